// Multiclass counting on the ATen path (every device; the CPU when forced): a fixed number of ops,
// the same from one update to the next, none reading a value back.
//
// Each row of the batch (its target t and predicted class p) adds pieces to the count buffer, in
// three groups of three: at p, fp += wrong and tn -= wrong; at t, tp += right, fn += wrong and
// tn -= 1; at one fixed place, 1 to tn's pending addend (a kept row is a negative of every class:
// tn takes them all when the state settles, less the classes each row involves, above). The update
// adds the tail (put_update.h) and each bad-input kind's flag per row too. A dropped row (a bad
// target or prediction, a bad weight, the ignored class) adds zeros. Positions are the rows' classes
// plus one base per piece (one add); values are A + B * wrong per piece (one addcmul; with top_k > 1
// and integer counts, below, the sums of copies), times the weight, then zeroed where dropped. The
// ConfusionMatrix layout adds one piece per row instead, at its cell; without num_classes every
// piece is at class 0 and the positions never change.
//
// The class rows (ClassRows) hold the classes: max writes p (top_k > 1: a stable descending sort
// writes the k best classes in order), one clamp writes the target as it is and clamped into range
// and the constants, so that one ne compares [p, t, t] with [tc, ignore_index, tc]: wrong, not
// ignored and bad target, each operand a strided view of rows in arithmetic progression. With
// top_k > 1 the ne compares each of the k best with tc, giving k flags f_i (a row is right where
// its target is among its k best; p, the best, counts only where it is wrong). The target is at
// most one of them, so wrong = 1 - k + sum f_i: with integer counts each piece comes in k copies,
// copy i adding a_i + B * f_i (a_0 = A + B * (1 - k), the others 0), and the put_ sums them; no op
// reduces the flags. That sum takes B back where it gave it (+1, -1), exact in integers only: float64
// (weighted) counts would round there, and could overflow, so they take wrong from one amin of the
// k flags instead, as the ConfusionMatrix layout does, whose cell needs it, and as batches do whose
// copies would take much memory (kMaxCopiedPieces). The values buffer is laid out so that the rows
// that ne writes are one strided view too.
//
// multidim_average=samplewise counts each sample apart: the pieces go to the rows the state gains
// for the batch's samples (tp, fp, tn and fn, C each, and tn's pending addend, per sample: a row
// of the state's rows buffer), their bases shifted by the row's sample; the kinds' flags and the
// tail still go to the count buffer: two put_s.

#include <ATen/ATen.h>

#include <algorithm>
#include <array>
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
  kKey = 100, kRows, kIndex, kValues, kDropped, kBestScores, kClamped, kLow, kHigh, kPredLow, kPredHigh, kBases,
  kTermA, kTermB, kPadded, kEnds, kWrongMask
};

// The class rows, each one batch long, for top_k = k.
struct RowLayout {
  int64_t k;
  // 0 .. k-1: p (argmax, or the predicted labels clamped into range); top_k > 1: the k best classes
  int64_t target_copy() const { return k; }  // the target as it is (clamped to the int64 range), twice
  int64_t target() const { return k + 2; }   // the target clamped into [0, C), k times
  int64_t ignore() const { return 2 * k + 2; }  // ignore_index (0 without one), then tc once more
  int64_t zero() const { return 2 * k + 4; }    // the position of the fixed pieces' group
  int64_t pred_copy() const { return 2 * k + 5; }  // the predicted labels as they are
  int64_t count() const { return 2 * k + 6; }
  // the columns of the sort's index buffer: num_classes, or more to hold the rows up to zero()
  int64_t sorted_width(int64_t classes) const { return std::max(classes, zero() + 1); }
};

// The class rows in their buffer: row-major for top_k 1 (row r at r * m), sample-major for top_k
// > 1, where they are the columns of the sort's (m, W) index buffer (the clamp overwrites columns
// from k on, which the sort wrote and nothing reads).
struct ClassRows {
  at::Tensor buffer;  // 2-D: (rows, m), or (m, W) where sorted
  bool sorted;
  int64_t m, row_stride, sample_stride;

  static ClassRows allocate(int64_t m, int64_t k, int64_t width, const at::TensorOptions& longs) {
    return {k > 1 ? at::zeros({m, width}, longs) : at::zeros({RowLayout{k}.count(), m}, longs), k > 1};
  }
  ClassRows(at::Tensor b, bool sorted_columns)
      : buffer(std::move(b)),
        sorted(sorted_columns),
        m(sorted ? buffer.size(0) : buffer.size(1)),
        row_stride(sorted ? 1 : m),
        sample_stride(sorted ? buffer.size(1) : 1) {}
  // `count` rows starting at first, first + step, ...: one strided view
  at::Tensor rows(int64_t first, int64_t step, int64_t count) const {
    const auto offset = buffer.storage_offset() + first * row_stride;
    return buffer.as_strided({count, m}, {step * row_stride, sample_stride}, offset);
  }
  at::Tensor row(int64_t r) const { return rows(r, 1, 1).select(0, 0); }
};

constexpr int64_t kGroups = 3, kPiecesPerGroup = 3;  // at p, at the target, at a fixed place
constexpr int64_t kKinds = 3;                          // bad targets, predictions, weights
constexpr int64_t kMinLong = std::numeric_limits<int64_t>::min(), kMaxLong = std::numeric_limits<int64_t>::max();
// The most pieces whose copies an update writes (32 MiB of index, as much of values); a larger batch
// (segmentation scores with top_k > 1) takes one amin instead of k times the memory.
constexpr int64_t kMaxCopiedPieces = int64_t{1} << 22;

// Where the values buffer holds what, in rows of the batch size m, for top_k = k: the rows that one
// ne writes, m + kTailPieces apart (each of the k best != t, the not-ignored flags, then the
// bad-target flags: the first kind row), with the tail in the gap before the kind rows; then the
// pieces (all their copies). The put_ region is the tail, the kinds and the pieces, so that
// samplewise the pieces' rows and the rest are two runs. The ignored rows' zeroing takes the kinds
// and the pieces as one run of rows. Where top_k > 1 and the pieces have one copy, wrong (the amin
// of the k flags) follows.
struct ValuesLayout {
  int64_t m, pieces, k, copies;

  // Each piece's copies: k where the put_ sums wrong from the k flags (integer counts, and pieces
  // that stay within kMaxCopiedPieces), else 1.
  static ValuesLayout of(const MetricState& state, int64_t m, CountLayout layout, int64_t k) {
    if (layout == CountLayout::Matrix) return {m, 1, k, 1};
    const int64_t all_copies = kGroups * kPiecesPerGroup * k * m;
    const bool copied = !at::isFloatingType(state.count_dtype()) && all_copies <= kMaxCopiedPieces;
    const int64_t copies = copied ? k : 1;
    return {m, kGroups * kPiecesPerGroup * copies, k, copies};
  }
  int64_t compare_stride() const { return m + kTailPieces; }
  int64_t not_ignored() const { return k * compare_stride(); }
  int64_t tail() const { return not_ignored() + m; }
  int64_t kinds() const { return tail() + kTailPieces; }
  int64_t pieces_begin() const { return kinds() + kKinds * m; }
  int64_t put_begin() const { return tail(); }
  int64_t put_length() const { return pieces_begin() + pieces * m - put_begin(); }
  int64_t pieces_in_put() const { return pieces_begin() - put_begin(); }  // (and in the index)
  int64_t wrong() const { return k == 1 ? 0 : pieces_begin() + pieces * m; }
  bool reduces_flags() const { return k > 1 && copies == 1; }  // an amin writes wrong
  int64_t length() const { return pieces_begin() + pieces * m + (reduces_flags() ? m : 0); }
  // the rows the pieces' copies take their flags from: the k flags, or wrong
  int64_t flags_begin() const { return copies == k ? 0 : wrong(); }
};

// The spare slot: where a piece goes that counts nothing.
int64_t spare(const MetricState& state) { return state.scratch_offset(0); }

// Each piece's base position, in the order the pieces' values come (entries: 1 tp, 2 fp, 3 tn, 4 fn,
// or 1 confmat): in the count buffer, or samplewise in a row of the rows buffer.
std::vector<int64_t> piece_bases(const MetricState& state, CountLayout layout) {
  if (layout == CountLayout::Matrix) return {state.offset(1)};
  const auto tp = state.offset(1), fp = state.offset(2), tn = state.offset(3), fn = state.offset(4);
  const auto kept = state.pending_addend_offset(3);
  // a piece that adds nothing goes where a class can follow its base: to tp's (it adds 0)
  return {fp, tn, tp,  // at p: fp += wrong, tn -= wrong
          tp, fn, tn,  // at the target: tp += right, fn += wrong, tn -= 1
          kept, tp, tp};
}

// The pieces' bases as added to the classes, [9, 1] (one per piece, its copies' too); samplewise
// [9, m], each row's shifted to its sample's row.
at::Tensor piece_base_tensor(const MetricState& state, const ClassificationOptions& o, CountLayout layout,
                             int64_t m, int64_t samples, const at::TensorOptions& longs) {
  const auto bases = piece_bases(state, layout);
  if (!samplewise(o)) return upload(bases, longs).view({-1, 1});
  const int64_t per_sample = m / samples;
  std::vector<int64_t> shifted;
  for (const auto base : bases) {
    for (int64_t row = 0; row < m; ++row) shifted.push_back(base + row / per_sample * state.row_width());
  }
  return upload(shifted, longs).view({-1, m});
}

// A and B of each piece's value, A + B * wrong, in piece_bases' order.
const std::vector<double> kA{0, 0, 0, 1, 0, -1, 1, 0, 0};
const std::vector<double> kB{1, -1, 0, -1, 1, 0, 0, 0, 0};

// The a_i and the B of each piece's copies, piece by piece ([9, copies, 1]; one copy: A and B).
std::vector<double> copy_offsets(int64_t copies) {
  std::vector<double> offsets;
  for (size_t piece = 0; piece < kA.size(); ++piece) {
    offsets.push_back(kA[piece] + kB[piece] * static_cast<double>(1 - copies));
    offsets.insert(offsets.end(), copies - 1, 0.0);
  }
  return offsets;
}
std::vector<double> copy_factors(int64_t copies) {
  std::vector<double> factors;
  for (const auto b : kB) factors.insert(factors.end(), copies, b);
  return factors;
}

struct Buffers {
  ClassRows rows;
  at::Tensor index, values, dropped, clamped, bases;
  // each row's best score (top_k 1), or its scores best first; where sorted, the larger of each
  // row's first and last (the sort's ends), the padded copy sorted where the scores are not, and
  // wrong as a mask
  at::Tensor best_scores, ends, padded, wrong_mask;
};

Buffers buffers(MetricState& state, const ClassificationOptions& o, CountLayout layout, const ClassificationBatch& b) {
  const int64_t m = b.target.size(0), k = o.top_k();
  const RowLayout r{k};
  const auto width = r.sorted_width(o.num_classes());
  // the scores are sorted from a copy where the sort's buffers are wider than they, or they are
  // strided or keep extra dimensions (a sort writes into its outputs only where its input is laid
  // out as they are)
  const bool copied =
      k > 1 && (b.preds.dim() > 2 || width > b.preds.size(1) || b.preds.stride(1) != 1 || b.preds.stride(0) != width);
  // (the weight flags' row and the dropped rows are written only where an update has them)
  const int64_t samples = samplewise(o) ? b.samples : 0;
  if (key_changed(state, kKey,
                  {m, static_cast<int64_t>(b.preds.scalar_type()), weight_dtype_key(b), copied, samples})) {
    const auto longs = at::TensorOptions().dtype(at::kLong).device(state.device());
    const auto v = ValuesLayout::of(state, m, layout, k);
    // the index: the tail, the kinds' places, the pieces (fixed without num_classes)
    std::vector<int64_t> positions(static_cast<size_t>(v.put_length()), spare(state));
    const auto tail = tail_positions(state, spare(state));
    std::copy(tail.begin(), tail.end(), positions.begin());
    if (const auto* tally = state.bad_input()) {
      for (int64_t kind = 0; kind < kKinds; ++kind) {
        std::fill_n(positions.begin() + (v.kinds() - v.put_begin() + kind * m), m,
                    state.offset(tally->counts_slot()) + kind);
      }
    }
    if (o.num_classes() == kUnknownClasses) {
      const auto bases = piece_bases(state, layout);
      const auto first = positions.begin() + v.pieces_in_put();
      for (int64_t p = 0; p < v.pieces; ++p) std::fill_n(first + p * m, m, bases[p / v.copies]);
    }
    auto values = at::zeros({v.length()}, longs.dtype(state.count_dtype()));
    values[v.tail()].fill_(1);  // the update count's piece
    state.scratch(kRows) = ClassRows::allocate(m, k, width, longs).buffer;
    state.scratch(kIndex) = upload(positions, longs);
    state.scratch(kValues) = values;
    state.scratch(kDropped) = at::zeros({m}, longs.dtype(at::kBool));
    state.scratch(kClamped) = b.weight ? at::empty({m}, b.weight->options()) : at::Tensor();
    state.scratch(kBestScores) = k == 1 ? at::empty({m}, b.preds.options()) : at::empty({m, width}, b.preds.options());
    state.scratch(kEnds) = k == 1 ? at::Tensor() : at::empty({m}, b.preds.options());
    // the columns past num_classes sort last (after the classes at -inf: a stable sort keeps their order)
    state.scratch(kPadded) =
        copied ? at::full({m, width}, -std::numeric_limits<double>::infinity(), b.preds.options()) : at::Tensor();
    const bool masks_wrong = k > 1 && layout == CountLayout::Matrix;
    state.scratch(kWrongMask) = masks_wrong ? at::empty({m}, longs.dtype(at::kBool)) : at::Tensor();
    state.scratch(kBases) = piece_base_tensor(state, o, layout, m, samples, longs);
    // the pieces' A and B per copy (how many copies follows the batch size)
    const auto counts = longs.dtype(state.count_dtype());
    state.scratch(kTermA) = upload(copy_offsets(v.copies), counts).view({-1, v.copies, 1});
    state.scratch(kTermB) = upload(copy_factors(v.copies), counts).view({-1, v.copies, 1});
  }
  return {ClassRows(state.scratch(kRows), k > 1), state.scratch(kIndex),      state.scratch(kValues),
          state.scratch(kDropped),                state.scratch(kClamped),    state.scratch(kBases),
          state.scratch(kBestScores),             state.scratch(kEnds),       state.scratch(kPadded),
          state.scratch(kWrongMask)};
}

// A constant of the state's device, made once from the values `values()` gives (called on the
// first update only).
template <class Make>
at::Tensor constant(MetricState& state, Scratch which, const at::TensorOptions& options, at::IntArrayRef shape,
                    Make values) {
  return state.scratch(which, [&] { return upload(values(), options).view(shape); });
}

// `count` rows of `buffer` (1-D, rows m long) starting at offsets first, first + step, ...: one
// strided view.
at::Tensor rows_at(const at::Tensor& buffer, int64_t first, int64_t step, int64_t count, int64_t m) {
  return buffer.as_strided({count, m}, {step, 1}, buffer.storage_offset() + first);
}

// The weight flags (NaN, negative and infinite weights: clamping to the largest finite weight of
// their dtype changes them) into `out`.
void weight_flags(Buffers& buf, const at::Tensor& w, at::Tensor out) {
  at::clamp_out(buf.clamped, w, 0, good_weight_bounds(w.scalar_type()).second);
  at::ne_out(out, buf.clamped, w);
}

// The one put_ of the tail, the kinds' flags and the pieces into the count buffer; samplewise, the
// pieces' into the rows the state gains for the batch's samples and the rest's into the count buffer.
void add_pieces(MetricState& state, const ClassificationBatch& b, const ClassificationOptions& o, Buffers& buf,
                const ValuesLayout& v) {
  const auto values = buf.values.narrow(0, v.put_begin(), v.put_length());
  if (!samplewise(o)) return void(state.count_buffer().put_(buf.index, values, /*accumulate=*/true));
  const auto rest = v.pieces_in_put(), pieces = v.put_length() - rest;
  state.grow_rows(b.samples).put_(buf.index.narrow(0, rest, pieces), values.narrow(0, rest, pieces),
                                  /*accumulate=*/true);
  state.count_buffer().put_(buf.index.narrow(0, 0, rest), values.narrow(0, 0, rest), /*accumulate=*/true);
}

// The pieces' values (A + B * wrong, or where they have k copies the sums of a_i + B * f_i; times
// the weight) and the kinds' flags with the rows that are dropped, or ignored, made zero; and the
// tail's tally where there is one; then the one put_.
void finish(MetricState& state, const ClassificationBatch& b, const ClassificationOptions& o, Buffers& buf,
            const ValuesLayout& v, bool can_be_bad) {
  const auto m = v.m;
  const auto flags = rows_at(buf.values, v.kinds(), m, kKinds, m);
  auto pieces = rows_at(buf.values, v.pieces_begin(), m, v.pieces, m);
  if (can_be_bad) at::any_out(buf.dropped, flags, 0);
  if (v.pieces == 1) {
    auto cells = pieces.select(0, 0);  // a matrix cell: its weight, or 1, where kept
    if (b.weight) {
      cells.copy_(*b.weight).masked_fill_(buf.dropped, 0);  // (not a product: a dropped weight may be NaN)
    } else {
      at::eq_out(cells, buf.dropped, false);
    }
  } else {
    const auto c = v.copies;
    const auto& a = state.scratch(kTermA);
    const auto& bb = state.scratch(kTermB);
    auto copies = pieces.view({v.pieces / c, c, m});
    at::addcmul_out(copies, a, bb, rows_at(buf.values, v.flags_begin(), v.compare_stride(), c, m));
    if (b.weight) pieces.mul_(*b.weight);
    if (can_be_bad) pieces.masked_fill_(buf.dropped, 0);
  }
  if (o.ignore_index()) {
    // an ignored row counts nothing and is never bad: the pieces' rows and the kinds' rows
    rows_at(buf.values, v.kinds(), m, kKinds + v.pieces, m).mul_(buf.values.narrow(0, v.not_ignored(), m));
  }
  if (state.bad_input()) {
    if (can_be_bad) {
      auto bad_updates = buf.values[v.tail() + 2];
      at::amax_out(bad_updates, flags, {0, 1});
    }
    count_since_bad(state, buf.values[v.tail() + 1]);
  }
  add_pieces(state, b, o, buf, v);
}

// `rows` (one per row of the batch) viewed as the rows of `scores`: (M,), or (N, ...) where the
// scores keep their extra dimensions (kernels.h).
at::Tensor as_rows_of(const at::Tensor& rows, const at::Tensor& scores) {
  return rows.view(scores.sizes().slice(0, scores.dim() - 1));
}

// The predicted classes into row 0 (where sorted, the k best into rows 0 .. k-1, in order, ties
// to the lower class as argmax takes the first maximum), and the flags of the rows that hold a NaN
// score into `nan_flags`. max gives NaN in such a row; a descending sort puts NaN first, but CUDA's
// radix sorts order NaN by its bits and put a NaN with the sign bit set last (below -inf, the
// padding's too), so the larger of the sort's two ends is the NaN.
void predict(Buffers& buf, const ClassificationBatch& b, at::Tensor nan_flags) {
  auto best = buf.best_scores;
  if (!buf.rows.sorted) {
    auto pred = buf.rows.row(0);
    auto best_rows = as_rows_of(best, b.preds), pred_rows = as_rows_of(pred, b.preds);
    at::max_out(best_rows, pred_rows, b.preds, -1);  // the first maximal index
  } else {
    if (buf.padded.defined()) buf.padded.narrow(1, 0, b.preds.size(-1)).view(b.preds.sizes()).copy_(b.preds);
    const auto& scores = buf.padded.defined() ? buf.padded : b.preds;
    at::sort_out(best, buf.rows.buffer, scores, /*stable=*/true, 1, /*descending=*/true);
    at::maximum_out(buf.ends, best.select(1, 0), best.select(1, best.size(1) - 1));
    best = buf.ends;
  }
  at::ne_out(nan_flags, best, best);
}

// Without num_classes: one class, labels compared as they are; targets are never bad, predictions
// only where scores are NaN.
void count_unknown_classes(MetricState& state, const ClassificationBatch& b, const ClassificationOptions& o) {
  const int64_t m = b.target.size(0);
  auto buf = buffers(state, o, CountLayout::PerClass, b);
  const auto v = ValuesLayout::of(state, m, CountLayout::PerClass, 1);
  const auto flags = rows_at(buf.values, v.kinds(), m, kKinds, m);
  auto wrong = buf.values.narrow(0, v.wrong(), m);
  if (b.scores) predict(buf, b, flags.select(0, 1));
  at::ne_out(wrong, b.scores ? buf.rows.row(0) : b.preds, b.target);
  if (o.ignore_index()) {
    auto not_ignored = buf.values.narrow(0, v.not_ignored(), m);
    at::ne_out(not_ignored, b.target, *o.ignore_index());
  }
  if (b.weight) weight_flags(buf, *b.weight, flags.select(0, 2));
  finish(state, b, o, buf, v, b.scores || b.weight);
}

// The predicted classes, and the bad-prediction flags into `flags` (NaN scores, or labels out of
// range: the labels are written clamped into range and as they are).
void write_predictions(MetricState& state, const ClassificationBatch& b, const ClassificationOptions& o, Buffers& buf,
                       at::Tensor flags) {
  if (b.scores) return predict(buf, b, flags);
  const auto longs = buf.index.options();
  const auto low = constant(state, kPredLow, longs, {2, 1}, [] { return std::vector<int64_t>{0, kMinLong}; });
  const auto high = constant(state, kPredHigh, longs, {2, 1}, [&] {
    return std::vector<int64_t>{o.num_classes() - 1, kMaxLong};
  });
  const auto copy = RowLayout{o.top_k()}.pred_copy();
  auto out = buf.rows.rows(0, copy, 2);
  at::clamp_out(out, b.preds.unsqueeze(0).expand({2, buf.rows.m}), low, high);
  at::ne_out(flags, buf.rows.row(copy), buf.rows.row(0));
}

// The bounds ([low, high]) of the clamp that writes the rows from target_copy() to zero(): the
// target as it is (twice), clamped into range (k times), ignore_index (between equal bounds), clamped
// into range once more, then 0 (between equal bounds).
std::array<std::vector<int64_t>, 2> target_bounds(const ClassificationOptions& o) {
  const RowLayout r{o.top_k()};
  const int64_t first = r.target_copy(), count = r.zero() + 1 - first;
  std::vector<int64_t> low(count, 0), high(count, o.num_classes() - 1);
  for (const auto row : {first, first + 1}) {
    low[row - first] = kMinLong;
    high[row - first] = kMaxLong;
  }
  low[r.ignore() - first] = high[r.ignore() - first] = o.ignore_index().value_or(0);
  low[r.zero() - first] = high[r.zero() - first] = 0;
  return {low, high};
}

// The rows from target_copy() to zero(), in one clamp between per-row bounds (target_bounds).
void write_targets(MetricState& state, const ClassificationBatch& b, const ClassificationOptions& o, Buffers& buf) {
  const RowLayout r{o.top_k()};
  const int64_t first = r.target_copy(), count = r.zero() + 1 - first;
  const auto longs = buf.index.options();
  const auto low = constant(state, kLow, longs, {count, 1}, [&] { return target_bounds(o)[0]; });
  const auto high = constant(state, kHigh, longs, {count, 1}, [&] { return target_bounds(o)[1]; });
  auto out = buf.rows.rows(first, 1, count);
  at::clamp_out(out, b.target.unsqueeze(0).expand({count, buf.rows.m}), low, high);
}

// [p != tc (each of the k best), not ignored, bad target]: one ne into the values' rows that
// ValuesLayout spaces compare_stride() apart; where the pieces have one copy with top_k > 1, one
// amin of the k flags is wrong (the target is none of the k best).
void compare_with_targets(const ClassificationOptions& o, Buffers& buf, const ValuesLayout& v) {
  const int64_t k = o.top_k(), compared = k + 2;
  auto out = rows_at(buf.values, 0, v.compare_stride(), compared, v.m);
  at::ne_out(out, buf.rows.rows(0, 1, compared), buf.rows.rows(RowLayout{k}.target(), 1, compared));
  if (v.reduces_flags()) {
    auto wrong = buf.values.narrow(0, v.wrong(), v.m);
    at::amin_out(wrong, out.narrow(0, 0, k), {0});
  }
}

// The pieces' positions: each group's class plus its pieces' bases (a matrix cell: target * C + p
// + base, p the target where the row is right).
void write_positions(const MetricState& state, const ClassificationOptions& o, CountLayout layout, Buffers& buf,
                     const ValuesLayout& v) {
  const RowLayout r{o.top_k()};
  const auto tc = buf.rows.row(r.target());
  if (layout == CountLayout::Matrix) {
    auto pred = buf.rows.row(0);
    if (r.k > 1) {
      at::ne_out(buf.wrong_mask, buf.values.narrow(0, v.wrong(), v.m), 0);
      at::where_out(pred, buf.wrong_mask, pred, tc);
    }
    auto cells = buf.index.narrow(0, v.pieces_in_put(), v.m);
    at::add_out(cells, pred, tc, o.num_classes());
    cells.add_(state.offset(1));
    return;
  }
  auto positions =
      buf.index.narrow(0, v.pieces_in_put(), v.pieces * v.m).view({kGroups, kPiecesPerGroup, v.copies, v.m});
  // p, t, 0, the same for every copy
  const auto groups = buf.rows.rows(0, r.target(), kGroups).view({kGroups, 1, 1, v.m}).expand({-1, -1, v.copies, -1});
  at::add_out(positions, groups, buf.bases.view({kGroups, kPiecesPerGroup, 1, -1}));
}

}  // namespace

void count_multiclass_on_aten(MetricState& state, const ClassificationBatch& b, const ClassificationOptions& o) {
  register_missing_meta_kernels();
  if (o.num_classes() == kUnknownClasses) return count_unknown_classes(state, b, o);
  const auto layout = layout_of(state);
  auto buf = buffers(state, o, layout, b);
  const auto v = ValuesLayout::of(state, b.target.size(0), layout, o.top_k());
  const auto flags = rows_at(buf.values, v.kinds(), v.m, kKinds, v.m);
  write_predictions(state, b, o, buf, flags.select(0, 1));
  write_targets(state, b, o, buf);
  compare_with_targets(o, buf, v);
  if (b.weight) weight_flags(buf, *b.weight, flags.select(0, 2));
  write_positions(state, o, layout, buf, v);
  finish(state, b, o, buf, v, /*can_be_bad=*/true);
}

}  // namespace metrics::detail
