#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include <string>

#include <metrics/classification_options.h>
#include <metrics/functional/classification.h>
#include <metrics/metric_state.h>

namespace metrics {

/// The one state that accuracy, precision, recall, F-beta, stat scores and the confusion matrix
/// are reductions of: per-class true/false positive/negative counts (int64, or float64 when
/// weighted), or, for a multiclass confusion matrix, the C x C matrix they derive from.
///
/// update() canonicalizes the input (argmax or top-k for multiclass scores, threshold for binary
/// and multilabel), drops ignored, out-of-range and NaN entries, and counts the rest: in one pass
/// over contiguous CPU input, with ATen ops elsewhere. It never synchronizes.
class ClassificationState {
 public:
  enum class Layout {
    PerClass,  ///< tp, fp, tn, fn: [C] each (C = 1 for binary, L for multilabel)
    Matrix,    ///< confmat: [C, C], rows targets, columns predictions (multiclass only)
  };

  ClassificationState(const ClassificationOptions& options, Layout layout);

  /// Validates shapes, dtypes and devices (metadata only; `metric` names the caller in errors),
  /// then counts. `weight`: one per sample (N,), or one per entry (the target's shape).
  void update(const std::string& metric, const at::Tensor& preds, const at::Tensor& target,
              const c10::optional<at::Tensor>& weight);

  /// tp, fp, tn, fn per class, derived from the matrix under the Matrix layout.
  StatCounts stat_counts() const;
  /// Rows targets, columns predictions: [C, C] multiclass (Matrix layout), [2, 2] binary,
  /// [L, 2, 2] multilabel.
  at::Tensor confusion_matrix() const;

  const ClassificationOptions& options() const { return options_; }
  Layout layout() const { return layout_; }
  MetricState& tensors() { return state_; }
  const MetricState& tensors() const { return state_; }

 private:
  ClassificationOptions options_;
  Layout layout_;
  MetricState state_;
};

}  // namespace metrics
