#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include <memory>
#include <string>
#include <vector>

#include <metrics/classification_options.h>
#include <metrics/functional/classification.h>
#include <metrics/metric.h>

namespace metrics::detail {
struct ClassificationBatch;
}  // namespace metrics::detail

namespace metrics {

/// How a classification state holds its counts.
enum class CountLayout {
  PerClass,  ///< tp, fp, tn, fn: [C] each (C = 1 for binary, L for multilabel)
  Matrix,    ///< confmat: [C, C], rows targets, columns predictions (multiclass only)
  /// Binary with ignore_index: tp, fp, tn, fn [1], with a batch's scores read as logits where any
  /// score lies outside [0, 1] (on the CPU a NaN too), and confmat [2, 2], read so where a score
  /// ignore_index keeps does (TorchMetrics' BinaryConfusionMatrix; its other binary metrics judge
  /// every score).
  PerClassAndKeptMatrix,
};

/// Base of the classification metrics: each is a reduction of one counting state (per-class
/// true/false positive/negative counts, int64 or float64 when weighted, or the C x C matrix they
/// derive from), which it owns, or shares with the other metrics of a MetricCollection whose
/// counting options are equal.
///
/// update() canonicalizes the input (argmax or top-k for multiclass scores, threshold for binary
/// and multilabel), drops ignored, out-of-range and NaN entries, and counts the rest: in one pass
/// over contiguous CPU input, with ATen ops elsewhere. It never synchronizes.
///
/// Names follow TorchMetrics' task classes: Accuracy with ClassificationOptions::multiclass(10)
/// is "MulticlassAccuracy". Bad input counted by update() (options.validate_args) makes
/// compute() and check() raise c10::ValueError with the counts.
class ClassificationMetric : public Metric {
 public:
  /// preds: binary (N, ...) probabilities, logits or {0, 1} labels; multiclass (N, C, ...) scores
  /// or (N, ...) labels; multilabel (N, L, ...). target: integer labels, (N, ...) or (N, L, ...).
  /// weight (needs options.weighted): (N,) per sample or the target's shape per entry.
  void update(const at::Tensor& preds, const at::Tensor& target, const c10::optional<at::Tensor>& weight = {});
  /// Accumulates, and returns the value of this batch alone (TorchMetrics' forward).
  at::Tensor forward(const at::Tensor& preds, const at::Tensor& target, const c10::optional<at::Tensor>& weight = {});
  using Metric::forward;
  using Metric::update;

  const ClassificationOptions& options() const { return options_; }
  /// The layout of the state this metric reads: a shared state with a matrix (C x C, or a binary
  /// one's kept matrix) serves per-class metrics too.
  CountLayout layout() const;
  /// tp, fp, tn, fn per class (derived from the matrix under the Matrix layout; under the per-class
  /// layout the state's own tensors: read them, never write).
  StatCounts stat_counts() const;
  /// Rows targets, columns predictions, a copy: [C, C] multiclass (where the state holds the
  /// matrix: a ConfusionMatrix's, or one shared with it; else ValueError), [2, 2] binary (a binary
  /// ConfusionMatrix with ignore_index: confmat, the others: from stat_counts), [L, 2, 2] multilabel.
  at::Tensor confusion_matrix() const;

  const std::vector<std::string>& update_parameters() const override;
  /// "weight" only where weighted().
  bool takes(const std::string& name) const override;
  UpdateStep prepare_update(const UpdateArgs& args) override;
  /// The counting options; level 1 for the layouts with a matrix, which serve the per-class one.
  SharingKey sharing_key() const override;
  std::string options_text() const override;
  /// Weighted counts that overflowed float64.
  std::string state_problem() const override;
  /// The per-class counts of a C x C state this metric shares, in a per-class state.
  MetricState own_state_copy() const override;
  bool holds_own_layout() const override;
  /// Before format version 5 a PerClassAndKeptMatrix state held no matrix: tp, fp, tn, fn alone.
  std::string description_in_version(int64_t version) const override;
  /// A PerClassAndKeptMatrix state of version 4 counted its matrix in tp, fp, tn, fn: the matrix
  /// takes them.
  void upgrade_state(StateDict& dict, int64_t version) const override;

 protected:
  ClassificationMetric(const std::string& base_name, ClassificationOptions options,
                       CountLayout layout = CountLayout::PerClass);

 private:
  // The checked, canonical batch of an update's arguments. A binary or multiclass 0-dim preds and
  // target (and weight) are a batch of one, as TorchMetrics' confusion matrices take them (they
  // flatten their inputs): so every metric here, which may share the matrix's state.
  detail::ClassificationBatch batch_of(const at::Tensor& preds, const at::Tensor& target,
                                       const c10::optional<at::Tensor>& weight) const;

  ClassificationOptions options_;
  CountLayout layout_;  // what this metric's own state holds
};

/// [tp, fp, tn, fn, support] (TorchMetrics' StatScores): see functional::stat_scores.
class StatScores : public Cloneable<StatScores, ClassificationMetric> {
 public:
  explicit StatScores(ClassificationOptions options);

  at::Tensor value() const override;
};

/// Binary: (tp + tn) / all. Multiclass: tp / (tp + fn) per class, micro by default in TorchMetrics'
/// task wrapper but macro in its task classes and here. Multilabel: (tp + tn) / all per label.
class Accuracy : public Cloneable<Accuracy, ClassificationMetric> {
 public:
  explicit Accuracy(ClassificationOptions options);

  at::Tensor value() const override;
};

/// tp / (tp + fp).
class Precision : public Cloneable<Precision, ClassificationMetric> {
 public:
  explicit Precision(ClassificationOptions options);

  at::Tensor value() const override;
};

/// tp / (tp + fn).
class Recall : public Cloneable<Recall, ClassificationMetric> {
 public:
  explicit Recall(ClassificationOptions options);

  at::Tensor value() const override;
};

/// (1 + beta^2) tp / ((1 + beta^2) tp + beta^2 fn + fp), beta > 0.
class FBetaScore : public Cloneable<FBetaScore, ClassificationMetric> {
 public:
  FBetaScore(double beta, ClassificationOptions options);
  double beta() const { return beta_; }
  std::string options_text() const override;

  at::Tensor value() const override;

 protected:
  FBetaScore(const std::string& base_name, double beta, ClassificationOptions options);

 private:
  double beta_;
};

/// FBetaScore with beta = 1, named F1Score.
class F1Score : public Cloneable<F1Score, FBetaScore> {
 public:
  explicit F1Score(ClassificationOptions options);
};

/// Rows targets, columns predictions: [C, C] multiclass, [2, 2] binary ([[tn, fp], [fn, tp]]),
/// [L, 2, 2] multilabel. Counts (int64, float64 when weighted), or float32 when normalized.
/// Multiclass with top_k > 1 (ours: TorchMetrics' takes no top_k, and counts the argmax): a sample
/// whose target is among its k highest scores counts as predicting it, else as its argmax.
class ConfusionMatrix : public Cloneable<ConfusionMatrix, ClassificationMetric> {
 public:
  explicit ConfusionMatrix(ClassificationOptions options, Normalize normalize = Normalize::None);
  Normalize normalize() const { return normalize_; }
  std::string options_text() const override;
  at::Tensor value() const override;

 private:
  Normalize normalize_;
};

}  // namespace metrics
