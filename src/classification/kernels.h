#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Exception.h>
#include <c10/util/Half.h>
#include <c10/util/Optional.h>

#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <metrics/classification.h>
#include <metrics/classification_options.h>
#include <metrics/metric_state.h>

namespace metrics::detail {

/// One update's input in canonical form, on the state's device.
struct ClassificationBatch {
  /// Binary (M,); multiclass scores (M, C) or labels (M,); multilabel (N, L), or (N, L, X) with
  /// extra dimensions (flattened in place, after the labels). Multiclass scores with extra
  /// dimensions stay (N, ..., C), a view with the classes moved last (its M = N * ... rows,
  /// sample-major, uncopied). Scores of any floating input dtype, as they came; labels int64, int32,
  /// int16, int8 or uint8 (bool as uint8; int64 where multiclass has no num_classes). (The CPU
  /// path's rows widen them: half-precision scores to float32, labels to int64.)
  at::Tensor preds;
  /// Binary and multiclass (M,); multilabel as its predictions; labels, as the predictions' are.
  at::Tensor target;
  /// Of any floating input dtype, as they came: (N,) one per sample, or one per entry, shaped as the
  /// target.
  c10::optional<at::Tensor> weight;
  bool scores = false;
  /// The dtype the scores came in (the CPU path's rows widen them): predictions are made as in it.
  at::ScalarType score_dtype = at::kFloat;
  /// N: the rows are sample-major, M / N to a sample (what samplewise counts per sample).
  int64_t samples = 0;

  /// Whether the weights are one per sample, spread over its entries or rows, rather than one per entry.
  bool weight_per_sample() const { return weight && weight->sizes() != target.sizes(); }
};

/// The classes the state counts: num_classes, or 1 where it is kUnknownClasses.
inline int64_t counted_classes(const ClassificationOptions& o) {
  return o.num_classes() == kUnknownClasses ? 1 : o.num_classes();
}

/// Whether `o` counts each sample apart (multidim_average=samplewise).
inline bool samplewise(const ClassificationOptions& o) {
  return o.multidim_average() == MultidimAverage::Samplewise;
}

/// The smallest positive and the largest finite value of `dtype` (a floating one).
inline std::pair<double, double> floating_extremes(at::ScalarType dtype) {
  switch (dtype) {
    case at::kHalf:
      return {std::numeric_limits<c10::Half>::denorm_min(), std::numeric_limits<c10::Half>::max()};
    case at::kBFloat16:
      return {std::numeric_limits<c10::BFloat16>::denorm_min(), std::numeric_limits<c10::BFloat16>::max()};
    case at::kFloat:
      return {std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max()};
    default:
      return {std::numeric_limits<double>::denorm_min(), std::numeric_limits<double>::max()};
  }
}

/// The negative number of `dtype` (a floating one) nearest 0: a value above it is not negative
/// (-0.0 too).
inline double negative_nearest_zero(at::ScalarType dtype) { return -floating_extremes(dtype).first; }

/// The bounds of a good weight of `dtype` (a floating one): negative_nearest_zero (a good weight is
/// above it) and the largest finite one.
inline std::pair<double, double> good_weight_bounds(at::ScalarType dtype) {
  return {negative_nearest_zero(dtype), floating_extremes(dtype).second};
}

/// A batch's weight dtype, or -1 without a weight: part of the keys the ATen paths' buffers are made for.
inline int64_t weight_dtype_key(const ClassificationBatch& b) {
  return b.weight ? static_cast<int64_t>(b.weight->scalar_type()) : -1;
}

/// Whether a NaN score makes a binary or multilabel batch logits, as one outside [0, 1] does: on the
/// CPU, where TorchMetrics asks whether every score is inside [0, 1] (normalize_logits_if_needed),
/// and not on other devices, where it asks whether any is outside.
inline bool nan_makes_logits(const at::Device& device) { return device.is_cpu(); }

/// Refuses options no metric (and no reduction) takes, naming `metric` (a class or a function).
void check_options(const std::string& metric, const ClassificationOptions& o);

/// The option that sizes the state, as given: "num_classes = 5", "num_labels = 4", "num_classes =
/// None"; "" for a binary task.
std::string sizing_option(const ClassificationOptions& o);

/// Refuses an F-beta's beta that is not a finite number above 0, naming `metric`.
inline void check_beta(const std::string& metric, double beta) {
  TORCH_CHECK_VALUE(beta > 0.0 && std::isfinite(beta), metric, ": beta must be a finite number larger than 0, got ",
                    beta);
}

/// Checks shapes, dtypes and devices (metadata only) and reshapes into canonical form.
ClassificationBatch canonicalize(const std::string& metric, const ClassificationOptions& options,
                                 const at::Tensor& preds, const at::Tensor& target,
                                 const c10::optional<at::Tensor>& weight, at::Device state_device);

/// Bad entries found by one update, by kind. This order is the one declaration of the kinds: the
/// labels (bad_input_kinds), the ATen path's masks and the tally all follow it.
struct BadInputCounts {
  int64_t targets = 0;
  int64_t predictions = 0;
  int64_t weights = 0;
  std::array<int64_t, 3> in_order() const { return {targets, predictions, weights}; }
};
/// The labels of BadInputCounts' kinds, in its order, for `options`' task.
std::vector<std::string> bad_input_kinds(const ClassificationOptions& options);

/// The counting state of `options` in `layout`, with its bad-input tally if validate_args.
MetricState make_count_state(const ClassificationOptions& options, CountLayout layout);
/// The slot of the matrix in a PerClassAndKeptMatrix state: after the update count, tp, fp, tn, fn.
constexpr size_t kKeptMatrixSlot = 5;
CountLayout layout_of(const MetricState& state);
/// tp, fp, tn, fn per class, derived from the matrix under the Matrix layout; [S, C] rows of S
/// samples under multidim_average=samplewise.
StatCounts stat_counts(const MetricState& state);
/// [C, C] multiclass (Matrix layout), [2, 2] binary, [L, 2, 2] multilabel; for `reader`, a
/// metric of that layout (the binary confmat where it is PerClassAndKeptMatrix).
at::Tensor confusion_matrix(const MetricState& state, const ClassificationOptions& options, CountLayout reader);
/// Counts a canonical batch into `state` (CPU fast path or ATen path) and finishes the update.
void count(MetricState& state, const ClassificationOptions& options, const ClassificationBatch& batch);

/// The state tensors counts go to: tp, fp, tn, fn [C] (PerClass) or matrix [C, C] (Matrix).
/// PerClassAndKeptMatrix: tp, fp, tn, fn; count() counts its matrix as a second PerClass sink.
struct CountSink {
  CountLayout layout;
  at::Tensor tp, fp, tn, fn, matrix;
  /// Binary with ignore_index: the scores that ignore_index keeps alone say whether a batch's
  /// scores are logits (TorchMetrics' BinaryConfusionMatrix), not every score.
  bool judges_kept_scores = false;
};

/// ATen path (any device): counts a batch into `state` and finishes the update (count and tally).
/// It alone counts samplewise, on the CPU too.
void count_on_aten(MetricState& state, const ClassificationBatch& batch, const ClassificationOptions& options);
/// Its multiclass part (multiclass_aten.cpp) and its binary and multilabel part (entries_aten.cpp),
/// for batches with entries.
void count_multiclass_on_aten(MetricState& state, const ClassificationBatch& batch, const ClassificationOptions& options);
void count_entries_on_aten(MetricState& state, const ClassificationBatch& batch, const ClassificationOptions& options);

namespace cpu {
/// CPU fast path: one pass over contiguous CPU tensors, counting straight into `sink`.
BadInputCounts count(const ClassificationBatch& batch, const ClassificationOptions& options, CountSink& sink);
}  // namespace cpu

}  // namespace metrics::detail
