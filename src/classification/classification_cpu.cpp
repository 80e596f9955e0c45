// CPU fast path of the classification update: one sweep over contiguous CPU input that
// predicts (argmax, top-k or threshold), drops bad entries and counts, writing straight into the
// state tensors. No ATen op runs here.

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "../two_sum.h"
#include "argmax_cpu.h"
#include "entry_counts_simd.h"
#include "kernels.h"
#include "score_cutoffs.h"
#include "weighted_entry_counts.h"

namespace metrics::detail::cpu {
namespace {

// `v` as `n` zeros: a fill with a constant 0, which compiles to a memset (assign(n, 0) took a loop
// of 8-byte stores: 5% of a multilabel (128, 100) collection update).
template <typename T>
void zero(std::vector<T>& v, int64_t n) {
  v.resize(n);
  std::fill(v.begin(), v.end(), T{0});
}

using Layout = CountLayout;

template <typename count_t>
struct PerClassCounter {
  count_t *tp, *fp, *tn, *fn;
  int64_t classes;
  // Every counted sample is a true negative of every class but its target and prediction: tn
  // takes the batch total minus what each class is `involved` in. The weighted total is summed
  // exactly (TwoSum), so that a weight of 1 next to 1e16 still reaches tn.
  std::vector<count_t>& involved = scratch();
  count_t total = 0, total_error = 0;

  static std::vector<count_t>& scratch() {
    thread_local std::vector<count_t> buffer;
    return buffer;
  }
  void start() { zero(involved, classes); }
  void add(int64_t t, int64_t p, count_t w) {
    add_to_total(w);
    involved[t] += w;
    if (t == p) {
      tp[t] += w;
    } else {
      fp[p] += w;
      fn[t] += w;
      involved[p] += w;
    }
  }
  void add_to_total(count_t w) {
    if constexpr (std::is_floating_point_v<count_t>) {
      two_sum(total, total_error, w);
    } else {
      total += w;
    }
  }
  void finish() {
    for (int64_t c = 0; c < classes; ++c) tn[c] += (total - involved[c]) + total_error;
  }
};

template <typename count_t>
struct MatrixCounter {
  count_t* cells;
  int64_t classes;
  void start() {}
  void add(int64_t t, int64_t p, count_t w) { cells[t * classes + p] += w; }
  void finish() {}
};

bool bad_weight(double w) { return !(w >= 0.0 && w <= std::numeric_limits<double>::max()); }  // NaN, < 0 or inf

// The weights as the scalar loops read them, float32 or float64 (cpu_rows widens half-precision
// ones), each widened to float64 as it is read: no float64 copy of them; none: null.
template <typename weight_t>
const weight_t* weights_of(const ClassificationBatch& batch) {
  return batch.weight ? batch.weight->data_ptr<weight_t>() : nullptr;
}

// Rows of a multiclass batch. predict(m, t) returns the predicted class of row m (t is the
// target, -1 when out of range), or -1 for an invalid prediction.
template <typename count_t, typename weight_t, typename Counter, typename Predict>
BadInputCounts count_rows(const ClassificationBatch& batch, const ClassificationOptions& o, Counter& counter,
                          Predict predict) {
  BadInputCounts bad;
  const auto rows = batch.target.numel();
  const auto* target = batch.target.data_ptr<int64_t>();
  const auto* weight = weights_of<weight_t>(batch);
  const int64_t classes = o.num_classes();
  const bool has_ignore = o.ignore_index().has_value();
  const int64_t ignore = o.ignore_index().value_or(0);
  counter.start();
  for (int64_t m = 0; m < rows; ++m) {
    const int64_t t = target[m];
    if (has_ignore && t == ignore) continue;
    const bool target_ok = t >= 0 && t < classes;
    const int64_t p = predict(m, target_ok ? t : -1);
    const double w = weight ? weight[m] : 1.0;
    bad.targets += !target_ok;
    bad.predictions += p < 0;
    bad.weights += weight && bad_weight(w);
    if (target_ok && p >= 0 && !(weight && bad_weight(w))) counter.add(t, p, static_cast<count_t>(w));
  }
  counter.finish();
  return bad;
}

template <typename count_t, typename weight_t, typename Counter>
BadInputCounts count_multiclass(const ClassificationBatch& batch, const ClassificationOptions& o, Counter& counter) {
  const int64_t classes = o.num_classes();
  if (!batch.scores) {
    const auto* labels = batch.preds.data_ptr<int64_t>();
    return count_rows<count_t, weight_t>(batch, o, counter, [&](int64_t m, int64_t) {
      const int64_t p = labels[m];
      return p >= 0 && p < classes ? p : int64_t{-1};
    });
  }
  return AT_DISPATCH_FLOATING_TYPES(batch.preds.scalar_type(), "count_multiclass", [&] {
    const auto* scores = batch.preds.data_ptr<scalar_t>();
    const int64_t k = o.top_k();
    return count_rows<count_t, weight_t>(batch, o, counter, [&](int64_t m, int64_t t) {
      const scalar_t* row = scores + m * classes;
      const int64_t top = first_argmax(row, classes);
      if (top >= 0 && k > 1 && t >= 0 && in_top_k(row, classes, t, k)) return t;
      return top;
    });
  });
}

// num_classes unknown (kUnknownClasses): one class, labels compared as they are. A kept row adds
// its weight to tp if right, else to fp and fn, and takes it from tn (TorchMetrics' micro branch
// with num_classes 1). Only NaN scores and bad weights are bad input.
template <typename count_t, typename weight_t>
BadInputCounts count_unknown_classes(const ClassificationBatch& batch, const ClassificationOptions& o,
                                     CountSink& sink) {
  BadInputCounts bad;
  const auto rows = batch.target.numel();
  const auto* target = batch.target.data_ptr<int64_t>();
  const auto* weight = weights_of<weight_t>(batch);
  const bool has_ignore = o.ignore_index().has_value();
  const int64_t ignore = o.ignore_index().value_or(0);
  count_t right = 0, wrong = 0;
  const auto count_row = [&](int64_t m, int64_t p, bool pred_ok) {
    const int64_t t = target[m];
    if (has_ignore && t == ignore) return;
    const double w = weight ? weight[m] : 1.0;
    const bool weight_ok = !(weight && bad_weight(w));
    bad.predictions += !pred_ok;
    bad.weights += !weight_ok;
    if (pred_ok && weight_ok) (p == t ? right : wrong) += static_cast<count_t>(w);
  };
  if (batch.scores) {
    AT_DISPATCH_FLOATING_TYPES(batch.preds.scalar_type(), "count_unknown_classes", [&] {
      const auto* scores = batch.preds.data_ptr<scalar_t>();
      const int64_t classes = batch.preds.size(1);
      for (int64_t m = 0; m < rows; ++m) {
        const int64_t top = first_argmax(scores + m * classes, classes);
        count_row(m, top, top >= 0);
      }
    });
  } else {
    const auto* labels = batch.preds.data_ptr<int64_t>();
    for (int64_t m = 0; m < rows; ++m) count_row(m, labels[m], true);
  }
  sink.tp.data_ptr<count_t>()[0] += right;
  sink.fp.data_ptr<count_t>()[0] += wrong;
  sink.fn.data_ptr<count_t>()[0] += wrong;
  sink.tn.data_ptr<count_t>()[0] -= wrong;
  return bad;
}

// The verdict on one binary entry: its weight in the one cell it falls in (tp, fp, tn or fn; 0
// in the others, and in all four if it is not kept), and what was wrong with it. Cells are summed
// directly, never derived by subtraction, so small weights next to huge ones are not lost.
// Products of 0/1 factors rather than branches, since the cells are random data.
template <typename count_t>
struct Entry {
  count_t tp, fp, tn, fn;
  bool bad_target, bad_prediction, bad_weight;
};

template <typename count_t>
struct CellSums {
  count_t tp = 0, fp = 0, tn = 0, fn = 0;
  void add(const Entry<count_t>& e) { tp += e.tp, fp += e.fp, tn += e.tn, fn += e.fn; }
};

template <typename count_t>
inline void add_cells(count_t& tp, count_t& fp, count_t& tn, count_t& fn, const Entry<count_t>& e) {
  tp += e.tp;
  fp += e.fp;
  tn += e.tn;
  fn += e.fn;
}

template <typename count_t, typename T, typename weight_t>
inline Entry<count_t> judge(int64_t t, T x, T threshold, const weight_t* weight, int64_t w_index, bool has_ignore,
                            int64_t ignore) {
  const bool valid = !(has_ignore && t == ignore);
  const bool target_ok = t == 0 || t == 1;
  bool pred_ok;
  if constexpr (std::is_floating_point_v<T>) {
    pred_ok = !std::isnan(x);
  } else {
    pred_ok = x == 0 || x == 1;
  }
  const bool predicted = std::is_floating_point_v<T> ? x > threshold : x == 1;
  const double w = weight ? weight[w_index] : 1.0;
  const bool weight_ok = !weight || !bad_weight(w);
  const bool keep = valid & target_ok & pred_ok & weight_ok;
  const count_t kept = keep ? static_cast<count_t>(w) : count_t(0);  // not a product: 0 * NaN is NaN
  const count_t positive = kept * static_cast<count_t>(t == 1);
  const count_t negative = kept * static_cast<count_t>(t != 1);
  const auto yes = static_cast<count_t>(predicted), no = static_cast<count_t>(!predicted);
  return {positive * yes, negative * yes, negative * no, positive * no,
          valid && !target_ok, valid && !pred_ok, valid && !weight_ok};
}

// Scores outside [0, 1] anywhere in the batch make it logits (TorchMetrics decides per batch; on
// the CPU a NaN is outside too), positive above the cutoff of their dtype (score_cutoffs.h).
template <typename T>
T score_threshold(const ClassificationBatch& batch, const ClassificationOptions& o, bool logits) {
  const auto cutoffs = score_cutoffs(o.threshold(), batch.score_dtype);
  return static_cast<T>(logits ? cutoffs.logit : cutoffs.probability);
}

// The unweighted cells of a sink. A label's four cells follow from its kept entries, positives,
// predicted entries and true positives.
struct Cells {
  int64_t *tp, *fp, *tn, *fn;
  explicit Cells(CountSink& sink)
      : tp(sink.tp.data_ptr<int64_t>()),
        fp(sink.fp.data_ptr<int64_t>()),
        tn(sink.tn.data_ptr<int64_t>()),
        fn(sink.fn.data_ptr<int64_t>()) {}
  void add(int64_t l, int64_t kept, int64_t positives, int64_t predicted, int64_t both) {
    tp[l] += both;
    fp[l] += predicted - both;
    fn[l] += positives - both;
    tn[l] += kept - positives - predicted + both;
  }
};

// The sums count_labels adds to, per label, zeroed, in storage kept between updates.
class LabelScratch {
 public:
  explicit LabelScratch(int64_t labels) : storage_(buffer()), labels_(labels) { zero(storage_, 6 * labels); }
  LabelSums at(int64_t first) {
    int64_t* p = storage_.data() + first;
    return {p, p + labels_, {p + 2 * labels_, p + 3 * labels_}, {p + 4 * labels_, p + 5 * labels_}};
  }

 private:
  static std::vector<int64_t>& buffer() {
    thread_local std::vector<int64_t> b;
    return b;
  }
  std::vector<int64_t>& storage_;
  int64_t labels_;
};

// Every label's cells from the sums under the threshold the batch chose: its entries of `rows`
// rows but the ignored ones are kept.
void add_labels(CountSink& sink, const LabelSums& sums, int64_t labels, int64_t rows, bool logits) {
  Cells cells(sink);
  for (int64_t l = 0; l < labels; ++l) {
    cells.add(l, rows - sums.ignored[l], sums.positives[l], sums.predicted[logits][l], sums.both[logits][l]);
  }
}

// The entries as rows of `lanes` columns; the columns' sums add up to the one label's.
bool count_clean_binary(const float* preds, const int64_t* target, int64_t entries, const float (&thresholds)[2],
                        Isa isa, const std::optional<Ignore>& ignore, CountSink& sink) {
  const int64_t lanes = label_lanes(isa);
  const int64_t whole = entries / lanes * lanes;
  LabelScratch scratch(lanes);
  const auto sums = scratch.at(0);
  const auto rows = count_labels(preds, target, entries / lanes, lanes, lanes, thresholds, isa, sums, ignore);
  const auto tail =
      count_labels(preds + whole, target + whole, 1, lanes, entries - whole, thresholds, isa, sums, ignore);
  if (!rows.clean || !tail.clean) return false;
  for (int64_t l = 1; l < lanes; ++l) {
    sums.positives[0] += sums.positives[l];
    sums.ignored[0] += sums.ignored[l];
    for (int k = 0; k < 2; ++k) sums.predicted[k][0] += sums.predicted[k][l], sums.both[k][0] += sums.both[k][l];
  }
  add_labels(sink, sums, 1, entries, rows.logits || tail.logits);
  return true;
}

// Column blocks of `lanes` labels, each over every row; nothing reaches the state until every
// block is found clean. The first block counts under both thresholds; the rest count under the
// one its scores chose (a quarter less work), checking their scores against that reading alone,
// and a later block with logits after a first block of probabilities (rare: no score of the first
// block outside [0, 1]) sends the batch to the scalar loop.
bool count_clean_multilabel(const float* preds, const int64_t* target, int64_t rows, int64_t labels,
                            const float (&thresholds)[2], Isa isa, const std::optional<Ignore>& ignore,
                            CountSink& sink) {
  const int64_t lanes = label_lanes(isa);
  LabelScratch scratch(labels);
  const auto first_block = count_labels(preds, target, rows, labels, std::min(lanes, labels), thresholds, isa,
                                        scratch.at(0), ignore);
  if (!first_block.clean) return false;
  const int chosen = first_block.logits ? 1 : 0;
  const float chosen_threshold[2] = {thresholds[chosen], thresholds[chosen]};
  const auto reading = first_block.logits ? Thresholds::Logits : Thresholds::Probabilities;
  for (int64_t first = lanes; first < labels; first += lanes) {
    const auto all = scratch.at(first);
    const LabelSums sums{all.positives, all.ignored, {all.predicted[chosen], nullptr}, {all.both[chosen], nullptr}};
    const auto scan = count_labels(preds + first, target + first, rows, labels, std::min(lanes, labels - first),
                                   chosen_threshold, isa, sums, ignore, reading);
    if (!scan.clean) return false;
  }
  add_labels(sink, scratch.at(0), labels, rows, first_block.logits);
  return true;
}

// Whether the vector kernels may count a batch: they count clean batches alone, where every
// target is 0 or 1 or an ignore_index they take.
bool vector_kernels_count(const ClassificationOptions& o, Isa isa) {
  const auto ignore = o.ignore_index();
  return isa != Isa::Scalar && (!ignore || vector_kernels_take(*ignore));
}

// The ignore_index as the vector kernels take it: the kept matrix's reading judges the kept scores.
std::optional<Ignore> ignore_of(const ClassificationOptions& o, const CountSink& sink) {
  if (!o.ignore_index()) return std::nullopt;
  return Ignore{*o.ignore_index(), !sink.judges_kept_scores};
}

// Unweighted float32 scores, with the vector kernels: a clean batch (every target 0, 1 or the
// ignore_index, and finite scores: those it keeps, or every one where every one is judged) has no
// bad entry, and each label's four cells follow from four counts. Any other batch, and a clean one
// whose later blocks of labels hold a score the first block's reading does not take (a logit, or
// -0.0, after probabilities), returns false with the state untouched, for the scalar loop.
bool count_clean_entries(const ClassificationBatch& batch, const ClassificationOptions& o, CountSink& sink) {
  const Isa isa = best_isa();
  if (!vector_kernels_count(o, isa)) return false;
  const auto* preds = batch.preds.data_ptr<float>();
  const auto* target = batch.target.data_ptr<int64_t>();
  const int64_t entries = batch.target.numel();
  const float thresholds[2] = {score_threshold<float>(batch, o, false), score_threshold<float>(batch, o, true)};
  const auto ignore = ignore_of(o, sink);
  if (o.task() == Task::Binary) return count_clean_binary(preds, target, entries, thresholds, isa, ignore, sink);
  const int64_t labels = o.num_classes();
  return count_clean_multilabel(preds, target, entries / labels, labels, thresholds, isa, ignore, sink);
}

// Weighted binary and multilabel float32 scores, with the vector kernels (weighted_entry_counts.h):
// a clean batch (as above; weights finite and not negative) is counted there, any other returns
// false, for the scalar loop.
bool count_clean_weighted_entries(const ClassificationBatch& batch, const ClassificationOptions& o, CountSink& sink) {
  const Isa isa = best_isa();
  if (o.task() == Task::Multiclass || !batch.scores || batch.preds.scalar_type() != at::kFloat ||
      !vector_kernels_count(o, isa)) {
    return false;
  }
  const int64_t entries = batch.target.numel();
  const int64_t labels = o.task() == Task::Binary ? 1 : o.num_classes();
  const auto& weight = batch.weight;
  const WeightedEntries entries_of{batch.preds.data_ptr<float>(),
                                   batch.target.data_ptr<int64_t>(),
                                   weight ? weight->data_ptr() : nullptr,
                                   weight && weight->scalar_type() == at::kFloat,
                                   entries / labels,
                                   labels,
                                   weight && weight->numel() == entries,
                                   ignore_of(o, sink)};
  const float thresholds[2] = {score_threshold<float>(batch, o, false), score_threshold<float>(batch, o, true)};
  const WeightedCells cells{sink.tp.data_ptr<double>(), sink.fp.data_ptr<double>(), sink.tn.data_ptr<double>(),
                            sink.fn.data_ptr<double>()};
  return count_weighted_entries(entries_of, thresholds, isa, cells) != Counted::None;
}

// Binary (L = 1) and multilabel entries: each (row, label) is a binary prediction of its label.
// Branch-free, with the four cells as separate sums: binary into registers, multilabel into
// label-contiguous state arrays the compiler can vectorize over.
template <typename count_t, typename T, typename weight_t>
BadInputCounts count_entries(const ClassificationBatch& batch, const ClassificationOptions& o, CountSink& sink) {
  if constexpr (std::is_same_v<count_t, int64_t> && std::is_same_v<T, float>) {
    if (count_clean_entries(batch, o, sink)) return {};
  }
  const auto entries = batch.target.numel();
  const int64_t labels = o.task() == Task::Binary ? 1 : o.num_classes();
  const int64_t rows = entries / labels;
  const int64_t* __restrict target = batch.target.data_ptr<int64_t>();
  const T* __restrict preds = batch.preds.data_ptr<T>();
  const auto* weight = weights_of<weight_t>(batch);
  const bool per_entry_weight = batch.weight && batch.weight->numel() == entries;
  const bool has_ignore = o.ignore_index().has_value();
  const int64_t ignore = o.ignore_index().value_or(0);

  T threshold = static_cast<T>(o.threshold());
  if constexpr (std::is_floating_point_v<T>) {
    // (a NaN is not inside [0, 1] either, as TorchMetrics reads scores on the CPU: see
    // nan_makes_logits)
    int64_t outside = 0;
    const bool judged_all = !sink.judges_kept_scores;
    for (int64_t i = 0; i < entries; ++i) {
      outside += (!(preds[i] >= 0) | !(preds[i] <= 1)) & (judged_all | (target[i] != ignore));
    }
    threshold = score_threshold<T>(batch, o, outside > 0);
  }
  count_t* __restrict tp = sink.tp.data_ptr<count_t>();
  count_t* __restrict fp = sink.fp.data_ptr<count_t>();
  count_t* __restrict tn = sink.tn.data_ptr<count_t>();
  count_t* __restrict fn = sink.fn.data_ptr<count_t>();
  int64_t bad_targets = 0, bad_predictions = 0, bad_weights = 0;
  const auto tally = [&](const Entry<count_t>& e) {
    bad_targets += e.bad_target;
    bad_predictions += e.bad_prediction;
    bad_weights += e.bad_weight;
  };
  if (labels == 1) {
    CellSums<count_t> sums;
    for (int64_t i = 0; i < entries; ++i) {
      const auto e = judge<count_t>(target[i], preds[i], threshold, weight, i, has_ignore, ignore);
      sums.add(e);
      tally(e);
    }
    tp[0] += sums.tp, fp[0] += sums.fp, tn[0] += sums.tn, fn[0] += sums.fn;
  } else {
    for (int64_t m = 0; m < rows; ++m) {
      for (int64_t l = 0; l < labels; ++l) {
        const int64_t i = m * labels + l;
        const auto e = judge<count_t>(target[i], preds[i], threshold, weight, per_entry_weight ? i : m, has_ignore,
                                      ignore);
        add_cells(tp[l], fp[l], tn[l], fn[l], e);
        tally(e);
      }
    }
  }
  return {bad_targets, bad_predictions, bad_weights};
}

template <typename count_t, typename weight_t>
BadInputCounts count_typed(const ClassificationBatch& batch, const ClassificationOptions& o, CountSink& sink) {
  if (o.task() != Task::Multiclass) {
    if (!batch.scores) return count_entries<count_t, int64_t, weight_t>(batch, o, sink);
    return AT_DISPATCH_FLOATING_TYPES(batch.preds.scalar_type(), "count_entries",
                                      [&] { return count_entries<count_t, scalar_t, weight_t>(batch, o, sink); });
  }
  if (o.num_classes() == kUnknownClasses) return count_unknown_classes<count_t, weight_t>(batch, o, sink);
  if (sink.layout == Layout::Matrix) {
    MatrixCounter<count_t> counter{sink.matrix.data_ptr<count_t>(), o.num_classes()};
    return count_multiclass<count_t, weight_t>(batch, o, counter);
  }
  PerClassCounter<count_t> counter{sink.tp.data_ptr<count_t>(), sink.fp.data_ptr<count_t>(),
                                   sink.tn.data_ptr<count_t>(), sink.fn.data_ptr<count_t>(), o.num_classes()};
  return count_multiclass<count_t, weight_t>(batch, o, counter);
}

}  // namespace

BadInputCounts count(const ClassificationBatch& batch, const ClassificationOptions& options, CountSink& sink) {
  if (!options.weighted()) return count_typed<int64_t, double>(batch, options, sink);  // (no weights)
  if (count_clean_weighted_entries(batch, options, sink)) return {};
  if (batch.weight && batch.weight->scalar_type() == at::kFloat) return count_typed<double, float>(batch, options, sink);
  return count_typed<double, double>(batch, options, sink);
}

}  // namespace metrics::detail::cpu
