#pragma once

#include <ATen/core/Tensor.h>

#include <metrics/nan_policy.h>

#include "../two_sum.h"

namespace metrics::detail::cpu {

/// One batch's contribution to a weighted sum, each sum with what its additions rounded off, and
/// the bad entries it dropped: NaN values or weights, and (other) infinite weights.
struct WeightedBatch {
  CompensatedSum weighted_sum;
  CompensatedSum weight_sum;
  int64_t nan_positions = 0;
  int64_t infinite_weights = 0;
};

/// One pass over a contiguous CPU `value` and `weight` of the same shape, or a host `weight_scalar`
/// when `weight` is null. NaN handling follows `policy`.
WeightedBatch weighted_sum(const at::Tensor& value, const at::Tensor* weight, double weight_scalar,
                           const NanPolicy& policy);

/// One batch's extremum; `saw_nan` is set only under Disable (NaN then wins, as in torch.max).
struct ExtremumBatch {
  double value = 0.0;
  bool saw_nan = false;
  int64_t nan_positions = 0;
};

ExtremumBatch extremum(const at::Tensor& value, bool is_max, const NanPolicy& policy);
ExtremumBatch extremum(double value, bool is_max, const NanPolicy& policy);

/// total += batch (element-wise over `width`) on float64 CPU state tensors, keeping what each addition
/// rounds off, and what the batch's own sums did, in `compensation` from `compensation_offset` on
/// (TwoSum), so the sum's error grows neither with the update count nor at each batch's end; where a
/// total is not finite, its compensation is the device path's (NaN or +-inf). (An offset, not a
/// narrowed view: a view costs more than the add.)
void add_compensated(at::Tensor& total, at::Tensor& compensation, int64_t compensation_offset,
                     const CompensatedSum* batch, int64_t width);

/// extremum_state = max/min(extremum_state, batch) on a CPU state tensor, NaN winning.
void fold_extremum(at::Tensor& state, const ExtremumBatch& batch, bool is_max);

}  // namespace metrics::detail::cpu
