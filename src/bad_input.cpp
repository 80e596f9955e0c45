#include <metrics/bad_input.h>

#include <ATen/ATen.h>

#include <algorithm>

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

BadInput::BadInput(std::vector<std::string> kinds, size_t counts_slot, size_t first_slot)
    : kinds_(std::move(kinds)), counts_slot_(counts_slot), first_slot_(first_slot) {
  TORCH_INTERNAL_ASSERT(!kinds_.empty());
}

namespace {

// The host's counts added into CPU tally tensors of dtype T.
template <class T>
void add_on_host(at::Tensor& counts, at::Tensor& first, c10::ArrayRef<int64_t> kind_counts,
                 const at::Tensor& update_index) {
  auto* data = counts.data_ptr<T>();
  const auto kinds = kind_counts.size();
  for (size_t k = 0; k < kinds; ++k) data[k] += static_cast<T>(kind_counts[k]);
  data[kinds] += 1;
  auto* first_data = first.data_ptr<T>();
  *first_data = std::min(*first_data, *update_index.data_ptr<T>());
}

}  // namespace

void BadInput::record(std::vector<StateEntry>& entries, c10::ArrayRef<int64_t> kind_counts,
                      const at::Tensor& update_index) const {
  if (std::all_of(kind_counts.begin(), kind_counts.end(), [](int64_t c) { return c == 0; })) return;
  TORCH_INTERNAL_ASSERT(kind_counts.size() == kinds_.size());
  auto& counts = entries[counts_slot_].tensor;
  auto& first = entries[first_slot_].tensor;
  const auto kinds = static_cast<int64_t>(kinds_.size());
  if (counts.is_cpu()) {
    return counts.scalar_type() == at::kLong ? add_on_host<int64_t>(counts, first, kind_counts, update_index)
                                             : add_on_host<double>(counts, first, kind_counts, update_index);
  }
  for (int64_t k = 0; k < kinds; ++k) {
    if (kind_counts[k] != 0) counts.narrow(0, k, 1).add_(kind_counts[k]);
  }
  counts.narrow(0, kinds, 1).add_(1);
  at::minimum_out(first, first, update_index);
}

at::Tensor BadInput::shift_first(const at::Tensor& theirs, const at::Tensor& offset) const {
  const auto none = theirs.eq(kNone);
  return theirs.masked_fill(none, 0).add_(offset).masked_fill_(none, kNone);
}

BadInputReport BadInput::report(const std::vector<StateEntry>& entries) const {
  const auto host = at::cat(tally(entries)).cpu().to(at::kLong);
  return report_of(host.data_ptr<int64_t>());
}

std::vector<at::Tensor> BadInput::tally(const std::vector<StateEntry>& entries) const {
  return {entries[counts_slot_].tensor, entries[first_slot_].tensor};
}

BadInputReport BadInput::report_of(const int64_t* values) const {
  BadInputReport report;
  const auto kinds = kinds_.size();
  for (size_t k = 0; k < kinds; ++k) report.counts.emplace_back(kinds_[k], values[k]);
  report.bad_updates = values[kinds];
  report.first_bad_update = values[kinds + 1] == kNone ? -1 : values[kinds + 1];
  return report;
}

}  // namespace metrics
