// The classification reference's values: the reductions from counts to scores as
// <metrics/functional/classification.h> documents them, in long double.

#include <ATen/ATen.h>

#include <cmath>

#include "fuzz_check.h"
#include "reference.h"

namespace fuzz {
namespace {

using metrics::Average;
using metrics::Normalize;
using metrics::Task;
using Vec = std::vector<long double>;

struct Expected {
  std::vector<int64_t> shape;
  Vec values;
  at::ScalarType dtype;
};

long double divide(long double num, long double den, long double zero_division) {
  return den == 0 ? zero_division : num / den;
}

long double sum(const Vec& v) {
  long double s = 0;
  for (auto x : v) s += x;
  return s;
}

Vec plus(const Vec& a, const Vec& b) {
  Vec out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = a[i] + b[i];
  return out;
}

Vec ratio(const Vec& num, const Vec& den, long double zero_division) {
  Vec out(num.size());
  for (size_t i = 0; i < num.size(); ++i) out[i] = divide(num[i], den[i], zero_division);
  return out;
}

// Macro: the mean over the classes seen (tp + fp + fn > 0, or tp + fn > 0 with top_k > 1; every
// label for multilabel); weighted: by support tp + fn; none: the scores.
Expected averaged(const Vec& score, const ClsReference::Counts& c, const metrics::ClassificationOptions& o,
                  int64_t top_k) {
  const int64_t classes = static_cast<int64_t>(score.size());
  if (o.average() == Average::None) return {{classes}, score, at::kFloat};
  Vec weights(score.size(), 1.0L);
  if (o.average() == Average::Weighted) {
    weights = plus(c.tp, c.fn);
  } else if (o.task() != Task::Multilabel) {
    for (size_t k = 0; k < score.size(); ++k) {
      const long double seen = top_k == 1 ? c.tp[k] + c.fp[k] + c.fn[k] : c.tp[k] + c.fn[k];
      if (seen == 0) weights[k] = 0;
    }
  }
  long double total = 0;
  for (size_t k = 0; k < score.size(); ++k) total += weights[k] * score[k];
  return {{}, {divide(total, sum(weights), 0)}, at::kFloat};
}

// One ratio per class, its micro form from the summed counts, combined as options say.
Expected ratio_score(const Vec& num, const Vec& den, long double zero_division, const ClsReference::Counts& c,
                     const metrics::ClassificationOptions& o, int64_t top_k) {
  if (o.task() == Task::Binary) return {{}, {divide(num[0], den[0], zero_division)}, at::kFloat};
  if (o.average() == Average::Micro) return {{}, {divide(sum(num), sum(den), zero_division)}, at::kFloat};
  return averaged(ratio(num, den, zero_division), c, o, top_k);
}

Expected accuracy(const ClsReference::Counts& c, const metrics::ClassificationOptions& o) {
  const auto all = plus(plus(c.tp, c.tn), plus(c.fp, c.fn));
  if (o.task() == Task::Multiclass) return ratio_score(c.tp, plus(c.tp, c.fn), 0, c, o, o.top_k());
  return ratio_score(plus(c.tp, c.tn), all, 0, c, o, o.top_k());
}

Expected fbeta(const ClsReference::Counts& c, double beta, const metrics::ClassificationOptions& o) {
  const long double b2 = static_cast<long double>(beta) * beta;
  Vec num(c.tp.size()), den(c.tp.size());
  for (size_t k = 0; k < num.size(); ++k) {
    num[k] = (1 + b2) * c.tp[k];
    den[k] = (1 + b2) * c.tp[k] + b2 * c.fn[k] + c.fp[k];
  }
  if (o.task() != Task::Binary && o.average() == Average::Micro) {
    const long double tp = sum(c.tp), fp = sum(c.fp), fn = sum(c.fn);
    return {{}, {divide((1 + b2) * tp, (1 + b2) * tp + b2 * fn + fp, o.zero_division())}, at::kFloat};
  }
  return ratio_score(num, den, o.zero_division(), c, o, /*top_k=*/1);
}

Expected stat_scores(const ClsReference::Counts& c, const metrics::ClassificationOptions& o, at::ScalarType counts) {
  const int64_t classes = static_cast<int64_t>(c.tp.size());
  Vec table;  // [C, 5]
  for (int64_t k = 0; k < classes; ++k) {
    for (auto v : {c.tp[k], c.fp[k], c.tn[k], c.fn[k], c.tp[k] + c.fn[k]}) table.push_back(v);
  }
  if (o.task() == Task::Binary) return {{5}, table, counts};
  if (o.average() == Average::None) return {{classes, 5}, table, counts};
  Vec out(5, 0.0L);
  const auto support = plus(c.tp, c.fn);
  const long double total_support = sum(support);
  for (int64_t k = 0; k < classes; ++k) {
    for (int j = 0; j < 5; ++j) {
      const long double v = table[k * 5 + j];
      if (o.average() == Average::Micro) out[j] += v;
      if (o.average() == Average::Macro) out[j] += v / classes;
      if (o.average() == Average::Weighted) out[j] += v * (support[k] / total_support);  // NaN with no support
    }
  }
  return {{5}, out, o.average() == Average::Micro ? counts : at::kFloat};
}

// Rows targets, columns predictions; binary and multilabel [[tn, fp], [fn, tp]] per label.
Expected confusion(const ClsReference& ref, metrics::Normalize normalize, at::ScalarType counts) {
  const auto& o = ref.config.cls_options;
  const int64_t k = o.task() == Task::Multiclass ? ref.classes : 2;
  const int64_t blocks = o.task() == Task::Multilabel ? ref.classes : 1;
  std::vector<int64_t> shape = {k, k};
  if (o.task() == Task::Multilabel) shape.insert(shape.begin(), blocks);
  Vec m = ref.kept_cells.empty() ? ref.cells : ref.kept_cells;
  if (normalize == Normalize::None) return {shape, m, counts};
  for (int64_t b = 0; b < blocks; ++b) {
    long double* block = m.data() + b * k * k;
    Vec rows(k, 0.0L), columns(k, 0.0L);
    for (int64_t i = 0; i < k; ++i) {
      for (int64_t j = 0; j < k; ++j) rows[i] += block[i * k + j], columns[j] += block[i * k + j];
    }
    const long double all = sum(rows);
    for (int64_t i = 0; i < k; ++i) {
      for (int64_t j = 0; j < k; ++j) {
        const long double total = normalize == Normalize::True ? rows[i] : normalize == Normalize::Pred ? columns[j] : all;
        block[i * k + j] = divide(block[i * k + j], total, 0);
      }
    }
  }
  return {shape, m, at::kFloat};
}

// The value of counts `c` (all of the stream's, or one sample's).
Expected value_of(const ClsReference& ref, const ClsReference::Counts& c) {
  const auto& cfg = ref.config;
  const auto& o = cfg.cls_options;
  const auto counts = o.weighted() ? at::kDouble : at::kLong;
  switch (cfg.cls) {
    case ClsKind::StatScores:
      return stat_scores(c, o, counts);
    case ClsKind::Accuracy:
      return accuracy(c, o);
    case ClsKind::Precision:
      return ratio_score(c.tp, plus(c.tp, c.fp), o.zero_division(), c, o, o.top_k());
    case ClsKind::Recall:
      return ratio_score(c.tp, plus(c.tp, c.fn), o.zero_division(), c, o, o.top_k());
    case ClsKind::FBeta:
    case ClsKind::F1:
      return fbeta(c, cfg.cls == ClsKind::F1 ? 1.0 : cfg.beta, o);
    case ClsKind::ConfusionMatrix:
      return confusion(ref, cfg.normalize, counts);
  }
  return {};
}

// Samplewise: each sample's value, stacked along a first dimension of S (the shape and dtype
// from counts of no entries where there is no sample); a binary StatScores squeezes [1, 5] to [5],
// as TorchMetrics.
Expected expected_value(const ClsReference& ref) {
  if (!ref.samplewise) return value_of(ref, ref.counts());
  const Vec none(static_cast<size_t>(ref.classes), 0.0L);
  auto out = value_of(ref, {none, none, none, none});
  out.values.clear();
  out.shape.insert(out.shape.begin(), ref.blocks);
  for (int64_t s = 0; s < ref.blocks; ++s) {
    const auto one = value_of(ref, ref.counts_of(s));
    out.values.insert(out.values.end(), one.values.begin(), one.values.end());
  }
  if (ref.config.cls == ClsKind::StatScores && ref.config.cls_options.task() == Task::Binary && ref.blocks == 1) {
    out.shape = {5};
  }
  return out;
}

}  // namespace

void ClsReference::expect_value(const at::Tensor& value) const {
  const auto want = expected_value(*this);
  FUZZ_CHECK(value.sizes() == at::IntArrayRef(want.shape) && value.scalar_type() == want.dtype, "value is ",
             value.scalar_type(), value.sizes(), ", expected ", want.dtype, at::IntArrayRef(want.shape));
  // float32 values (StatScores' macro mean, for one, is taken in float32) only where the
  // weighted counts stay well inside float32's range.
  if (!comparable || (want.dtype == at::kFloat && scale > 1e30L)) return;
  const auto got = value.to(at::kDouble).contiguous();
  const double* data = got.data_ptr<double>();
  const bool exact = want.dtype == at::kLong;
  for (size_t i = 0; i < want.values.size(); ++i) {
    const long double w = want.values[i];
    const long double tol = exact ? 0 : 2e-6L * std::fabs(w) + 1e-6L + 1e-9L * scale;
    const bool ok = (std::isnan(w) && std::isnan(data[i])) || std::fabs(data[i] - w) <= tol;
    FUZZ_CHECK(ok, "value[", i, "] is ", data[i], ", expected ", static_cast<double>(w), "; value ", value);
  }
}

}  // namespace fuzz
