#include <metrics/bad_input.h>

#include <ATen/ATen.h>

#include <algorithm>

#include <metrics/backend.h>

#include "host_copy.h"

namespace metrics {

namespace {

// "1 NaN value", "1 target outside [0, 3)": a kind names its entries in the plural, with the first
// word that ends in "s".
std::string counted(int64_t count, std::string kind) {
  if (count != 1) return std::to_string(count) + " " + kind;
  for (size_t start = 0; start < kind.size();) {
    const auto end = std::min(kind.find_first_of(" ,", start), kind.size());
    if (end > start && kind[end - 1] == 's') {
      kind.erase(end - 1, 1);
      break;
    }
    start = end + 1;
  }
  return "1 " + kind;
}

}  // namespace

std::string BadInputReport::message(const std::string& metric) const {
  if (clean()) return metric + ": no bad input";
  std::string text = metric + ": ";
  bool first = true;
  for (const auto& [kind, count] : counts) {
    if (count == 0) continue;
    text += (first ? "" : ", ") + counted(count, kind);
    first = false;
  }
  text += " in " + std::to_string(bad_updates) + (bad_updates == 1 ? " update" : " updates");
  text += ", first at update " + std::to_string(first_bad_update);
  text += " (kept out of the state)";
  return text;
}

BadInput::BadInput(std::vector<std::string> kinds, size_t counts_slot, size_t first_slot, int64_t since_bad_offset,
                   bool cumulative)
    : kinds_(std::move(kinds)),
      counts_slot_(counts_slot),
      first_slot_(first_slot),
      since_bad_offset_(since_bad_offset),
      cumulative_(cumulative) {
  TORCH_INTERNAL_ASSERT(!kinds_.empty());
}

namespace {

// settle() on the host, for CPU tally tensors of dtype T; `kinds`: where the bad-update count is.
template <class T>
void settle_on_host(const at::Tensor& count, const at::Tensor& counts, at::Tensor& first, const at::Tensor& since_bad,
                    size_t kinds) {
  auto& since = *since_bad.data_ptr<T>();
  const T none_bad = counts.data_ptr<T>()[kinds] == 0;
  const T implied = *count.data_ptr<T>() - since - 1 + none_bad * static_cast<T>(BadInput::kNone + 1);
  auto& first_value = *first.data_ptr<T>();
  first_value = std::min(first_value, implied);
  since = 0;
}

// One update's host-known counts (`added`: what each kind's count gains; `any`: whether one does)
// added into CPU tally tensors of dtype T.
template <class T>
void add_on_host(at::Tensor& counts, at::Tensor& first, at::Tensor& since_bad, const std::vector<int64_t>& added,
                 bool any, const at::Tensor& update_index) {
  auto* data = counts.data_ptr<T>();
  const auto kinds = added.size();
  auto* first_data = first.data_ptr<T>();
  auto& since = *since_bad.data_ptr<T>();
  const auto index = *update_index.data_ptr<T>();
  if (data[kinds] > 0) {
    settle_on_host<T>(update_index, counts, first, since_bad, kinds);
    since += 1;
  }
  if (!any) return;
  for (size_t k = 0; k < kinds; ++k) data[k] += static_cast<T>(added[k]);
  data[kinds] += 1;
  *first_data = std::min(*first_data, index);
}

}  // namespace

void BadInput::record(std::vector<StateEntry>& entries, const at::Tensor& since_bad, c10::ArrayRef<int64_t> kind_counts,
                      const at::Tensor& update_index) const {
  TORCH_INTERNAL_ASSERT(kind_counts.empty() || kind_counts.size() == kinds_.size());
  auto& counts = entries[counts_slot_].tensor;
  auto& first = entries[first_slot_].tensor;
  auto since = since_bad;
  const bool any = !std::all_of(kind_counts.begin(), kind_counts.end(), [](int64_t c) { return c == 0; });
  std::vector<int64_t> added(kinds_.size(), 0);  // cumulative kinds: each count holds the ones before it
  for (size_t k = 0; any && k < added.size(); ++k) added[k] = kind_counts[k] + (cumulative_ && k > 0 ? added[k - 1] : 0);
  if (counts.is_cpu()) {
    return counts.scalar_type() == at::kLong ? add_on_host<int64_t>(counts, first, since, added, any, update_index)
                                             : add_on_host<double>(counts, first, since, added, any, update_index);
  }
  const auto kinds = static_cast<int64_t>(kinds_.size());
  if (any) settle(entries, since);  // the first bad update, if pending, before this one writes its own
  since.add_(counts.narrow(0, kinds, 1).clamp_max(1));
  if (!any) return;
  for (int64_t k = 0; k < kinds; ++k) {
    if (added[k] != 0) counts.narrow(0, k, 1).add_(added[k]);
  }
  counts.narrow(0, kinds, 1).add_(1);
  at::minimum_out(first, first, update_index);
}

void BadInput::settle(const std::vector<StateEntry>& entries, const at::Tensor& since_bad) const {
  // update_count - 1 - since_bad where an update had bad input, none or more where none did (then
  // since_bad is 0). A first_bad_update already written is no later: since_bad was zeroed then.
  auto first = entries[first_slot_].tensor;  // a handle to the entry's tensor (written below)
  if (first.is_cpu() && cpu_fast_path_enabled()) {  // six small ops: a third of a CPU forward
    const auto& count = entries.front().tensor;
    const auto& counts = entries[counts_slot_].tensor;
    return first.scalar_type() == at::kLong ? settle_on_host<int64_t>(count, counts, first, since_bad, kinds_.size())
                                            : settle_on_host<double>(count, counts, first, since_bad, kinds_.size());
  }
  const auto bad_updates = entries[counts_slot_].tensor.narrow(0, static_cast<int64_t>(kinds_.size()), 1);
  const auto implied = at::add(entries.front().tensor.sub(since_bad).sub_(1), bad_updates.eq(0), kNone + 1);
  at::minimum_out(first, first, implied);
  since_bad.zero_();
}

at::Tensor BadInput::from_version_2(const at::Tensor& counts) const {
  if (!cumulative_) return counts;
  const auto kinds = static_cast<int64_t>(kinds_.size());
  return at::cat({counts.narrow(0, 0, kinds).cumsum(0).to(counts.scalar_type()), counts.narrow(0, kinds, 1)});
}

at::Tensor BadInput::shift_first(const at::Tensor& theirs, const at::Tensor& offset) {
  return theirs + offset;  // (kNone + offset: never below kNone in float64; below 2^63 in int64)
}

BadInputReport BadInput::report(const std::vector<StateEntry>& entries) const {
  return report_of(detail::host_longs(tally(entries)).data());
}

std::vector<at::Tensor> BadInput::tally(const std::vector<StateEntry>& entries) const {
  return {entries[counts_slot_].tensor, entries[first_slot_].tensor};
}

BadInputReport BadInput::report_of(const int64_t* values) const {
  BadInputReport report;
  const auto kinds = kinds_.size();
  for (size_t k = 0; k < kinds; ++k) {
    report.counts.emplace_back(kinds_[k], cumulative_ && k > 0 ? values[k] - values[k - 1] : values[k]);
  }
  report.bad_updates = values[kinds];
  report.first_bad_update = values[kinds + 1] == kNone ? -1 : values[kinds + 1];
  return report;
}

}  // namespace metrics
