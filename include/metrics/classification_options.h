#pragma once

#include <c10/core/Device.h>
#include <c10/util/Optional.h>
#include <torch/arg.h>

#include <cstdint>
#include <string>

namespace metrics {

enum class Task { Binary, Multiclass, Multilabel };

/// How per-class scores combine (TorchMetrics' `average`; ignored by binary tasks).
enum class Average {
  Micro,     ///< sum the counts over classes, then one ratio
  Macro,     ///< per-class score, then the mean over classes (see docs for which classes count)
  Weighted,  ///< per-class score, weighted by support tp + fn
  None,      ///< the per-class scores
};

/// What the counts cover (TorchMetrics' multidim_average).
enum class MultidimAverage {
  Global,      ///< every sample and position of the stream: one count per class
  Samplewise,  ///< each sample over its extra dimensions (N, ...): a value per sample; the state grows
};

/// ConfusionMatrix normalization: none, over targets (rows), predictions (columns), or all.
enum class Normalize { None, True, Pred, All };

/// num_classes of a multiclass metric whose classes are not given (TorchMetrics' num_classes=None),
/// for micro averaging with top_k 1 only. As TorchMetrics 1.6.2+, the state then holds one class:
/// labels are compared as they are (no range, so none is bad), a right prediction adds a true
/// positive and a wrong one a false positive, a false negative and -1 true negative
/// (tn = 1 * n - (tp + fp + fn)). Scores (N, C, ...) may have any C >= 1.
constexpr int64_t kUnknownClasses = -1;

/// Options of every classification metric. The counting options (task through device) decide
/// the state; metrics whose counting options are equal can share one state in a collection.
/// average and zero_division only shape compute().
struct ClassificationOptions {
  /// The required values: the task, and its classes (multiclass) or labels (multilabel); a binary
  /// task has 1. The factories below say the same in fewer words.
  ClassificationOptions(Task task, int64_t num_classes);

  /// Binary task: preds (N, ...) probabilities, logits or {0, 1} labels; target (N, ...) in {0, 1}.
  static ClassificationOptions binary(double threshold = 0.5);
  /// Multiclass: preds (N, C, ...) scores or (N, ...) labels; target (N, ...) in [0, C).
  static ClassificationOptions multiclass(int64_t num_classes);
  /// Multilabel: preds and target (N, L, ...); each label is a binary task.
  static ClassificationOptions multilabel(int64_t num_labels, double threshold = 0.5);

  TORCH_ARG(Task, task);
  /// Classes (multiclass) or labels (multilabel); 1 for binary. Multiclass: kUnknownClasses too.
  TORCH_ARG(int64_t, num_classes);
  /// Binary and multilabel: a probability above it is a positive prediction. Scores outside
  /// [0, 1] in a batch mark it as logits, compared with log(t / (1 - t)) instead.
  TORCH_ARG(double, threshold) = 0.5;
  /// Multiclass with scores: the target counts as predicted when it is among the k highest
  /// scores (ties broken towards the lower index); otherwise the top-1 class is the prediction.
  TORCH_ARG(int64_t, top_k) = 1;
  /// Targets equal to it are left out of every count.
  TORCH_ARG(c10::optional<int64_t>, ignore_index) = c10::nullopt;
  /// Count bad input (targets out of range, NaN predictions, NaN, negative or infinite weights) on the
  /// device and raise ValueError from compute()/check(). Bad entries are left out either way.
  TORCH_ARG(bool, validate_args) = true;
  /// Accept per-sample weights in update(); counts become float64 weighted sums (else int64).
  TORCH_ARG(bool, weighted) = false;
  /// Where the state lives; inputs must be there too.
  TORCH_ARG(at::Device, device) = at::Device(at::kCPU);
  /// Samplewise needs inputs with extra dimensions (binary and multiclass labels (N, P, ...),
  /// multiclass scores and multilabel (N, C, P, ...)); values are then per sample, and the state
  /// holds a row of counts per sample seen (Cat entries). Not with weights.
  TORCH_ARG(MultidimAverage, multidim_average) = MultidimAverage::Global;
  /// Macro by default, as in TorchMetrics' task classes.
  TORCH_ARG(Average, average) = Average::Macro;
  /// The value of a ratio with a zero denominator: 0 or 1.
  TORCH_ARG(double, zero_division) = 0.0;
};

/// The counting options as text: equal for option sets that count the same things the same way
/// (the state-sharing key of the classification metrics).
std::string counting_key(const ClassificationOptions& options);

/// The options in TorchMetrics' words, e.g. "num_classes=10, top_k=1, average=macro, ...".
std::string describe(const ClassificationOptions& options);

/// "micro", "macro", "weighted" or "none".
const char* average_name(Average average);

/// "Binary", "Multiclass" or "Multilabel": the prefix of TorchMetrics' class names.
std::string task_prefix(Task task);

}  // namespace metrics
