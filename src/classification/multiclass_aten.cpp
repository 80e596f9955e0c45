// Multiclass counting on the ATen path (every device; the CPU when forced): a fixed number of ops,
// the same from one update to the next, none reading a value back.
//
// Each row of the batch (its target t and predicted class p) adds pieces to the count buffer, in
// three groups of three: at p, fp += wrong and tn -= wrong; at t, tp += right, fn += wrong and
// tn -= 1; at one fixed place, 1 to tn's pending addend (a kept row is a negative of every class:
// tn takes them all when the state settles, less the classes each row involves, above). Then each
// bad-input kind's flag per row, and the tail (put_update.h). A dropped row (a bad target or
// prediction, a bad weight, the ignored class) adds zeros. Positions are the rows' classes plus one
// base per piece (one add); values are A + B * wrong per piece (one addcmul), times the weight, then
// zeroed where dropped. The ConfusionMatrix layout adds one piece per row instead, at its cell;
// without num_classes every piece is at class 0 and the positions never change.
//
// The rows buffer holds the classes: max writes p, one clamp writes the target as it is and clamped
// into range, twice each, so that one ne compares [p, t, t] with [tc, tc, ignore_index]: wrong, bad
// target and not ignored, each operand a strided view of rows in arithmetic progression. The values
// buffer is laid out so that the three rows that ne writes are one strided view too.

#include <ATen/ATen.h>

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "../meta_kernels.h"
#include "kernels.h"
#include "put_update.h"

namespace metrics::detail {
namespace {

// The state's scratch tensors (MetricState::scratch): the update's buffers, made for a batch size
// (kKey), and constants. (Slots apart from the other ATen paths': they share a state.)
enum Scratch {
  kKey = 100, kRows, kIndex, kValues, kDropped, kMax, kClamped, kLow, kHigh, kPredLow, kPredHigh, kBases, kTermA, kTermB,
  kTopKKey, kTargetScore, kAhead, kBefore, kAheadCount, kClassIndex, kWithin
};

// Rows of the int64 rows buffer, each one batch long.
enum Row : int64_t {
  kPred,         // p: argmax, or the predicted labels clamped into range
  kTargetCopy,   // the target as it is (clamped to the int64 range)
  kTargetCopy2,  // ... again, to compare with ignore_index
  kTarget,       // the target clamped into [0, C)
  kTarget2,      // ... again: one ne compares [p, t, t] with [tc, tc, ignore_index]
  kIgnore,       // ignore_index (constant)
  kZero,         // 0 (constant): the position of the fixed pieces' group
  kPredCopy,     // the predicted labels as they are
  kRowCount
};

constexpr int64_t kGroups = 3, kPiecesPerGroup = 3;  // at p, at the target, at a fixed place
constexpr int64_t kKinds = 3;                          // bad targets, predictions, weights
constexpr int64_t kMinLong = std::numeric_limits<int64_t>::min(), kMaxLong = std::numeric_limits<int64_t>::max();

int64_t piece_rows(CountLayout layout) { return layout == CountLayout::Matrix ? 1 : kGroups * kPiecesPerGroup; }

// Where the values buffer holds what, in rows of the batch size m: the wrong flags first, then the
// put_ region (the pieces, one row per bad-input kind, the tail), and the not-ignored flags as far
// after the kinds as the wrong flags are before them (the put_ region starts late enough for them
// to lie past it).
struct ValuesLayout {
  int64_t m, pieces;
  int64_t put_begin() const { return std::max(m, (kKinds - pieces) * m + kTailPieces); }
  int64_t kinds() const { return put_begin() + pieces * m; }
  int64_t tail() const { return kinds() + kKinds * m; }
  int64_t put_length() const { return tail() + kTailPieces - put_begin(); }
  int64_t not_ignored() const { return 2 * kinds(); }
  int64_t length() const { return not_ignored() + m; }
};

// The spare slot: where a piece goes that counts nothing.
int64_t spare(const MetricState& state) { return state.scratch_offset(0); }

// Each piece's base position, in the order the pieces' values come (entries: 1 tp, 2 fp, 3 tn, 4 fn,
// or 1 confmat).
std::vector<int64_t> piece_bases(const MetricState& state, CountLayout layout) {
  if (layout == CountLayout::Matrix) return {state.offset(1)};
  const auto tp = state.offset(1), fp = state.offset(2), tn = state.offset(3), fn = state.offset(4);
  const auto kept = state.pending_addend_offset(3);
  // a piece that adds nothing goes where a class can follow its base: to tp's (it adds 0)
  return {fp, tn, tp,  // at p: fp += wrong, tn -= wrong
          tp, fn, tn,  // at the target: tp += right, fn += wrong, tn -= 1
          kept, tp, tp};
}

// A and B of each piece's value, A + B * wrong, in piece_bases' order.
const std::vector<double> kA{0, 0, 0, 1, 0, -1, 1, 0, 0};
const std::vector<double> kB{1, -1, 0, -1, 1, 0, 0, 0, 0};

struct Buffers {
  at::Tensor rows, index, values, dropped, max, clamped;
};

Buffers buffers(MetricState& state, const ClassificationOptions& o, CountLayout layout, const ClassificationBatch& b) {
  const int64_t m = b.target.size(0);
  // (the weight flags' row and the dropped rows are written only where an update has them)
  if (key_changed(state, kKey, {m, static_cast<int64_t>(b.preds.scalar_type()), b.weight.has_value()})) {
    const auto longs = at::TensorOptions().dtype(at::kLong).device(state.device());
    const ValuesLayout v{m, piece_rows(layout)};
    auto rows = at::zeros({kRowCount, m}, longs);
    if (o.ignore_index()) rows[kIgnore].fill_(*o.ignore_index());
    // the index: the pieces (fixed without num_classes), the kinds' places, the tail
    std::vector<int64_t> positions(static_cast<size_t>(v.put_length()), spare(state));
    if (const auto* tally = state.bad_input()) {
      for (int64_t k = 0; k < kKinds; ++k) {
        std::fill_n(positions.begin() + (v.kinds() - v.put_begin() + k * m), m, state.offset(tally->counts_slot()) + k);
      }
    }
    const auto tail = tail_positions(state, spare(state));
    std::copy(tail.begin(), tail.end(), positions.end() - kTailPieces);
    if (o.num_classes() == kUnknownClasses) {
      const auto bases = piece_bases(state, layout);
      for (int64_t p = 0; p < v.pieces; ++p) std::fill_n(positions.begin() + p * m, m, bases[p]);
    }
    auto values = at::zeros({v.length()}, longs.dtype(state.count_dtype()));
    values[v.tail()].fill_(1);  // the update count's piece
    state.scratch(kRows) = rows;
    state.scratch(kIndex) = upload(positions, longs);
    state.scratch(kValues) = values;
    state.scratch(kDropped) = at::zeros({m}, longs.dtype(at::kBool));
    state.scratch(kMax) = at::empty({m}, b.preds.options());
    state.scratch(kClamped) = at::empty({m}, longs.dtype(at::kDouble));
  }
  return {state.scratch(kRows),    state.scratch(kIndex), state.scratch(kValues),
          state.scratch(kDropped), state.scratch(kMax),   state.scratch(kClamped)};
}

// A constant of the state's device, made once.
template <class T>
at::Tensor constant(MetricState& state, Scratch which, const std::vector<T>& values, const at::TensorOptions& options,
                    at::IntArrayRef shape) {
  return state.scratch(which, [&] { return upload(values, options).view(shape); });
}

// `count` rows of `buffer` (1-D, rows m long) starting at offsets first, first + step, ...: one
// strided view.
at::Tensor rows_at(const at::Tensor& buffer, int64_t first, int64_t step, int64_t count, int64_t m) {
  return buffer.as_strided({count, m}, {step, 1}, buffer.storage_offset() + first);
}

// Rows of the rows buffer, as rows_at counts them.
at::Tensor class_rows(const Buffers& buf, int64_t first, int64_t step, int64_t count) {
  const auto m = buf.rows.size(1);
  return rows_at(buf.rows.view({-1}), first * m, step * m, count, m);
}

// The weight flags (NaN, negative and infinite weights: clamping changes them) into `out`.
void weight_flags(Buffers& buf, const at::Tensor& w, at::Tensor out) {
  at::clamp_out(buf.clamped, w, 0, std::numeric_limits<double>::max());
  at::ne_out(out, buf.clamped, w);
}

// The pieces' values (A + B * wrong, times the weight) and the kinds' flags with the rows that are
// dropped, or ignored, made zero; and the tail's tally where there is one; then the one put_.
void finish(MetricState& state, const ClassificationBatch& b, const ClassificationOptions& o, Buffers& buf,
            const ValuesLayout& v, bool can_be_bad) {
  const auto m = v.m;
  const auto counts = buf.values.options();
  const auto flags = rows_at(buf.values, v.kinds(), m, kKinds, m);
  const auto wrong = buf.values.narrow(0, 0, m);
  auto pieces = rows_at(buf.values, v.put_begin(), m, v.pieces, m);
  if (can_be_bad) at::any_out(buf.dropped, flags, 0);
  if (v.pieces == 1) {
    auto cells = pieces.select(0, 0);  // a matrix cell: its weight, or 1, where kept
    if (b.weight) {
      cells.copy_(*b.weight).masked_fill_(buf.dropped, 0);  // (not a product: a dropped weight may be NaN)
    } else {
      at::eq_out(cells, buf.dropped, false);
    }
  } else {
    const auto a = constant(state, kTermA, kA, counts, {v.pieces, 1});
    const auto bb = constant(state, kTermB, kB, counts, {v.pieces, 1});
    at::addcmul_out(pieces, a, bb, wrong);
    if (b.weight) pieces.mul_(*b.weight);
    if (can_be_bad) pieces.masked_fill_(buf.dropped, 0);
  }
  if (o.ignore_index()) {
    // an ignored row counts nothing and is never bad: the pieces' rows and the kinds' rows
    rows_at(buf.values, v.put_begin(), m, v.pieces + kKinds, m).mul_(buf.values.narrow(0, v.not_ignored(), m));
  }
  if (state.bad_input()) {
    if (can_be_bad) {
      auto bad_updates = buf.values[v.tail() + 2];
      at::amax_out(bad_updates, flags, {0, 1});
    }
    count_since_bad(state, buf.values[v.tail() + 1]);
  }
  state.count_buffer().put_(buf.index, buf.values.narrow(0, v.put_begin(), v.put_length()), /*accumulate=*/true);
}

// Without num_classes: one class, labels compared as they are; targets are never bad, predictions
// only where scores are NaN.
void count_unknown_classes(MetricState& state, const ClassificationBatch& b, const ClassificationOptions& o) {
  const int64_t m = b.target.size(0);
  auto buf = buffers(state, o, CountLayout::PerClass, b);
  const ValuesLayout v{m, piece_rows(CountLayout::PerClass)};
  const auto flags = rows_at(buf.values, v.kinds(), m, kKinds, m);
  auto wrong = buf.values.narrow(0, 0, m);
  auto pred = b.preds;
  if (b.scores) {
    pred = buf.rows[kPred];
    at::max_out(buf.max, pred, b.preds, 1);
    auto nan = flags.select(0, 1);
    at::ne_out(nan, buf.max, buf.max);
  }
  at::ne_out(wrong, pred, b.target);
  if (o.ignore_index()) {
    auto not_ignored = buf.values.narrow(0, v.not_ignored(), m);
    at::ne_out(not_ignored, b.target, *o.ignore_index());
  }
  if (b.weight) weight_flags(buf, *b.weight, flags.select(0, 2));
  finish(state, b, o, buf, v, b.scores || b.weight);
}

// top_k > 1: the prediction becomes the target where the target is among the row's k best scores,
// ties going to the lower class (as argmax takes the first maximum): where fewer than k classes
// score above the target's, or the same at a lower index. heaviside(s - s_t, c < t) counts both in
// one op (1 above, the flag where equal, 0 below or NaN).
void predict_within_top_k(MetricState& state, const ClassificationBatch& b, const ClassificationOptions& o,
                          const at::Tensor& target, at::Tensor pred) {
  const auto& s = b.preds;
  const int64_t m = s.size(0), classes = s.size(1);
  if (key_changed(state, kTopKKey, {m, classes, static_cast<int64_t>(s.scalar_type())})) {
    state.scratch(kTargetScore) = at::empty({m, 1}, s.options());
    state.scratch(kAhead) = at::empty({m, classes}, s.options());
    state.scratch(kBefore) = at::empty({m, classes}, s.options());
    state.scratch(kAheadCount) = at::empty({m}, s.options());
    state.scratch(kClassIndex) = at::arange(classes, s.options()).unsqueeze(0);
    state.scratch(kWithin) = at::empty({m}, s.options().dtype(at::kBool));
  }
  auto score = state.scratch(kTargetScore), ahead = state.scratch(kAhead), before = state.scratch(kBefore);
  auto count = state.scratch(kAheadCount), within = state.scratch(kWithin);
  const auto t = target.unsqueeze(1);
  at::gather_out(score, s, 1, t);
  at::sub_out(ahead, s, score);
  ahead.nan_to_num_(0);  // an infinite score beside an equal target's: a tie (inf - inf is NaN)
  at::lt_out(before, state.scratch(kClassIndex), t);
  at::heaviside_out(ahead, ahead, before);
  at::sum_out(count, ahead, 1);
  at::lt_out(within, count, o.top_k());
  at::where_out(pred, within, target, pred);
}

}  // namespace

void count_multiclass_on_aten(MetricState& state, const ClassificationBatch& b, const ClassificationOptions& o) {
  register_missing_meta_kernels();
  const int64_t classes = o.num_classes();
  if (classes == kUnknownClasses) return count_unknown_classes(state, b, o);
  const auto layout = layout_of(state);
  const int64_t m = b.target.size(0);
  auto buf = buffers(state, o, layout, b);
  const ValuesLayout v{m, piece_rows(layout)};
  const auto longs = buf.rows.options();
  const auto flags = rows_at(buf.values, v.kinds(), m, kKinds, m);

  // the classes: p, the target as it is (twice) and clamped into range (twice)
  if (b.scores) {
    auto pred = buf.rows[kPred];
    at::max_out(buf.max, pred, b.preds, 1);  // NaN where the row has a NaN; the first maximal index
  } else {
    const auto low = constant<int64_t>(state, kPredLow, {0, kMinLong}, longs, {2, 1});
    const auto high = constant<int64_t>(state, kPredHigh, {classes - 1, kMaxLong}, longs, {2, 1});
    auto out = class_rows(buf, kPred, kPredCopy - kPred, 2);
    at::clamp_out(out, b.preds.unsqueeze(0).expand({2, m}), low, high);
  }
  const auto low = constant<int64_t>(state, kLow, {kMinLong, kMinLong, 0, 0}, longs, {4, 1});
  const auto high = constant<int64_t>(state, kHigh, {kMaxLong, kMaxLong, classes - 1, classes - 1}, longs, {4, 1});
  auto targets = class_rows(buf, kTargetCopy, 1, 4);
  at::clamp_out(targets, b.target.unsqueeze(0).expand({4, m}), low, high);

  // [wrong, bad target, not ignored]: one ne into the values' wrong row, first kind row and
  // not-ignored row (as far apart as the two operands' rows are alike)
  if (o.top_k() > 1) predict_within_top_k(state, b, o, buf.rows[kTarget], buf.rows[kPred]);
  const int64_t compared = o.ignore_index() ? 3 : 2;
  auto out = rows_at(buf.values, 0, v.kinds(), compared, m);
  at::ne_out(out, class_rows(buf, kPred, 1, compared), class_rows(buf, kTarget, 1, compared));
  auto pred_flags = flags.select(0, 1);
  if (b.scores) {
    at::ne_out(pred_flags, buf.max, buf.max);
  } else {
    at::ne_out(pred_flags, buf.rows[kPredCopy], buf.rows[kPred]);
  }
  if (b.weight) weight_flags(buf, *b.weight, flags.select(0, 2));

  // positions: each group's class plus its pieces' bases (a matrix cell: target * C + p + base)
  if (layout == CountLayout::Matrix) {
    auto cells = buf.index.narrow(0, 0, m);
    at::add_out(cells, buf.rows[kPred], buf.rows[kTarget], classes);
    cells.add_(state.offset(1));
  } else {
    const auto bases = constant(state, kBases, piece_bases(state, layout), longs, {kGroups, kPiecesPerGroup, 1});
    auto positions = buf.index.narrow(0, 0, v.pieces * m).view({kGroups, kPiecesPerGroup, m});
    const auto groups = class_rows(buf, kPred, kTarget - kPred, kGroups).unsqueeze(1);  // p, t, 0
    at::add_out(positions, groups, bases);
  }
  finish(state, b, o, buf, v, /*can_be_bad=*/true);
}

}  // namespace metrics::detail
