#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include <string>

#include <metrics/classification_options.h>
#include <metrics/classification_state.h>

namespace metrics::detail {

/// One update's input in canonical form, on the state's device.
struct ClassificationBatch {
  /// Binary (M,); multiclass scores (M, C) or labels (M,); multilabel (M, L). Scores are float32
  /// or float64 (float16/bfloat16 widened exactly to float32), labels int64.
  at::Tensor preds;
  /// Binary and multiclass (M,); multilabel (M, L); int64.
  at::Tensor target;
  /// float64: (M,) one per row, or (M, L) one per multilabel entry.
  c10::optional<at::Tensor> weight;
  bool scores = false;
};

/// Checks shapes, dtypes and devices (metadata only) and reshapes into canonical form.
ClassificationBatch canonicalize(const std::string& metric, const ClassificationOptions& options,
                                 const at::Tensor& preds, const at::Tensor& target,
                                 const c10::optional<at::Tensor>& weight, at::Device state_device);

/// The state tensors counts go to: tp, fp, tn, fn [C] (PerClass) or matrix [C, C] (Matrix).
struct CountSink {
  ClassificationState::Layout layout;
  at::Tensor tp, fp, tn, fn, matrix;
};

/// Bad entries found by one update, by kind: targets, predictions, weights.
struct BadInputCounts {
  int64_t targets = 0;
  int64_t predictions = 0;
  int64_t weights = 0;
};

/// ATen path (any device): counts into `sink`; returns the bad-input counts as an int64 [3]
/// tensor on the device.
at::Tensor count_on_aten(const ClassificationBatch& batch, const ClassificationOptions& options, CountSink& sink);

namespace cpu {
/// CPU fast path: one pass over contiguous CPU tensors, counting straight into `sink`.
BadInputCounts count(const ClassificationBatch& batch, const ClassificationOptions& options, CountSink& sink);
}  // namespace cpu

}  // namespace metrics::detail
