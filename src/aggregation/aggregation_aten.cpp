// Aggregators off the CPU fast path. An update writes what it adds (its count, totals and bad-input
// tally) into one row of a per-metric delta allocated once, then adds that row to the packed state
// with one compensated add: a fixed, small number of ops, the same from one update to the next
// (bench/launch_bench.py counts them).

#include "kernels.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include <metrics/backend.h>

#include "../aten_masks.h"
#include "../aten_scratch.h"
#include "../meta_kernels.h"
#include "aggregation_cpu.h"

namespace metrics::detail {

namespace {

// The state's scratch tensors (MetricState::scratch): the delta of each kind of update (each kind
// writes its own places; views of the update rows the metric reserved behind the state in the
// count buffer, see reserve_update_rows), the rows a weighted update sums, and constants made once
// with fill ops.
enum Scratch {
  kScalarWeight, kTensorWeight, kHostValue, kExtremum, kLowBound, kHighBound, kZeroRow, kBatchSize, kBatchSizeKey,
  kRowLow, kRowHigh, kRowBase, kReplacements, kCounted, kCountedKey
};
constexpr int64_t kDeltaKinds = kExtremum + 1;

// The last entry in the state's count dtype that an update adds to: the tally's last, or the count.
size_t last_count_slot(const MetricState& state) {
  return state.bad_input() ? state.bad_input()->first_slot() : 0;
}

// Places in a delta row, which mirrors the count buffer from its start (the update count at 0): up
// to the compensation in a weighted sum, up to the tally's last entry in an extremum.
struct DeltaLayout {
  int64_t length = 0;
  int64_t totals = 0;
  int64_t kinds = -1;  // the tally's kinds; the last of them counts every bad entry of the update
  int64_t kind_count = 0;
  int64_t bad_updates = -1;
  int64_t since_bad = -1;
  int64_t extremum = -1;  // an extremum's place in the row, if any: its delta, -0.0, keeps a -0.0 extremum
};

DeltaLayout counted_layout(const MetricState& state) {
  DeltaLayout layout;
  const auto last = last_count_slot(state);
  layout.length = state.offset(last) + state.numel(last);
  if (const auto* tally = state.bad_input()) {
    layout.kinds = state.offset(tally->counts_slot());
    layout.kind_count = static_cast<int64_t>(tally->kinds().size());
    layout.bad_updates = bad_updates_offset(state);
    layout.since_bad = tally->since_bad_offset();
  }
  return layout;
}

DeltaLayout layout_of(const MetricState& state, WeightedSumSlots slots) {
  auto layout = counted_layout(state);
  layout.totals = state.offset(slots.total);
  layout.length = state.offset(slots.compensation);
  return layout;
}

// The float64 delta of updates of `kind`, (2, length), in the update rows: row 0 is what an update
// adds; it starts as 1 at 0 (the update count's place), -0.0 at the extremum's and 0 elsewhere,
// and each update rewrites the places it adds to. Row 1 is compensated_add's: it receives what
// each addition rounds off.
at::Tensor delta_of(MetricState& state, Scratch kind, const DeltaLayout& layout, int64_t rows) {
  auto& delta = state.scratch(kind);
  if (!delta.defined()) {
    delta = state.count_buffer().narrow(0, rows + kind * 2 * layout.length, 2 * layout.length).view({2, layout.length});
    delta.zero_();
    delta[0][0].fill_(1);
    if (layout.extremum >= 0) delta[0][layout.extremum].fill_(-0.0);
  }
  return delta;
}

// A float64 constant with one entry per row, on the state's device, made on first use.
at::Tensor per_row_constant(MetricState& state, Scratch kind, std::initializer_list<double> values) {
  return state.scratch(kind, [&] {
    return upload(std::vector<double>(values), at::TensorOptions().dtype(at::kDouble).device(state.device()));
  });
}

// A (1,) float64 zero (a row that sets the dtype ops compute in).
at::Tensor zero_row(MetricState& state) { return per_row_constant(state, kZeroRow, {0.0}); }

// (2, 1) float64 bounds [-inf, 1] and [inf, 1]: clamping a value expanded to two rows between them
// gives the value and, in row 1, 1 where it is not NaN (NaN stays NaN).
std::pair<at::Tensor, at::Tensor> value_and_one_bounds(MetricState& state) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  return {per_row_constant(state, kLowBound, {-kInf, 1.0}).view({2, 1}),
          per_row_constant(state, kHighBound, {kInf, 1.0}).view({2, 1})};
}

bool takes_cpu_fast_path(const at::Tensor& value, const ValueArg& weight) {
  return cpu_fast_path_enabled() && value.is_cpu() && (!weight.is_tensor() || weight.tensor().is_cpu());
}

// `t` as the fast path reads it, its memory in order: a strided, expanded or negative-bit view
// (x.conj().imag) is copied so, one pass, where the ATen path's temporaries would take several times
// the input's memory and round otherwise. (Dispatches nothing for a contiguous input.)
at::Tensor in_order(const at::Tensor& t) { return t.is_neg() ? t.resolve_neg().contiguous() : t.contiguous(); }

// A weight in order, broadcast to the value's shape (expanded, then copied by in_order).
at::Tensor weight_in_order(const at::Tensor& weight, const at::Tensor& value) {
  return in_order(weight.sizes() == value.sizes() ? weight : weight.expand_as(value));
}

// A host value as a `dtype` value, rounded as the CPU path's store rounds it: beyond float32's range
// it is +-inf, where ATen's checked conversion would throw. (Replacements beyond the state's range
// are refused up front.)
double as_state_scalar(double v, at::ScalarType dtype) {
  if (dtype != at::kFloat || !(std::abs(v) > std::numeric_limits<float>::max())) return v;
  return std::copysign(std::numeric_limits<double>::infinity(), v);
}

// Ends an update whose bad entries the host counted, by kind.
void finish(MetricState& state, const NanPolicy& policy, c10::ArrayRef<int64_t> bad) {
  if (policy.counts()) return state.finish_update(bad);
  state.finish_update();
}

// rows = [total; compensation] += [b; e], where b is delta's row 0 and e = b - (t - total) with
// t = total + b is what that addition rounds off (exact where |total| >= |b|, Fast2Sum), written
// into delta's row 1. total + b rounds as t does. Where t is not finite e is NaN, and
// compensated_totals leaves it out. Four ops whatever the width.
void compensated_add(const at::Tensor& rows, const at::Tensor& delta) {
  const auto total = rows.select(0, 0);
  const auto b = delta.select(0, 0);
  const auto t = total + b;
  auto e = delta.select(0, 1);
  at::sub_out(e, b, t - total);
  rows.add_(delta);
}

// Adds a weighted sum's delta (count, totals, tally in row 0) to its state, compensated.
void apply_weighted_sum_delta(MetricState& state, WeightedSumSlots slots, const DeltaLayout& layout,
                              const at::Tensor& delta) {
  compensated_add(state.span(0, slots.compensation).view({2, layout.length}), delta);
}

// The tally's part of an update whose row already holds its bad entries by kind (the last kind
// counting them all): since_bad += min(bad_updates, 1), bad_updates as the update began, and
// bad_updates += min(bad, 1). One clamp of [bad_updates in the state, bad in the row] into the
// row's [since_bad, bad_updates]: the row lies behind the state in the count buffer, so one strided
// view reaches both (BadInput says why since_bad stands for the first bad update).
void tally(MetricState& state, const at::Tensor& row, const DeltaLayout& layout) {
  const auto& buffer = state.count_buffer();
  const auto base = buffer.storage_offset();
  const auto at_row = row.storage_offset() - base;
  const auto bad = at_row + layout.kinds + layout.kind_count - 1;
  const auto counted = buffer.as_strided({2}, {bad - layout.bad_updates}, base + layout.bad_updates);
  auto written = buffer.as_strided({2}, {layout.bad_updates - layout.since_bad}, base + at_row + layout.since_bad);
  at::clamp_max_out(written, counted, 1);
}

// The batch size `n` repeated for each of the tally's kinds, as a float64 tensor on the state's
// device, filled again only when it changes (a host-side key remembers it): consecutive batches of
// one size dispatch the same ops, and no host number reaches an op (a CPU scalar tensor is copied
// to the device on some PyTorch versions).
at::Tensor batch_size(MetricState& state, int64_t n, int64_t kinds) {
  auto& size = state.scratch(kBatchSize);
  make_for_key(state, kBatchSizeKey, {n}, [&] {
    if (!size.defined()) size = at::empty({kinds}, at::TensorOptions().dtype(at::kDouble).device(state.device()));
    size.fill_(static_cast<double>(n));
  });
  return size;
}

// at::nansum_out over `dim` in float64. LibTorch alone has no meta kernel for nansum (Python
// registers one): on meta without it the same shapes come from a masked sum.
void nansum_out(at::Tensor out, const at::Tensor& x, int64_t dim) {
  static const bool meta_kernel = has_meta_kernel("aten::nansum", "out");
  if (x.is_meta() && !meta_kernel) {
    at::sum_out(out, x.masked_fill(nan_mask(x), 0), dim, false, at::kDouble);
    return;
  }
  at::nansum_out(out, x, dim, false, at::kDouble);
}

// x with `fill` in place of its NaNs, infinities kept: one op (masked_fill's copy and fill are two
// kernels).
at::Tensor nan_filled(const at::Tensor& x, double fill) {
  register_missing_meta_kernels();
  constexpr double kInf = std::numeric_limits<double>::infinity();
  return at::nan_to_num(x, fill, kInf, -kInf);
}

// Σ x (and, for width 2, the number of entries) into `totals`, NaN included.
void sum_all(MetricState& state, at::Tensor totals, const at::Tensor& x) {
  if (totals.numel() == 1) {
    at::sum_out(totals, x, 0, false, at::kDouble);
    return;
  }
  const auto ones = value_and_one_bounds(state).first.select(0, 1);
  at::sum_out(totals, at::stack({x, ones.expand_as(x)}), 1, false, at::kDouble);
}

// The delta of a batch `x` (1-D) with a finite host weight `w` (1 under Replace) into `row`, and
// where the policy counts, the bad entries by kind: NaN values are the only bad entries, so every
// kind (cumulative: NaN values, then NaN or infinite weights) counts them.
void delta_with_host_weight(MetricState& state, const at::Tensor& row, const DeltaLayout& layout, int64_t width,
                            const at::Tensor& x, double w, const NanPolicy& policy) {
  auto totals = width == 1 ? row.select(0, layout.totals) : row.narrow(0, layout.totals, width);
  auto kinds = policy.counts() ? row.narrow(0, layout.kinds, layout.kind_count) : at::Tensor();
  if (!policy.checks()) {
    sum_all(state, totals, x);
  } else if (policy.strategy == NanStrategy::Replace) {
    const auto xd = x.scalar_type() == at::kDouble ? x : x.to(at::kDouble);
    sum_all(state, totals, nan_filled(xd, policy.replacement));
  } else if (width == 2) {
    // [x; 1 where x is not NaN] in one op; nansum gives (Σ x, entries kept)
    const auto [low, high] = value_and_one_bounds(state);
    nansum_out(totals, at::clamp(x.expand({2, x.numel()}), low, high), 1);
    if (kinds.defined()) at::sub_out(kinds, batch_size(state, x.numel(), layout.kind_count), totals.select(0, 1));
  } else {
    nansum_out(totals, x, 0);
    if (kinds.defined()) at::sum_out(kinds, nan_mask(x).expand({layout.kind_count, x.numel()}), 1, false, at::kDouble);
  }
  if (w != 1.0) totals.mul_(w);
}

// `constant` (k,) viewed as (k, 1, ..., 1), to broadcast one entry over each row of a (k, x's shape).
at::Tensor as_rows(const at::Tensor& constant, int64_t dims) {
  std::vector<int64_t> sizes(static_cast<size_t>(dims) + 1, 1);
  sizes[0] = constant.size(0);
  return constant.view(sizes);
}

// Three float64 rows of x's shape, in two ops: [x * w; w; h], where the weight row is NaN where x is
// NaN and h is 0 where the entry is kept and NaN where it is bad (x NaN, w NaN or infinite). A clamp
// of x expanded to three rows between [-inf, 1, 0] and [inf, 1, 0] gives [x; 1; 0] (1 and 0 NaN
// where x is NaN: a float64 copy of x and two NaN masks), and addcmul([0, -0, 0], that, w) the rows
// (0 * w is NaN where w is not finite; -0 + w is w, even -0). x * w is exact for float32 inputs, and
// rounds as today's addcmul(0, x, w) for float64 ones; x = inf with w = 0 is kept and gives NaN.
at::Tensor product_rows(MetricState& state, const at::Tensor& x, const at::Tensor& weights) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const auto low = per_row_constant(state, kRowLow, {-kInf, 1.0, 0.0});
  const auto high = per_row_constant(state, kRowHigh, {kInf, 1.0, 0.0});
  const auto base = per_row_constant(state, kRowBase, {0.0, -0.0, 0.0});
  std::vector<int64_t> sizes{3};
  sizes.insert(sizes.end(), x.sizes().begin(), x.sizes().end());
  const auto values = at::clamp(x.unsqueeze(0).expand(sizes), as_rows(low, x.dim()), as_rows(high, x.dim()));
  return at::addcmul(as_rows(base, x.dim()), values, weights);
}

// Σ over each row of `rows` (k, ...) into `out` (k,), in float64.
void sum_rows(at::Tensor out, const at::Tensor& rows) {
  at::sum_out(out, rows.reshape({out.size(0), -1}), 1, false, at::kDouble);
}

// The rows a counting weighted update sums into its delta row in one op: from the first of its
// totals and kinds to the last, in the row's order, the rows between them (since_bad, or the
// tally's other entries) zeros. Made once per shape of `x` (a host-side key remembers it).
at::Tensor counted_rows(MetricState& state, const DeltaLayout& layout, int64_t width, const at::Tensor& x) {
  auto& rows = state.scratch(kCounted);
  make_for_key(state, kCountedKey, x.sizes().vec(), [&] {
    const auto first = std::min(layout.totals, layout.kinds);
    const auto last = std::max(layout.totals + width, layout.kinds + layout.kind_count);
    std::vector<int64_t> sizes{last - first};
    sizes.insert(sizes.end(), x.sizes().begin(), x.sizes().end());
    rows = at::zeros(sizes, x.options().dtype(at::kDouble));
  });
  return rows;
}

// The delta of a batch `x` with weights `weights` (broadcast to it) into `row`: NaN values or
// weights and infinite weights are bad (dropped, or replaced under Replace). The products are
// float64: exact for float32 inputs, as on the CPU. With the tally (Warn, Error): clamp, addcmul,
// heaviside, ne, one sum for the totals and the kinds (NaN, then NaN or infinite weight).
void delta_with_weights(MetricState& state, const at::Tensor& row, const DeltaLayout& layout, int64_t width,
                        const at::Tensor& x, const at::Tensor& weights, const NanPolicy& policy) {
  const auto totals = row.narrow(0, layout.totals, width);
  if (!policy.checks()) {
    const auto w = weights.expand_as(x);
    const auto product = at::addcmul(zero_row(state), x, w).view(x.sizes());
    return sum_rows(totals, width == 1 ? product.unsqueeze(0) : at::stack({product, w}));
  }
  const auto rows = product_rows(state, x, weights);
  const auto values = rows.narrow(0, 0, width);
  const auto kept = rows.select(0, 2).expand_as(values);  // 0 where kept, NaN where bad
  if (policy.strategy == NanStrategy::Replace) {
    const auto replacements = per_row_constant(state, kReplacements, {policy.replacement, 1.0});
    return sum_rows(totals, select(nan_mask(kept), as_rows(replacements.narrow(0, 0, width), x.dim()), values));
  }
  // heaviside(h, v) is v where h is 0 and 0 where h is NaN: the kept entries' values, NaN included
  if (!policy.counts()) return sum_rows(totals, at::heaviside(kept, values));
  // w != w is an entry of the NaN kind (x or w NaN), h != h a bad one (NaN, or an infinite weight)
  const auto counted = counted_rows(state, layout, width, x);
  const auto first = std::min(layout.totals, layout.kinds);
  auto head = counted.narrow(0, layout.totals - first, width);
  auto flags = counted.narrow(0, layout.kinds - first, 2);
  at::heaviside_out(head, kept, values);
  at::ne_out(flags, rows.narrow(0, 1, 2), rows.narrow(0, 1, 2));
  sum_rows(row.narrow(0, first, counted.size(0)), counted);
}

void weighted_sum_on_device(MetricState& state, WeightedSumSlots slots, const at::Tensor& value,
                            const ValueArg& weight, const NanPolicy& policy) {
  const auto width = state[slots.total].numel();
  const auto layout = layout_of(state, slots);
  const double host_weight = weight.is_tensor() ? 1.0 : weight.scalar();
  // A host weight that is not finite, or that Replace must set to 1 at NaNs, takes the tensor path.
  const bool host = !weight.is_tensor() && std::isfinite(host_weight) &&
                    (policy.strategy != NanStrategy::Replace || host_weight == 1.0);
  const auto delta = delta_of(state, host ? kScalarWeight : kTensorWeight, layout, slots.rows);
  const auto row = delta.select(0, 0);
  if (host) {
    delta_with_host_weight(state, row, layout, width, value.reshape({-1}), host_weight, policy);
  } else {
    const auto w = weight.is_tensor() ? weight.tensor() : at::full({}, host_weight, value.options().dtype(at::kDouble));
    delta_with_weights(state, row, layout, width, value, w, policy);
  }
  if (policy.counts()) tally(state, row, layout);
  apply_weighted_sum_delta(state, slots, layout, delta);
}

// Where the totals' own part of the compensation starts in it (see WeightedSumSlots).
int64_t compensation_offset(const MetricState& state, WeightedSumSlots slots) { return state.offset(slots.total); }

void add_host_batch_on_cpu(MetricState& state, WeightedSumSlots slots, const CompensatedSum* batch) {
  auto& total = state[slots.total];
  cpu::add_compensated(total, state[slots.compensation], compensation_offset(state, slots), batch, total.size(0));
}

void weighted_sum_of_host_value(MetricState& state, WeightedSumSlots slots, double x, double w,
                                const NanPolicy& policy) {
  const bool nan = std::isnan(x) || std::isnan(w);
  if (policy.checks() && (nan || std::isinf(w))) {
    const int64_t kinds[2] = {nan, !nan};
    if (policy.strategy != NanStrategy::Replace) return finish(state, policy, kinds);
    x = policy.replacement;
    w = 1.0;
  }
  const CompensatedSum batch[2] = {{x * w}, {w}};
  if (state.device().is_cpu()) {
    add_host_batch_on_cpu(state, slots, batch);
    return state.finish_update();
  }
  const auto width = state[slots.total].numel();
  const auto layout = layout_of(state, slots);
  const auto delta = delta_of(state, kHostValue, layout, slots.rows);
  const auto row = delta.select(0, 0);
  for (int64_t k = 0; k < width; ++k) row[layout.totals + k].fill_(batch[k].sum);
  if (state.bad_input()) count_since_bad(state, row.select(0, layout.since_bad));
  apply_weighted_sum_delta(state, slots, layout, delta);
}

void fold_extremum_on_device(at::Tensor& extremum, const cpu::ExtremumBatch& batch, bool is_max) {
  const double v = batch.saw_nan ? std::numeric_limits<double>::quiet_NaN() : batch.value;
  const auto other = at::full({1}, as_state_scalar(v, extremum.scalar_type()), extremum.options());
  is_max ? at::maximum_out(extremum, extremum, other) : at::minimum_out(extremum, extremum, other);
}

void extremum_on_device(MetricState& state, ExtremumSlots slots, bool is_max, const at::Tensor& value,
                        const NanPolicy& policy) {
  auto& extremum = state[slots.extremum];
  const auto counted = state.span(0, last_count_slot(state));
  auto layout = counted_layout(state);
  if (extremum.scalar_type() == state.count_dtype() && state.offset(slots.extremum) < layout.length) {
    layout.extremum = state.offset(slots.extremum);  // (counted.add_ below adds its delta)
  }
  const auto row = delta_of(state, kExtremum, layout, slots.rows).select(0, 0);
  auto x = value.reshape({-1});
  at::Tensor nan;
  if (policy.checks()) {
    const bool replace = policy.strategy == NanStrategy::Replace;
    if (replace && x.scalar_type() != extremum.scalar_type()) x = x.to(extremum.scalar_type());
    const double identity = is_max ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
    if (policy.counts()) nan = nan_mask(x);
    x = nan_filled(x, replace ? policy.replacement : identity);
  }
  const auto batch = is_max ? x.amax() : x.amin();
  is_max ? at::maximum_out(extremum, extremum, batch) : at::minimum_out(extremum, extremum, batch);
  if (policy.counts()) {
    auto nans = row.select(0, layout.kinds);
    at::sum_out(nans, nan, 0, false, at::kDouble);
    tally(state, row, layout);
  }
  counted.add_(row);
}

}  // namespace

void accumulate_weighted_sum(MetricState& state, WeightedSumSlots slots, const ValueArg& value,
                             const ValueArg& weight, const NanPolicy& policy) {
  if (!value.is_tensor()) {
    return weighted_sum_of_host_value(state, slots, value.scalar(), weight.scalar(), policy);
  }
  const auto& x = value.tensor();
  if (x.numel() == 0) return state.finish_update();
  if (!takes_cpu_fast_path(x, weight)) return weighted_sum_on_device(state, slots, x, weight, policy);
  const auto w = weight.is_tensor() ? weight_in_order(weight.tensor(), x) : at::Tensor();
  const auto batch = cpu::weighted_sum(in_order(x), w.defined() ? &w : nullptr, weight.scalar(), policy);
  const CompensatedSum sums[2] = {batch.weighted_sum, batch.weight_sum};
  add_host_batch_on_cpu(state, slots, sums);
  finish(state, policy, {batch.nan_positions, batch.infinite_weights});
}

void accumulate_extremum(MetricState& state, ExtremumSlots slots, bool is_max, const ValueArg& value,
                         const NanPolicy& policy) {
  const bool host_value = !value.is_tensor();
  if (!host_value && value.tensor().numel() == 0) return state.finish_update();
  if (!host_value && !takes_cpu_fast_path(value.tensor(), 1.0)) {
    return extremum_on_device(state, slots, is_max, value.tensor(), policy);
  }
  const auto batch = host_value ? cpu::extremum(value.scalar(), is_max, policy)
                                : cpu::extremum(in_order(value.tensor()), is_max, policy);
  auto& extremum = state[slots.extremum];
  extremum.is_cpu() ? cpu::fold_extremum(extremum, batch, is_max) : fold_extremum_on_device(extremum, batch, is_max);
  finish(state, policy, batch.nan_positions);
}

int64_t reserve_update_rows(MetricState& state, const WeightedSumSlots& slots) {
  return state.add_scratch(kDeltaKinds * 2 * layout_of(state, slots).length);
}

int64_t reserve_update_rows(MetricState& state) {
  return state.add_scratch(kDeltaKinds * 2 * counted_layout(state).length);
}

at::Tensor compensated_totals(const MetricState& state, WeightedSumSlots slots) {
  const auto& e = state.value_entries();  // settled once
  const auto& total = e[slots.total].tensor;
  const auto& compensation = e[slots.compensation].tensor;
  return with_compensation(total, compensation.narrow(0, compensation_offset(state, slots), total.numel()));
}

at::Tensor with_compensation(const at::Tensor& total, const at::Tensor& compensation) {
  return select(non_finite_mask(total), total, total + compensation);
}

}  // namespace metrics::detail
