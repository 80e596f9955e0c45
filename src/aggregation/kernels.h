#pragma once

#include <metrics/aggregation.h>
#include <metrics/update_args.h>
#include <metrics/metric_state.h>
#include <metrics/nan_policy.h>

namespace metrics::detail {

/// Where a weighted sum lives in its MetricState: totals [width] and their compensation [width],
/// width 1 for Σ w·x, 2 for (Σ w·x, Σ w).
struct WeightedSumSlots {
  size_t total;
  size_t compensation;
};

/// Adds one update to a weighted sum and finishes it (state.finish_update): the CPU fast path for
/// contiguous CPU input, ATen ops for everything else. Inputs are already validated (dtype,
/// device, broadcastable weight).
void accumulate_weighted_sum(MetricState& state, WeightedSumSlots slots, const ValueArg& value,
                             const ValueArg& weight, const NanPolicy& policy);

/// Folds one update into a running minimum or maximum, and finishes it.
void accumulate_extremum(MetricState& state, size_t slot, bool is_max, const ValueArg& value,
                         const NanPolicy& policy);

}  // namespace metrics::detail
