// CPU fast path of the classification update: one sweep over contiguous CPU input that
// predicts (argmax, top-k or threshold), drops bad entries and counts, writing straight into the
// state tensors. No ATen op runs here.

#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "argmax_cpu.h"
#include "kernels.h"

namespace metrics::detail::cpu {
namespace {

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
  void start() { involved.assign(classes, 0); }
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
    const count_t sum = total + w;
    if constexpr (std::is_floating_point_v<count_t>) {
      const count_t from_w = sum - total;
      total_error += (total - (sum - from_w)) + (w - from_w);
    }
    total = sum;
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

// Rows of a multiclass batch. predict(m, t) returns the predicted class of row m (t is the
// target, -1 when out of range), or -1 for an invalid prediction.
template <typename count_t, typename Counter, typename Predict>
BadInputCounts count_rows(const ClassificationBatch& batch, const ClassificationOptions& o, Counter& counter,
                          Predict predict) {
  BadInputCounts bad;
  const auto rows = batch.target.numel();
  const auto* target = batch.target.data_ptr<int64_t>();
  const double* weight = batch.weight ? batch.weight->data_ptr<double>() : nullptr;
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

template <typename count_t, typename Counter>
BadInputCounts count_multiclass(const ClassificationBatch& batch, const ClassificationOptions& o, Counter& counter) {
  const int64_t classes = o.num_classes();
  if (!batch.scores) {
    const auto* labels = batch.preds.data_ptr<int64_t>();
    return count_rows<count_t>(batch, o, counter, [&](int64_t m, int64_t) {
      const int64_t p = labels[m];
      return p >= 0 && p < classes ? p : int64_t{-1};
    });
  }
  return AT_DISPATCH_FLOATING_TYPES(batch.preds.scalar_type(), "count_multiclass", [&] {
    const auto* scores = batch.preds.data_ptr<scalar_t>();
    const int64_t k = o.top_k();
    return count_rows<count_t>(batch, o, counter, [&](int64_t m, int64_t t) {
      const scalar_t* row = scores + m * classes;
      const int64_t top = first_argmax(row, classes);
      if (top >= 0 && k > 1 && t >= 0 && in_top_k(row, classes, t, k)) return t;
      return top;
    });
  });
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

template <typename count_t, typename T>
inline Entry<count_t> judge(int64_t t, T x, T threshold, const double* weight, int64_t w_index, bool has_ignore,
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

// Binary (L = 1) and multilabel entries: each (row, label) is a binary prediction of its label.
// Branch-free, with the four cells as separate sums: binary into registers, multilabel into
// label-contiguous state arrays the compiler can vectorize over.
template <typename count_t, typename T>
BadInputCounts count_entries(const ClassificationBatch& batch, const ClassificationOptions& o, CountSink& sink) {
  const auto entries = batch.target.numel();
  const int64_t labels = o.task() == Task::Binary ? 1 : o.num_classes();
  const int64_t rows = entries / labels;
  const int64_t* __restrict target = batch.target.data_ptr<int64_t>();
  const T* __restrict preds = batch.preds.data_ptr<T>();
  const double* weight = batch.weight ? batch.weight->data_ptr<double>() : nullptr;
  const bool per_entry_weight = batch.weight && batch.weight->numel() == entries;
  const bool has_ignore = o.ignore_index().has_value();
  const int64_t ignore = o.ignore_index().value_or(0);

  // Scores outside [0, 1] anywhere in the batch make it logits (TorchMetrics decides per batch).
  T threshold = static_cast<T>(o.threshold());
  if constexpr (std::is_floating_point_v<T>) {
    int64_t outside = 0;  // an integer count vectorizes where a bool OR does not
    for (int64_t i = 0; i < entries; ++i) outside += (preds[i] < 0) | (preds[i] > 1);
    if (outside > 0) threshold = static_cast<T>(std::log(o.threshold() / (1.0 - o.threshold())));
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

template <typename count_t>
BadInputCounts count_typed(const ClassificationBatch& batch, const ClassificationOptions& o, CountSink& sink) {
  if (o.task() != Task::Multiclass) {
    if (!batch.scores) return count_entries<count_t, int64_t>(batch, o, sink);
    return AT_DISPATCH_FLOATING_TYPES(batch.preds.scalar_type(), "count_entries",
                                      [&] { return count_entries<count_t, scalar_t>(batch, o, sink); });
  }
  if (sink.layout == Layout::Matrix) {
    MatrixCounter<count_t> counter{sink.matrix.data_ptr<count_t>(), o.num_classes()};
    return count_multiclass<count_t>(batch, o, counter);
  }
  PerClassCounter<count_t> counter{sink.tp.data_ptr<count_t>(), sink.fp.data_ptr<count_t>(),
                                   sink.tn.data_ptr<count_t>(), sink.fn.data_ptr<count_t>(), o.num_classes()};
  return count_multiclass<count_t>(batch, o, counter);
}

}  // namespace

BadInputCounts count(const ClassificationBatch& batch, const ClassificationOptions& options, CountSink& sink) {
  return options.weighted() ? count_typed<double>(batch, options, sink) : count_typed<int64_t>(batch, options, sink);
}

}  // namespace metrics::detail::cpu
