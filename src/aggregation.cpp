#include <metrics/aggregation.h>

#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/record_function.h>

#include <limits>

#include "aggregation_kernels.h"

namespace metrics {
namespace {

BadInputAction action_for(const NanPolicy& policy) {
  return policy.strategy == NanStrategy::Error ? BadInputAction::RaiseRuntimeError : BadInputAction::Warn;
}

bool is_floating(at::ScalarType type) {
  return type == at::kFloat || type == at::kDouble || type == at::kHalf || type == at::kBFloat16;
}

void check_options(const std::string& metric, const AggregationOptions& options) {
  TORCH_CHECK_TYPE(options.dtype() == at::kDouble || options.dtype() == at::kFloat, metric,
                   ": dtype must be float64 or float32, got ", options.dtype());
}

void check_value(const std::string& metric, const ValueArg& value, at::Device state_device) {
  if (!value.is_tensor()) return;
  const auto& t = value.tensor();
  TORCH_CHECK_TYPE(t.defined(), metric, ".update: value is an undefined tensor");
  TORCH_CHECK_TYPE(is_floating(t.scalar_type()), metric, ".update: value has dtype ", t.scalar_type(),
                   "; expected float32, float64, float16 or bfloat16");
  TORCH_CHECK_VALUE(t.device() == state_device, metric, ".update: value is on ", t.device(),
                    " but the metric's state is on ", state_device, "; move the metric with .to(", t.device(), ")");
}

void check_weight(const std::string& metric, const ValueArg& value, const ValueArg& weight) {
  if (!weight.is_tensor()) return;
  const auto& w = weight.tensor();
  TORCH_CHECK_VALUE(value.is_tensor(), metric, ".update: a weight tensor needs a value tensor, but value is a float");
  const auto& v = value.tensor();
  TORCH_CHECK_TYPE(w.defined(), metric, ".update: weight is an undefined tensor");
  TORCH_CHECK_TYPE(is_floating(w.scalar_type()), metric, ".update: weight has dtype ", w.scalar_type(),
                   "; expected a floating-point tensor");
  TORCH_CHECK_VALUE(w.device() == v.device(), metric, ".update: weight is on ", w.device(), " but value is on ",
                    v.device());
  TORCH_CHECK_VALUE(at::is_expandable_to(w.sizes(), v.sizes()), metric, ".update: weight of shape ", w.sizes(),
                    " is not broadcastable to value of shape ", v.sizes());
}

}  // namespace

namespace detail {

WeightedSumMetric::WeightedSumMetric(std::string name, AggregationOptions options, bool tracks_weight)
    : Metric(std::move(name), action_for(options.nan_policy())), options_(options) {
  check_options(this->name(), options_);
  const int64_t width = tracks_weight ? 2 : 1;
  total_ = state_.add("total", {width}, options_.dtype(), 0, Reduction::Sum, options_.device());
  compensation_ = state_.add("compensation", {width}, options_.dtype(), 0, Reduction::Sum, options_.device());
  if (options_.nan_policy().counts()) state_.track_bad_input({"NaN values"}, options_.device());
}

void WeightedSumMetric::update(const ValueArg& value, const ValueArg& weight) {
  RECORD_USER_SCOPE(update_scope().c_str());
  check_value(name(), value, state_.device());
  check_weight(name(), value, weight);
  const auto index = state_.begin_update();
  detail::accumulate_weighted_sum(state_, {total_, compensation_}, value, weight, options_.nan_policy(), index);
}

at::Tensor WeightedSumMetric::forward(const ValueArg& value, const ValueArg& weight) {
  return forward_on_copy<WeightedSumMetric>([&](WeightedSumMetric& batch) { batch.update(value, weight); });
}

at::Tensor WeightedSumMetric::totals() const { return state_[total_] + state_[compensation_]; }

ExtremumMetric::ExtremumMetric(std::string name, AggregationOptions options, bool is_max)
    : Metric(std::move(name), action_for(options.nan_policy())), options_(options), is_max_(is_max) {
  check_options(this->name(), options_);
  const double initial = is_max ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  extremum_ = state_.add(is_max ? "max_value" : "min_value", {1}, options_.dtype(), initial,
                         is_max ? Reduction::Max : Reduction::Min, options_.device());
  if (options_.nan_policy().counts()) state_.track_bad_input({"NaN values"}, options_.device());
}

void ExtremumMetric::update(const ValueArg& value) {
  RECORD_USER_SCOPE(update_scope().c_str());
  check_value(name(), value, state_.device());
  const auto index = state_.begin_update();
  detail::accumulate_extremum(state_, extremum_, is_max_, value, options_.nan_policy(), index);
}

at::Tensor ExtremumMetric::forward(const ValueArg& value) {
  return forward_on_copy<ExtremumMetric>([&](ExtremumMetric& batch) { batch.update(value); });
}

at::Tensor ExtremumMetric::value() const { return state_[extremum_].select(0, 0).clone(); }

}  // namespace detail

Mean::Mean(AggregationOptions options) : Cloneable("Mean", options, /*tracks_weight=*/true) {}

at::Tensor Mean::value() const {
  const auto sums = totals();
  return sums.select(0, 0) / sums.select(0, 1);
}

Sum::Sum(AggregationOptions options) : Cloneable("Sum", options, /*tracks_weight=*/false) {}

at::Tensor Sum::value() const { return totals().select(0, 0); }

Min::Min(AggregationOptions options) : Cloneable("Min", options, /*is_max=*/false) {}

Max::Max(AggregationOptions options) : Cloneable("Max", options, /*is_max=*/true) {}

}  // namespace metrics
