#include "kernels.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>

#include <metrics/backend.h>

#include "../aten_masks.h"
#include "aggregation_cpu.h"

namespace metrics::detail {
namespace {

bool takes_cpu_fast_path(const at::Tensor& value, const ValueArg& weight) {
  if (!cpu_fast_path_enabled() || !value.is_cpu() || !value.is_contiguous()) return false;
  if (!weight.is_tensor()) return true;
  const auto& w = weight.tensor();
  return w.is_cpu() && w.is_contiguous() && w.sizes() == value.sizes();
}

// A host value (or value times weight) as a `dtype` value, rounded as the CPU path's store rounds
// it: beyond float32's range it is +-inf, where ATen's checked conversion would throw. (Weights and
// replacements beyond the state's range are refused up front.)
double as_state_scalar(double v, at::ScalarType dtype) {
  if (dtype != at::kFloat || !(std::abs(v) > std::numeric_limits<float>::max())) return v;
  return std::copysign(std::numeric_limits<double>::infinity(), v);
}

// Ends an update whose bad entries the host counted, by kind.
void finish(MetricState& state, const NanPolicy& policy, c10::ArrayRef<int64_t> bad) {
  if (policy.counts()) return state.finish_update(bad);
  state.finish_update();
}

// sum += x on device tensors, keeping the rounding error in compensation (TwoSum, as on the CPU).
void two_sum_add(at::Tensor& sum, at::Tensor& compensation, const at::Tensor& x) {
  const auto total = sum + x;
  const auto from_x = total - sum;
  auto error = (sum - (total - from_x)).add_(x - from_x);
  compensation.add_(error.masked_fill_(non_finite_mask(total), 0));
  sum.copy_(total);
}

void add_host_batch(MetricState& state, WeightedSumSlots slots, const double* batch) {
  auto& total = state[slots.total];
  auto& compensation = state[slots.compensation];
  const auto width = total.size(0);
  if (total.is_cpu()) {
    cpu::add_compensated(total, compensation, batch, width);
    return;
  }
  auto device_batch = at::empty({width}, total.options());
  const auto dtype = total.scalar_type();
  for (int64_t k = 0; k < width; ++k) device_batch.narrow(0, k, 1).fill_(as_state_scalar(batch[k], dtype));
  two_sum_add(total, compensation, device_batch);
}

void weighted_sum_of_host_value(MetricState& state, WeightedSumSlots slots, double x, double w,
                                const NanPolicy& policy) {
  const bool nan = std::isnan(x) || std::isnan(w);
  if (policy.checks() && (nan || std::isinf(w))) {
    const int64_t kinds[2] = {nan, !nan};
    if (policy.strategy != NanStrategy::Replace) return finish(state, policy, kinds);
    x = policy.replacement;
    w = 1.0;
  }
  const double batch[2] = {x * w, w};
  add_host_batch(state, slots, batch);
  state.finish_update();
}

// The dtype a batch is judged and multiplied in: the widest floating dtype among the state's, the
// value's and the weight's, as the CPU path reads everything as double. A float64 weight of 1e300
// for a float32 state is then a finite weight on both paths, never inf after narrowing.
at::ScalarType batch_dtype(const at::Tensor& total, const at::Tensor& value, const ValueArg& weight) {
  auto dtype = total.scalar_type();
  if (at::isFloatingType(value.scalar_type())) dtype = c10::promoteTypes(dtype, value.scalar_type());
  if (weight.is_tensor() && at::isFloatingType(weight.tensor().scalar_type())) {
    dtype = c10::promoteTypes(dtype, weight.tensor().scalar_type());
  }
  return dtype;
}

void weighted_sum_on_aten(MetricState& state, WeightedSumSlots slots, const at::Tensor& value,
                          const ValueArg& weight, const NanPolicy& policy) {
  auto& total = state[slots.total];
  const auto dtype = batch_dtype(total, value, weight);
  auto x = value.to(dtype);
  auto w = weight.is_tensor() ? weight.tensor().to(dtype).expand_as(x) : at::full_like(x, weight.scalar());
  at::Tensor bad, bad_counts;
  if (policy.checks()) {
    const auto nan = nan_mask(x).bitwise_or_(nan_mask(w));
    const auto infinite = infinite_mask(w).bitwise_and_(nan.bitwise_not());
    bad = nan.bitwise_or(infinite);
    bad_counts = at::stack({nan.sum(), infinite.sum()});
    const bool replace = policy.strategy == NanStrategy::Replace;
    x = x.masked_fill(bad, replace ? policy.replacement : 0.0);
    w = w.masked_fill(bad, replace ? 1.0 : 0.0);
  }
  const auto weighted = (x * w).sum();
  const auto batch = total.size(0) == 2 ? at::stack({weighted, w.sum()}) : weighted.reshape({1});
  two_sum_add(total, state[slots.compensation], batch.to(total.scalar_type()));
  policy.counts() ? state.finish_update(bad_counts) : state.finish_update();
}

void fold_extremum_on_device(at::Tensor& extremum, const cpu::ExtremumBatch& batch, bool is_max) {
  const double v = batch.saw_nan ? std::numeric_limits<double>::quiet_NaN() : batch.value;
  const auto other = at::full({1}, as_state_scalar(v, extremum.scalar_type()), extremum.options());
  is_max ? at::maximum_out(extremum, extremum, other) : at::minimum_out(extremum, extremum, other);
}

void extremum_on_aten(MetricState& state, size_t slot, bool is_max, const at::Tensor& value,
                      const NanPolicy& policy) {
  auto& extremum = state[slot];
  auto x = value.to(extremum.scalar_type());
  at::Tensor bad;
  if (policy.checks()) {
    bad = nan_mask(x);
    const double identity = is_max ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
    x = x.masked_fill(bad, policy.strategy == NanStrategy::Replace ? policy.replacement : identity);
  }
  const auto batch = is_max ? x.amax() : x.amin();
  is_max ? at::maximum_out(extremum, extremum, batch) : at::minimum_out(extremum, extremum, batch);
  policy.counts() ? state.finish_update(bad.sum().reshape({1})) : state.finish_update();
}

}  // namespace

void accumulate_weighted_sum(MetricState& state, WeightedSumSlots slots, const ValueArg& value,
                             const ValueArg& weight, const NanPolicy& policy) {
  if (!value.is_tensor()) return weighted_sum_of_host_value(state, slots, value.scalar(), weight.scalar(), policy);
  const auto& x = value.tensor();
  if (x.numel() == 0) return state.finish_update();
  if (!takes_cpu_fast_path(x, weight)) return weighted_sum_on_aten(state, slots, x, weight, policy);
  const auto batch = cpu::weighted_sum(x, weight.is_tensor() ? &weight.tensor() : nullptr, weight.scalar(), policy);
  const double sums[2] = {batch.weighted_sum, batch.weight_sum};
  add_host_batch(state, slots, sums);
  finish(state, policy, {batch.nan_positions, batch.infinite_weights});
}

void accumulate_extremum(MetricState& state, size_t slot, bool is_max, const ValueArg& value,
                         const NanPolicy& policy) {
  const bool host_value = !value.is_tensor();
  if (!host_value && value.tensor().numel() == 0) return state.finish_update();
  if (!host_value && !takes_cpu_fast_path(value.tensor(), 1.0)) {
    return extremum_on_aten(state, slot, is_max, value.tensor(), policy);
  }
  const auto batch = host_value ? cpu::extremum(value.scalar(), is_max, policy)
                                : cpu::extremum(value.tensor(), is_max, policy);
  auto& extremum = state[slot];
  extremum.is_cpu() ? cpu::fold_extremum(extremum, batch, is_max) : fold_extremum_on_device(extremum, batch, is_max);
  finish(state, policy, batch.nan_positions);
}

}  // namespace metrics::detail
