#pragma once

// Simple references for the fuzz target: host loops in long double over the same inputs, written
// from the headers' documentation rather than from the implementation. They follow each metric's
// update count and bad-input tally exactly, and its sums, counts and extrema where that is simple
// (sums only while no partial sum can overflow): outside that, `comparable` goes false and only the tally is checked.

#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include <cstdint>
#include <string>
#include <vector>

#include <metrics/aggregation.h>
#include <metrics/bad_input.h>
#include <metrics/classification.h>

namespace fuzz {

enum class AggKind { Mean, Sum, Min, Max };
enum class ClsKind { StatScores, Accuracy, Precision, Recall, FBeta, F1, ConfusionMatrix };

/// Everything that decides what a metric is.
struct Config {
  bool classification = false;
  AggKind agg = AggKind::Mean;
  metrics::AggregationOptions agg_options;
  ClsKind cls = ClsKind::Accuracy;
  metrics::ClassificationOptions cls_options = metrics::ClassificationOptions::binary();
  double beta = 1.0;
  metrics::Normalize normalize = metrics::Normalize::None;
};

/// The bad-input tally and update count every metric keeps.
struct Tally {
  int64_t updates = 0;
  std::vector<int64_t> counts;  // per kind
  int64_t bad_updates = 0;
  int64_t first_bad = -1;

  void record(const std::vector<int64_t>& update_counts, bool tracked);
  /// Parallel merge (appended = false) or forward's append of a later batch.
  void merge(const Tally& other, bool appended);
  bool clean() const { return bad_updates == 0; }
};

/// An aggregator's reference: Σ w·x and Σ w, or the extremum, per the NanPolicy.
struct AggReference {
  Config config;
  Tally tally;
  long double sum_wx = 0, sum_w = 0;  // Mean, Sum
  long double scale_wx = 0, scale_w = 0;  // Σ|w·x|, Σ|w| over what was added: the tolerance's scale
  double extremum = 0;  // Min, Max
  bool comparable = true;

  explicit AggReference(const Config& config);
  void reset();
  /// One update: `value` a tensor or (undefined) the host `scalar`; `weight` likewise.
  void update(const at::Tensor& value, double scalar, const at::Tensor& weight, double weight_scalar);
  void merge(const AggReference& other, bool appended);
  /// Aborts unless `metric` (of this config) holds this state.
  void expect_state(const metrics::Metric& metric) const;
  /// Aborts unless `value` is what compute() of this state gives.
  void expect_value(const at::Tensor& value) const;
};

/// A classification reference: the C x C matrix (multiclass) or per-label [tn, fp, fn, tp] cells,
/// counted by brute force, with every kind of bad entry. With num_classes unknown, one class's
/// [tn, fp, fn, tp] as TorchMetrics' num_classes=None micro branch counts them (labels compared as
/// they are; a wrong prediction adds to fp and fn and takes from tn). Samplewise, one block of
/// cells per sample seen, in the order the samples came.
struct ClsReference {
  struct Counts {
    std::vector<long double> tp, fp, tn, fn;
  };

  Config config;
  Tally tally;
  int64_t classes = 1;             // counted: 1 where num_classes is unknown
  bool matrix = false;             // cells [t * C + p] (multiclass with num_classes), else per label
  bool samplewise = false;
  int64_t blocks = 1;              // blocks of cells: 1, or samplewise one per sample seen
  std::vector<long double> cells;  // blocks of block_size(): [t * C + p], or [label * 4 + 2 * target + pred]
  // A binary ConfusionMatrix with ignore_index: its value's cells, whose scores are logits or not as
  // the kept ones alone say (TorchMetrics' BinaryConfusionMatrix); empty otherwise
  std::vector<long double> kept_cells;
  long double scale = 0;           // Σ of the kept weights
  bool comparable = true;

  explicit ClsReference(const Config& config);
  void reset();
  void update(const at::Tensor& preds, const at::Tensor& target, const c10::optional<at::Tensor>& weight);
  void merge(const ClsReference& other, bool appended);
  /// Cells in one block.
  int64_t block_size() const { return matrix ? classes * classes : classes * 4; }
  /// tp, fp, tn, fn per class (label) of one block, derived from its cells.
  Counts counts_of(int64_t block) const;
  /// Every block's counts, block-major (the [S, C] rows of a samplewise state, flattened).
  Counts counts() const;
  /// How far a count may be from the reference's: 0 unweighted, rounding of the weight sums else.
  long double count_tolerance() const;
  void expect_state(const metrics::ClassificationMetric& metric) const;
  /// What compute() gives for these counts (reference_scores.cpp).
  void expect_value(const at::Tensor& value) const;

 private:
  // One update's input on the host, in the layout of the arguments.
  struct Batch {
    std::vector<int64_t> target, label;
    std::vector<double> score, weight;
    int64_t samples = 0;
    int64_t width = 0;       // multiclass scores: C of (N, C, ...)
    int64_t first_block = 0;  // samplewise: the block of the batch's first sample
    bool scores = false, weighted = false, per_sample = false;
    at::ScalarType score_dtype = at::kFloat;
    bool logits = false;       // a score outside [0, 1] (or NaN) somewhere in the batch
    bool kept_logits = false;  // one where the target is not ignore_index
    double weight_of(int64_t flat) const;
  };
  void add(size_t cell, double weight);
  /// Where `cell` of the block of sample `sample` (of the batch) is.
  size_t at(const Batch& b, int64_t sample, size_t cell) const;
  void count_rows(const Batch& b, std::vector<int64_t>& bad);
  void count_unknown_classes(const Batch& b, std::vector<int64_t>& bad);
  /// Into cells (and kept_cells where the reference keeps them) and the bad-input counts `bad`.
  void count_entries(const Batch& b, double threshold, std::vector<int64_t>& bad);
};

/// Compares the bad-input report and update count with the tally (exactly).
void expect_tally(const metrics::Metric& metric, const Tally& tally);

}  // namespace fuzz
