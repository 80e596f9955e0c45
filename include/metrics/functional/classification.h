#pragma once

#include <ATen/core/Tensor.h>

#include <metrics/classification_options.h>

namespace metrics {

/// Per-class counts, each [C] (int64, or float64 when weighted), or [S, C] for S samples under
/// multidim_average=samplewise, whose values are then per sample.
struct StatCounts {
  at::Tensor tp, fp, tn, fn;
};

/// The reductions from counts to scores, as TorchMetrics 1.6 defines them. The metric classes
/// compute the same reductions, without the checks below; they run on the counts' device and read
/// nothing back.
///
/// Ratios with a zero denominator take options.zero_division (accuracy: 0). Averages:
/// micro sums the counts first; macro averages the per-class scores over the classes with
/// tp + fp + fn > 0 (precision, recall and accuracy with top_k > 1: tp + fn > 0; multilabel:
/// every label); weighted weights them by support tp + fn; none returns them. Binary tasks
/// ignore average. Scores are float32: integer counts are summed in int64 and rounded into float32,
/// where they are divided, as TorchMetrics' _safe_divide divides them (F-beta: see below);
/// weighted (float64) ones are divided in float64 and each score rounded once.
///
/// tp, fp, tn and fn have one shape and device: [C] ([1] binary; samplewise [S, C], binary [S, 1]
/// or [S]). Counts are integer only when all four are. Counts of other shapes or devices, undefined
/// ones, ones that require grad, options no metric takes and an F-beta beta that is not a finite
/// number above 0 raise a ValueError naming functional::<function> (metadata only: nothing is
/// read back).
namespace functional {

at::Tensor accuracy(const StatCounts& counts, const ClassificationOptions& options);
at::Tensor precision(const StatCounts& counts, const ClassificationOptions& options);
at::Tensor recall(const StatCounts& counts, const ClassificationOptions& options);
/// (1 + beta^2) tp / ((1 + beta^2) tp + beta^2 fn + fp); beta = 1 is F1. In the default dtype
/// (c10::get_default_dtype()), as TorchMetrics' arithmetic makes it, not float32: integer counts
/// are rounded into it and summed there, save the weighted average's support total (float32).
at::Tensor fbeta_score(const StatCounts& counts, double beta, const ClassificationOptions& options);
/// [tp, fp, tn, fn, support] for binary and micro (int64 for integer counts, else the counts'
/// dtype), [C, 5] for none, and over the classes the float32 mean (macro) or the support-weighted
/// mean in the default dtype (weighted), as TorchMetrics computes them.
at::Tensor stat_scores(const StatCounts& counts, const ClassificationOptions& options);
/// Divides by row sums (True), column sums (Pred) or the total (All) of the last two dims; 0/0
/// becomes 0. None returns the counts as they are.
at::Tensor normalize_confusion_matrix(const at::Tensor& confusion_matrix, Normalize normalize);

}  // namespace functional
}  // namespace metrics
