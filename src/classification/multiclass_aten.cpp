// Multiclass counting on the ATen path (every device; the CPU when forced): a fixed number of ops,
// the same from one update to the next, none reading a value back.
//
// Each row of the batch (its target t and predicted class p) adds pieces to the count buffer, in
// three groups of three: at p, fp += wrong and tn -= wrong; at t, tp += right, fn += wrong and
// tn -= 1; at one fixed place, 1 to tn's pending addend (a kept row is a negative of every class:
// tn takes them all when the state settles, less the classes each row involves, above). The update
// adds the tail (put_update.h) and each bad-input kind's flag per row too. A dropped row (a bad
// target or prediction, a bad weight) and an ignored one add zeros. Positions are the rows'
// classes plus one base per piece (one add; the fixed group's never change); all go in one put_.
// The ConfusionMatrix layout adds one piece per row instead, at its cell (with one scatter_add_,
// see scatters()); without num_classes every piece is at class 0 and the positions never change.
//
// The flags come in k + 1 blocks (top_k = k), each [bad weight, bad prediction, selected, bad
// target, not ignored]: block i < k selects the rows whose i-th best is not the target, block k
// selects none. Two ne write them all: one compares the weights clamped into their good range (one
// clamp) with themselves as they are, and the scores with themselves (NaN), and one the class rows
// (RowLayout: written by the max or sort and one clamp, or by the labels' clamp and the target's,
// the labels checked there too) with each other (float64 weights beside float32 scores, weights
// beside float16 scores, and weights beside labels, take an ne of their own). One
// reduction over each block's first four gives D_i = dropped or the i-th best missed, D_k =
// dropped, and the values follow from D alone, with no masking op:
//   integer counts: a piece is A + B * wrong where kept; the target is at most one of the k best,
//     so the kept value is a_0 - (A + B) D_k + B sum_i D_i (a_0 = A + B (1 - k)): k + 1 copies of
//     each piece, one addcmul writing B D_i and a_0 - (A + B) D_k, which the put_ sums (exact in
//     integers). Batches whose copies would take much memory (kMaxCopiedPieces: segmentation scores)
//     write one copy, A + B * wrong, and zero the dropped rows after (one op more; top_k > 1 two:
//     wrong is every D_i).
//   float64 (weighted) counts: one where writes R_i = 0 where D_i, else the weight: R_k is the
//     kept weight and R_i (i < k) the kept weight where the target is the i-th best. One mm sums
//     each piece, (A + B) R_k - B sum_i R_i, before the put_: at most two terms are not zero, and
//     they are equal or cancel, so the sum is exact, and NaN weights never reach it.
// Ignored rows are zeroed after (one mul_ by the not-ignored flags). The values buffer is laid out
// so that every operand above is one strided view: rows m + kTailPieces apart, the tail in the gap
// before the last block, whose bad-input rows (its selected row is zero) sit right before the
// pieces.
//
// Weighted counts with an ignore_index need no zeroing (the tally layouts, ValuesLayout::tally): a
// zero row closes each block, and the one reduction is an any over windows of rows: D_i (the zero
// row before block i and its rows through the bad target), E_i = D_i or not ignored (one row on),
// and the last block's not-ignored row with the zero rows after it (N). The where writes R_i = 0
// where D_i, else the weight, S_i the same with E_i, and each kind's flags where N, else 0 (the
// flags' view takes zero rows where it writes the weights); R_i - S_i is the weight of a kept row
// not ignored, so the mm sums each piece over R_i - S_i as above (an ignored row's terms cancel in
// pairs: still exact in any order, while twice the weight is finite) and each kind's tally over its
// flags, where not ignored. The put_ takes the tallies (the mm writes them before the pieces) for
// the kinds' flags, and bad_updates their largest. Weighted counts with top_k > 1 take the same
// layout with two bad-prediction rows (kSortEnds): the ne checks each end of the sort for NaN and
// (the weights in rows after the sorted scores: m + 1 rows more of the sort's values buffer) the
// weights, with no maximum; the prediction tally is where B (block 0's two NaN rows and the zero
// rows before them), the not-ignored flags (ones without an ignore_index), so a row NaN at both
// ends counts once.
//
// multidim_average=samplewise counts each sample apart: the pieces go to the rows the state gains
// for the batch's samples (tp, fp, tn and fn, C each, and tn's pending addend, per sample: a row
// of the state's rows buffer), their bases shifted by the row's sample; the kinds' flags and the
// tail still go to the count buffer: two put_s.

#include <ATen/ATen.h>
#include <torch/version.h>

#include <algorithm>
#include <array>
#include <limits>
#include <tuple>
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
  kKey = 100, kRows, kIndex, kValues, kDropped, kSortedScores, kChecked, kWeights, kKeptWeights, kLow, kHigh,
  kPredLow, kPredHigh, kWeightLow, kWeightHigh, kBases, kTermA, kTermB, kSums, kZero, kOne, kPadded, kWrongMask,
  kWeightAndZero
};

// A block of flag rows; the first kReducedRows are reduced into D.
enum BlockRow { kBadWeight, kBadPrediction, kSelected, kBadTarget, kNotIgnored, kBlockRows };
constexpr int64_t kReducedRows = kNotIgnored;

// What a class row holds: the predicted classes (max or sort), or the labels or the target, as
// they are, clamped into [0, C), or ignore_index (0 without one): a clamp's bounds.
enum class RowKind { kPredicted, kAsIs, kClamped, kIgnore };

// The class rows, each one batch long, for top_k = k, and the ne that compares them: for each
// block i = 0 .. k and level j, row i + j * step() with row right_first() + i * right_block_step()
// + j * right_step(), into the block's row first_level() + j.
//   scores: levels [selected, bad target, not ignored]: [p_i (tc where i = k), tc, t] with the
//     same rows in every block, [tc, t, ignore_index]; the predicted classes first, written by the
//     max or the sort. The not-ignored level only where there is an ignore_index: 3k + 4 rows,
//     [p_0 .. p_k-1, tc x (k + 2), t x (k + 1), ignore_index]; else 2k + 2, [p_0 .. p_k-1,
//     tc x (k + 1), t], the levels a row apart (block k's selected row is level 1's first). The
//     sort's index buffer holds them (sorted_width).
//   labels (top_k 1): a level before, bad prediction: [p, p, tc, t] with [label, label, ...] (the
//     label clamped into range and as it is, block by block), all written by two clamps, of the
//     labels and the target; so one ne checks the labels too.
struct RowLayout {
  int64_t k;
  bool labels;
  bool ignores;  // an ignore_index: the not-ignored level, the last, is compared
  int64_t levels() const { return (labels ? 4 : 3) - (ignores ? 0 : 1); }
  BlockRow first_level() const { return labels ? kBadPrediction : kSelected; }
  int64_t step() const { return labels ? 4 : ignores ? k + 1 : k; }
  int64_t right_first() const { return labels ? 2 : ignores ? k + 1 : 2 * k; }
  int64_t right_block_step() const { return labels ? 1 : 0; }
  int64_t right_step() const { return labels || ignores ? step() : 1; }
  int64_t first_target() const { return labels ? 5 : k; }  // the rows before hold the predictions
  int64_t target() const { return labels ? 6 : k + 1; }     // tc, the moving group's class
  std::vector<RowKind> kinds() const {
    using K = RowKind;
    if (labels) {
      return {K::kClamped, K::kClamped, K::kAsIs,  K::kAsIs,  K::kClamped, K::kAsIs,   K::kClamped, K::kAsIs,
              K::kClamped, K::kClamped, K::kAsIs,  K::kAsIs,  K::kAsIs,    K::kAsIs,   K::kIgnore,  K::kIgnore};
    }
    std::vector<K> kinds(static_cast<size_t>(k), K::kPredicted);
    kinds.insert(kinds.end(), ignores ? k + 2 : k + 1, K::kClamped);
    kinds.insert(kinds.end(), ignores ? k + 1 : 1, K::kAsIs);
    if (ignores) kinds.push_back(K::kIgnore);
    return kinds;
  }
  int64_t count() const { return static_cast<int64_t>(kinds().size()); }
  // the columns of the sort's index buffer: num_classes, or more to hold the class rows
  int64_t sorted_width(int64_t classes) const { return std::max(classes, count()); }
};

// The class rows in their buffer: row-major for top_k 1 (row r at r * m), sample-major for top_k
// > 1, where they are the columns of the sort's (m, W) index buffer (the clamp overwrites columns
// from k on, which the sort wrote and nothing reads).
struct ClassRows {
  at::Tensor buffer;  // 2-D: (rows, m), or (m, W) where sorted
  bool sorted;
  int64_t m, row_stride, sample_stride;

  static ClassRows allocate(int64_t m, const RowLayout& r, int64_t width, const at::TensorOptions& longs) {
    return {r.k > 1 ? at::zeros({m, width}, longs) : at::zeros({r.count(), m}, longs), r.k > 1};
  }
  ClassRows(at::Tensor b, bool sorted_columns)
      : buffer(std::move(b)),
        sorted(sorted_columns),
        m(sorted ? buffer.size(0) : buffer.size(1)),
        row_stride(sorted ? 1 : m),
        sample_stride(sorted ? buffer.size(1) : 1) {}
  // blocks x count rows: row first + block * block_step + j * step; one strided view
  at::Tensor grid(int64_t first, int64_t block_step, int64_t step, int64_t blocks, int64_t count) const {
    return buffer.as_strided({blocks, count, m}, {block_step * row_stride, step * row_stride, sample_stride},
                             buffer.storage_offset() + first * row_stride);
  }
  // `count` rows starting at first, first + step, ...
  at::Tensor rows(int64_t first, int64_t step, int64_t count) const { return grid(first, 0, step, 1, count)[0]; }
  at::Tensor row(int64_t r) const { return rows(r, 1, 1)[0]; }
};

constexpr int64_t kGroups = 3, kPiecesPerGroup = 3;  // at p, at the target, at a fixed place
constexpr int64_t kMovingGroups = 2;                   // at p and at the target: their positions follow the rows
constexpr int64_t kMinLong = std::numeric_limits<int64_t>::min(), kMaxLong = std::numeric_limits<int64_t>::max();
// The most pieces whose copies an update writes (32 MiB of index, as much of values); a larger batch
// (segmentation scores) writes one copy and masks the dropped rows. It bounds the tally layouts'
// where too (ValuesLayout::tally_of).
constexpr int64_t kMaxCopiedPieces = int64_t{1} << 22;

// Weighted counts tally the kinds of bad input in the where and the mm (see the top) where an
// ignore_index takes rows out (kIgnored) or the sort's two ends are checked for NaN scores
// (kSortEnds: top_k > 1); else (and integer counts) the put_ takes the last block's flags.
enum class Tally { kNone, kIgnored, kSortEnds };
constexpr int64_t kTallies = 3;  // one row per kind, in this order
constexpr std::array<BlockRow, kTallies> kTallied{kBadWeight, kBadPrediction, kBadTarget};

// Where the values buffer holds what, in rows of the batch size m, m + kTailPieces apart: the k + 1
// blocks of flags (kBlockRows each), then the pieces (all their copies). The put_ region runs from
// the tail (in the gap before the last block) through the last block (its bad-input rows go to the
// tally, its other rows and the gaps to the spare slot) and the pieces, so that samplewise the
// pieces and the rest are two runs. The ignored rows' zeroing takes the last block and the pieces
// as one run of rows.
// A tally layout has no zeroing: zero rows before the blocks, zero rows closing each block, zero
// rows after the last, then the tallies and the pieces, which the mm writes; the put_ region runs
// from the tail (in the gap before the tallies) through them. kIgnored's block is kBlockRows and a
// zero row; kSortEnds' is [first end's NaN, last end's NaN, bad weight, zero, selected, bad
// target, not ignored] and four zero rows (see windows()).
struct ValuesLayout {
  int64_t m, k, copies, pieces;
  bool integer;  // integer counts (else float64: weighted)
  Tally tally = Tally::kNone;

  static ValuesLayout of(const MetricState& state, const ClassificationOptions& o, int64_t m, CountLayout layout,
                         int64_t k) {
    const bool integer = !at::isFloatingType(state.count_dtype());
    if (layout == CountLayout::Matrix) return {m, k, 1, 1, integer};
    if (!integer) {
      ValuesLayout v{m, k, 1, kGroups * kPiecesPerGroup, integer, tally_of(o, k)};
      // the tally layout's where: a batch for which it would take much memory (kMaxCopiedPieces:
      // segmentation scores) zeroes the ignored rows after and takes the larger of the sort's ends
      // instead (an op more each)
      if (v.tallies() && v.where_rows() * m > kMaxCopiedPieces) v.tally = Tally::kNone;
      return v;
    }
    const int64_t copies = kGroups * kPiecesPerGroup * (k + 1) * m <= kMaxCopiedPieces ? k + 1 : 1;
    return {m, k, copies, kGroups * kPiecesPerGroup * copies, integer};
  }
  // Weighted counts' tally layout, batch size aside (of())
  static Tally tally_of(const ClassificationOptions& o, int64_t k) {
    return k > 1                                                      ? Tally::kSortEnds
           : o.ignore_index() && o.num_classes() != kUnknownClasses ? Tally::kIgnored
                                                                     : Tally::kNone;
  }
  bool tallies() const { return tally != Tally::kNone; }
  bool sort_ends() const { return tally == Tally::kSortEnds; }
  int64_t blocks() const { return k + 1; }
  int64_t stride() const { return m + kTailPieces; }
  // a kind's row in a block (kSortEnds: kBadPrediction's is the first end's, the last end's the next)
  int64_t row(BlockRow kind) const {
    constexpr std::array<int64_t, kBlockRows> kSortEndsRows{2, 0, 4, 5, 6};
    return sort_ends() ? kSortEndsRows[kind] : int64_t{kind};
  }
  // kSortEnds: 11, so that N, k + 1 blocks after B (5 rows before block 0), is 6 rows into block k
  int64_t block_rows() const { return sort_ends() ? 11 : kBlockRows + (tallies() ? 1 : 0); }
  int64_t block(int64_t i) const { return (tallies() ? kFront : 0) + block_rows() * i; }  // its first row
  int64_t last_block() const { return block(k); }
  // where the put_ takes the kinds' flags from: the last block's rows, or the tallies
  int64_t kinds_row() const { return tallies() ? block(blocks()) + gap() : last_block(); }
  int64_t kind_row(BlockRow kind) const {
    if (!tallies()) return last_block() + row(kind);
    return kinds_row() + (std::find(kTallied.begin(), kTallied.end(), kind) - kTallied.begin());
  }
  int64_t pieces_row() const { return tallies() ? kinds_row() + kTallies : block(blocks()); }
  int64_t tail() const { return (kinds_row() - 1) * stride() + m; }
  int64_t put_begin() const { return tail(); }
  int64_t put_end() const { return (pieces_row() + pieces - 1) * stride() + m; }
  int64_t put_length() const { return put_end() - put_begin(); }
  int64_t pieces_in_put() const { return pieces_row() * stride() - put_begin(); }  // (and in the index)
  int64_t length() const { return std::max(put_end(), windows_end()); }
  bool matrix() const { return pieces == 1; }  // the ConfusionMatrix layout's one cell per row
  // integer counts with one copy (large batches): A + B * wrong, the dropped rows zeroed after
  bool masks_dropped() const { return integer && copies == 1 && !matrix(); }
  // D as int64 (an amax) where integer counts take it as the copies' factors, else as a bool mask
  bool counts_dropped() const { return integer && !masks_dropped(); }

  // `count` rows of `buffer` (laid out as this layout says) from row `first`: one strided view
  at::Tensor rows(const at::Tensor& buffer, int64_t first, int64_t count) const {
    return buffer.as_strided({count, m}, {stride(), 1}, buffer.storage_offset() + first * stride());
  }
  // rows first .. first + count - 1 of every block: [blocks, count, m]
  at::Tensor blocks_of(const at::Tensor& buffer, BlockRow first, int64_t count) const {
    return buffer.as_strided({blocks(), count, m}, {block_rows() * stride(), stride(), 1},
                             buffer.storage_offset() + (block(0) + row(first)) * stride());
  }

  // A tally layout's any and where, [2 halves, slots, 2, ...]: the weights' half holds [i][0] D_i
  // and [i][1] E_i; the tallies' half [0][0] N (kIgnored: the last block's not-ignored row and the
  // zero rows after it), or (kSortEnds) [0][0] B (block 0's two NaN rows and the zero rows before
  // them) and [blocks][0] N (see block_rows). The other slots are unused (kSortEnds: the weights'
  // slot `blocks` too, which the mm skips).
  int64_t slots() const { return blocks() + (sort_ends() ? 1 : 0); }
  int64_t weights_half() const { return sort_ends() ? 1 : 0; }
  static constexpr int64_t kSlotRows = 8;  // a where slot's rows in a half: [b][d1][d2]
  // the where's output: [2 halves, slots, 2 (D or E), 2, 2 (d1, d2: flags()), m]
  std::vector<int64_t> where_sizes() const { return {2, slots(), 2, 2, 2, m}; }
  int64_t where_rows() const { return 2 * slots() * kSlotRows; }
  // rows an any window reduces: D_i's, from the zero row before block i through its bad target
  int64_t window() const { return row(kBadTarget) - std::min(row(kBadWeight), row(kBadPrediction)) + 2; }
  // the any's input, [2, slots, 2, window, m]
  at::Tensor windows(const at::Tensor& buffer) const {
    const auto [first, second] = halves(block(0) - 1, tallies_window());
    return buffer.as_strided({2, slots(), 2, window(), m},
                             {(second - first) * stride(), block_rows() * stride(), stride(), stride(), 1},
                             buffer.storage_offset() + first * stride());
  }
  // the where's flags view, [2, slots, 2, 2, 2, m]: the tallies' half the bad weight's row, d1 adding
  // the rows to the bad target's, d2 to the bad prediction's (kIgnored, where N) or the not-ignored
  // one (kSortEnds, where B); the weights' half zero rows (before the blocks, or after them)
  at::Tensor flags(const at::Tensor& buffer) const {
    const int64_t bad_weight = row(kBadWeight), d2 = row(sort_ends() ? kNotIgnored : kBadPrediction);
    const auto [first, second] = halves(sort_ends() ? block(blocks()) + 2 : 0, block(0) + bad_weight);
    return buffer.as_strided(
        where_sizes(),
        {(second - first) * stride(), 0, 0, (row(kBadTarget) - bad_weight) * stride(), (d2 - bad_weight) * stride(), 1},
        buffer.storage_offset() + first * stride());
  }
  // where the where's tally of `kind` is: [half][slot][0][d1][d2], d1 and d2 as flags() says
  std::array<int64_t, 4> tally_slot(BlockRow kind) const {
    return {1 - weights_half(), sort_ends() && kind != kBadPrediction ? blocks() : 0, kind == kBadTarget,
            kind == kBadPrediction};
  }

 private:
  // zero rows before the first block: kIgnored's flags view reads four, D_0 the last; B five
  static constexpr int64_t kFront = 5;
  // zero rows after the last block: N's (kIgnored: 3), or (kSortEnds) the flags view's (from 2 on)
  // and the windows' of the weights' slot `blocks` (through 6)
  int64_t gap() const { return sort_ends() ? 10 : 3; }
  // the first window of the tallies' half: N, or (kSortEnds) B, ending at block 0's last-end row
  int64_t tallies_window() const {
    return sort_ends() ? block(0) + row(kBadPrediction) + 1 - (window() - 1) : last_block() + row(kNotIgnored);
  }
  // the first rows of the weights' half and the tallies', in the halves' order
  std::pair<int64_t, int64_t> halves(int64_t weights, int64_t tallies) const {
    return sort_ends() ? std::pair{tallies, weights} : std::pair{weights, tallies};
  }
  int64_t windows_end() const {
    if (!tallies()) return 0;
    const auto [first, second] = halves(block(0) - 1, tallies_window());
    return (second + block_rows() * (slots() - 1) + 1 + window() - 1) * stride() + m;
  }
};

// The spare slot: where a piece goes that counts nothing.
int64_t spare(const MetricState& state) { return state.scratch_offset(0); }

// Whether the update adds its pieces with one scatter_add_ rather than the put_: the ConfusionMatrix
// layout, but samplewise. The count buffer is seen as two overlapping rows, one from 0 and one from
// the matrix on (its cells are then target * C + prediction, as one add writes them: no second add
// of the matrix's offset), and each column of the put index says where in either row: every place
// an update adds to is past the matrix's start but the update count's, which the first row takes
// from a copy of the values' put region kept before the values (zeros but the update count's 1; the
// put region's own update count piece is 0). The first row's other places and the second row's
// update count place get 0. Not with deterministic algorithms on: CUDA has no deterministic
// scatter_add_ into more than one dimension (put_ turns into a deterministic index_put_).
bool scatters(const ClassificationOptions& o, CountLayout layout) {
  return layout == CountLayout::Matrix && !samplewise(o) && !at::globalContext().deterministicAlgorithms();
}

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

// The shift of each row's pieces: samplewise, to its sample's row; else 0.
std::vector<int64_t> row_shifts(const MetricState& state, const ClassificationOptions& o, int64_t m, int64_t samples) {
  std::vector<int64_t> shifts(static_cast<size_t>(m), 0);
  if (!samplewise(o)) return shifts;
  const int64_t per_sample = m / samples;
  for (int64_t row = 0; row < m; ++row) shifts[row] = row / per_sample * state.row_width();
  return shifts;
}

// The moving groups' bases as added to the classes, [2, 3, 1, 1]; samplewise [2, 3, 1, m], each
// row's shifted to its sample's row.
at::Tensor moving_base_tensor(const MetricState& state, const std::vector<int64_t>& shifts, bool shifted,
                              const at::TensorOptions& longs) {
  const auto bases = piece_bases(state, CountLayout::PerClass);
  const int64_t count = kMovingGroups * kPiecesPerGroup, m = static_cast<int64_t>(shifts.size());
  if (!shifted) {
    return upload(std::vector<int64_t>(bases.begin(), bases.begin() + count), longs)
        .view({kMovingGroups, kPiecesPerGroup, 1, 1});
  }
  std::vector<int64_t> values;
  for (int64_t piece = 0; piece < count; ++piece) {
    for (const auto shift : shifts) values.push_back(bases[piece] + shift);
  }
  return upload(values, longs).view({kMovingGroups, kPiecesPerGroup, 1, m});
}

// The put_ index, laid out as the values' put_ region: the tail's and the kinds' places, the fixed
// pieces' positions (every piece's without num_classes), the spare slot (samplewise pieces: 0, a
// place the rows buffer has, adding 0) where nothing counts.
std::vector<int64_t> put_index(const MetricState& state, const ClassificationOptions& o, CountLayout layout,
                               const ValuesLayout& v, const std::vector<int64_t>& shifts) {
  std::vector<int64_t> positions(static_cast<size_t>(v.put_length()), spare(state));
  const auto slot = [&](int64_t row, int64_t sample) -> int64_t& {
    return positions[static_cast<size_t>(row * v.stride() + sample - v.put_begin())];
  };
  const auto tail = tail_positions(state, spare(state));
  std::copy(tail.begin(), tail.end(), positions.begin());
  if (const auto* tally = state.bad_input()) {
    const auto counts = state.offset(tally->counts_slot());  // in BadInputCounts' order
    for (const auto& [row, kind] : {std::pair{kBadTarget, 0}, {kBadPrediction, 1}, {kBadWeight, 2}}) {
      for (int64_t s = 0; s < v.m; ++s) slot(v.kind_row(row), s) = counts + kind;
    }
  }
  if (samplewise(o)) std::fill(positions.begin() + v.pieces_in_put(), positions.end(), 0);
  if (scatters(o, layout)) {
    // relative to the matrix (the second row), but the update count's (the first row)
    const auto matrix = state.offset(1);
    for (auto& position : positions) {
      TORCH_INTERNAL_ASSERT(position >= matrix || position == state.offset(0));
      if (position >= matrix) position -= matrix;
    }
  }
  if (layout == CountLayout::Matrix) return positions;
  const auto bases = piece_bases(state, layout);
  const auto fixed_from = o.num_classes() == kUnknownClasses ? 0 : kMovingGroups * kPiecesPerGroup;
  for (int64_t row = 0; row < v.pieces; ++row) {
    const int64_t piece = row / v.copies;
    if (piece < fixed_from) continue;
    for (int64_t s = 0; s < v.m; ++s) slot(v.pieces_row() + row, s) = bases[piece] + shifts[s];
  }
  return positions;
}

// A and B of each piece's value where kept, A + B * wrong, in piece_bases' order.
const std::vector<int64_t> kA{0, 0, 0, 1, 0, -1, 1, 0, 0};
const std::vector<int64_t> kB{1, -1, 0, -1, 1, 0, 0, 0, 0};

// The integer copies' terms, [9, copies, 1] each: copy = term_a + term_b * D (see the top), or
// with one copy term_a + term_b * wrong.
std::array<std::vector<int64_t>, 2> copy_terms(const ValuesLayout& v) {
  std::vector<int64_t> term_a, term_b;
  for (size_t piece = 0; piece < kA.size(); ++piece) {
    std::vector<std::pair<int64_t, int64_t>> copies{{kA[piece], kB[piece]}};  // A + B * wrong
    if (v.copies > 1) {
      copies.assign(static_cast<size_t>(v.k), {0, kB[piece]});                          // B * D_i
      copies.emplace_back(kA[piece] + kB[piece] * (1 - v.k), -(kA[piece] + kB[piece]));  // a_0 - (A + B) D_k
    }
    for (const auto& [a, b] : copies) {
      term_a.push_back(a);
      term_b.push_back(b);
    }
  }
  return {term_a, term_b};
}

// The float64 pieces' sums over [R_0 .. R_{k-1}, R_k]: [-B ... -B, A + B] per piece, [9, k + 1].
std::vector<double> kept_weight_sums(int64_t k) {
  std::vector<double> sums;
  for (size_t piece = 0; piece < kA.size(); ++piece) {
    sums.insert(sums.end(), k, static_cast<double>(-kB[piece]));
    sums.push_back(static_cast<double>(kA[piece] + kB[piece]));
  }
  return sums;
}

// The columns of a tally layout's mm, the where's rows: [half][slot][b][d1][d2] (ValuesLayout), all
// but (kSortEnds) the weights' last slot's, which no block has.
struct TallyColumns {
  const ValuesLayout& v;
  int64_t count() const { return v.where_rows() - (v.sort_ends() ? ValuesLayout::kSlotRows : 0); }
  int64_t at(int64_t half, int64_t slot, int64_t b, int64_t d1, int64_t d2) const {
    return (((half * v.slots() + slot) * 2 + b) * 2 + d1) * 2 + d2;
  }
  int64_t tally(BlockRow kind) const {
    const auto [half, slot, d1, d2] = v.tally_slot(kind);
    return at(half, slot, 0, d1, d2);
  }
};

// A tally layout's mm coefficients, [kTallies + 9, TallyColumns::count()]: each tally its kind's
// flags; each piece the kept weights of the not-ignored rows, R_i - S_i, as kept_weight_sums takes R_i.
std::vector<double> tally_sums(const ValuesLayout& v) {
  const TallyColumns columns{v};
  const auto sums = kept_weight_sums(v.k);
  std::vector<double> coefficients((kTallies + kA.size()) * columns.count(), 0.0);
  for (int64_t t = 0; t < kTallies; ++t) coefficients[t * columns.count() + columns.tally(kTallied[t])] = 1;
  for (size_t piece = 0; piece < kA.size(); ++piece) {
    auto* row = &coefficients[(kTallies + piece) * columns.count()];
    for (int64_t i = 0; i < v.blocks(); ++i) {
      row[columns.at(v.weights_half(), i, 0, 0, 0)] = sums[piece * v.blocks() + i];
      row[columns.at(v.weights_half(), i, 1, 0, 0)] = -sums[piece * v.blocks() + i];
    }
  }
  return coefficients;
}

// Whether the weights are checked with the scores, by the ne that finds NaN scores: where the
// scores' dtype holds every weight exactly, but not float16 scores on a CPU before PyTorch 2.1 (its
// CPU clamp takes no float16; meta's and CUDA's do).
bool checks_weights_with_scores(const ClassificationBatch& b) {
  const auto scores = b.preds.scalar_type();
#if TORCH_VERSION_MAJOR < 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR < 1)
  if (scores == at::kHalf && b.preds.is_cpu()) return false;
#endif
  return b.weight && b.scores && at::promoteTypes(scores, b.weight->scalar_type()) == scores;
}

struct Buffers {
  ClassRows rows;
  // D [k + 1, m] (int64 where the copies take it, else bool; a tally layout's any: [2, slots, 2, m]);
  // the kept weights R [k + 1, m], float64 (a tally layout's where: [2, slots, 2, 2, 2, m])
  at::Tensor index, values, dropped, kept_weights, bases;
  // in the scores' dtype, but in kSortEnds: where the weights are checked with the scores, the
  // weights clamped into their good range and as they are, then each row's best score (where
  // sorted, the larger of the sort's first and last), then a zero row: [4 or 1, m]. The weights so,
  // [2, m] (weight_rows)
  at::Tensor checked, weights;
  // where sorted, the scores best first (kSortEnds: then the weights' rows, see flag_sort_ends), and
  // the padded copy sorted where the scores are not; wrong (or dropped) as a mask where top_k > 1
  // needs it (ConfusionMatrix, one copy)
  at::Tensor sorted_scores, padded, wrong_mask;
};

// The bounds of the clamp that writes the class rows first .. first + count - 1, [count, 1] each.
std::pair<at::Tensor, at::Tensor> clamp_bounds(const ClassificationOptions& o, const RowLayout& r, int64_t first,
                                               int64_t count, const at::TensorOptions& longs) {
  std::vector<int64_t> low, high;
  const auto kinds = r.kinds();
  const auto ignore = o.ignore_index().value_or(0);
  for (auto row = first; row < first + count; ++row) {
    const auto kind = kinds[static_cast<size_t>(row)];
    low.push_back(kind == RowKind::kClamped ? 0 : kind == RowKind::kIgnore ? ignore : kMinLong);
    high.push_back(kind == RowKind::kClamped ? o.num_classes() - 1 : kind == RowKind::kIgnore ? ignore : kMaxLong);
  }
  return {upload(low, longs).view({count, 1}), upload(high, longs).view({count, 1})};
}

// The constants the buffers of a batch shape need: the clamps' bounds, the pieces' terms, the
// weights' bounds.
void make_constants(MetricState& state, const ClassificationOptions& o, const RowLayout& r,
                    const ClassificationBatch& b, const ValuesLayout& v, const at::TensorOptions& longs) {
  const auto doubles = longs.dtype(at::kDouble);
  std::tie(state.scratch(kLow), state.scratch(kHigh)) =
      clamp_bounds(o, r, r.first_target(), r.count() - r.first_target(), longs);
  if (r.labels) {
    std::tie(state.scratch(kPredLow), state.scratch(kPredHigh)) = clamp_bounds(o, r, 0, r.first_target(), longs);
  }
  if (v.integer && !v.matrix()) {
    const auto terms = copy_terms(v);
    state.scratch(kTermA) = upload(terms[0], longs).view({-1, v.copies, 1});
    state.scratch(kTermB) = upload(terms[1], longs).view({-1, v.copies, 1});
  } else if (!v.integer) {
    state.scratch(kSums) = v.tallies() ? upload(tally_sums(v), doubles).view({kTallies + v.pieces, -1})
                                     : upload(kept_weight_sums(v.k), doubles).view({-1, v.blocks()});
    state.scratch(kZero) = at::zeros({1}, doubles);
    state.scratch(kOne) = at::ones({1}, doubles);
  }
  if (b.weight) {
    constexpr double kInf = std::numeric_limits<double>::infinity();
    const auto largest = good_weight_bounds(b.weight->scalar_type()).second;
    const auto bounds = longs.dtype(checks_weights_with_scores(b) ? b.preds.scalar_type() : at::kDouble);
    state.scratch(kWeightLow) = upload(std::vector<double>{0, -kInf}, bounds).view({2, 1});
    state.scratch(kWeightHigh) = upload(std::vector<double>{largest, kInf}, bounds).view({2, 1});
  }
}

// Where the weights go, [2, m] each: clamped into their good range and as they are (check_weights), and
// a tally layout's weight or zero for each half of its where (kSortEnds: the zero first). Checked
// with the scores, they are rows of the checked buffer (its zero row last) or (kSortEnds) columns 1
// and 3 of the rows after the sorted scores (column 2 zero); else float64 rows between zero rows.
// Without a weight, a tally layout's halves take 1 and 0.
std::pair<at::Tensor, at::Tensor> weight_rows(MetricState& state, const ClassificationBatch& b, const ValuesLayout& v,
                                              int64_t width) {
  const int64_t m = v.m;
  const bool zero_first = v.sort_ends();
  if (checks_weights_with_scores(b) && v.sort_ends()) {
    const auto& sorted = state.scratch(kSortedScores);
    const auto columns = [&](int64_t first, int64_t apart) {
      return sorted.as_strided({2, m}, {apart, width}, sorted.storage_offset() + m * width + first);
    };
    return {columns(1, 2), columns(2, 1)};
  }
  if (checks_weights_with_scores(b)) {
    const auto& checked = state.scratch(kChecked);  // [clamped, as they are, best, zero]
    return {checked.narrow(0, 0, 2), checked.as_strided({2, m}, {2 * m, 1}, checked.storage_offset() + m)};
  }
  const auto doubles = at::TensorOptions().dtype(at::kDouble).device(state.device());
  if (b.weight) {
    const auto own = at::zeros({4, m}, doubles);  // [zero, clamped, as they are, zero]
    return {own.narrow(0, 1, 2), zero_first ? own.as_strided({2, m}, {2 * m, 1}, own.storage_offset())
                                            : own.narrow(0, 2, 2)};
  }
  if (!v.tallies()) return {};
  return {at::Tensor(), upload(std::vector<double>{zero_first ? 0.0 : 1.0, zero_first ? 1.0 : 0.0}, doubles)
                            .view({2, 1})
                            .expand({2, m})};
}

Buffers buffers(MetricState& state, const ClassificationOptions& o, const RowLayout& r, CountLayout layout,
                const ClassificationBatch& b) {
  const int64_t m = b.target.size(0), k = r.k;
  const auto width = k > 1 ? r.sorted_width(o.num_classes()) : 0;  // (the sort's buffers alone have it)
  // the scores are sorted from a copy where the sort's buffers are wider than they, or they are
  // strided or keep extra dimensions (a sort writes into its outputs only where its input is laid
  // out as they are)
  const bool copied =
      k > 1 && (b.preds.dim() > 2 || width > b.preds.size(1) || b.preds.stride(1) != 1 || b.preds.stride(0) != width);
  const int64_t samples = samplewise(o) ? b.samples : 0;
  const std::vector<int64_t> key{m, static_cast<int64_t>(b.preds.scalar_type()), weight_dtype_key(b), copied, samples,
                                 scatters(o, layout)};
  make_for_key(state, kKey, key, [&] {
    const auto longs = at::TensorOptions().dtype(at::kLong).device(state.device());
    const auto doubles = longs.dtype(at::kDouble);
    const auto v = ValuesLayout::of(state, o, m, layout, k);
    // where scattered, the first row's copy of the put region before the values (see scatters)
    const int64_t copy = scatters(o, layout) ? v.put_length() : 0;
    auto storage = at::zeros({copy + v.length()}, longs.dtype(state.count_dtype()));
    auto values = storage.narrow(0, copy, v.length());
    (copy ? storage[v.tail() - v.put_begin()] : values[v.tail()]).fill_(1);  // the update count's piece
    state.scratch(kRows) = ClassRows::allocate(m, r, width, longs).buffer;
    const auto shifts = row_shifts(state, o, m, samples);
    state.scratch(kIndex) = upload(put_index(state, o, layout, v, shifts), longs);
    state.scratch(kValues) = values;
    const auto reduced = v.tallies() ? std::vector<int64_t>{2, v.slots(), 2, m} : std::vector<int64_t>{v.blocks(), m};
    state.scratch(kDropped) = at::zeros(reduced, v.counts_dropped() ? longs : longs.dtype(at::kBool));
    if (v.sort_ends() && !o.ignore_index()) v.blocks_of(values, kNotIgnored, 1).fill_(1);  // (never written)
    const bool with_scores = checks_weights_with_scores(b);
    // kSortEnds: rows of weights after the sorted scores (see flag_sort_ends)
    const int64_t sorted_rows = v.sort_ends() && with_scores ? 2 * m + 1 : m;
    state.scratch(kSortedScores) = k == 1 ? at::Tensor() : at::zeros({sorted_rows, width}, b.preds.options());
    state.scratch(kChecked) = v.sort_ends() ? at::Tensor() : at::zeros({with_scores ? 4 : 1, m}, b.preds.options());
    std::tie(state.scratch(kWeights), state.scratch(kWeightAndZero)) = weight_rows(state, b, v, width);
    const auto kept = v.tallies() ? v.where_sizes() : std::vector<int64_t>{v.blocks(), m};
    state.scratch(kKeptWeights) = v.integer || v.matrix() ? at::Tensor() : at::empty(kept, doubles);
    // the columns past num_classes sort last (after the classes at -inf: a stable sort keeps their order)
    state.scratch(kPadded) =
        copied ? at::full({m, width}, -std::numeric_limits<double>::infinity(), b.preds.options()) : at::Tensor();
    const bool masks_wrong = k > 1 && (layout == CountLayout::Matrix || v.masks_dropped());
    state.scratch(kWrongMask) = masks_wrong ? at::empty({m}, longs.dtype(at::kBool)) : at::Tensor();
    state.scratch(kBases) = layout == CountLayout::Matrix
                                ? at::Tensor()
                                : moving_base_tensor(state, shifts, samplewise(o), longs);
    make_constants(state, o, r, b, v, longs);
  });
  return {ClassRows(state.scratch(kRows), k > 1), state.scratch(kIndex),        state.scratch(kValues),
          state.scratch(kDropped),                state.scratch(kKeptWeights),  state.scratch(kBases),
          state.scratch(kChecked),                state.scratch(kWeights),      state.scratch(kSortedScores),
          state.scratch(kPadded),                 state.scratch(kWrongMask)};
}

// The weights clamped into their good range and as they are (one clamp), and their flags (NaN,
// negative and infinite weights: the clamp changes them) into every block, unless the scores'
// NaN check writes them. A weight per sample, (N,), is spread over its rows by the clamp, [N, m / N]
// (one per row: [m, 1]).
void check_weights(MetricState& state, const ClassificationBatch& b, Buffers& buf, const ValuesLayout& v) {
  const auto& w = *b.weight;
  const int64_t samples = w.size(0), per_sample = v.m / samples;
  auto spread = buf.weights.view({2, samples, per_sample});
  at::clamp_out(spread, w.view({1, samples, 1}).expand({2, samples, per_sample}),
                state.scratch(kWeightLow).view({2, 1, 1}), state.scratch(kWeightHigh).view({2, 1, 1}));
  if (checks_weights_with_scores(b)) return;
  auto flags = v.blocks_of(buf.values, kBadWeight, 1).select(1, 0);
  at::ne_out(flags, buf.weights[0].expand({v.blocks(), v.m}), buf.weights[1].expand({v.blocks(), v.m}));
}

// D: each block's first rows reduced (dropped, or dropped or the i-th best missed); a tally layout's
// windows (ValuesLayout::windows). Where no row can be dropped and the copies take D, the selected
// rows are D as they are.
at::Tensor reduce_flags(Buffers& buf, const ValuesLayout& v, bool can_be_bad) {
  if (v.tallies()) return at::any_out(buf.dropped, v.windows(buf.values), 3);
  const auto flags = v.blocks_of(buf.values, kBadWeight, kReducedRows);
  if (!can_be_bad && v.counts_dropped()) return flags.select(1, kSelected);
  auto& dropped = buf.dropped;
  if (v.counts_dropped()) {
    at::amax_out(dropped, flags, {1});
  } else {
    at::any_out(dropped, flags, 1);
  }
  return dropped;
}

// Where each row is wrong (its k best all miss the target) or dropped: D_0 for top_k 1, else
// every D_i (one all).
at::Tensor wrong_or_dropped(Buffers& buf, const ValuesLayout& v, const at::Tensor& dropped) {
  if (v.k == 1) return dropped[0];
  at::all_out(buf.wrong_mask, dropped.narrow(0, 0, v.k), 0);
  return buf.wrong_mask;
}

// The weights (1 without a weight), [m] or [1].
at::Tensor weights_or_one(MetricState& state, const ClassificationBatch& b, const Buffers& buf) {
  return b.weight ? buf.weights[1] : state.scratch(kOne);
}

// A tally layout's tallies and pieces (see the top): one where writes its rows (TallyColumns) where
// the windows' D, E, N or B, the flags (or zero rows) else the weight (or a zero row); one mm sums them.
void tally_values(MetricState& state, Buffers& buf, const ValuesLayout& v, const at::Tensor& reduced) {
  const auto sizes = v.where_sizes();
  const auto cond = reduced.unsqueeze(3).unsqueeze(3).expand(sizes);
  // [2, m]: each half's weight or zero
  const auto weights = state.scratch(kWeightAndZero).unsqueeze(1).unsqueeze(1).unsqueeze(1).unsqueeze(1).expand(sizes);
  at::where_out(buf.kept_weights, cond, v.flags(buf.values), weights);
  auto sums = v.rows(buf.values, v.kinds_row(), kTallies + v.pieces);
  at::mm_out(sums, state.scratch(kSums), buf.kept_weights.view({-1, v.m}).narrow(0, 0, TallyColumns{v}.count()));
}

// The pieces' values from D (see the top): the cells' where the layout is the ConfusionMatrix's.
void write_values(MetricState& state, const ClassificationBatch& b, Buffers& buf, const ValuesLayout& v,
                  const at::Tensor& dropped) {
  auto pieces = v.rows(buf.values, v.pieces_row(), v.pieces);
  if (v.matrix()) {  // a matrix cell: its weight, or 1, where kept
    auto cells = pieces[0];
    const auto kept = dropped[v.k];
    if (v.integer) return void(at::eq_out(cells, kept, 0));
    return void(at::where_out(cells, kept, state.scratch(kZero), weights_or_one(state, b, buf)));
  }
  if (v.tallies()) return tally_values(state, buf, v, dropped);
  if (!v.integer) {
    at::where_out(buf.kept_weights, dropped, state.scratch(kZero), weights_or_one(state, b, buf));
    return void(at::mm_out(pieces, state.scratch(kSums), buf.kept_weights));
  }
  auto copies = pieces.view({-1, v.copies, v.m});
  if (!v.masks_dropped()) return void(at::addcmul_out(copies, state.scratch(kTermA), state.scratch(kTermB), dropped));
  at::addcmul_out(copies, state.scratch(kTermA), state.scratch(kTermB), wrong_or_dropped(buf, v, dropped));
  pieces.masked_fill_(dropped[v.k], 0);
}

// The one put_ of the tail, the kinds' flags and the pieces into the count buffer (the ConfusionMatrix
// layout's: one scatter_add_, see scatters); samplewise, the pieces' into the rows the state gains for
// the batch's samples and the rest's into the count buffer.
void add_pieces(MetricState& state, const ClassificationBatch& b, const ClassificationOptions& o, Buffers& buf,
                const ValuesLayout& v) {
  if (v.matrix() && scatters(o, CountLayout::Matrix)) {
    const auto& counts = state.count_buffer();
    const auto matrix = state.offset(1), n = v.put_length();
    auto rows = counts.as_strided({2, counts.numel() - matrix}, {matrix, 1}, counts.storage_offset());
    const auto source = buf.values.as_strided({2, n}, {n + v.put_begin(), 1}, buf.values.storage_offset() - n);
    return void(rows.scatter_add_(1, buf.index.unsqueeze(0).expand({2, n}), source));
  }
  const auto values = buf.values.narrow(0, v.put_begin(), v.put_length());
  if (!samplewise(o)) return void(state.count_buffer().put_(buf.index, values, /*accumulate=*/true));
  const auto rest = v.pieces_in_put(), pieces = v.put_length() - rest;
  state.grow_rows(b.samples).put_(buf.index.narrow(0, rest, pieces), values.narrow(0, rest, pieces),
                                  /*accumulate=*/true);
  state.count_buffer().put_(buf.index.narrow(0, 0, rest), values.narrow(0, 0, rest), /*accumulate=*/true);
}

// The pieces' values, the ignored rows made zero (their pieces and their kinds' flags), the tail's
// tally where there is one; then the one put_.
void finish(MetricState& state, const ClassificationBatch& b, const ClassificationOptions& o, Buffers& buf,
            const ValuesLayout& v, const at::Tensor& dropped, bool can_be_bad) {
  write_values(state, b, buf, v, dropped);
  if (o.ignore_index() && !v.tallies()) {
    v.rows(buf.values, v.last_block(), v.block_rows() + v.pieces).mul_(v.rows(buf.values, kNotIgnored, 1));
  }
  if (state.bad_input()) {
    if (can_be_bad) {
      auto bad_updates = buf.values[v.tail() + 2];
      const auto kinds = v.tallies() ? v.rows(buf.values, v.kinds_row(), kTallies)
                                   : v.rows(buf.values, v.last_block(), kReducedRows);
      at::amax_out(bad_updates, kinds, {0, 1});
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

// kSortEnds: into every block the flags of the rows whose sort put a NaN first or last, and (checked
// with the scores) the bad weights', in one ne over [first, last] x [clamped, as they are]: columns
// of the sorted buffer, whose rows after the m sorted ones hold the weights at columns 1 and 3. (The
// [last][weights] corner compares columns 0 and 2 of the next row, zeros, into the block's zero row.)
void flag_sort_ends(Buffers& buf, const ClassificationBatch& b, const ValuesLayout& v) {
  const auto& sorted = buf.sorted_scores;
  const int64_t m = v.m, width = sorted.size(1), s = v.stride(), weights = checks_weights_with_scores(b) ? 2 : 1;
  const auto ends_and_weights = [&](int64_t weight_column) {
    return sorted.as_strided({v.blocks(), 2, weights, m}, {0, width - 1, m * width + weight_column, width},
                             sorted.storage_offset());
  };
  const auto first = v.row(kBadPrediction);
  auto flags = buf.values.as_strided({v.blocks(), 2, weights, m},
                                     {v.block_rows() * s, s, (v.row(kBadWeight) - first) * s, 1},
                                     buf.values.storage_offset() + (v.block(0) + first) * s);
  at::ne_out(flags, ends_and_weights(1), ends_and_weights(3));
}

// The predicted classes into row 0 (where sorted, the k best into rows 0 .. k-1, in order, ties
// to the lower class as argmax takes the first maximum), and into every block the flags of the
// rows that hold a NaN score, after (where checked with the scores) those of the bad weights: one
// ne compares [clamped weights, best] with [weights, best]. max gives NaN in such a row; a descending
// sort puts NaN first, but CUDA's radix sorts order NaN by its bits and put a NaN with the sign bit
// set last (below -inf, the padding's too), so the larger of the sort's two ends is the NaN (or,
// kSortEnds, each end is checked).
void predict(Buffers& buf, const ClassificationBatch& b, const ValuesLayout& v) {
  auto best = v.sort_ends() ? at::Tensor() : buf.checked[buf.checked.size(0) == 1 ? 0 : 2];
  if (!buf.rows.sorted) {
    auto pred = buf.rows.row(0);
    auto best_rows = as_rows_of(best, b.preds), pred_rows = as_rows_of(pred, b.preds);
    at::max_out(best_rows, pred_rows, b.preds, -1);  // the first maximal index
  } else {
    if (buf.padded.defined()) buf.padded.narrow(1, 0, b.preds.size(-1)).view(b.preds.sizes()).copy_(b.preds);
    const auto& scores = buf.padded.defined() ? buf.padded : b.preds;
    auto sorted = buf.sorted_scores.narrow(0, 0, v.m);
    at::sort_out(sorted, buf.rows.buffer, scores, /*stable=*/true, 1, /*descending=*/true);
    if (v.sort_ends()) return flag_sort_ends(buf, b, v);
    at::maximum_out(best, sorted.select(1, 0), sorted.select(1, sorted.size(1) - 1));
  }
  const int64_t checked = buf.checked.size(0) == 1 ? 1 : 2, m = v.m, offset = buf.checked.storage_offset();
  auto flags = v.blocks_of(buf.values, checked == 1 ? kBadPrediction : kBadWeight, checked);
  at::ne_out(flags, buf.checked.as_strided({v.blocks(), checked, m}, {0, 2 * m, 1}, offset),
             buf.checked.as_strided({v.blocks(), checked, m}, {0, m, 1}, offset + (checked - 1) * m));
}

// Without num_classes: one class, labels compared as they are; targets are never bad, predictions
// only where scores are NaN.
void count_unknown_classes(MetricState& state, const ClassificationBatch& b, const ClassificationOptions& o) {
  const int64_t m = b.target.size(0);
  auto buf = buffers(state, o, RowLayout{1, !b.scores, /*ignores=*/false}, CountLayout::PerClass, b);
  const auto v = ValuesLayout::of(state, o, m, CountLayout::PerClass, 1);
  if (b.weight) check_weights(state, b, buf, v);
  if (b.scores) predict(buf, b, v);
  auto wrong = v.rows(buf.values, kSelected, 1)[0];  // the first block's
  at::ne_out(wrong, b.scores ? buf.rows.row(0) : b.preds, b.target);
  if (o.ignore_index()) {
    auto not_ignored = v.rows(buf.values, kNotIgnored, 1)[0];
    at::ne_out(not_ignored, b.target, *o.ignore_index());
  }
  const bool can_be_bad = b.scores || b.weight;
  finish(state, b, o, buf, v, reduce_flags(buf, v, can_be_bad), can_be_bad);
}

// The predicted classes, and (scores) the bad-prediction flags into every block; labels are written
// into the rows before first_target(), clamped into range and as they are (their ne is the targets').
void write_predictions(MetricState& state, const ClassificationBatch& b, const RowLayout& r, Buffers& buf,
                       const ValuesLayout& v) {
  if (b.scores) return predict(buf, b, v);
  auto out = buf.rows.rows(0, 1, r.first_target());
  at::clamp_out(out, b.preds.unsqueeze(0).expand(out.sizes()), state.scratch(kPredLow), state.scratch(kPredHigh));
}

// The rows from first_target() on, in one clamp between per-row bounds (RowLayout::kinds: as many
// as the bounds have).
void write_targets(MetricState& state, const ClassificationBatch& b, const RowLayout& r, Buffers& buf) {
  auto out = buf.rows.rows(r.first_target(), 1, state.scratch(kLow).size(0));
  at::clamp_out(out, b.target.unsqueeze(0).expand(out.sizes()), state.scratch(kLow), state.scratch(kHigh));
}

// Every block's levels (RowLayout) in one ne. (Without an ignore_index nothing reads the
// not-ignored rows but kSortEnds', ones.)
void compare_with_targets(const RowLayout& r, Buffers& buf, const ValuesLayout& v) {
  auto out = v.blocks_of(buf.values, r.first_level(), r.levels());
  at::ne_out(out, buf.rows.grid(0, 1, r.step(), v.blocks(), r.levels()),
             buf.rows.grid(r.right_first(), r.right_block_step(), r.right_step(), v.blocks(), r.levels()));
}

// The pieces' positions: the moving groups' classes plus their pieces' bases (a matrix cell:
// target * C + p + base, p the target where the row is right; any cell where it is dropped).
void write_positions(const MetricState& state, const ClassificationOptions& o, const RowLayout& r, CountLayout layout,
                     Buffers& buf, const ValuesLayout& v, const at::Tensor& dropped) {
  const auto tc = buf.rows.row(r.target());
  if (layout == CountLayout::Matrix) {
    auto pred = buf.rows.row(0);
    if (r.k > 1) at::where_out(pred, wrong_or_dropped(buf, v, dropped), pred, tc);
    auto cells = buf.index.narrow(0, v.pieces_in_put(), v.m);
    at::add_out(cells, pred, tc, o.num_classes());
    if (!scatters(o, layout)) cells.add_(state.offset(1));
    return;
  }
  const auto c = v.copies;
  auto positions = buf.index.as_strided({kMovingGroups, kPiecesPerGroup, c, v.m},
                                        {kPiecesPerGroup * c * v.stride(), c * v.stride(), v.stride(), 1},
                                        buf.index.storage_offset() + v.pieces_in_put());
  // p and t, the same for every copy
  const auto groups = buf.rows.rows(0, r.target(), kMovingGroups).view({kMovingGroups, 1, 1, v.m});
  at::add_out(positions, groups.expand({-1, kPiecesPerGroup, c, -1}), buf.bases);
}

}  // namespace

void count_multiclass_on_aten(MetricState& state, const ClassificationBatch& b, const ClassificationOptions& o) {
  register_missing_meta_kernels();
  if (o.num_classes() == kUnknownClasses) return count_unknown_classes(state, b, o);
  const auto layout = layout_of(state);
  const RowLayout r{o.top_k(), !b.scores, o.ignore_index().has_value()};
  auto buf = buffers(state, o, r, layout, b);
  const auto v = ValuesLayout::of(state, o, b.target.size(0), layout, r.k);
  if (b.weight) check_weights(state, b, buf, v);
  write_predictions(state, b, r, buf, v);
  write_targets(state, b, r, buf);
  compare_with_targets(r, buf, v);
  const auto dropped = reduce_flags(buf, v, /*can_be_bad=*/true);
  write_positions(state, o, r, layout, buf, v, dropped);
  finish(state, b, o, buf, v, dropped, /*can_be_bad=*/true);
}

}  // namespace metrics::detail
