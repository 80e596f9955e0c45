#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <metrics/classification.h>

namespace metrics {

/// Named classification metrics updated together. Metrics whose counting options match share
/// one ClassificationState: the collection works that out from their options when they are
/// added (no trial update, no comparison of states), so update() counts each batch once per
/// shared state. A multiclass ConfusionMatrix's C x C state also serves the other multiclass
/// metrics with the same options. Metrics that already have updates keep their own state.
class MetricCollection {
 public:
  MetricCollection() = default;
  MetricCollection(MetricCollection&&) = default;
  MetricCollection& operator=(MetricCollection&&) = default;
  MetricCollection(const MetricCollection&) = delete;
  MetricCollection& operator=(const MetricCollection&) = delete;

  /// Adds `metric` under `name` (names are unique). The collection shares the metric: updates
  /// through the collection show in it, and it may now share its state with others.
  MetricCollection& add(const std::string& name, std::shared_ptr<ClassificationMetric> metric);
  /// Adds a copy of `metric`.
  template <class M, class = std::enable_if_t<std::is_base_of_v<ClassificationMetric, M>>>
  MetricCollection& add(const std::string& name, const M& metric) {
    return add(name, std::make_shared<M>(metric));
  }

  void update(const at::Tensor& preds, const at::Tensor& target, const c10::optional<at::Tensor>& weight = {});
  /// name -> value; raises (ValueError) once per shared state that counted bad input.
  std::map<std::string, at::Tensor> compute() const;
  /// Accumulates, and returns each metric's value on this batch alone.
  std::map<std::string, at::Tensor> forward(const at::Tensor& preds, const at::Tensor& target,
                                            const c10::optional<at::Tensor>& weight = {});
  void check() const;
  void reset();
  /// Folds in a collection with the same names and options; `other` is unchanged.
  void merge(const MetricCollection& other);
  /// "<name>.<state>" -> tensor, for every metric.
  StateDict state_dict() const;
  void load_state_dict(const StateDict& dict);
  void to(at::Device device);
  /// A deep copy that shares states between the same metrics as this one does.
  MetricCollection clone() const;

  const ClassificationMetric& at(const std::string& name) const;
  std::vector<std::string> names() const;
  /// The metrics of each shared state, in the order added (TorchMetrics' compute_groups).
  std::vector<std::vector<std::string>> groups() const;

 private:
  struct Entry {
    std::string name;
    std::shared_ptr<ClassificationMetric> metric;
  };
  std::shared_ptr<ClassificationState> join_group(ClassificationMetric& metric);
  const Entry& entry(const std::string& name) const;

  std::vector<Entry> entries_;
  std::vector<std::shared_ptr<ClassificationState>> states_;  // distinct, in the order first used
};

}  // namespace metrics
