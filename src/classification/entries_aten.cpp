// Binary and multilabel counting on the ATen path. Each entry (a score or label, its target, its
// weight) falls into a few buckets (bucketize), and the combination of its buckets, the entry's
// code, says all that an update needs of it. Each input is bucketized in its own dtype (half-precision
// scores, integer labels and targets too: no cast). A table, made once per state and inputs' dtypes
// (and device: a move drops the scratch), gives each code its pieces (put_update.h): the cell
// it counts in (tn, fp, fn or tp of its label) under each reading of the scores, the spare slot
// where it is dropped; the tally's place for each kind of bad input it has, the spare slot for each
// it has not; and two more columns (three with a kept matrix, below): bad_updates' place where the
// entry is bad (the spare slot where not), and 0 where the entry is outside [0, 1] (1 where not).
//
// Scores are probabilities or logits by the batch (TorchMetrics takes logits where any score is
// outside [0, 1], a NaN too on the CPU: see nan_makes_logits): the table has the cell under both
// readings, and the update weighs them I and 1 - I, where I is 1 if every score is inside [0, 1]
// (a NaN, on the CPU, is not). One amin over the flag columns gives I, and where the update adds
// bad_updates' 1 (bad_updates' place if any entry is bad: it lies before the spare slot), straight
// into the index. A binary state with a kept matrix (CountLayout::PerClassAndKeptMatrix) counts
// each entry twice: in tp, fp, tn, fn as above, and in the matrix under I', 1 if every score
// ignore_index keeps is inside [0, 1] (one more column for the amin, two more cells per entry, the
// same ops).
//
// An update: bucketize the scores and the targets, add them into codes, look the codes up, one
// amin, since_bad's increment, the cells' values, one put_: 8 ops. Multilabel adds each entry's
// label to its cells' positions (9); weights take 3 more (their buckets, their part of the codes,
// and the product of weights and readings).
//
// multidim_average=samplewise counts each sample apart, into the rows the state gains for the
// batch's samples (tp, fp, tn and fn, L each, and a spare where a dropped entry's cell goes, per
// sample: a row of the state's rows buffer). A cell's position is its place in a row plus its
// sample's row and its label (one addcmul, binary too); the cells go there, the kinds' flags and the
// tail to the count buffer: three put_s.

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>

#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include "../meta_kernels.h"
#include "kernels.h"
#include "put_update.h"
#include "score_cutoffs.h"

namespace metrics::detail {
namespace {

// The state's scratch tensors (MetricState::scratch): the update's buffers, made for a batch shape
// (kKey); the bucket bounds and the table, made for the predictions', targets' and weights' dtypes
// (kTableKey); the readings' weights.
enum Scratch {
  kKey = 200, kTableKey, kScoreBounds, kTargetBounds, kWeightBounds, kTable, kScoreBuckets, kTargetBuckets,
  kWeightBuckets, kCodes, kLooked, kIndex, kValues, kLabels, kReadings, kReadingsA, kReadingsB, kScoresCopy,
  kTargetsCopy, kWeightsCopy
};

// One bucketize: its bounds, and whether a bucket counts the bounds below or at a value (right) or
// below it.
struct Buckets {
  std::vector<double> bounds;
  bool right;
  int64_t count() const { return static_cast<int64_t>(bounds.size()) + 1; }
  // A value in bucket i; bucket count() - 1 of a bucketize that counts bounds below a value holds NaN.
  double representative(int64_t i) const {
    if (bounds.empty()) return 0;
    if (right) return i == 0 ? bounds.front() - 1 : bounds[static_cast<size_t>(i - 1)];
    return i < static_cast<int64_t>(bounds.size()) ? bounds[static_cast<size_t>(i)]
                                                   : std::numeric_limits<double>::quiet_NaN();
  }
};

Buckets of(const std::set<double>& bounds, bool right) { return {{bounds.begin(), bounds.end()}, right}; }

// What the predictions are: scores, with their cutoffs under each reading, or 0/1 labels.
struct Predictions {
  bool scores;
  ScoreCutoffs cutoffs;
  Buckets buckets;
};

// Scores: below 0 (as the bound, the largest negative value of their dtype), at most each cutoff,
// at most 1, at most +inf, NaN. Labels: below 0, 0, 1, above.
Predictions predictions(const ClassificationBatch& b, const ClassificationOptions& o) {
  if (!b.scores) return {false, {}, {{0, 1, 2}, true}};
  const auto c = score_cutoffs(o.threshold(), b.score_dtype);
  const double below_zero = negative_nearest_zero(b.preds.scalar_type());
  return {true, c, of({below_zero, c.probability, c.logit, 1.0, std::numeric_limits<double>::infinity()}, false)};
}

// Targets: below 0, 0, 1, above, and ignore_index on its own; in the targets' integer dtype, exact
// at any ignore_index (a bucket counts the bounds at or below a target; a bound outside the dtype,
// an ignore_index no target of it can be, splits none of its values and is left out).
struct TargetBuckets {
  std::vector<int64_t> bounds;
  int64_t count() const { return static_cast<int64_t>(bounds.size()) + 1; }
  // A target in bucket i (bucket 0 is empty where the first bound is the dtype's smallest value).
  int64_t representative(int64_t i) const {
    if (i > 0) return bounds[static_cast<size_t>(i - 1)];
    return bounds.front() == std::numeric_limits<int64_t>::min() ? bounds.front() : bounds.front() - 1;
  }
};

TargetBuckets target_buckets(const ClassificationOptions& o, at::ScalarType dtype) {
  std::set<int64_t> bounds{0, 1, 2};
  if (const auto ignore = o.ignore_index()) {
    bounds.insert(*ignore);
    if (*ignore < std::numeric_limits<int64_t>::max()) bounds.insert(*ignore + 1);
  }
  const auto [lowest, largest] = AT_DISPATCH_INTEGRAL_TYPES(dtype, "target_buckets", [] {
    return std::pair<int64_t, int64_t>{std::numeric_limits<scalar_t>::lowest(), std::numeric_limits<scalar_t>::max()};
  });
  return {{bounds.lower_bound(lowest), bounds.upper_bound(largest)}};
}

// Weights (of their floating dtype): negative, finite and not negative, +inf or NaN; one bucket where
// there are none.
Buckets weight_buckets(const c10::optional<at::Tensor>& weight) {
  if (!weight) return {{}, true};
  const auto [below, largest] = good_weight_bounds(weight->scalar_type());
  return {{below, largest}, false};
}

// The table's columns: each entry's pieces, the cell it counts in under the probability reading and
// under the logit one (the spare slot where it is dropped; with a kept matrix, its cell there under
// each reading too), then the tally's place for each of its kinds of bad input, bad target,
// prediction and (where weighted) weight (the spare slot where it is not bad so); then the flags
// [bad_updates' place or the spare slot, inside (, inside or ignored)]; then each piece's cell flag
// (1 where its position is a cell, to which a multilabel entry's label is added).
struct Columns {
  int64_t kinds;
  int64_t readings;  // of the batch's scores: 1, 2 with a kept matrix
  int64_t cells() const { return 2 * readings; }
  int64_t pieces() const { return cells() + kinds; }
  int64_t flags() const { return pieces(); }
  int64_t flag_count() const { return 1 + readings; }
  int64_t cell_flags() const { return pieces() + flag_count(); }
  int64_t count() const { return 2 * pieces() + flag_count(); }
};

// Where each code's pieces go. Cells by 2 * target + prediction: tn, fp, fn, tp (entries 1 tp, 2 fp,
// 3 tn, 4 fn); a label's cell is its label past these (samplewise, its sample's too).
std::vector<int64_t> table(const MetricState& state, const ClassificationOptions& o, const Predictions& p,
                           const TargetBuckets& targets, const Buckets& weights, const Columns& col) {
  static const size_t cell_entries[] = {3, 2, 4, 1};
  const auto cell_of = [&](int64_t reading, int64_t target, int64_t pred) {
    if (reading == 0) return state.offset(cell_entries[2 * target + pred]);
    return state.offset(kKeptMatrixSlot) + 2 * target + pred;  // [[tn, fp], [fn, tp]]
  };
  const auto* tally = state.bad_input();
  const auto spare = state.scratch_offset(0);
  const auto dropped_cell = samplewise(o) ? state.row_spare_offset() : spare;
  const auto tally_of = [&](int64_t kind) { return tally ? state.offset(tally->counts_slot()) + kind : spare; };
  const auto bad_updates = tally_of(static_cast<int64_t>(tally ? tally->kinds().size() : 0));
  const auto& x_buckets = p.buckets;
  const int64_t codes = x_buckets.count() * targets.count() * weights.count();
  std::vector<int64_t> rows;
  for (int64_t code = 0; code < codes; ++code) {
    const auto x = x_buckets.representative(code % x_buckets.count());
    const auto t = targets.representative(code / x_buckets.count() % targets.count());
    const auto w = weights.representative(code / (x_buckets.count() * targets.count()));
    const bool ignored = o.ignore_index() && t == *o.ignore_index();
    const bool bad[] = {!ignored && t != 0 && t != 1, !ignored && (p.scores ? std::isnan(x) : x != 0 && x != 1),
                        !ignored && col.kinds == 3 && !(w >= 0 && w <= std::numeric_limits<double>::max())};
    const bool kept = !ignored && !bad[0] && !bad[1] && !bad[2];
    for (int64_t reading = 0; reading < col.readings; ++reading) {
      for (const double cutoff : {p.cutoffs.probability, p.cutoffs.logit}) {
        const int64_t pred = p.scores ? x > cutoff : x == 1;
        rows.push_back(kept ? cell_of(reading, static_cast<int64_t>(t), pred) : dropped_cell);
      }
    }
    for (int64_t k = 0; k < col.kinds; ++k) rows.push_back(bad[k] ? tally_of(k) : spare);
    rows.push_back(tally && (bad[0] || bad[1] || bad[2]) ? bad_updates : spare);
    const bool inside = !(p.scores && (x < 0 || x > 1 || (std::isnan(x) && nan_makes_logits(state.device()))));
    rows.push_back(inside);
    if (col.readings == 2) rows.push_back(inside || ignored);
    for (int64_t piece = 0; piece < col.pieces(); ++piece) rows.push_back(piece < col.cells() && kept);
  }
  return rows;
}

// Where an update's positions and values are: each entry's pieces (binary: with the table's flag
// columns beside them, zeros in the values), then the tail: the update count's 1, since_bad's
// increment, bad_updates' 1 (at the place the amin gives) and I (and I'; the amin's too, positions
// below 2 with a value of 0). A cell's value is its weight times I under the probability reading and
// times 1 - I under the logit one (I' and 1 - I' in the kept matrix); a tally's is 1.
struct Layout {
  int64_t entries, width, readings;
  int64_t tail() const { return entries * width; }
  int64_t tail_length() const { return kTailPieces + readings; }
  int64_t length() const { return tail() + tail_length(); }
};

// The entries as [rows, labels, rest]: a sample's row, its labels (binary: 1), and the rest of its
// entries under each label (its extra dimensions, flattened in place; 1 where there are none). A
// weight per sample spreads over its row, and samplewise counts are per row. The update's buffers
// hold them in that order, or as [rows, rest, labels] where more of the inputs lie so in memory
// (channels_last multilabel entries): bucketize reads an input laid out as its buffer in place.
struct Grid {
  int64_t rows, labels, rest;
  bool labels_last;
  int64_t entries() const { return rows * labels * rest; }
  // the buffers' dimensions, then `more`
  std::vector<int64_t> dims(std::initializer_list<int64_t> more = {}) const {
    std::vector<int64_t> d{rows, labels_last ? rest : labels, labels_last ? labels : rest};
    d.insert(d.end(), more);
    return d;
  }
  // an input, [rows, labels, rest] (binary: (M,), multilabel without extra dimensions: [rows, labels]),
  // in the buffers' order
  at::Tensor ordered(const at::Tensor& input) const {
    return labels_last && input.dim() == 3 ? input.transpose(1, 2) : input;
  }
  // where a cell's position adds its label: [samples, labels, 1, 1], or labels last [samples, 1,
  // labels, 1] (samples: 1, or the rows)
  std::vector<int64_t> label_dims(int64_t samples) const {
    return labels_last ? std::vector<int64_t>{samples, 1, labels, 1} : std::vector<int64_t>{samples, labels, 1, 1};
  }
};

// Whether `input`, [rows, labels, rest], lies labels last in memory and not as it is.
bool lies_labels_last(const at::Tensor& input) {
  return input.dim() == 3 && !input.is_contiguous() && input.transpose(1, 2).is_contiguous();
}

Grid grid_of(const ClassificationBatch& b) {
  const auto& t = b.target;
  if (t.dim() == 1) return {b.samples, 1, t.size(0) / b.samples, false};  // binary: (N * X,) entries
  if (t.dim() == 2) return {t.size(0), t.size(1), 1, false};
  // how many inputs each order reads in place (a weight per sample, (N,), either)
  int64_t labels_last = 0, as_they_are = 0;
  const auto tell = [&](const at::Tensor& input) {
    labels_last += lies_labels_last(input);
    as_they_are += input.is_contiguous();
  };
  tell(b.preds), tell(t);
  if (b.weight && !b.weight_per_sample()) tell(*b.weight);
  return {t.size(0), t.size(1), t.size(2), labels_last > as_they_are};
}

// The inputs in the buffers' order (Grid::ordered), made once an update.
struct Ordered {
  at::Tensor scores, targets, weights;  // weights: undefined where there are none
  Ordered(const Grid& g, const ClassificationBatch& b)
      : scores(g.ordered(b.preds)),
        targets(g.ordered(b.target)),
        weights(b.weight ? g.ordered(*b.weight) : at::Tensor()) {}
};

struct Buffers {
  at::Tensor scores, targets, weights, codes, looked, index, values, labels, readings;
  // where an input is strided (a column of a wider tensor, a transpose), its copy, laid out as
  // bucketize reads it (see read_as_laid_out)
  at::Tensor scores_copy, targets_copy, weights_copy;
};

// Room for `input` laid out as bucketize reads it, where it is not (none where it is).
at::Tensor copy_room(const at::Tensor& input) {
  return input.is_contiguous() ? at::Tensor() : at::empty(input.sizes(), input.options());
}

// `input` where bucketize reads it without a copy of its own (it copies a strided input itself, with
// a warning: an allocation and a kernel that the update's ops would not show): as it is, or copied
// into `room` (one op).
const at::Tensor& read_as_laid_out(const at::Tensor& input, const at::Tensor& room) {
  if (!room.defined()) return input;
  room.copy_(input);
  return room;
}

// What a kept cell's position adds to its row's place, [1, L, 1, 1]: its label; samplewise
// [N, L, 1, 1]: its label and its sample's row (labels last: [1 or N, 1, L, 1]).
at::Tensor cell_places(const MetricState& state, const Grid& g, const ClassificationOptions& o,
                       const at::TensorOptions& longs) {
  if (!samplewise(o)) return at::arange(g.labels, longs).view(g.label_dims(1));
  std::vector<int64_t> places;
  for (int64_t row = 0; row < g.rows; ++row) {
    for (int64_t label = 0; label < g.labels; ++label) places.push_back(row * state.row_width() + label);
  }
  return upload(places, longs).view(g.label_dims(g.rows));
}

// The bounds and the table, made for the predictions', targets' and weights' (or no weights') dtypes.
void make_table(MetricState& state, const ClassificationBatch& b, const ClassificationOptions& o, const Predictions& p,
                const TargetBuckets& targets, const Buckets& weights, const Columns& col, bool adds_places) {
  const auto longs = b.target.options().dtype(at::kLong);
  const int64_t codes = p.buckets.count() * targets.count() * weights.count();
  state.scratch(kScoreBounds) = upload(p.buckets.bounds, b.preds.options());
  state.scratch(kTargetBounds) = upload(targets.bounds, b.target.options());
  state.scratch(kWeightBounds) = b.weight ? upload(weights.bounds, b.weight->options()) : at::Tensor();
  const auto rows = upload(table(state, o, p, targets, weights, col), longs).view({codes, col.count()});
  state.scratch(kTable) = adds_places ? rows : rows.narrow(1, 0, col.cell_flags()).contiguous();
  // the readings' weights [I, 1 - I] are A + B * I
  const auto counts = longs.dtype(state.count_dtype());
  state.scratch(kReadingsA) = upload(std::vector<int64_t>{0, 1}, counts);
  state.scratch(kReadingsB) = upload(std::vector<int64_t>{1, -1}, counts);
}

Buffers buffers(MetricState& state, const ClassificationBatch& b, const ClassificationOptions& o, const Columns& col,
                const Layout& layout, const Grid& g, const Ordered& in, bool adds_places) {
  const auto& t = b.target;
  const int64_t samples = samplewise(o) ? b.samples : 0;
  // (a weight is one per sample or one per entry: its buckets' shape)
  const int64_t weight_dims = b.weight ? b.weight->dim() : 0, weights = b.weight ? b.weight->numel() : 0;
  // (and what decides each input's copy: its layout and dtype; (N, L) and (N, L, 1) share a grid, not
  // their buffers' shapes)
  const std::vector<int64_t> key{g.rows,
                                 g.labels,
                                 g.rest,
                                 t.dim(),
                                 static_cast<int64_t>(b.preds.scalar_type()),
                                 static_cast<int64_t>(t.scalar_type()),
                                 weight_dims,
                                 weights,
                                 weight_dtype_key(b),
                                 samples,
                                 g.labels_last,
                                 in.scores.is_contiguous(),
                                 in.targets.is_contiguous(),
                                 in.weights.defined() && in.weights.is_contiguous()};
  make_for_key(state, kKey, key, [&] {
    const auto longs = t.options().dtype(at::kLong);
    const auto counts = longs.dtype(state.count_dtype());
    const auto spare = state.scratch_offset(0);
    state.scratch(kScoreBuckets) = at::empty(in.scores.sizes(), longs);
    state.scratch(kTargetBuckets) = at::empty(in.targets.sizes(), longs);
    state.scratch(kWeightBuckets) = b.weight ? at::empty(in.weights.sizes(), longs) : at::Tensor();
    state.scratch(kCodes) = at::empty(in.targets.sizes(), longs);
    state.scratch(kScoresCopy) = copy_room(in.scores);
    state.scratch(kTargetsCopy) = copy_room(in.targets);
    state.scratch(kWeightsCopy) = b.weight ? copy_room(in.weights) : at::Tensor();
    state.scratch(kLooked) = adds_places ? at::empty(g.dims({col.count()}), longs) : at::Tensor();
    auto tail = tail_positions(state, spare);
    tail.resize(layout.tail_length(), 0);  // I's (and I''s), written by each update
    auto positions = at::empty({layout.length()}, longs);
    positions.narrow(0, layout.tail(), layout.tail_length()).copy_(upload(tail, longs));
    state.scratch(kIndex) = positions;
    auto values = at::zeros({layout.length()}, counts);
    auto tail_values = std::vector<int64_t>{1, 0, 1};
    tail_values.resize(layout.tail_length(), 0);
    values.narrow(0, layout.tail(), layout.tail_length()).copy_(upload(tail_values, counts));
    auto pieces = values.narrow(0, 0, layout.tail()).view({layout.entries, layout.width});
    pieces.narrow(1, col.cells(), col.kinds).fill_(1);  // a tally counts the entry
    // labels: I is 1, the probability reading's cell counts
    pieces.narrow(1, 0, col.cells()).view({layout.entries, col.readings, 2}).select(2, 0).fill_(1);
    state.scratch(kValues) = values;
    state.scratch(kLabels) = adds_places ? cell_places(state, g, o, longs) : at::Tensor();
    // labels: I is 1, so the readings are A + B, made once here
    const auto& a = state.scratch(kReadingsA);
    const auto& bb = state.scratch(kReadingsB);
    state.scratch(kReadings) = !b.weight  ? at::Tensor()
                               : b.scores ? at::empty({col.readings, 2}, counts)
                                          : (a + bb).repeat({col.readings, 1});
  });
  return {state.scratch(kScoreBuckets), state.scratch(kTargetBuckets), state.scratch(kWeightBuckets),
          state.scratch(kCodes),        state.scratch(kLooked),        state.scratch(kIndex),
          state.scratch(kValues),       state.scratch(kLabels),        state.scratch(kReadings),
          state.scratch(kScoresCopy),   state.scratch(kTargetsCopy),   state.scratch(kWeightsCopy)};
}

// The one put_ into the count buffer; samplewise, the cells' into the rows the state gains for the
// batch's samples, the kinds' flags and the tail's into the count buffer.
void add_pieces(MetricState& state, const ClassificationBatch& b, const ClassificationOptions& o, const Buffers& buf,
                const Layout& layout, const Columns& col) {
  const auto& counts = state.count_buffer();
  if (!samplewise(o)) return void(counts.put_(buf.index, buf.values, /*accumulate=*/true));
  const auto pieces = [&](const at::Tensor& t, int64_t first, int64_t n) {
    return t.narrow(0, 0, layout.tail()).view({layout.entries, layout.width}).narrow(1, first, n);
  };
  state.grow_rows(b.samples).put_(pieces(buf.index, 0, col.cells()), pieces(buf.values, 0, col.cells()),
                                  /*accumulate=*/true);
  counts.put_(pieces(buf.index, col.cells(), col.kinds), pieces(buf.values, col.cells(), col.kinds),
              /*accumulate=*/true);
  const auto tail = layout.tail_length();
  counts.put_(buf.index.narrow(0, layout.tail(), tail), buf.values.narrow(0, layout.tail(), tail), /*accumulate=*/true);
}

}  // namespace

void count_entries_on_aten(MetricState& state, const ClassificationBatch& b, const ClassificationOptions& o) {
  register_missing_meta_kernels();
  const auto& t = b.target;
  const auto g = grid_of(b);
  const bool adds_places = t.dim() > 1 || samplewise(o);  // the cells' positions add labels or samples
  const Columns col{b.weight ? 3 : 2, layout_of(state) == CountLayout::PerClassAndKeptMatrix ? 2 : 1};
  const auto p = predictions(b, o);
  const auto targets = target_buckets(o, t.scalar_type());
  const auto weights = weight_buckets(b.weight);
  const std::vector<int64_t> table_key{static_cast<int64_t>(b.preds.scalar_type()), b.scores,
                                       static_cast<int64_t>(t.scalar_type()), weight_dtype_key(b)};
  make_for_key(state, kTableKey, table_key, [&] { make_table(state, b, o, p, targets, weights, col, adds_places); });
  const Layout layout{g.entries(), adds_places ? col.pieces() : col.cell_flags(), col.readings};
  const Ordered in(g, b);
  auto buf = buffers(state, b, o, col, layout, g, in, adds_places);

  // each entry's code: its score's bucket + its target's (+ its weight's), in mixed radix
  at::bucketize_out(buf.scores, read_as_laid_out(in.scores, buf.scores_copy), state.scratch(kScoreBounds), false,
                    p.buckets.right);
  at::bucketize_out(buf.targets, read_as_laid_out(in.targets, buf.targets_copy), state.scratch(kTargetBounds), false,
                    /*right=*/true);
  at::add_out(buf.codes, buf.scores, buf.targets, p.buckets.count());
  if (b.weight) {
    at::bucketize_out(buf.weights, read_as_laid_out(in.weights, buf.weights_copy), state.scratch(kWeightBounds), false,
                      weights.right);
    // (a row's weight, or each entry's)
    buf.codes.view({g.rows, -1}).add_(buf.weights.view({g.rows, -1}), p.buckets.count() * targets.count());
  }

  // the codes' pieces: positions (plus the label or the sample, for a cell) and flags
  auto head = buf.index.narrow(0, 0, layout.tail()).view(g.dims({layout.width}));
  at::Tensor flags;
  if (adds_places) {
    auto looked = buf.looked.view({g.entries(), col.count()});
    at::gather_out(looked, state.scratch(kTable), 0, buf.codes.view({-1, 1}).expand_as(looked));
    at::addcmul_out(head, buf.looked.narrow(3, 0, col.pieces()), buf.looked.narrow(3, col.cell_flags(), col.pieces()),
                    buf.labels);
    flags = buf.looked.narrow(3, col.flags(), col.flag_count());
  } else {
    auto looked = head.view({g.entries(), col.cell_flags()});
    at::gather_out(looked, state.scratch(kTable), 0, buf.codes.view({-1, 1}).expand_as(looked));
    flags = head.narrow(3, col.flags(), col.flag_count());
  }
  // [where bad_updates' 1 goes, I (, I')] into the index's tail, then since_bad's increment
  auto bad_and_inside = buf.index.narrow(0, layout.tail() + 2, col.flag_count());
  at::amin_out(bad_and_inside, flags, {0, 1, 2});
  if (state.bad_input()) count_since_bad(state, buf.values[layout.tail() + 1]);

  // the cells' values: [I, 1 - I] (, [I', 1 - I']), times the weight (labels without weights keep
  // theirs: I is 1)
  auto cells = buf.values.narrow(0, 0, layout.tail())
                   .view(g.dims({layout.width}))
                   .narrow(3, 0, col.cells())
                   .view(g.dims({col.readings, 2}));
  const auto inside = buf.index.narrow(0, layout.tail() + 3, col.readings).view({col.readings, 1});
  const auto& a = state.scratch(kReadingsA);
  const auto& bb = state.scratch(kReadingsB);
  if (!b.weight) {
    if (b.scores) at::addcmul_out(cells, a.expand_as(cells), bb, inside);
  } else {
    auto readings = buf.readings;
    if (b.scores) at::addcmul_out(readings, a, bb, inside);
    const auto w =
        b.weight_per_sample() ? b.weight->view({g.rows, 1, 1, 1, 1}) : in.weights.view(g.dims({1, 1}));
    at::mul_out(cells, w.expand(g.dims({1, 1})), readings);
  }
  add_pieces(state, b, o, buf, layout, col);
}

}  // namespace metrics::detail
