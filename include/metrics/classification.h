#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include <memory>
#include <string>

#include <metrics/classification_options.h>
#include <metrics/classification_state.h>
#include <metrics/metric.h>

namespace metrics {

class MetricCollection;

/// Base of the classification metrics: each is a reduction of a ClassificationState, which it
/// owns, or shares with the other metrics of a MetricCollection.
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

  const ClassificationOptions& options() const { return options_; }
  /// The counts this metric reduces (shared with other metrics in a MetricCollection).
  const ClassificationState& counts() const { return *counts_; }

 protected:
  ClassificationMetric(const std::string& base_name, ClassificationOptions options,
                       ClassificationState::Layout layout = ClassificationState::Layout::PerClass);
  ClassificationMetric(const ClassificationMetric& other);

  MetricState& state() override { return counts_->tensors(); }
  const MetricState& state() const override { return counts_->tensors(); }

 private:
  friend class MetricCollection;

  ClassificationOptions options_;
  ClassificationState::Layout layout_;  // what this metric needs of a shared state
  std::shared_ptr<ClassificationState> counts_;
};

/// [tp, fp, tn, fn, support] (TorchMetrics' StatScores): see functional::stat_scores.
class StatScores : public Cloneable<StatScores, ClassificationMetric> {
 public:
  explicit StatScores(ClassificationOptions options);

 protected:
  at::Tensor value() const override;
};

/// Binary: (tp + tn) / all. Multiclass: tp / (tp + fn) per class, micro by default in TorchMetrics'
/// task wrapper but macro in its task classes and here. Multilabel: (tp + tn) / all per label.
class Accuracy : public Cloneable<Accuracy, ClassificationMetric> {
 public:
  explicit Accuracy(ClassificationOptions options);

 protected:
  at::Tensor value() const override;
};

/// tp / (tp + fp).
class Precision : public Cloneable<Precision, ClassificationMetric> {
 public:
  explicit Precision(ClassificationOptions options);

 protected:
  at::Tensor value() const override;
};

/// tp / (tp + fn).
class Recall : public Cloneable<Recall, ClassificationMetric> {
 public:
  explicit Recall(ClassificationOptions options);

 protected:
  at::Tensor value() const override;
};

/// (1 + beta^2) tp / ((1 + beta^2) tp + beta^2 fn + fp), beta > 0.
class FBetaScore : public Cloneable<FBetaScore, ClassificationMetric> {
 public:
  FBetaScore(double beta, ClassificationOptions options);
  double beta() const { return beta_; }

 protected:
  FBetaScore(const std::string& base_name, double beta, ClassificationOptions options);
  at::Tensor value() const override;

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
class ConfusionMatrix : public Cloneable<ConfusionMatrix, ClassificationMetric> {
 public:
  explicit ConfusionMatrix(ClassificationOptions options, Normalize normalize = Normalize::None);
  Normalize normalize() const { return normalize_; }

 protected:
  at::Tensor value() const override;

 private:
  Normalize normalize_;
};

}  // namespace metrics
