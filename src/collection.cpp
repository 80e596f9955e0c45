#include <metrics/collection.h>

#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <unordered_map>

namespace metrics {
namespace {

using Layout = ClassificationState::Layout;
constexpr char kName[] = "MetricCollection";

}  // namespace

MetricCollection& MetricCollection::add(const std::string& name, std::shared_ptr<ClassificationMetric> metric) {
  TORCH_CHECK_VALUE(metric != nullptr, kName, ".add: metric '", name, "' is null");
  TORCH_CHECK_VALUE(std::none_of(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.name == name; }),
                    kName, ".add: a metric named '", name, "' is already in the collection");
  metric->counts_ = join_group(*metric);
  entries_.push_back({name, std::move(metric)});
  return *this;
}

// The state `metric` will use: a fresh compatible group's (upgraded to a C x C matrix if the
// metric needs one), else its own.
std::shared_ptr<ClassificationState> MetricCollection::join_group(ClassificationMetric& metric) {
  const bool fresh = metric.update_count() == 0;
  for (auto& state : states_) {
    if (!fresh || state->tensors().updates() != 0 || !same_counting(state->options(), metric.options()) ||
        state->tensors().device() != metric.device()) {
      continue;
    }
    if (metric.layout_ == Layout::Matrix && state->layout() == Layout::PerClass) {
      auto upgraded = std::make_shared<ClassificationState>(state->options(), Layout::Matrix);
      upgraded->tensors().to(metric.device());
      for (auto& e : entries_) {
        if (e.metric->counts_ == state) e.metric->counts_ = upgraded;
      }
      state = upgraded;
    }
    return state;
  }
  states_.push_back(metric.counts_);
  return metric.counts_;
}

void MetricCollection::update(const at::Tensor& preds, const at::Tensor& target,
                              const c10::optional<at::Tensor>& weight) {
  RECORD_USER_SCOPE("metrics::MetricCollection::update");
  for (auto& state : states_) state->update(kName, preds, target, weight);
}

void MetricCollection::check() const {
  for (const auto& state : states_) {
    for (const auto& e : entries_) {
      if (e.metric->counts_ == state) {
        e.metric->check();
        break;
      }
    }
  }
}

std::map<std::string, at::Tensor> MetricCollection::compute() const {
  RECORD_USER_SCOPE("metrics::MetricCollection::compute");
  if (std::any_of(states_.begin(), states_.end(), [](const auto& s) { return s->tensors().updates() == 0; })) {
    TORCH_WARN(kName, ".compute: called before any update; values reflect the initial state");
  }
  check();
  std::map<std::string, at::Tensor> values;
  for (const auto& e : entries_) values.emplace(e.name, e.metric->value());
  return values;
}

std::map<std::string, at::Tensor> MetricCollection::forward(const at::Tensor& preds, const at::Tensor& target,
                                                             const c10::optional<at::Tensor>& weight) {
  auto batch = clone();
  batch.reset();
  batch.update(preds, target, weight);
  for (size_t i = 0; i < states_.size(); ++i) {
    states_[i]->tensors().merge(batch.states_[i]->tensors(), kName, /*append=*/true);
  }
  std::map<std::string, at::Tensor> values;
  for (const auto& e : batch.entries_) values.emplace(e.name, e.metric->value());
  return values;
}

void MetricCollection::reset() {
  for (auto& state : states_) state->tensors().reset();
}

void MetricCollection::merge(const MetricCollection& other) {
  TORCH_CHECK_VALUE(names() == other.names() && groups() == other.groups(), kName,
                    ".merge: the other collection has different metrics or groups");
  for (size_t i = 0; i < states_.size(); ++i) states_[i]->tensors().merge(other.states_[i]->tensors(), kName);
}

StateDict MetricCollection::state_dict() const {
  StateDict dict;
  for (const auto& e : entries_) {
    for (auto& [key, tensor] : e.metric->state_dict()) dict.emplace(e.name + "." + key, tensor);
  }
  return dict;
}

void MetricCollection::load_state_dict(const StateDict& dict) {
  std::vector<StateDict> parts(entries_.size());
  for (const auto& [key, tensor] : dict) {
    const auto dot = key.find('.');
    const auto owner = key.substr(0, dot);
    auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.name == owner; });
    TORCH_CHECK_VALUE(dot != std::string::npos && it != entries_.end(), kName, ".load_state_dict: unexpected key '",
                      key, "'");
    parts[it - entries_.begin()].emplace(key.substr(dot + 1), tensor);
  }
  // Check every part on a copy first, so that a bad dict changes nothing.
  for (size_t i = 0; i < entries_.size(); ++i) entries_[i].metric->clone()->load_state_dict(parts[i]);
  for (size_t i = 0; i < entries_.size(); ++i) entries_[i].metric->load_state_dict(parts[i]);
}

void MetricCollection::to(at::Device device) {
  for (auto& state : states_) state->tensors().to(device);
}

MetricCollection MetricCollection::clone() const {
  MetricCollection copy;
  std::unordered_map<const ClassificationState*, std::shared_ptr<ClassificationState>> copies;
  for (const auto& state : states_) {
    copies[state.get()] = std::make_shared<ClassificationState>(*state);
    copy.states_.push_back(copies[state.get()]);
  }
  for (const auto& e : entries_) {
    auto metric = std::shared_ptr<ClassificationMetric>(static_cast<ClassificationMetric*>(e.metric->clone().release()));
    metric->counts_ = copies.at(e.metric->counts_.get());
    copy.entries_.push_back({e.name, std::move(metric)});
  }
  return copy;
}

const MetricCollection::Entry& MetricCollection::entry(const std::string& name) const {
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.name == name; });
  TORCH_CHECK_INDEX(it != entries_.end(), kName, ": no metric named '", name, "'");
  return *it;
}

const ClassificationMetric& MetricCollection::at(const std::string& name) const { return *entry(name).metric; }

std::vector<std::string> MetricCollection::names() const {
  std::vector<std::string> names;
  for (const auto& e : entries_) names.push_back(e.name);
  return names;
}

std::vector<std::vector<std::string>> MetricCollection::groups() const {
  std::vector<std::vector<std::string>> groups;
  for (const auto& state : states_) {
    groups.emplace_back();
    for (const auto& e : entries_) {
      if (e.metric->counts_ == state) groups.back().push_back(e.name);
    }
  }
  return groups;
}

}  // namespace metrics
