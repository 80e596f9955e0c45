#include <metrics/metric_state.h>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <utility>
#include <cmath>
#include <limits>
#include <sstream>
#include <type_traits>

#include "host_copy.h"
#include "normal_tensors.h"
#include "two_sum.h"

namespace metrics {
namespace {

// A meta tensor has a shape but no values: it can stand in for a meta state only.
void check_has_values(const at::Tensor& given, const at::Tensor& mine, const std::string& metric,
                      const std::string& what) {
  TORCH_CHECK_VALUE(!given.is_meta() || mine.is_meta(), metric, what,
                    " is on the meta device, which holds no values; load a state with values");
}

// Counts (update counts, bad-input tallies, label counts) and the first-bad-update index are whole
// numbers, never negative, and stay far enough below 2^63 (2^53 when float64) that later updates
// cannot overflow them or lose exactness. A signed count stays as far above -2^62 (-2^53).
template <class T>
void check_counts_of(const at::Tensor& host, const StateEntry& entry, const std::string& metric) {
  constexpr bool integral = std::is_integral<T>::value;
  const T limit = integral ? static_cast<T>(int64_t{1} << 62) : static_cast<T>(0x1p53);  // compared in T: exact
  const bool is_signed = entry.counts == Counts::kSigned;
  const T low = is_signed ? -limit : T(0);
  const std::string bound = integral ? "2^62" : "2^53";
  const auto range = is_signed ? "[-" + bound + ", " + bound + ")" : "[0, " + bound + ")";
  const auto* data = host.data_ptr<T>();
  for (int64_t i = 0; i < host.numel(); ++i) {
    const T v = data[i];
    const bool sentinel = entry.reduction == Reduction::Min && v == entry.fill.to<T>();
    TORCH_CHECK_VALUE(sentinel || (v >= low && v < limit && std::floor(static_cast<double>(v)) == v), metric,
                      ".load_state_dict: '", entry.name, "' holds ", v, "; a count must be a whole number in ", range);
  }
}

// The elements of one row of a Cat entry.
int64_t row_numel(const StateEntry& entry) {
  int64_t n = 1;
  for (const auto size : entry.tensor.sizes().slice(1)) n *= size;
  return n;
}

// Whether two fill values are the same number (compared as integers where both are, so that
// large int64 fills compare exactly).
bool same_value(const c10::Scalar& a, const c10::Scalar& b) {
  if (a.isIntegral(false) && b.isIntegral(false)) return a.toLong() == b.toLong();
  return a.toDouble() == b.toDouble();
}

// Counts in float64 that sum weights: none below 0 unless signed (-0.0 is 0; +inf and NaN are what
// an overflow leaves, inf - inf in a count derived from others, which compute() reports).
void check_weight_sums(const at::Tensor& host, const StateEntry& entry, const std::string& metric) {
  if (entry.counts == Counts::kSigned) return;
  const auto* data = host.data_ptr<double>();
  for (int64_t i = 0; i < host.numel(); ++i) {
    TORCH_CHECK_VALUE(!(data[i] < 0), metric, ".load_state_dict: '", entry.name, "' holds ", data[i],
                      "; a sum of weights is not below 0");
  }
}

void check_count(const at::Tensor& given, const StateEntry& entry, const std::string& metric) {
  if (given.is_meta() || given.numel() == 0) return;
  const auto host = detail::host_copy(given).contiguous();
  if (host.scalar_type() == at::kLong) return check_counts_of<int64_t>(host, entry, metric);
  if (entry.counts != Counts::kNo) return check_weight_sums(host, entry, metric);
  check_counts_of<double>(host, entry, metric);  // the update count and the tally, in a float64 state
}

// Whether `one` (an element of the count dtype) is on the CPU and 0: nothing to add, read for free.
bool holds_zero_on_host(const at::Tensor& one) {
  if (!one.is_cpu()) return false;
  return one.scalar_type() == at::kLong ? *one.data_ptr<int64_t>() == 0 : *one.data_ptr<double>() == 0;
}

// sums += added, what each addition rounds off added to `rounded_off` (TwoSum: exact at any
// magnitudes), so that merged compensated sums are as exact as one stream's. Where a sum is not
// finite its error is NaN or +-inf, as the device path's update leaves it (compute leaves it out).
// Float64 CPU sums (a forward's batch folded in) on the host; elsewhere eight ops.
void add_with_two_sum(at::Tensor& sums, const at::Tensor& added, const at::Tensor& rounded_off) {
  if (sums.is_cpu() && sums.scalar_type() == at::kDouble) {
    const auto contiguous = added.contiguous();
    const auto* from = contiguous.data_ptr<double>();
    auto* sum = sums.data_ptr<double>();
    auto* error = rounded_off.data_ptr<double>();
    for (int64_t k = 0; k < sums.numel(); ++k) detail::add_to_state(sum[k], error[k], from[k]);
    return;
  }
  const auto total = sums + added;
  const auto from_added = total - sums;
  rounded_off.add_(sums - (total - from_added)).add_(added - from_added);
  sums.copy_(total);
}

}  // namespace

bool same_shape(const StateEntry& entry, const at::Tensor& other) {
  const auto mine = entry.tensor.sizes();
  if (entry.reduction != Reduction::Cat) return other.sizes() == mine;
  return other.dim() == entry.tensor.dim() && other.sizes().slice(1) == mine.slice(1);
}

std::string shape_text(const StateEntry& entry) {
  std::ostringstream text;
  text << entry.tensor.sizes();
  if (entry.reduction != Reduction::Cat) return text.str();
  auto shape = text.str();  // "[rows, ...]": the rows are any number
  return "[*" + shape.substr(shape.find_first_of(",]"));
}

const char* reduction_name(Reduction reduction) {
  switch (reduction) {
    case Reduction::Sum:
      return "sum";
    case Reduction::Min:
      return "min";
    case Reduction::Max:
      return "max";
    case Reduction::Cat:
      return "cat";
  }
  return "";
}

MetricState::MetricState(at::Device device, at::ScalarType count_dtype) {
  entries_.push_back({"update_count", at::zeros({}, at::TensorOptions().dtype(count_dtype).device(device)), 0,
                      Reduction::Sum});
  pack();
}

MetricState::MetricState(const MetricState& other)
    : entries_(other.entries_),
      hidden_(other.hidden_),
      hidden_offsets_(other.hidden_offsets_),
      row_count_(other.row_count_),
      rows_settled_(other.rows_settled_),
      row_pending_(other.row_pending_),
      bad_input_(other.bad_input_),
      compensation_(other.compensation_) {
  const detail::NormalTensors normal_tensors;
  // a deep copy (and no scratch): one copy per packed buffer, not one per entry
  for (const auto& buffer : other.buffers_) buffers_.push_back(buffer.clone());
  if (other.rows_.defined()) rows_ = other.rows_.narrow(0, 0, other.row_count_).clone();  // no room
  view_buffers();
  threads_->locks = other.threads_->locks;
}

MetricState& MetricState::operator=(const MetricState& other) {
  if (this != &other) *this = MetricState(other);
  return *this;
}

size_t MetricState::add(std::string name, at::IntArrayRef shape, at::ScalarType dtype, const c10::Scalar& fill,
                        Reduction reduction, Counts counts) {
  TORCH_INTERNAL_ASSERT(reduction != Reduction::Cat || (shape[0] == 0 && row_count_ == 0 &&
                                                         (!rows_.defined() || rows_.scalar_type() == dtype)));
  auto tensor = at::full(shape, fill, at::TensorOptions().dtype(dtype).device(device()));
  entries_.push_back({std::move(name), std::move(tensor), fill, reduction, counts});
  pack();
  return entries_.size() - 1;
}

int64_t MetricState::add_hidden(Hidden hidden) {
  hidden_.push_back(hidden);
  pack();
  return hidden_offsets_.back();
}

int64_t MetricState::add_scratch(int64_t length) { return add_hidden({entries_.size(), length}); }

int64_t MetricState::add_pending_addend(size_t target) {
  TORCH_INTERNAL_ASSERT(target < entries_.size() && entries_[target].tensor.scalar_type() == count_dtype());
  if (entries_[target].reduction == Reduction::Cat) {
    TORCH_INTERNAL_ASSERT(entries_[target].tensor.dim() == 2 && pending_addend_offset(target) < 0);
    row_pending_.push_back(target);
    pack();
    return pending_addend_offset(target);
  }
  TORCH_INTERNAL_ASSERT(entries_[target].reduction == Reduction::Sum);
  return add_hidden({entries_.size(), 1, static_cast<int64_t>(target)});
}

int64_t MetricState::scratch_offset(size_t nth) const {
  for (size_t h = 0; h < hidden_.size(); ++h) {
    if (hidden_[h].target == Hidden::kScratch && nth-- == 0) return hidden_offsets_[h];
  }
  TORCH_INTERNAL_ASSERT(false, "no scratch range ", nth);
}

int64_t MetricState::add_row_spare() {
  TORCH_INTERNAL_ASSERT(rows_.defined());
  row_pending_.push_back(kNoEntry);
  pack();
  return row_width() - 1;
}

int64_t MetricState::row_spare_offset() const {
  const auto spare = std::find(row_pending_.begin(), row_pending_.end(), kNoEntry);
  return spare == row_pending_.end() ? -1 : cat_width() + (spare - row_pending_.begin());
}

int64_t MetricState::pending_addend_offset(size_t target) const {
  for (size_t p = 0; p < row_pending_.size(); ++p) {
    if (row_pending_[p] == target) return cat_width() + static_cast<int64_t>(p);
  }
  for (size_t h = 0; h < hidden_.size(); ++h) {
    if (hidden_[h].target == static_cast<int64_t>(target)) return hidden_offsets_[h];
  }
  return -1;
}

template <class Entry, class HiddenRange>
void MetricState::walk_count_buffer(Entry entry, HiddenRange hidden) const {
  const auto dtype = count_dtype();
  int64_t offset = 0;
  const auto hidden_before = [&](size_t slot) {
    for (size_t h = 0; h < hidden_.size(); ++h) {
      if (hidden_[h].before != slot) continue;
      hidden(h, offset);
      offset += hidden_[h].length;
    }
  };
  for (size_t slot = 0; slot < entries_.size(); ++slot) {
    const auto& e = entries_[slot];
    if (e.reduction == Reduction::Cat || e.tensor.scalar_type() != dtype) continue;
    hidden_before(slot);
    entry(slot, offset);
    offset += e.tensor.numel();
  }
  hidden_before(entries_.size());
}

void MetricState::pack() {
  const detail::NormalTensors normal_tensors;
  std::vector<std::vector<at::Tensor>> parts(1);
  std::vector<at::ScalarType> dtypes{count_dtype()};
  walk_count_buffer([&](size_t slot, int64_t) { parts[0].push_back(entries_[slot].tensor.reshape({-1})); },
                    [&](size_t h, int64_t) {
                      parts[0].push_back(at::zeros({hidden_[h].length}, entries_.front().tensor.options()));
                    });
  for (auto& entry : entries_) {
    if (entry.reduction == Reduction::Cat) continue;  // in the rows buffer
    const auto dtype = entry.tensor.scalar_type();
    if (dtype == dtypes.front()) continue;
    const auto b = std::find(dtypes.begin(), dtypes.end(), dtype) - dtypes.begin();
    if (b == static_cast<std::ptrdiff_t>(dtypes.size())) {
      dtypes.push_back(dtype);
      parts.emplace_back();
    }
    parts[b].push_back(entry.tensor.reshape({-1}));
  }
  buffers_.clear();
  for (const auto& part : parts) buffers_.push_back(at::cat(part));
  pack_rows();
  view_buffers();
}

void MetricState::pack_rows() {
  std::vector<at::Tensor> columns;
  for (const auto& entry : entries_) {
    if (entry.reduction == Reduction::Cat) columns.push_back(entry.tensor.reshape({row_count_, row_numel(entry)}));
  }
  if (columns.empty()) return;
  for (size_t p = 0; p < row_pending_.size(); ++p) columns.push_back(at::zeros({row_count_, 1}, columns[0].options()));
  rows_ = at::cat(columns, 1);
}

int64_t MetricState::cat_width() const { return row_width() - static_cast<int64_t>(row_pending_.size()); }

void MetricState::view_buffers() {
  const detail::NormalTensors normal_tensors;
  std::vector<int64_t> used(buffers_.size(), 0);
  offsets_.assign(entries_.size(), -1);
  hidden_offsets_.assign(hidden_.size(), 0);
  walk_count_buffer([&](size_t slot, int64_t offset) { offsets_[slot] = offset; },
                    [&](size_t h, int64_t offset) { hidden_offsets_[h] = offset; });
  int64_t column = 0;
  for (size_t slot = 0; slot < entries_.size(); ++slot) {
    auto& entry = entries_[slot];
    if (entry.reduction == Reduction::Cat) {
      offsets_[slot] = column;
      auto shape = entry.tensor.sizes().vec();
      shape[0] = row_count_;
      entry.tensor = rows_.narrow(0, 0, row_count_).narrow(1, column, row_numel(entry)).view(shape);
      column += row_numel(entry);
      continue;
    }
    const auto b = buffer_of(entry.tensor.scalar_type());
    if (b != 0) {
      offsets_[slot] = used[b];
      used[b] += entry.tensor.numel();
    }
    entry.tensor = buffers_[b].narrow(0, offsets_[slot], entry.tensor.numel()).view(entry.tensor.sizes());
  }
  if (bad_input_) since_bad_ = buffers_.front().narrow(0, bad_input_->since_bad_offset(), 1);
}

size_t MetricState::buffer_of(at::ScalarType dtype) const {
  for (size_t b = 0; b < buffers_.size(); ++b) {
    if (buffers_[b].scalar_type() == dtype) return b;
  }
  TORCH_INTERNAL_ASSERT(false, "no state buffer of dtype ", dtype);
}

size_t MetricState::last_of_sums_packed_alike(const MetricState& other, size_t first) const {
  auto last = first;
  const auto next_packed = [&](size_t slot) {  // (the compensation starts a run: it holds the others' low parts)
    return entries_[slot].reduction == Reduction::Sum && dtype(slot) == dtype(first) && slot != compensation_ &&
           offsets_[slot] == offsets_[slot - 1] + numel(slot - 1) && other.offsets_[slot] == offsets_[slot];
  };
  if (other.device() != device() || other.offsets_[first] != offsets_[first]) return first;
  while (last + 1 < entries_.size() && next_packed(last + 1)) ++last;
  return last;
}

at::Tensor MetricState::span(size_t first, size_t last) const {
  const auto dtype = entries_[first].tensor.scalar_type();
  TORCH_INTERNAL_ASSERT(first <= last && last < entries_.size() && entries_[last].tensor.scalar_type() == dtype);
  const auto end = offsets_[last] + entries_[last].tensor.numel();
  return buffers_[buffer_of(dtype)].narrow(0, offsets_[first], end - offsets_[first]);
}

at::Tensor& MetricState::scratch(size_t index) { return scratch_[index]; }

void MetricState::track_bad_input(std::vector<std::string> kinds, bool cumulative) {
  TORCH_INTERNAL_ASSERT(!tracks_bad_input());
  const auto width = static_cast<int64_t>(kinds.size()) + 1;
  const auto counts = add("bad_input_counts", {width}, count_dtype(), 0, Reduction::Sum);
  // since-bad just before the counts: an update writes its increment beside bad_updates' (see aggregation_aten)
  add_hidden({counts, 1, Hidden::kSinceBad});
  const auto first = add("first_bad_update", {1}, count_dtype(), BadInput::kNone, Reduction::Min);
  bad_input_.emplace(std::move(kinds), counts, first, offsets_[counts] - 1, cumulative);
  view_buffers();
}

void MetricState::compensate_in(size_t slot) {
  TORCH_INTERNAL_ASSERT(slot < entries_.size() && dtype(slot) == count_dtype() && offsets_[0] == 0);
  compensation_ = slot;
}

at::Tensor MetricState::compensation_of(size_t first, size_t last) const {
  const auto end = offsets_[last] + numel(last);
  if (!compensation_ || dtype(first) != count_dtype() || end > numel(*compensation_)) return {};
  bool counts_only = true;  // (whole numbers: their additions round nothing off)
  for (auto slot = first; slot <= last; ++slot) counts_only = counts_only && is_count(slot);
  if (counts_only) return {};
  return entries_[*compensation_].tensor.narrow(0, offsets_[first], end - offsets_[first]);
}

at::Tensor& MetricState::operator[](size_t slot) {
  TORCH_INTERNAL_ASSERT(slot > 0 && slot < entries_.size());
  return entries_[slot].tensor;
}

void MetricState::finish_update(c10::ArrayRef<int64_t> bad_counts) {
  if (bad_input_) {
    bad_input_->record(entries_, since_bad_, bad_counts, update_count_tensor());
  }
  auto& count = entries_.front().tensor;
  if (!count.is_cpu()) {
    count.add_(1);
  } else if (count.scalar_type() == at::kLong) {
    ++*count.data_ptr<int64_t>();
  } else {
    ++*count.data_ptr<double>();
  }
}

// settle() and settle_values() fold always, not only after an update this object saw: a replayed
// CUDA graph of updates runs no host code, so no flag set by an update would say so.
void MetricState::settle() const {
  if (device().is_meta()) return;  // no values to fold
  const std::lock_guard<std::mutex> settling(threads_->settling);
  fold_pending();
  if (bad_input_) bad_input_->settle(entries_, since_bad_);
}

void MetricState::settle_values() const {
  if (device().is_meta()) return;
  const std::lock_guard<std::mutex> settling(threads_->settling);
  fold_pending();
}

void MetricState::fold_pending() const {
  const auto& buffer = count_buffer();
  for (size_t h = 0; h < hidden_.size(); ++h) {
    if (hidden_[h].target < 0) continue;  // scratch, or since_bad (the tally's)
    const auto addend = buffer.narrow(0, hidden_offsets_[h], 1);
    if (holds_zero_on_host(addend)) continue;  // (the CPU paths add on the host, leaving it 0)
    entries_[hidden_[h].target].tensor.add_(addend);
    addend.zero_();
  }
  // rows: an update adds to the pending columns of the rows it adds, never to older ones
  const auto fresh =
      row_count_ > rows_settled_ ? rows_.narrow(0, rows_settled_, row_count_ - rows_settled_) : at::Tensor();
  for (const auto target : row_pending_) {
    if (target == kNoEntry || !fresh.defined()) continue;
    const auto addend = fresh.narrow(1, pending_addend_offset(target), 1);
    entries_[target].tensor.narrow(0, rows_settled_, fresh.size(0)).add_(addend);
    addend.zero_();
  }
  rows_settled_ = row_count_;
}

void MetricState::zero_hidden() {
  const auto& buffer = count_buffer();
  for (size_t h = 0; h < hidden_.size(); ++h) {
    if (hidden_[h].target >= 0) buffer.narrow(0, hidden_offsets_[h], 1).zero_();
  }
  if (!row_pending_.empty()) {
    rows_.narrow(0, 0, row_count_).narrow(1, cat_width(), static_cast<int64_t>(row_pending_.size())).zero_();
  }
  if (bad_input_) since_bad_.zero_();
}

int64_t MetricState::update_count() const { return entries_.front().tensor.item<int64_t>(); }

BadInputReport MetricState::bad_input_report() const {
  settle();
  return bad_input_ ? bad_input_->report(entries_) : BadInputReport{};
}

std::pair<int64_t, BadInputReport> MetricState::update_count_and_report() const {
  settle();
  std::vector<at::Tensor> read{entries_.front().tensor};
  if (bad_input_) {
    for (const auto& t : bad_input_->tally(entries_)) read.push_back(t);
  }
  const auto values = detail::host_longs(read);
  return {values[0], bad_input_ ? bad_input_->report_of(values.data() + 1) : BadInputReport{}};
}

void MetricState::append(const std::vector<std::pair<size_t, at::Tensor>>& rows) {
  std::vector<at::Tensor> converted;  // all made before any is kept: an error changes nothing
  for (const auto& [slot, more] : rows) {
    const auto& entry = entries_[slot];
    TORCH_INTERNAL_ASSERT(entry.reduction == Reduction::Cat && same_shape(entry, more) &&
                          more.size(0) == rows.front().second.size(0));
    converted.push_back(more.to(rows_.scalar_type()).reshape({more.size(0), row_numel(entry)}));
  }
  if (rows.empty()) return;  // (no Cat entries)
  const auto n = rows.front().second.size(0);
  const auto grown = grow_rows(n).view({n, row_width()});
  for (size_t i = 0; i < rows.size(); ++i) grown.narrow(1, offsets_[rows[i].first], converted[i].size(1)).copy_(converted[i]);
}

at::Tensor MetricState::grow_rows(int64_t n) {
  TORCH_INTERNAL_ASSERT(rows_.defined() && n >= 0);
  const detail::NormalTensors normal_tensors;
  const auto needed = row_count_ + n;
  if (needed > rows_.size(0)) {
    auto grown = at::zeros({std::max(needed, 2 * rows_.size(0)), rows_.size(1)}, rows_.options());
    grown.narrow(0, 0, row_count_).copy_(rows_.narrow(0, 0, row_count_));
    rows_ = std::move(grown);
  }
  const auto added = rows_.narrow(0, row_count_, n).view({-1});
  row_count_ = needed;
  view_buffers();
  return added;
}

void MetricState::clear_rows() {
  if (!rows_.defined()) return;
  rows_.narrow(0, 0, row_count_).zero_();  // the rows past them are zeros already
  row_count_ = 0;
  rows_settled_ = 0;
  view_buffers();
}

void MetricState::swap_tensors(MetricState& other) {
  std::swap(entries_, other.entries_);
  std::swap(buffers_, other.buffers_);
  std::swap(offsets_, other.offsets_);
  std::swap(scratch_, other.scratch_);
  std::swap(hidden_, other.hidden_);
  std::swap(hidden_offsets_, other.hidden_offsets_);
  std::swap(rows_, other.rows_);
  std::swap(row_count_, other.row_count_);
  std::swap(rows_settled_, other.rows_settled_);
  std::swap(row_pending_, other.row_pending_);
  std::swap(since_bad_, other.since_bad_);
  std::swap(bad_input_, other.bad_input_);
}

void MetricState::reset() {
  // one fill per run of neighbouring entries of one buffer that start from the same value
  const auto fills_with_first = [&](size_t first, size_t i) {
    const auto& a = entries_[first];
    const auto& b = entries_[i];
    return b.reduction != Reduction::Cat && b.tensor.scalar_type() == a.tensor.scalar_type() &&
           same_value(a.fill, b.fill);
  };
  clear_rows();
  for (size_t first = 0; first < entries_.size();) {
    auto& entry = entries_[first];
    if (entry.reduction == Reduction::Cat) {
      ++first;
      continue;
    }
    auto last = first;
    while (last + 1 < entries_.size() && fills_with_first(first, last + 1)) ++last;
    span(first, last).fill_(entry.fill);
    first = last + 1;
  }
  zero_hidden();
}

bool MetricState::holds_fresh_values() const {
  if (device().is_meta()) return true;  // (it holds no values: it arrives reset)
  settle();
  std::vector<at::Tensor> at_fill;
  for (const auto& e : entries_) {
    if (e.reduction == Reduction::Cat && e.tensor.size(0) > 0) return false;
    if (e.reduction != Reduction::Cat) at_fill.push_back(e.tensor.eq(e.fill).all());
  }
  return at_fill.empty() || at::stack(at_fill).all().item<bool>();  // one read back
}

std::vector<at::Tensor> MetricState::mergeable(const MetricState& other, const std::string& metric) const {
  const bool same_kinds = tracks_bad_input() == other.tracks_bad_input() &&
                          (!tracks_bad_input() || bad_input_->kinds() == other.bad_input_->kinds());
  TORCH_CHECK_VALUE(entries_.size() == other.entries_.size() && same_kinds, metric,
                    ".merge: the other metric has different state; merge metrics built with the same options");
  std::vector<at::Tensor> incoming;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const auto& mine = entries_[i];
    const auto& theirs = other.entries_[i];
    TORCH_CHECK_VALUE(mine.name == theirs.name && same_shape(mine, theirs.tensor) &&
                          mine.tensor.scalar_type() == theirs.tensor.scalar_type(),
                      metric, ".merge: state '", mine.name, "' is ", mine.tensor.scalar_type(), mine.tensor.sizes(),
                      " here but '", theirs.name, "' is ", theirs.tensor.scalar_type(), theirs.tensor.sizes(),
                      " in the other metric; merge metrics built with the same options");
    check_has_values(theirs.tensor, mine.tensor, metric, ".merge: the other metric's state '" + theirs.name + "'");
    incoming.push_back(theirs.tensor.to(mine.tensor.device()));
  }
  return incoming;
}

void MetricState::merge(const MetricState& other, const std::string& metric, MergeOrder order) {
  const at::NoGradGuard no_grad;
  TORCH_CHECK_VALUE(this != &other, metric, ".merge: cannot merge a state into itself (the two metrics share it)");
  settle();
  other.settle();
  auto incoming = mergeable(other, metric);
  if (order == MergeOrder::Appended && bad_input_) {  // (before the update count grows)
    auto& first = incoming[bad_input_->first_slot()];
    first = BadInput::shift_first(first, update_count_tensor());
  }
  std::vector<std::pair<size_t, at::Tensor>> rows;
  for (size_t i = 0, last = 0; i < entries_.size(); i = last + 1) {
    last = i;
    auto& mine = entries_[i].tensor;
    const auto& theirs = incoming[i];
    switch (entries_[i].reduction) {
      case Reduction::Sum: {  // a run of them packed alike: one add
        last = last_of_sums_packed_alike(other, i);
        auto sums = last == i ? mine : span(i, last);
        const auto added = last == i ? theirs : other.span(i, last);
        const auto compensation = compensation_of(i, last);
        if (compensation.defined()) {
          add_with_two_sum(sums, added, compensation);
        } else {
          sums.add_(added);
        }
        break;
      }
      case Reduction::Min:
        at::minimum_out(mine, mine, theirs);
        break;
      case Reduction::Max:
        at::maximum_out(mine, mine, theirs);
        break;
      case Reduction::Cat:
        rows.emplace_back(i, theirs);
        break;
    }
  }
  append(rows);
}

StateDict MetricState::state_dict() const {
  settle();
  StateDict dict;
  for (const auto& entry : entries_) dict.emplace(entry.name, entry.tensor.clone());
  return dict;
}

void MetricState::load_state_dict(const StateDict& dict, const std::string& metric) {
  const at::NoGradGuard no_grad;  // a dict tensor that requires grad must not make the state require it
  for (const auto& item : dict) {
    const auto& name = item.first;  // not a structured binding: clang before 16 cannot capture one
    const bool known =
        std::any_of(entries_.begin(), entries_.end(), [&](const StateEntry& e) { return e.name == name; });
    TORCH_CHECK_VALUE(known, metric, ".load_state_dict: unexpected key '", name, "'");
  }
  std::vector<at::Tensor> incoming;
  for (size_t slot = 0; slot < entries_.size(); ++slot) {
    const auto& entry = entries_[slot];
    auto it = dict.find(entry.name);
    TORCH_CHECK_VALUE(it != dict.end(), metric, ".load_state_dict: missing key '", entry.name, "'");
    TORCH_CHECK_VALUE(it->second.defined(), metric, ".load_state_dict: '", entry.name, "' is an undefined tensor");
    const auto given = widened(it->second, slot);
    TORCH_CHECK_VALUE(same_shape(entry, given) && given.scalar_type() == entry.tensor.scalar_type(), metric,
                      ".load_state_dict: '", entry.name, "' must be ", entry.tensor.scalar_type(), shape_text(entry),
                      " but is ", given.scalar_type(), given.sizes());
    check_has_values(given, entry.tensor, metric, ".load_state_dict: '" + entry.name + "'");
    if (is_count(slot)) check_count(given, entry, metric);
    incoming.push_back(given.to(entry.tensor.device(), /*non_blocking=*/false, /*copy=*/true));
  }
  check_rows_agree(incoming, metric);
  check_tally_agrees(incoming, metric);
  std::vector<std::pair<size_t, at::Tensor>> rows;
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i].reduction == Reduction::Cat) {
      rows.emplace_back(i, incoming[i]);
    } else {
      entries_[i].tensor.copy_(incoming[i]);
    }
  }
  clear_rows();
  append(rows);
  zero_hidden();
}

// A tally as updates leave it: updates with bad input name the first of them (settle() would
// otherwise write one), and none when there were none; no more of them than updates, the first
// among them; cumulative kinds' counts never decrease (each holds the ones before it).
void MetricState::check_tally_agrees(const std::vector<at::Tensor>& incoming, const std::string& metric) const {
  if (!bad_input_ || device().is_meta()) return;
  const auto& counts = incoming[bad_input_->counts_slot()];
  const auto& first = incoming[bad_input_->first_slot()];
  if (counts.is_meta() || first.is_meta() || incoming.front().is_meta()) return;
  // the counts are whole numbers in any state dtype, so int64 holds them exactly
  const auto v = detail::host_longs({incoming.front(), counts, first});
  const auto kinds = static_cast<int64_t>(bad_input_->kinds().size());
  const int64_t updates = v[0], bad_updates = v[1 + kinds], first_bad = v[2 + kinds];
  const auto prefix = metric + ".load_state_dict: 'bad_input_counts' ";
  TORCH_CHECK_VALUE(bad_updates == 0 || first_bad != BadInput::kNone, prefix,
                    "counts updates with bad input, but 'first_bad_update' names none of them");
  TORCH_CHECK_VALUE(bad_updates > 0 || first_bad == BadInput::kNone, prefix,
                    "counts no update with bad input, but 'first_bad_update' names update ", first_bad);
  TORCH_CHECK_VALUE(bad_updates <= updates, prefix, "counts ", bad_updates, " updates with bad input, more than the ",
                    updates, " of 'update_count'");
  TORCH_CHECK_VALUE(first_bad == BadInput::kNone || first_bad < updates, metric,
                    ".load_state_dict: 'first_bad_update' names update ", first_bad, ", but 'update_count' is ",
                    updates);
  for (int64_t k = 1; bad_input_->cumulative() && k < kinds; ++k) {
    TORCH_CHECK_VALUE(v[1 + k] >= v[k], prefix, "holds ", v[k], " then ", v[1 + k],
                      ": its counts are cumulative (each kind's holds the kinds' before it), so they never decrease");
  }
}

// The rows entries grow together (append adds to all or none): a dict must give each as many.
void MetricState::check_rows_agree(const std::vector<at::Tensor>& incoming, const std::string& metric) const {
  const StateEntry* first = nullptr;
  int64_t rows = 0;
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i].reduction != Reduction::Cat) continue;
    if (!first) {
      first = &entries_[i];
      rows = incoming[i].size(0);
    }
    TORCH_CHECK_VALUE(incoming[i].size(0) == rows, metric, ".load_state_dict: '", entries_[i].name, "' has ",
                      incoming[i].size(0), " rows but '", first->name, "' has ", rows,
                      ": every row entry holds one row per sample");
  }
}

bool MetricState::is_update_count_or_tally(size_t slot) const {
  return slot == 0 || (bad_input_ && (slot == bad_input_->counts_slot() || slot == bad_input_->first_slot()));
}

bool MetricState::is_count(size_t slot) const {
  return is_update_count_or_tally(slot) || entries_[slot].counts != Counts::kNo;
}

at::Tensor MetricState::widened(const at::Tensor& given, size_t slot) const {
  if (given.scalar_type() != at::kLong || !is_update_count_or_tally(slot)) return given;
  auto tally = given;
  if (bad_input_ && slot == bad_input_->first_slot() && !given.is_meta()) {
    // before format version 2 "no bad update yet" was INT64_MAX; it is 2^62 now (exact in float64)
    tally = given.masked_fill(given.eq(std::numeric_limits<int64_t>::max()), BadInput::kNone);
  }
  return count_dtype() == at::kDouble ? tally.to(at::kDouble) : tally;
}

void MetricState::to(at::Device device) {
  // a meta state holds no values to copy: it arrives fresh (as module.to_empty() materializes it)
  const bool fresh = this->device().is_meta() && !device.is_meta();
  const detail::NormalTensors normal_tensors;
  const auto moved = [&](const at::Tensor& t) { return fresh ? at::empty_like(t, t.options().device(device)) : t.to(device); };
  for (auto& buffer : buffers_) buffer = moved(buffer);
  // (a fresh state's rows buffer is zeros: the rows past the used ones must be)
  if (rows_.defined()) rows_ = fresh ? at::zeros(rows_.sizes(), rows_.options().device(device)) : rows_.to(device);
  view_buffers();
  scratch_.clear();
  if (fresh) reset();
}

bool MetricState::same_entries(const MetricState& other) const {
  if (entries_.size() != other.entries_.size()) return false;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const auto& x = entries_[i];
    const auto& y = other.entries_[i];
    if (x.name != y.name || x.tensor.scalar_type() != y.tensor.scalar_type()) return false;
  }
  return true;
}

}  // namespace metrics
