#include <metrics/aggregation.h>
#include <metrics/shape_error.h>
#include <metrics/update_call.h>

#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/record_function.h>

#include <array>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "../allocated_state.h"
#include "../dense_input.h"
#include "../input_dtypes.h"
#include "../input_devices.h"
#include "../number_text.h"
#include "kernels.h"

namespace metrics {
namespace {

BadInputAction action_for(const NanPolicy& policy) {
  return policy.strategy == NanStrategy::Error ? BadInputAction::RaiseRuntimeError : BadInputAction::Warn;
}

bool is_real(at::ScalarType type) {
  return detail::is_input_floating(type) || at::isIntegralType(type, /*includeBool=*/true);
}

// Integer and bool tensors (a count of correct predictions, a mask as weights) are summed as
// float64, as TorchMetrics casts them to its float dtype; floating tensors pass as they are.
at::Tensor as_floating(const at::Tensor& t) {
  return detail::is_input_floating(t.scalar_type()) ? t : t.to(at::kDouble);
}

// Whether host scalar `v` (finite) lies beyond what a float32 state holds.
bool beyond_float32(double v, at::ScalarType state) {
  return state == at::kFloat && std::isfinite(v) && std::abs(v) > std::numeric_limits<float>::max();
}

void check_dtype(const std::string& metric, at::ScalarType dtype) {
  TORCH_CHECK_TYPE(dtype == at::kDouble || dtype == at::kFloat, metric, ": dtype must be float64 or float32, got ",
                   dtype);
}

// Min and Max keep their state in the options' dtype: a replacement must fit it.
void check_extremum_options(const std::string& metric, const AggregationOptions& options) {
  check_dtype(metric, options.dtype());
  const auto& policy = options.nan_policy();
  TORCH_CHECK_VALUE(policy.strategy != NanStrategy::Replace || !beyond_float32(policy.replacement, options.dtype()),
                    metric, ": nan_strategy = ", policy.replacement,
                    " is beyond the range of the float32 state; use dtype float64");
}

void check_value(const std::string& metric, const ValueArg& value) {
  if (!value.is_tensor()) return;
  const auto& t = value.tensor();
  TORCH_CHECK_TYPE(t.defined(), UpdateCall::prefix(metric), "value is an undefined tensor");
  detail::check_dense(metric, "value", t);
  TORCH_CHECK_TYPE(is_real(t.scalar_type()), UpdateCall::prefix(metric), "value has dtype ", t.scalar_type(),
                   "; expected a real (floating, integer or bool) tensor");
}

void check_weight_type(const std::string& metric, const ValueArg& weight) {
  if (!weight.is_tensor()) return;
  const auto& w = weight.tensor();
  TORCH_CHECK_TYPE(w.defined(), UpdateCall::prefix(metric), "weight is an undefined tensor");
  detail::check_dense(metric, "weight", w);
  TORCH_CHECK_TYPE(is_real(w.scalar_type()), UpdateCall::prefix(metric), "weight has dtype ", w.scalar_type(),
                   "; expected a real (floating, integer or bool) tensor");
}

// A host value with a weight tensor is a 0-dim value (as TorchMetrics makes it one): the weight
// must broadcast to it.
void check_weight_shape(const std::string& metric, const ValueArg& value, const ValueArg& weight) {
  if (!weight.is_tensor()) return;
  const auto value_sizes = value.is_tensor() ? value.tensor().sizes() : c10::IntArrayRef{};
  METRICS_CHECK_SHAPE(at::is_expandable_to(weight.tensor().sizes(), value_sizes), UpdateCall::prefix(metric),
                      "weight of shape ", weight.tensor().sizes(), " is not broadcastable to value of shape ",
                      value_sizes);
}

// The arguments that are tensors (value, and the weight where one is given) on the metric's device.
void check_arg_devices(const std::string& metric, const ValueArg& value, const ValueArg* weight,
                       at::Device state_device) {
  std::array<detail::NamedInput, 2> inputs;
  size_t count = 0;
  if (value.is_tensor()) inputs[count++] = {"value", &value.tensor()};
  if (weight != nullptr && weight->is_tensor()) inputs[count++] = {"weight", &weight->tensor()};
  if (count > 0) detail::check_devices(metric, {inputs.data(), count}, state_device);
}

std::string describe(const AggregationOptions& o) {
  const auto& policy = o.nan_policy();
  std::ostringstream text;
  text << "nan_strategy=";
  switch (policy.strategy) {
    case NanStrategy::Error:
      text << "error";
      break;
    case NanStrategy::Warn:
      text << "warn";
      break;
    case NanStrategy::Ignore:
      text << "ignore";
      break;
    case NanStrategy::Disable:
      text << "disable";
      break;
    case NanStrategy::Replace:
      text << detail::number_text(policy.replacement);
      break;
  }
  text << ", dtype=" << o.dtype();
  return text.str();
}

// Whether state format `version` kept a float32 metric's totals and their compensation (as wide as
// the totals) in float32: versions 2 and 3 did (version 1's layout is refused).
bool float32_totals_in(int64_t version, at::ScalarType dtype) {
  return dtype == at::kFloat && version >= 2 && version < 4;
}

// `text` with its line of entry `name` replaced by `line`.
std::string with_entry_line(std::string text, const std::string& name, const std::string& line) {
  const auto start = text.find("\n" + name + " ") + 1;
  return text.replace(start, text.find('\n', start) - start, line);
}

// An aggregator's state on `device`.
MetricState state_on(const std::string& metric, at::Device device) {
  return detail::allocated_state(metric, "the state on " + device.str(),
                                 [&] { return MetricState(device, at::kDouble); });
}

}  // namespace

namespace detail {

// Aggregators count and sum in float64 (a float32 metric rounds its values), so that the state packs
// its count, totals and tally into one buffer that one compensated add updates (the compensation
// then covers all of them).
WeightedSumMetric::WeightedSumMetric(std::string name, AggregationOptions options, bool tracks_weight)
    : Metric(name, action_for(options.nan_policy()), state_on(name, options.device())),
      options_(options) {
  check_dtype(this->name(), options_.dtype());
  auto& state = mutable_state();
  const int64_t width = tracks_weight ? 2 : 1;
  total_ = state.add("total", {width}, state.count_dtype(), 0, Reduction::Sum);
  // the kinds cumulative: one reduction of nested masks counts NaN, then NaN or infinite weight
  if (options_.nan_policy().counts()) state.track_bad_input({"NaN values", "infinite weights"}, /*cumulative=*/true);
  const auto compensated = state.span(0, state.size() - 1).numel();
  compensation_ = state.add("compensation", {compensated}, state.count_dtype(), 0, Reduction::Sum);
  state.compensate_in(compensation_);
  rows_ = detail::reserve_update_rows(state, slots());
}

const std::vector<std::string>& WeightedSumMetric::update_parameters() const {
  static const std::vector<std::string> names{"value", "weight"};
  return names;
}

SharingKey WeightedSumMetric::sharing_key() const { return {name() + "(" + options_text() + ")"}; }

std::string WeightedSumMetric::options_text() const { return describe(options_); }

void WeightedSumMetric::check_args(const ValueArg& value, const ValueArg& weight) const {
  check_value(name(), value);
  check_weight_type(name(), weight);
  check_arg_devices(name(), value, &weight, device());
  check_weight_shape(name(), value, weight);
}

void WeightedSumMetric::accumulate(const ValueArg& value, const ValueArg& weight) {
  // a host value beside a weight tensor becomes a 0-dim tensor by a fill on the device, not a copy
  const auto v = value.is_tensor()    ? as_floating(value.tensor())
                 : weight.is_tensor() ? at::full({}, value.scalar(), weight.tensor().options().dtype(at::kDouble))
                                      : at::Tensor();
  const auto w = weight.is_tensor() ? as_floating(weight.tensor()) : at::Tensor();
  accumulate_weighted_sum(mutable_state(), slots(), v.defined() ? ValueArg(v) : value,
                          w.defined() ? ValueArg(w) : weight, options_.nan_policy());
}

void WeightedSumMetric::update(const ValueArg& value, const ValueArg& weight) {
  RECORD_USER_SCOPE(update_scope().c_str());
  check_args(value, weight);
  apply([&] { accumulate(value, weight); });
}

UpdateStep WeightedSumMetric::prepare_update(const UpdateArgs& args) {
  const auto bound = bind(args);
  const auto& value = required(bound, 0);
  const ValueArg weight = bound[1] ? *bound[1] : ValueArg(1.0);
  check_args(value, weight);
  return [this, value, weight] { accumulate(value, weight); };
}

at::Tensor WeightedSumMetric::forward(const ValueArg& value, const ValueArg& weight) {
  return Metric::forward(UpdateArgs{{value, weight}});
}

std::string WeightedSumMetric::description_in_version(int64_t version) const {
  if (!float32_totals_in(version, options_.dtype())) return description();
  const auto width = "Float[" + std::to_string(state().numel(total_)) + "] sum";
  return with_entry_line(with_entry_line(description(), "total", "total " + width), "compensation",
                         "compensation " + width);
}

void WeightedSumMetric::upgrade_state(StateDict& dict, int64_t version) const {
  const auto total = dict.find("total");
  const auto compensation = dict.find("compensation");
  if (!float32_totals_in(version, options_.dtype()) || total == dict.end() || compensation == dict.end()) return;
  const auto& t = total->second;
  const auto& c = compensation->second;
  const auto float32_entry = [&](const at::Tensor& x) {
    return x.defined() && x.scalar_type() == at::kFloat && x.dim() == 1 && x.numel() == state().numel(total_) &&
           x.device() == t.device();
  };
  if (!float32_entry(t) || !float32_entry(c)) return;
  total->second = with_compensation(t.to(at::kDouble), c.to(at::kDouble));
  compensation->second = at::zeros({state().numel(compensation_)}, c.options().dtype(at::kDouble));
}

at::Tensor WeightedSumMetric::totals() const { return compensated_totals(state(), slots()); }

at::Tensor WeightedSumMetric::in_options_dtype(const at::Tensor& value) const { return value.to(options_.dtype()); }

ExtremumMetric::ExtremumMetric(std::string name, AggregationOptions options, bool is_max)
    : Metric(name, action_for(options.nan_policy()), state_on(name, options.device())),
      options_(options),
      is_max_(is_max) {
  check_extremum_options(this->name(), options_);
  const double initial = is_max ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  extremum_ = mutable_state().add(is_max ? "max_value" : "min_value", {1}, options_.dtype(), initial,
                                  is_max ? Reduction::Max : Reduction::Min);
  if (options_.nan_policy().counts()) mutable_state().track_bad_input({"NaN values"});
  rows_ = detail::reserve_update_rows(mutable_state());
}

const std::vector<std::string>& ExtremumMetric::update_parameters() const {
  static const std::vector<std::string> names{"value"};
  return names;
}

SharingKey ExtremumMetric::sharing_key() const { return {name() + "(" + options_text() + ")"}; }

std::string ExtremumMetric::options_text() const { return describe(options_); }

void ExtremumMetric::check_args(const ValueArg& value) const {
  check_value(name(), value);
  check_arg_devices(name(), value, nullptr, device());
}

void ExtremumMetric::accumulate(const ValueArg& value) {
  const auto v = value.is_tensor() ? as_floating(value.tensor()) : at::Tensor();
  accumulate_extremum(mutable_state(), {extremum_, rows_}, is_max_, v.defined() ? ValueArg(v) : value,
                      options_.nan_policy());
}

void ExtremumMetric::update(const ValueArg& value) {
  RECORD_USER_SCOPE(update_scope().c_str());
  check_args(value);
  apply([&] { accumulate(value); });
}

UpdateStep ExtremumMetric::prepare_update(const UpdateArgs& args) {
  const auto& value = required(bind(args), 0);
  check_args(value);
  return [this, value] { accumulate(value); };
}

at::Tensor ExtremumMetric::forward(const ValueArg& value) { return Metric::forward(UpdateArgs{{value}}); }

at::Tensor ExtremumMetric::value() const { return state()[extremum_].select(0, 0).clone(); }

}  // namespace detail

Mean::Mean(AggregationOptions options) : Cloneable("Mean", options, /*tracks_weight=*/true) {}

at::Tensor Mean::value() const {
  const auto sums = totals();
  return in_options_dtype(sums.select(0, 0) / sums.select(0, 1));
}

Sum::Sum(AggregationOptions options) : Cloneable("Sum", options, /*tracks_weight=*/false) {}

at::Tensor Sum::value() const { return in_options_dtype(totals().select(0, 0)); }

Min::Min(AggregationOptions options) : Cloneable("Min", options, /*is_max=*/false) {}

Max::Max(AggregationOptions options) : Cloneable("Max", options, /*is_max=*/true) {}

}  // namespace metrics
