// ATen path of the classification update: which part counts a batch (multiclass_aten.cpp,
// entries_aten.cpp), and samplewise counting (multidim_average="samplewise"), whose state gains
// rows. Nothing is read back, and the number of ops is fixed (bench/launch_bench.py counts them).

#include <ATen/ATen.h>

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include <metrics/bad_input.h>

#include "kernels.h"
#include "score_cutoffs.h"
#include "../aten_masks.h"
#include "../aten_scratch.h"

namespace metrics::detail {
namespace {

// The state's scratch tensors (MetricState::scratch), made once with fill ops.
enum Scratch { kBaseKey, kBase, kZeros, kOne, kNoBadUpdate, kCutoffs, kCutoffsKey };

// A piece of positions in the state's buffer: element j goes to base + j % period.
struct Piece {
  int64_t length, base, period;
};

// One update's additions to the state, applied as one index_add_. Indexed pieces (positions
// computed from the data, relative to their base) come first, constant pieces after them; `values`
// holds what goes to each position, in the same order. The positions' bases are one cached vector,
// rebuilt only when the pieces change (a new batch size), and added with one op.
class Scatter {
 public:
  explicit Scatter(MetricState& state) : state_(state) {}

  void indexed(const at::Tensor& index, int64_t base, int64_t period = 1) {
    TORCH_INTERNAL_ASSERT(constant_.empty());
    index_.push_back(index.reshape({-1}));
    indexed_.push_back({index.numel(), base, period});
  }
  void at_one(int64_t base, int64_t length) { constant_.push_back({length, base, 1}); }
  void at_range(int64_t base, int64_t length) { constant_.push_back({length, base, length}); }
  void add(const at::Tensor& values) { values_.push_back(values.reshape({-1})); }

  // Adds everything into the state's entries up to `last_slot`.
  void apply(size_t last_slot) {
    refresh_bases();
    auto pieces = index_;
    pieces.push_back(state_.scratch(kZeros));
    const auto index = at::cat(pieces).add_(state_.scratch(kBase));
    state_.span(0, last_slot).index_add_(0, index, at::cat(values_));
  }

 private:
  std::vector<Piece> pieces() const {
    auto all = indexed_;
    all.insert(all.end(), constant_.begin(), constant_.end());
    return all;
  }

  // The pieces' description as the host keeps it, to know when the cached bases still fit.
  static std::vector<int64_t> key_of(const std::vector<Piece>& pieces) {
    std::vector<int64_t> key;
    for (const auto& p : pieces) key.insert(key.end(), {p.length, p.base, p.period});
    return key;
  }

  void refresh_bases() {
    const auto all = pieces();
    if (!key_changed(state_, kBaseKey, key_of(all))) return;
    const auto options = at::TensorOptions().dtype(at::kLong).device(state_.device());
    std::vector<at::Tensor> bases;
    int64_t constant_length = 0;
    for (const auto& p : all) bases.push_back(at::arange(p.length, options).remainder_(p.period).add_(p.base));
    for (const auto& p : constant_) constant_length += p.length;
    state_.scratch(kBase) = at::cat(bases);
    state_.scratch(kZeros) = at::zeros({constant_length}, options);
  }

  MetricState& state_;
  std::vector<at::Tensor> index_, values_;
  std::vector<Piece> indexed_, constant_;
};

// A constant of the state's scratch, made on first use.
template <class Make>
const at::Tensor& constant(MetricState& state, Scratch which, Make make) {
  return state.scratch(which, [&] { return make(at::TensorOptions().dtype(state.count_dtype()).device(state.device())); });
}

// Per-kind bad masks of one update and what is kept out of the counts.
struct BadMasks {
  std::vector<at::Tensor> kinds;  // in bad_input_kinds' order, ignored entries left out; none for weights not given
  at::Tensor bad;                 // bad in any kind, ignored entries left out
  at::Tensor dropped;             // bad or ignored
};

at::Tensor weight_bad(const at::Tensor& w) {
  // NaN, negative and infinite weights: clamping changes them (NaN stays NaN, which is not equal)
  return w.clamp(0, std::numeric_limits<double>::max()).ne(w);
}

BadMasks bad_masks(std::vector<at::Tensor> kinds, const at::Tensor& target, const ClassificationOptions& o) {
  BadMasks m;
  m.bad = kinds[0];
  for (size_t k = 1; k < kinds.size(); ++k) m.bad = m.bad.bitwise_or(kinds[k]);
  m.dropped = m.bad;
  if (o.ignore_index()) {
    // an ignored entry is never bad (greater: bad and not ignored)
    const auto ignored = target.eq(*o.ignore_index());
    for (auto& kind : kinds) kind = kind.gt(ignored);
    m.dropped = m.bad.bitwise_or(ignored);
    m.bad = m.bad.gt(ignored);
  }
  m.kinds = std::move(kinds);
  return m;
}

// The last entry in the packed buffer: the counts follow the update count, unless they are rows.
size_t last_packed_slot(const MetricState& state) {
  auto slot = state.size() - 1;
  while (state.reduction(slot) == Reduction::Cat) --slot;
  return slot;
}

// Adds the update count and, where the state tracks bad input, the per-kind bad entries and the
// bad-update flag to `scatter`, applies it, and records the first bad update.
void finish(MetricState& state, Scatter& scatter, const BadMasks& m) {
  const auto* tally = state.bad_input();
  scatter.at_one(state.offset(0), 1);
  scatter.add(constant(state, kOne, [](const at::TensorOptions& t) { return at::ones({1}, t); }));
  if (!tally) return scatter.apply(last_packed_slot(state));
  const auto counts = state.offset(tally->counts_slot());
  for (size_t k = 0; k < m.kinds.size(); ++k) {
    scatter.at_one(counts + static_cast<int64_t>(k), m.kinds[k].numel());
    scatter.add(m.kinds[k]);
  }
  const auto any = m.bad.any();
  scatter.at_one(counts + static_cast<int64_t>(tally->kinds().size()), 1);
  scatter.add(any);
  // the update's index (the count before this update) where it has bad input, kNone where not
  const auto& none = constant(state, kNoBadUpdate, [](const at::TensorOptions& t) {
    return at::full({}, BadInput::kNone, t);
  });
  const auto candidate = select(any, state.update_count_tensor(), none);
  scatter.apply(tally->counts_slot());
  auto first = state.span(tally->first_slot(), tally->first_slot());
  at::minimum_out(first, first, candidate);
}

// The predicted class of each row; for top_k > 1 the target where it is among the k best.
std::pair<at::Tensor, at::Tensor> predicted_class(const ClassificationBatch& b, const ClassificationOptions& o,
                                                  const at::Tensor& tc, const at::Tensor& target_bad) {
  const int64_t classes = o.num_classes();
  if (!b.scores) {
    const auto p = b.preds.clamp(0, classes - 1);
    return {p, p.ne(b.preds)};
  }
  // max is NaN in a row with NaN; its index is the first maximal one, as argmax's
  auto [max, p] = b.preds.max(1);
  auto pred_bad = max.ne(max);
  if (o.top_k() > 1) {
    const auto xt = b.preds.gather(1, tc.unsqueeze(1));
    const auto before = at::arange(classes, tc.options()).unsqueeze(0).lt(tc.unsqueeze(1));
    const auto ahead = b.preds.gt(xt).sum(1).add_(b.preds.eq(xt).bitwise_and_(before).sum(1));
    p = select(ahead.lt(o.top_k()).gt(target_bad), tc, p);
  }
  return {p, pred_bad};
}

// Each row's target (clamped into range) and predicted class, and its bad masks.
struct MulticlassRows {
  at::Tensor tc, p;
  BadMasks m;
};

MulticlassRows multiclass_rows(const ClassificationBatch& b, const ClassificationOptions& o) {
  const auto& t = b.target;
  const auto tc = t.clamp(0, o.num_classes() - 1);
  const auto target_bad = tc.ne(t);
  auto [p, pred_bad] = predicted_class(b, o, tc, target_bad);
  std::vector<at::Tensor> kinds{target_bad, pred_bad};
  if (b.weight) kinds.push_back(weight_bad(*b.weight));
  return {tc, std::move(p), bad_masks(std::move(kinds), t, o)};
}

// The cutoffs of scores of `dtype` (score_cutoffs.h), [probability, logit] in float64 on the
// state's device, filled again only when the dtype changes (a host-side key remembers it).
const at::Tensor& cutoffs(MetricState& state, const ClassificationOptions& o, at::ScalarType dtype) {
  auto& cutoffs = state.scratch(kCutoffs);
  if (key_changed(state, kCutoffsKey, {static_cast<int64_t>(dtype)})) {
    if (!cutoffs.defined()) cutoffs = at::empty({2}, at::TensorOptions().dtype(at::kDouble).device(state.device()));
    const auto c = score_cutoffs(o.threshold(), dtype);
    cutoffs[0].fill_(c.probability);
    cutoffs[1].fill_(c.logit);
  }
  return cutoffs;
}

// Binary predictions of scores (of `dtype` before widening): above the cutoff, a logit's where the
// batch holds any score outside [0, 1].
at::Tensor predicted(MetricState& state, const at::Tensor& x, const ClassificationOptions& o, at::ScalarType dtype) {
  const auto& c = cutoffs(state, o, dtype);
  const auto logits = x.lt(0).bitwise_or_(x.gt(1)).any();
  return x.gt(select(logits, c.select(0, 1), c.select(0, 0)));
}

// Binary (M,) and multilabel (M, L) entries: each one's cell 2 * target + prediction (0 tn, 1 fp,
// 2 fn, 3 tp), its weight, and the bad masks.
struct EntryRows {
  at::Tensor cell;
  c10::optional<at::Tensor> weight;
  BadMasks m;
};

EntryRows entry_rows(MetricState& state, const ClassificationBatch& b, const ClassificationOptions& o) {
  const auto& t = b.target;
  const auto& x = b.preds;
  const auto tc = t.clamp(0, 1);
  std::vector<at::Tensor> kinds{tc.ne(t)};
  at::Tensor pred;
  if (b.scores) {
    kinds.push_back(nan_mask(x));
    pred = predicted(state, x, o, b.score_dtype);
  } else {
    pred = x.clamp(0, 1);
    kinds.push_back(pred.ne(x));
  }
  c10::optional<at::Tensor> weight;
  if (b.weight) weight = b.weight->dim() < t.dim() ? b.weight->unsqueeze(1).expand_as(t) : *b.weight;
  if (weight) kinds.push_back(weight_bad(*weight));
  return {at::add(pred, tc, 2), std::move(weight), bad_masks(std::move(kinds), t, o)};
}

// multidim_average=samplewise: the counts of each sample of the batch, [N, C] per stat, appended
// to the state's rows (the rows are sample-major, `rows / N` to a sample). One index_add_ per
// stat into a zeroed block; tn is what the sample kept less the other three.
void count_samplewise(MetricState& state, const ClassificationBatch& b, const ClassificationOptions& o) {
  const int64_t n = b.samples, classes = o.num_classes(), rows = b.target.size(0);
  const int64_t per_sample = n == 0 ? 0 : rows / n;
  const auto long_options = b.target.options().dtype(at::kLong);
  const auto sample = at::arange(rows, long_options).div_(std::max<int64_t>(per_sample, 1), "floor");
  at::Tensor tp, fp, tn, fn;
  BadMasks masks;
  if (o.task() == Task::Multiclass) {
    auto [tc, p, m] = multiclass_rows(b, o);
    const auto kept = m.dropped.bitwise_not().to(at::kLong);
    const auto wrong = p.ne(tc).to(at::kLong).mul_(kept);
    const auto first = sample.mul(classes);
    auto sums = at::zeros({3, n * classes}, long_options);
    sums[0].index_add_(0, first + tc, kept - wrong);
    sums[1].index_add_(0, first + p, wrong);
    sums[2].index_add_(0, first + tc, wrong);
    const auto per = sums.view({3, n, classes});
    tp = per[0], fp = per[1], fn = per[2];
    tn = kept.reshape({n, per_sample}).sum(1, /*keepdim=*/true) - tp - fp - fn;
    masks = std::move(m);
  } else {
    auto [cell, weight, m] = entry_rows(state, b, o);
    const auto labels = cell.dim() == 1 ? 1 : cell.size(1);
    const auto label = at::arange(labels, long_options);
    const auto index = sample.unsqueeze(1).mul(labels).add(label).mul_(4).add_(cell.reshape({rows, labels}));
    const auto kept = m.dropped.bitwise_not().to(at::kLong).reshape({-1});
    const auto cells = at::zeros({n * labels * 4}, long_options).index_add_(0, index.reshape({-1}), kept);
    const auto per = cells.view({n, labels, 4}).unbind(2);
    tn = per[0], fp = per[1], fn = per[2], tp = per[3];
    masks = std::move(m);
  }
  state.append({{1, tp}, {2, fp}, {3, tn}, {4, fn}});
  Scatter scatter(state);
  finish(state, scatter, masks);
}

}  // namespace

void count_on_aten(MetricState& state, const ClassificationBatch& batch, const ClassificationOptions& options) {
  if (options.multidim_average() == MultidimAverage::Samplewise) return count_samplewise(state, batch, options);
  if (batch.target.numel() == 0) return state.finish_update();  // an update that counts nothing else
  if (options.task() == Task::Multiclass) return count_multiclass_on_aten(state, batch, options);
  count_entries_on_aten(state, batch, options);
}

}  // namespace metrics::detail
