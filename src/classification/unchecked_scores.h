#pragma once

// The functional reductions without their checks, for counts a metric's own state holds (its
// options checked when it was made): the public functions check a caller's counts, then call these.

#include <ATen/core/Tensor.h>

#include <metrics/functional/classification.h>

namespace metrics::functional::unchecked {

at::Tensor accuracy(const StatCounts& counts, const ClassificationOptions& o);
at::Tensor precision(const StatCounts& counts, const ClassificationOptions& o);
at::Tensor recall(const StatCounts& counts, const ClassificationOptions& o);
at::Tensor fbeta_score(const StatCounts& counts, double beta, const ClassificationOptions& o);
at::Tensor stat_scores(const StatCounts& counts, const ClassificationOptions& o);

}  // namespace metrics::functional::unchecked
