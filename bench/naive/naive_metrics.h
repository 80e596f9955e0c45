#pragma once

// Faithful C++ versions of the update patterns nosync-metrics avoids, as TorchMetrics 1.6 writes
// them. They compute the same values as the library (tested in tests/naive_metrics_test.cpp), so
// only their cost differs: host round-trips, boolean indexing, data-dependent sizes.

#include <ATen/core/Tensor.h>

#include <metrics/classification_options.h>
#include <metrics/functional/classification.h>

namespace naive {

/// MeanMetric/SumMetric/MinMetric/MaxMetric.update: the host weight becomes a new tensor, NaNs
/// are looked for with isnan(x).any() branched on the host, and removed by boolean indexing;
/// float32 states.
class Aggregator {
 public:
  enum class Kind { Mean, Sum, Min, Max };
  explicit Aggregator(Kind kind);
  void update(const at::Tensor& value, double weight = 1.0);
  at::Tensor compute() const;

 private:
  Kind kind_;
  at::Tensor value_;
  at::Tensor weight_;
};

/// The update of TorchMetrics' stat-score metrics (accuracy, precision, recall, F-beta, stat
/// scores, confusion matrix), one state per metric: validation through unique() read back,
/// sigmoid decided on the host, ignore_index by boolean indexing, multiclass counts through
/// bincount over C * C bins.
class StatScores {
 public:
  explicit StatScores(const metrics::ClassificationOptions& options);
  void update(const at::Tensor& preds, const at::Tensor& target);
  metrics::StatCounts counts() const;
  const metrics::ClassificationOptions& options() const { return options_; }

 private:
  void update_multiclass(at::Tensor preds, at::Tensor target);
  void update_entries(at::Tensor preds, at::Tensor target);

  metrics::ClassificationOptions options_;
  at::Tensor confmat_;         // multiclass [C, C]
  at::Tensor tp_, fp_, tn_, fn_;  // binary and multilabel [L]
};

}  // namespace naive
