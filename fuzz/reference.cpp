#include "reference.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "fuzz_check.h"

namespace fuzz {
namespace {

using metrics::NanStrategy;

// Beyond this a sum may overflow float64 in one order and not in another.
constexpr long double kSumLimit = 1e300L;

bool same_or_both_nan(long double a, long double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

// |got - want| within tol; non-finite values must match exactly (NaN matching NaN).
bool close(long double got, long double want, long double tol) {
  if (!std::isfinite(want) || !std::isfinite(got)) return same_or_both_nan(got, want);
  return std::fabs(got - want) <= tol;
}

std::vector<double> as_doubles(const at::Tensor& t) {
  const auto host = t.to(at::kDouble).contiguous();
  return std::vector<double>(host.data_ptr<double>(), host.data_ptr<double>() + host.numel());
}

std::vector<int64_t> as_longs(const at::Tensor& t) {
  const auto host = t.to(at::kLong).contiguous();
  return std::vector<int64_t>(host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + host.numel());
}

// Labels from a target tensor, or multiclass preds shaped like it: a float label (binary and
// multilabel targets take {0., 1.}) keeps its whole numbers; any other float (0.5, NaN, inf, beyond
// int64) is `not_a_label`, which no class or ignore_index has, and which differs between preds and
// targets (without num_classes, labels are compared as they are, and two such never match).
std::vector<int64_t> whole_labels(const at::Tensor& t, int64_t not_a_label) {
  if (!t.is_floating_point()) return as_longs(t);
  std::vector<int64_t> labels;
  for (double v : as_doubles(t)) {
    const bool whole = std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9.2e18;
    labels.push_back(whole ? static_cast<int64_t>(v) : not_a_label);
  }
  return labels;
}

constexpr int64_t kNotATarget = std::numeric_limits<int64_t>::min(), kNotAPrediction = kNotATarget + 1;

// NaN, negative and infinite weights are bad input.
bool weight_ok(double w) { return w >= 0 && w <= std::numeric_limits<double>::max(); }

bool is_extremum(AggKind kind) { return kind == AggKind::Min || kind == AggKind::Max; }

}  // namespace

// ---------------------------------------------------------------------------------------- tally

void Tally::record(const std::vector<int64_t>& update_counts, bool tracked) {
  const int64_t index = updates++;
  if (!tracked) return;
  if (counts.empty()) counts.assign(update_counts.size(), 0);
  bool any = false;
  for (size_t k = 0; k < update_counts.size(); ++k) {
    counts[k] += update_counts[k];
    any = any || update_counts[k] != 0;
  }
  if (!any) return;
  ++bad_updates;
  if (first_bad < 0) first_bad = index;
}

void Tally::merge(const Tally& other, bool appended) {
  if (counts.empty()) counts.assign(other.counts.size(), 0);
  for (size_t k = 0; k < other.counts.size(); ++k) counts[k] += other.counts[k];
  bad_updates += other.bad_updates;
  if (other.first_bad >= 0) {
    const int64_t theirs = appended ? other.first_bad + updates : other.first_bad;
    first_bad = first_bad < 0 ? theirs : std::min(first_bad, theirs);
  }
  updates += other.updates;
}

void expect_tally(const metrics::Metric& metric, const Tally& tally) {
  FUZZ_CHECK(metric.update_count() == tally.updates, metric.name(), ": update_count ", metric.update_count(),
             ", expected ", tally.updates);
  const auto report = metric.bad_input_report();
  FUZZ_CHECK(report.bad_updates == tally.bad_updates && report.first_bad_update == tally.first_bad,
             metric.name(), ": bad input in ", report.bad_updates, " updates, first at ", report.first_bad_update,
             "; expected ", tally.bad_updates, ", first at ", tally.first_bad);
  if (!metric.state().tracks_bad_input()) return;
  FUZZ_CHECK(report.counts.size() == tally.counts.size() || tally.counts.empty(), metric.name(), ": ",
             report.counts.size(), " bad-input kinds");
  for (size_t k = 0; k < report.counts.size(); ++k) {
    const int64_t want = tally.counts.empty() ? 0 : tally.counts[k];
    FUZZ_CHECK(report.counts[k].second == want, metric.name(), ": ", report.counts[k].second, " ",
               report.counts[k].first, ", expected ", want);
  }
}

// ---------------------------------------------------------------------------------- aggregation

AggReference::AggReference(const Config& c) : config(c) { reset(); }

void AggReference::reset() {
  tally = Tally{};
  sum_wx = sum_w = scale_wx = scale_w = 0;
  extremum = config.agg == AggKind::Max ? -std::numeric_limits<double>::infinity()
                                        : std::numeric_limits<double>::infinity();
  comparable = true;
}

void AggReference::update(const at::Tensor& value, double scalar, const at::Tensor& weight, double weight_scalar) {
  const auto& policy = config.agg_options.nan_policy();
  const bool float32 = config.agg_options.dtype() == at::kFloat;
  const bool extremum_kind = is_extremum(config.agg);
  const auto xs = value.defined() ? as_doubles(value) : std::vector<double>{scalar};
  std::vector<double> ws(xs.size(), weight_scalar);
  if (weight.defined() && !extremum_kind) {
    ws = as_doubles(weight.expand(value.defined() ? value.sizes() : c10::IntArrayRef{}));
  }
  int64_t nans = 0, infinite_weights = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    double x = xs[i], w = extremum_kind ? 1.0 : ws[i];
    // Bad: a NaN value or weight, or (Mean, Sum) an infinite weight.
    const bool nan = std::isnan(x) || std::isnan(w);
    const bool infinite = std::isinf(w);
    if (policy.checks() && (nan || infinite)) {
      if (policy.strategy != NanStrategy::Replace) {
        nans += nan;
        infinite_weights += !nan;
        continue;
      }
      x = policy.replacement;
      w = 1.0;
    }
    if (extremum_kind) {
      const double v = float32 ? static_cast<double>(static_cast<float>(x)) : x;
      if (std::isnan(v) || std::isnan(extremum)) {
        extremum = std::numeric_limits<double>::quiet_NaN();
      } else {
        extremum = config.agg == AggKind::Max ? std::max(extremum, v) : std::min(extremum, v);
      }
      continue;
    }
    const long double product = static_cast<long double>(x) * w;
    sum_wx += product;
    sum_w += w;
    if (std::isfinite(product)) scale_wx += std::fabs(product);
    if (std::isfinite(w)) scale_w += std::fabs(w);
  }
  // Beyond this a partial sum may overflow in one order and not in another.
  if (scale_wx > kSumLimit || scale_w > kSumLimit) comparable = false;
  tally.record(extremum_kind ? std::vector<int64_t>{nans} : std::vector<int64_t>{nans, infinite_weights},
               policy.counts());
}

void AggReference::merge(const AggReference& other, bool appended) {
  tally.merge(other.tally, appended);
  sum_wx += other.sum_wx;
  sum_w += other.sum_w;
  scale_wx += other.scale_wx;
  scale_w += other.scale_w;
  comparable = comparable && other.comparable;
  if (scale_wx > kSumLimit || scale_w > kSumLimit) comparable = false;
  if (std::isnan(other.extremum) || std::isnan(extremum)) {
    extremum = std::numeric_limits<double>::quiet_NaN();
  } else {
    extremum = config.agg == AggKind::Max ? std::max(extremum, other.extremum) : std::min(extremum, other.extremum);
  }
}

namespace {

// Mean and Sum accumulate in float64 whatever their dtype; a float32 one rounds its value.
constexpr long double kStateRtol = 1e-12L, kStateAtol = 1e-300L;
long double value_rtol(const Config& c) { return c.agg_options.dtype() == at::kFloat ? 1e-5L : kStateRtol; }
long double value_atol(const Config& c) { return c.agg_options.dtype() == at::kFloat ? 1e-30L : kStateAtol; }
// A value beyond this may overflow the value's dtype.
long double value_limit(const Config& c) { return c.agg_options.dtype() == at::kFloat ? 1e37L : kSumLimit; }

}  // namespace

void AggReference::expect_state(const metrics::Metric& metric) const {
  expect_tally(metric, tally);
  const auto dict = metric.state_dict();
  if (is_extremum(config.agg)) {
    const auto got = as_doubles(dict.at(config.agg == AggKind::Max ? "max_value" : "min_value"))[0];
    FUZZ_CHECK(same_or_both_nan(got, extremum), metric.name(), ": state holds ", got, ", expected ", extremum);
    return;
  }
  if (!comparable) return;
  const auto total = as_doubles(dict.at("total"));
  const auto compensation = as_doubles(dict.at("compensation"));
  // The compensation covers the packed row, where the totals follow the update count; where a total
  // is not finite its compensation is NaN and left out (compensated_totals).
  const auto compensated = [&](size_t k) {
    return std::isfinite(total[k]) ? static_cast<long double>(total[k]) + compensation[1 + k]
                                   : static_cast<long double>(total[k]);
  };
  const long double wx = compensated(0);
  FUZZ_CHECK(close(wx, sum_wx, kStateRtol * scale_wx + kStateAtol), metric.name(), ": sum of w*x is ",
             static_cast<double>(wx), ", expected ", static_cast<double>(sum_wx), " (scale ",
             static_cast<double>(scale_wx), ")");
  if (total.size() < 2) return;
  const long double w = compensated(1);
  FUZZ_CHECK(close(w, sum_w, kStateRtol * scale_w + kStateAtol), metric.name(), ": sum of weights is ",
             static_cast<double>(w), ", expected ", static_cast<double>(sum_w));
}

void AggReference::expect_value(const at::Tensor& value) const {
  FUZZ_CHECK(value.dim() == 0 && value.scalar_type() == config.agg_options.dtype(), "value is ",
             value.scalar_type(), value.sizes(), ", expected a ", config.agg_options.dtype(), " scalar");
  const long double got = value.to(at::kDouble).item<double>();
  if (is_extremum(config.agg)) {
    FUZZ_CHECK(same_or_both_nan(got, extremum), "value ", static_cast<double>(got), ", expected ", extremum);
    return;
  }
  if (!comparable) return;
  const long double rtol = value_rtol(config), atol = value_atol(config);
  if (config.agg == AggKind::Sum) {
    if (std::fabs(sum_wx) > value_limit(config)) return;
    FUZZ_CHECK(close(got, sum_wx, rtol * scale_wx + atol), "value ", static_cast<double>(got), ", expected ",
               static_cast<double>(sum_wx));
    return;
  }
  // The mean is ill-conditioned where the weights cancel: compare only where they do not.
  if (!std::isfinite(sum_w) || std::fabs(sum_w) <= 1e3L * (rtol * scale_w + atol)) return;
  const long double want = sum_wx / sum_w;
  if (std::fabs(want) > value_limit(config)) return;
  const long double tol = (rtol * scale_wx + atol) / std::fabs(sum_w) + std::fabs(want) * 4 * rtol * scale_w / std::fabs(sum_w);
  FUZZ_CHECK(close(got, want, tol), "mean ", static_cast<double>(got), ", expected ", static_cast<double>(want));
}

}  // namespace fuzz

// ------------------------------------------------------------------------------- classification

namespace fuzz {
namespace {

using metrics::Average;
using metrics::Normalize;
using metrics::Task;

bool multiclass(const Config& c) { return c.cls_options.task() == Task::Multiclass; }
bool unknown_classes(const Config& c) { return multiclass(c) && c.cls_options.num_classes() == metrics::kUnknownClasses; }

// `x` rounded as a tensor of `dtype` stores it.
double in_dtype(double x, at::ScalarType dtype) {
  switch (dtype) {
    case at::kDouble:
      return x;
    case at::kHalf:
      return static_cast<float>(c10::Half(static_cast<float>(x)));
    case at::kBFloat16:
      return static_cast<float>(c10::BFloat16(static_cast<float>(x)));
    default:
      return static_cast<float>(x);
  }
}

// Whether a score is a positive prediction, as TorchMetrics makes it in the scores' dtype: a
// logit's sigmoid (in float32 below float64) rounded to the dtype, or the probability, above the
// threshold rounded to the dtype.
bool positive(double x, double threshold, at::ScalarType dtype, bool logits) {
  if (logits) {
    x = dtype == at::kDouble ? 1.0 / (1.0 + std::exp(-x))
                             : in_dtype(1.0f / (1.0f + std::exp(-static_cast<float>(x))), dtype);
  }
  return x > in_dtype(threshold, dtype);
}

// The first maximum of a row, -1 if the row has a NaN; the target instead when top_k > 1 ranks
// it among the k highest (ties towards the lower index).
int64_t predicted_class(const std::vector<double>& row, int64_t target, int64_t top_k) {
  int64_t best = 0;
  for (size_t c = 0; c < row.size(); ++c) {
    if (std::isnan(row[c])) return -1;
    if (row[c] > row[best]) best = static_cast<int64_t>(c);
  }
  if (top_k > 1 && target >= 0) {
    int64_t ahead = 0;
    for (size_t c = 0; c < row.size(); ++c) {
      ahead += row[c] > row[target] || (row[c] == row[target] && static_cast<int64_t>(c) < target);
    }
    if (ahead < top_k) return target;
  }
  return best;
}

}  // namespace

ClsReference::ClsReference(const Config& c)
    : config(c),
      classes(unknown_classes(c) ? 1 : c.cls_options.num_classes()),
      matrix(multiclass(c) && !unknown_classes(c)),
      samplewise(c.cls_options.multidim_average() == metrics::MultidimAverage::Samplewise) {
  reset();
}

void ClsReference::reset() {
  tally = Tally{};
  blocks = samplewise ? 0 : 1;
  cells.assign(blocks * block_size(), 0.0L);
  const auto& o = config.cls_options;
  const bool reads_kept = o.task() == Task::Binary && config.cls == ClsKind::ConfusionMatrix && o.ignore_index();
  kept_cells.assign(reads_kept ? cells.size() : 0, 0.0L);
  scale = 0;
  comparable = true;
}

// Past 1e300 the float64 counts may overflow in one order of additions and not in another.
void ClsReference::add(size_t cell, double weight) {
  cells[cell] += weight;
  scale += weight;
  if (scale > 1e300L) comparable = false;
}

size_t ClsReference::at(const Batch& b, int64_t sample, size_t cell) const {
  return samplewise ? (b.first_block + sample) * block_size() + cell : cell;
}

void ClsReference::update(const at::Tensor& preds, const at::Tensor& target, const c10::optional<at::Tensor>& weight) {
  const auto& o = config.cls_options;
  Batch b;
  b.target = whole_labels(target, kNotATarget);
  b.samples = target.size(0);
  b.weighted = weight.has_value();
  if (weight) {
    b.weight = as_doubles(*weight);
    b.per_sample = weight->sizes() != target.sizes();
  }
  b.scores = at::isFloatingType(preds.scalar_type()) && !(o.task() == Task::Multiclass && preds.dim() == target.dim());
  if (b.scores) {
    b.score = as_doubles(preds);
    b.score_dtype = preds.scalar_type();
    // a NaN is not inside [0, 1] either: on the CPU it makes the batch logits (nan_makes_logits)
    const auto outside = [](double x) { return !(x >= 0 && x <= 1); };
    b.logits = std::any_of(b.score.begin(), b.score.end(), outside);
    if (!kept_cells.empty()) {
      for (size_t i = 0; i < b.score.size(); ++i) {  // (binary: a score per target)
        b.kept_logits |= outside(b.score[i]) && b.target[i] != *o.ignore_index();
      }
    }
  } else {
    b.label = whole_labels(preds, kNotAPrediction);
  }
  if (b.scores && preds.dim() == target.dim() + 1) b.width = preds.size(1);
  if (samplewise) {  // a block for every sample of the batch, counted or not
    b.first_block = blocks;
    blocks += b.samples;
    cells.resize(blocks * block_size(), 0.0L);
  }
  std::vector<int64_t> bad(3, 0);
  if (!b.target.empty()) {
    if (unknown_classes(config)) {
      count_unknown_classes(b, bad);
    } else if (o.task() == Task::Multiclass) {
      count_rows(b, bad);
    } else {
      count_entries(b, o.threshold(), bad);
    }
  }
  tally.record(bad, o.validate_args());
}

double ClsReference::Batch::weight_of(int64_t flat) const {
  if (!weighted) return 1.0;
  if (!per_sample) return weight[flat];
  return weight[flat / (static_cast<int64_t>(target.size()) / samples)];
}

void ClsReference::count_rows(const Batch& b, std::vector<int64_t>& bad) {
  const auto& o = config.cls_options;
  const int64_t rows = static_cast<int64_t>(b.target.size());
  const int64_t rest = rows / b.samples;  // positions per sample beyond the batch dimension
  std::vector<double> row(classes);
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t t = b.target[i];
    if (o.ignore_index() && t == *o.ignore_index()) continue;
    const bool target_ok = t >= 0 && t < classes;
    const int64_t n = i / rest, r = i % rest;
    int64_t p;
    if (b.scores) {
      for (int64_t c = 0; c < classes; ++c) row[c] = b.score[(n * classes + c) * rest + r];
      p = predicted_class(row, target_ok ? t : -1, o.top_k());
    } else {
      p = b.label[i] >= 0 && b.label[i] < classes ? b.label[i] : -1;
    }
    const double w = b.weight_of(i);
    const bool w_ok = !b.weighted || weight_ok(w);
    bad[0] += !target_ok;
    bad[1] += p < 0;
    bad[2] += !w_ok;
    if (target_ok && p >= 0 && w_ok) add(at(b, n, t * classes + p), w);
  }
}

// TorchMetrics' num_classes=None: no label is out of range, a row is right or wrong; a wrong one
// is a false positive and a false negative of the one class, and -1 true negative (tn = n - tp -
// fp - fn over the rows kept). Only NaN scores and bad weights are bad input.
void ClsReference::count_unknown_classes(const Batch& b, std::vector<int64_t>& bad) {
  const auto& o = config.cls_options;
  const int64_t rows = static_cast<int64_t>(b.target.size());
  const int64_t rest = rows / b.samples;
  std::vector<double> row(b.width);
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t t = b.target[i];
    if (o.ignore_index() && t == *o.ignore_index()) continue;
    int64_t p = b.scores ? -1 : b.label[i];
    bool pred_ok = true;
    if (b.scores) {
      const int64_t n = i / rest, r = i % rest;
      for (int64_t c = 0; c < b.width; ++c) row[c] = b.score[(n * b.width + c) * rest + r];
      p = predicted_class(row, -1, 1);
      pred_ok = p >= 0;
    }
    const double w = b.weight_of(i);
    const bool w_ok = !b.weighted || weight_ok(w);
    bad[1] += !pred_ok;
    bad[2] += !w_ok;
    if (!pred_ok || !w_ok) continue;
    if (p == t) {
      add(3, w);  // tp
    } else {
      add(1, w);  // fp
      cells[2] += w;  // fn
      cells[0] -= w;  // tn
    }
  }
}

void ClsReference::count_entries(const Batch& b, double threshold, std::vector<int64_t>& bad) {
  const auto& o = config.cls_options;
  const int64_t entries = static_cast<int64_t>(b.target.size());
  const int64_t labels = o.task() == Task::Binary ? 1 : classes;
  const int64_t rest = entries / (b.samples * labels);  // multilabel: positions beyond (N, L)
  for (int64_t i = 0; i < entries; ++i) {
    const int64_t t = b.target[i];
    if (o.ignore_index() && t == *o.ignore_index()) continue;
    const int64_t label = labels == 1 ? 0 : (i / rest) % labels;
    const int64_t sample = i / (rest * labels);
    const bool target_ok = t == 0 || t == 1;
    const bool pred_ok = b.scores ? !std::isnan(b.score[i]) : b.label[i] == 0 || b.label[i] == 1;
    const auto predicted = [&](bool logits) {
      return b.scores ? positive(b.score[i], threshold, b.score_dtype, logits) : b.label[i] == 1;
    };
    const double w = b.weight_of(i);
    const bool w_ok = !b.weighted || weight_ok(w);
    bad[0] += !target_ok;
    bad[1] += !pred_ok;
    bad[2] += !w_ok;
    if (!(target_ok && pred_ok && w_ok)) continue;
    add(at(b, sample, label * 4 + 2 * t + predicted(b.logits)), w);
    // (binary, never samplewise: one block)
    if (!kept_cells.empty()) kept_cells[label * 4 + 2 * t + predicted(b.kept_logits)] += w;
  }
}

void ClsReference::merge(const ClsReference& other, bool appended) {
  tally.merge(other.tally, appended);
  if (samplewise) {  // the other's samples after these (Reduction::Cat), in either kind of merge
    cells.insert(cells.end(), other.cells.begin(), other.cells.end());
    blocks += other.blocks;
  } else {
    for (size_t i = 0; i < cells.size(); ++i) cells[i] += other.cells[i];
    for (size_t i = 0; i < kept_cells.size(); ++i) kept_cells[i] += other.kept_cells[i];
  }
  scale += other.scale;
  comparable = comparable && other.comparable && scale <= 1e300L;
}

ClsReference::Counts ClsReference::counts() const {
  Counts all;
  for (int64_t block = 0; block < blocks; ++block) {
    const auto c = counts_of(block);
    for (auto [to, from] : {std::pair{&all.tp, &c.tp}, {&all.fp, &c.fp}, {&all.tn, &c.tn}, {&all.fn, &c.fn}}) {
      to->insert(to->end(), from->begin(), from->end());
    }
  }
  return all;
}

ClsReference::Counts ClsReference::counts_of(int64_t block) const {
  const long double* block_cells = cells.data() + block * block_size();
  Counts c{std::vector<long double>(classes), std::vector<long double>(classes), std::vector<long double>(classes),
           std::vector<long double>(classes)};
  if (!matrix) {
    for (int64_t l = 0; l < classes; ++l) {
      const long double* cell = block_cells + l * 4;
      c.tn[l] = cell[0], c.fp[l] = cell[1], c.fn[l] = cell[2], c.tp[l] = cell[3];
    }
    return c;
  }
  for (int64_t t = 0; t < classes; ++t) {
    for (int64_t p = 0; p < classes; ++p) {
      const long double n = block_cells[t * classes + p];
      for (int64_t k = 0; k < classes; ++k) {
        if (t == k && p == k) c.tp[k] += n;
        else if (p == k) c.fp[k] += n;
        else if (t == k) c.fn[k] += n;
        else c.tn[k] += n;
      }
    }
  }
  return c;
}

long double ClsReference::count_tolerance() const { return config.cls_options.weighted() ? 1e-10L * scale : 0; }

void ClsReference::expect_state(const metrics::ClassificationMetric& metric) const {
  expect_tally(metric, tally);
  if (!comparable) return;
  const auto want = counts();
  const auto got = metric.stat_counts();
  const std::pair<const char*, std::pair<const at::Tensor*, const std::vector<long double>*>> parts[] = {
      {"tp", {&got.tp, &want.tp}}, {"fp", {&got.fp, &want.fp}}, {"tn", {&got.tn, &want.tn}}, {"fn", {&got.fn, &want.fn}}};
  for (const auto& [name, pair] : parts) {
    const auto values = as_doubles(*pair.first);
    FUZZ_CHECK(values.size() == pair.second->size(), metric.name(), ": ", name, " has ", values.size(), " classes");
    for (size_t k = 0; k < values.size(); ++k) {
      FUZZ_CHECK(close(values[k], (*pair.second)[k], count_tolerance()), metric.name(), ": ", name, "[", k, "] is ",
                 values[k], ", expected ", static_cast<double>((*pair.second)[k]), "; all: ", *pair.first);
    }
  }
  if (metric.layout() != metrics::CountLayout::Matrix) return;
  const auto confmat = as_doubles(metric.confusion_matrix());
  for (size_t i = 0; i < cells.size(); ++i) {
    FUZZ_CHECK(close(confmat[i], cells[i], count_tolerance()), metric.name(), ": confmat cell ", i, " is ", confmat[i],
               ", expected ", static_cast<double>(cells[i]));
  }
}

}  // namespace fuzz
