#pragma once

#include <ATen/core/Tensor.h>

#include <metrics/aggregation.h>
#include <metrics/update_args.h>
#include <metrics/metric_state.h>
#include <metrics/nan_policy.h>

namespace metrics::detail {

/// Adds one update to a weighted sum and finishes it (the update count and the tally included):
/// the CPU fast path for contiguous CPU input, ATen ops for everything else. Inputs are already
/// validated (dtype, device, broadcastable weight).
void accumulate_weighted_sum(MetricState& state, WeightedSumSlots slots, const ValueArg& value,
                             const ValueArg& weight, const NanPolicy& policy);

/// Folds one update into a running minimum or maximum, and finishes it.
void accumulate_extremum(MetricState& state, ExtremumSlots slots, bool is_max, const ValueArg& value,
                         const NanPolicy& policy);

/// Reserves, behind the state in its count buffer, the rows the ATen path writes an update into
/// before adding it (one pair of rows per kind of update): a weighted sum's, once `slots` are
/// registered, or an extremum's, once its tally is. Returns their offset (the slots' `rows`).
int64_t reserve_update_rows(MetricState& state, const WeightedSumSlots& slots);
int64_t reserve_update_rows(MetricState& state);

/// `total` plus `compensation`, the compensation left out where the total is not finite (it is NaN
/// there).
at::Tensor with_compensation(const at::Tensor& total, const at::Tensor& compensation);

/// A weighted sum's totals with their compensation (with_compensation).
at::Tensor compensated_totals(const MetricState& state, WeightedSumSlots slots);

}  // namespace metrics::detail
