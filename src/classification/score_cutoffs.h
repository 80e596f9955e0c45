#pragma once

#include <c10/core/ScalarType.h>

namespace metrics::detail {

/// Where binary predictions of scores of one dtype start, as TorchMetrics makes them in that
/// dtype: a probability p is positive when p > round(threshold) (the threshold rounded to the
/// scores' dtype, as a tensor comparison rounds it), a logit x when round(sigmoid(x)) >
/// round(threshold) (sigmoid computed in float32 for float16 and bfloat16 scores, then rounded).
/// Both are strict cutoffs: a score is positive when it is above its cutoff. Each cutoff is a value
/// of the dtype (so exact in float32 for the 16-bit ones), and ±inf where every score or none is
/// positive. float16 scores near a threshold round onto it often: comparing them with the exact
/// threshold, or logits with log(t / (1 - t)), would call ties TorchMetrics does not.
struct ScoreCutoffs {
  double probability;
  double logit;
};

/// The cutoffs of `threshold` (in [0, 1]) for scores of `dtype` (float64, float32, float16 or
/// bfloat16). Worked out once per thread for the last (threshold, dtype) asked.
ScoreCutoffs score_cutoffs(double threshold, at::ScalarType dtype);

}  // namespace metrics::detail
