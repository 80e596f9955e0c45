#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace metrics {

/// A value given to update(): a tensor, or a host double that reaches ATen as a scalar argument
/// (never as a new tensor). It holds its own reference to the tensor (no copy of the data), so an
/// UpdateArgs built from temporaries stays valid.
class ValueArg {
 public:
  ValueArg(at::Tensor tensor) : tensor_(std::move(tensor)), is_tensor_(true) {}  // NOLINT: implicit by design
  ValueArg(double scalar) : scalar_(scalar) {}                                   // NOLINT: implicit by design
  bool is_tensor() const { return is_tensor_; }
  const at::Tensor& tensor() const { return tensor_; }
  double scalar() const { return scalar_; }

 private:
  at::Tensor tensor_;
  bool is_tensor_ = false;
  double scalar_ = 0.0;
};

/// The arguments of one update in a form every metric takes, so that a MetricCollection can hand
/// the same call to metrics of any family: positional arguments first, then keywords with
/// TorchMetrics' names ("preds", "target", "value", "weight").
struct UpdateArgs {
  UpdateArgs(std::vector<ValueArg> given = {}) : positional(std::move(given)) {}  // NOLINT: implicit

  std::vector<ValueArg> positional;
  std::vector<std::pair<std::string, ValueArg>> keywords;
  /// A collection passes every keyword to every metric; each takes the ones it knows (as
  /// TorchMetrics' MetricCollection filters keyword arguments by each metric's signature).
  bool skip_unknown_keywords = false;
};

/// The counting half of an update whose checks have passed; running it changes the state. It
/// refers to the UpdateArgs it was prepared from, so it runs before they go away.
using UpdateStep = std::function<void()>;

}  // namespace metrics
