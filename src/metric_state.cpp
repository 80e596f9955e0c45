#include <metrics/metric_state.h>

#include <ATen/ATen.h>

#include <limits>
#include <set>

namespace metrics {
namespace {

constexpr char kUpdateCount[] = "update_count";
constexpr int64_t kNoBadUpdate = std::numeric_limits<int64_t>::max();

}  // namespace

MetricState::MetricState(const MetricState& other)
    : entries_(other.entries_),
      bad_input_kinds_(other.bad_input_kinds_),
      bad_counts_index_(other.bad_counts_index_),
      first_bad_index_(other.first_bad_index_),
      updates_(other.updates_) {
  for (auto& entry : entries_) entry.tensor = entry.tensor.clone();
}

MetricState& MetricState::operator=(const MetricState& other) {
  if (this != &other) *this = MetricState(other);
  return *this;
}

size_t MetricState::add(std::string name, at::IntArrayRef shape, at::ScalarType dtype, const c10::Scalar& fill,
                        Reduction reduction, at::Device device) {
  auto tensor = at::full(shape, fill, at::TensorOptions().dtype(dtype).device(device));
  entries_.push_back({std::move(name), std::move(tensor), fill, reduction});
  return entries_.size() - 1;
}

void MetricState::track_bad_input(std::vector<std::string> kinds, at::Device device) {
  TORCH_INTERNAL_ASSERT(!kinds.empty() && !tracks_bad_input());
  const auto width = static_cast<int64_t>(kinds.size()) + 1;
  bad_input_kinds_ = std::move(kinds);
  bad_counts_index_ = add("bad_input_counts", {width}, at::kLong, 0, Reduction::Sum, device);
  first_bad_index_ = add("first_bad_update", {1}, at::kLong, kNoBadUpdate, Reduction::Min, device);
}

at::Device MetricState::device() const {
  TORCH_INTERNAL_ASSERT(!entries_.empty());
  return entries_.front().tensor.device();
}

void MetricState::reset() {
  for (auto& entry : entries_) entry.tensor.fill_(entry.fill);
  updates_ = 0;
}

void MetricState::merge(const MetricState& other, const std::string& metric, bool append) {
  TORCH_CHECK_VALUE(this != &other, metric, ".merge: cannot merge a state into itself (the two metrics share it)");
  TORCH_CHECK_VALUE(entries_.size() == other.entries_.size() && bad_input_kinds_ == other.bad_input_kinds_, metric,
                    ".merge: the other metric has different state; merge metrics built with the same options");
  for (size_t i = 0; i < entries_.size(); ++i) {
    const auto& mine = entries_[i];
    const auto& theirs = other.entries_[i];
    TORCH_CHECK_VALUE(mine.name == theirs.name && mine.tensor.sizes() == theirs.tensor.sizes() &&
                          mine.tensor.scalar_type() == theirs.tensor.scalar_type(),
                      metric, ".merge: state '", mine.name, "' is ", mine.tensor.scalar_type(), mine.tensor.sizes(),
                      " here but '", theirs.name, "' is ", theirs.tensor.scalar_type(), theirs.tensor.sizes(),
                      " in the other metric; merge metrics built with the same options");
  }
  for (size_t i = 0; i < entries_.size(); ++i) {
    auto& mine = entries_[i].tensor;
    auto theirs = other.entries_[i].tensor.to(mine.device());
    if (append && tracks_bad_input() && i == first_bad_index_) {
      theirs = theirs.clamp_max(kNoBadUpdate - updates_).add_(updates_);  // "none" stays kNoBadUpdate
    }
    switch (entries_[i].reduction) {
      case Reduction::Sum:
        mine.add_(theirs);
        break;
      case Reduction::Min:
        at::minimum_out(mine, mine, theirs);
        break;
      case Reduction::Max:
        at::maximum_out(mine, mine, theirs);
        break;
    }
  }
  updates_ += other.updates_;
}

StateDict MetricState::state_dict() const {
  StateDict dict;
  for (const auto& entry : entries_) dict.emplace(entry.name, entry.tensor.clone());
  dict.emplace(kUpdateCount, at::full({}, updates_, at::kLong));
  return dict;
}

const MetricState::Entry* MetricState::find(const std::string& name) const {
  for (const auto& entry : entries_) {
    if (entry.name == name) return &entry;
  }
  return nullptr;
}

void MetricState::load_state_dict(const StateDict& dict, const std::string& metric) {
  for (const auto& [name, tensor] : dict) {
    TORCH_CHECK_VALUE(name == kUpdateCount || find(name) != nullptr, metric, ".load_state_dict: unexpected key '",
                      name, "'");
  }
  auto count = dict.find(kUpdateCount);
  TORCH_CHECK_VALUE(count != dict.end() && count->second.numel() == 1 && count->second.scalar_type() == at::kLong,
                    metric, ".load_state_dict: missing or malformed '", kUpdateCount, "' (an int64 scalar)");
  for (const auto& entry : entries_) {
    auto it = dict.find(entry.name);
    TORCH_CHECK_VALUE(it != dict.end(), metric, ".load_state_dict: missing key '", entry.name, "'");
    TORCH_CHECK_VALUE(it->second.sizes() == entry.tensor.sizes() && it->second.scalar_type() == entry.tensor.scalar_type(),
                      metric, ".load_state_dict: '", entry.name, "' must be ", entry.tensor.scalar_type(),
                      entry.tensor.sizes(), " but is ", it->second.scalar_type(), it->second.sizes());
  }
  for (auto& entry : entries_) entry.tensor.copy_(dict.at(entry.name));
  updates_ = count->second.item<int64_t>();
}

void MetricState::to(at::Device device) {
  for (auto& entry : entries_) entry.tensor = entry.tensor.to(device);
}

InputReport MetricState::report() const {
  InputReport report;
  if (!tracks_bad_input()) return report;
  const auto host = at::cat({entries_[bad_counts_index_].tensor, entries_[first_bad_index_].tensor}).cpu();
  const auto* values = host.data_ptr<int64_t>();
  const auto kinds = bad_input_kinds_.size();
  for (size_t k = 0; k < kinds; ++k) report.counts.emplace_back(bad_input_kinds_[k], values[k]);
  report.bad_updates = values[kinds];
  report.first_bad_update = values[kinds + 1] == kNoBadUpdate ? -1 : values[kinds + 1];
  return report;
}

}  // namespace metrics
