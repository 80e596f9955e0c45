// Random streams against a brute-force reference written from the specification, on both
// paths, for every task, average and option; and the metric contract on classification metrics.

#include <ATen/ATen.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include <metrics/backend.h>
#include <metrics/classification.h>

#include "metric_contract.h"
#include "test_support.h"

namespace metrics {
namespace {

using testing::generator;
using testing::MetricContract;
using testing::tensors_close;
using Opts = ClassificationOptions;

// ---------------------------------------------------------------- the reference

struct Reference {
  std::vector<double> tp, fp, tn, fn;
  std::vector<double> matrix;  // multiclass: [t * C + p]
  explicit Reference(int64_t classes)
      : tp(classes), fp(classes), tn(classes), fn(classes), matrix(classes * classes) {}
};

std::vector<double> doubles(const at::Tensor& t) {
  const auto d = t.to(at::kDouble).contiguous();
  return std::vector<double>(d.data_ptr<double>(), d.data_ptr<double>() + d.numel());
}

bool ignored(const Opts& o, int64_t t) { return o.ignore_index() && *o.ignore_index() == t; }
bool bad_weight(double w) { return !(w >= 0 && w <= std::numeric_limits<double>::max()); }  // NaN, < 0 or inf

// The k classes with the highest scores, ties to the lower index, by sorting.
std::vector<int64_t> top_classes(const double* row, int64_t classes, int64_t k) {
  std::vector<int64_t> order(classes);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return row[a] > row[b]; });
  order.resize(k);
  return order;
}

void add_sample(Reference& ref, int64_t classes, int64_t t, int64_t p, double w) {
  ref.matrix[t * classes + p] += w;
  for (int64_t c = 0; c < classes; ++c) {
    const bool is_t = c == t, is_p = c == p;
    (is_t && is_p ? ref.tp : is_p ? ref.fp : is_t ? ref.fn : ref.tn)[c] += w;
  }
}

// num_classes unknown: TorchMetrics' micro branch with num_classes 1, tn = 1 * n - (tp + fp + fn).
void add_unknown_classes_sample(Reference& ref, int64_t t, int64_t p, double w) {
  const double wrong = t == p ? 0.0 : w;
  ref.tp[0] += w - wrong;
  ref.fp[0] += wrong;
  ref.fn[0] += wrong;
  ref.tn[0] -= wrong;
}

// preds (N, C, ...) scores or (N, ...) labels, target (N, ...), weight (N,) or empty.
void reference_multiclass(Reference& ref, const Opts& o, const at::Tensor& preds, const at::Tensor& target,
                          const at::Tensor& weight) {
  const bool scores = preds.dim() == target.dim() + 1;
  const bool unknown = o.num_classes() == kUnknownClasses;  // any label, scores of any width
  const int64_t classes = unknown ? (scores ? preds.size(1) : 1) : o.num_classes();
  const auto rows = scores ? preds.movedim(1, -1).reshape({-1, classes}) : preds.reshape({-1});
  const auto x = doubles(rows);
  const auto t_all = doubles(target.reshape({-1}));
  const int64_t per_sample = target.numel() / target.size(0);
  const auto w_all = weight.defined() ? doubles(weight) : std::vector<double>();
  for (size_t m = 0; m < t_all.size(); ++m) {
    const auto t = static_cast<int64_t>(t_all[m]);
    const bool per_entry = w_all.size() == t_all.size();
    const double w = w_all.empty() ? 1.0 : w_all[per_entry ? m : m / per_sample];
    if (ignored(o, t) || (!unknown && (t < 0 || t >= classes)) || bad_weight(w)) continue;
    int64_t p;
    if (scores) {
      const double* row = x.data() + m * classes;
      if (std::any_of(row, row + classes, [](double v) { return std::isnan(v); })) continue;
      const auto top = top_classes(row, classes, o.top_k());
      p = std::find(top.begin(), top.end(), t) != top.end() ? t : top[0];
    } else {
      p = static_cast<int64_t>(x[m]);
      if (!unknown && (p < 0 || p >= classes)) continue;
    }
    unknown ? add_unknown_classes_sample(ref, t, p, w) : add_sample(ref, classes, t, p, w);
  }
}

// Binary (N, ...) or multilabel (N, L, ...) entries.
void reference_entries(Reference& ref, const Opts& o, const at::Tensor& preds, const at::Tensor& target,
                       const at::Tensor& weight) {
  const bool multilabel = o.task() == Task::Multilabel;
  const int64_t labels = o.num_classes();
  const auto to_rows = [&](const at::Tensor& t) { return multilabel ? t.movedim(1, -1).reshape({-1, labels}) : t.reshape({-1, 1}); };
  const auto x = doubles(to_rows(preds));
  const auto t_all = doubles(to_rows(target));
  const bool is_float = preds.is_floating_point();
  // TorchMetrics on the CPU: logits unless every score is inside [0, 1] (a NaN is not)
  const bool logits = is_float && !std::all_of(x.begin(), x.end(), [](double v) { return v >= 0 && v <= 1; });
  std::vector<double> w_all;
  if (weight.defined()) {
    const auto per_row = weight.dim() == 1 && weight.sizes() != target.sizes();
    const auto expanded = per_row ? weight.view({-1, 1}).expand({target.size(0), target.numel() / target.size(0)})
                                        .reshape(multilabel ? at::IntArrayRef{target.size(0), labels, -1} : target.sizes())
                                  : weight;
    w_all = doubles(to_rows(expanded));
  }
  for (size_t i = 0; i < t_all.size(); ++i) {
    const auto t = static_cast<int64_t>(t_all[i]);
    const double w = w_all.empty() ? 1.0 : w_all[i];
    if (ignored(o, t) || (t != 0 && t != 1) || bad_weight(w) || std::isnan(x[i])) continue;
    int64_t p;
    if (!is_float) {
      if (x[i] != 0 && x[i] != 1) continue;
      p = static_cast<int64_t>(x[i]);
    } else if (logits) {
      p = 1.0 / (1.0 + std::exp(-x[i])) > o.threshold();
    } else {
      p = static_cast<float>(x[i]) > static_cast<float>(o.threshold());
    }
    const auto c = static_cast<int64_t>(i % labels);
    (t == 1 && p == 1 ? ref.tp : p == 1 ? ref.fp : t == 1 ? ref.fn : ref.tn)[c] += w;
  }
}

void reference_update(Reference& ref, const Opts& o, const at::Tensor& preds, const at::Tensor& target,
                      const at::Tensor& weight) {
  o.task() == Task::Multiclass ? reference_multiclass(ref, o, preds, target, weight)
                               : reference_entries(ref, o, preds, target, weight);
}

// ---------------------------------------------------------------- reference reductions (the spec)

double ratio(double num, double den, double zero_division) { return den == 0 ? zero_division : num / den; }

enum class Score { Accuracy, Precision, Recall, FBeta };

double class_score(Score s, const Reference& r, size_t c, const Opts& o, double beta) {
  const double tp = r.tp[c], fp = r.fp[c], tn = r.tn[c], fn = r.fn[c];
  switch (s) {
    case Score::Accuracy:
      return o.task() == Task::Multiclass ? ratio(tp, tp + fn, 0) : ratio(tp + tn, tp + tn + fp + fn, 0);
    case Score::Precision:
      return ratio(tp, tp + fp, o.zero_division());
    case Score::Recall:
      return ratio(tp, tp + fn, o.zero_division());
    case Score::FBeta:
      return ratio((1 + beta * beta) * tp, (1 + beta * beta) * tp + beta * beta * fn + fp, o.zero_division());
  }
  return 0;
}

std::vector<double> expected_score(Score s, const Reference& r, const Opts& o, double beta = 1.0) {
  const size_t classes = r.tp.size();
  auto sum = [](const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); };
  if (o.task() == Task::Binary) return {class_score(s, r, 0, o, beta)};
  if (o.average() == Average::Micro) {
    Reference total(1);
    total.tp = {sum(r.tp)};
    total.fp = {sum(r.fp)};
    total.tn = {sum(r.tn)};
    total.fn = {sum(r.fn)};
    return {class_score(s, total, 0, o, beta)};
  }
  std::vector<double> per_class(classes);
  for (size_t c = 0; c < classes; ++c) per_class[c] = class_score(s, r, c, o, beta);
  if (o.average() == Average::None) return per_class;
  double num = 0, den = 0;
  for (size_t c = 0; c < classes; ++c) {
    double w = 1;
    if (o.average() == Average::Weighted) {
      w = r.tp[c] + r.fn[c];
    } else if (o.task() == Task::Multiclass) {
      const bool top1_rule = s == Score::FBeta || o.top_k() == 1;
      w = (top1_rule ? r.tp[c] + r.fp[c] + r.fn[c] : r.tp[c] + r.fn[c]) > 0 ? 1 : 0;
    }
    num += w * per_class[c];
    den += w;
  }
  return {ratio(num, den, 0)};
}

// ---------------------------------------------------------------- random batches

struct StreamSpec {
  std::string name;
  Opts options;
  bool labels = false;     // multiclass preds as labels
  bool extra_dims = false; // (N, C, 3) / (N, 3) inputs
  bool logits = false;     // binary and multilabel scores as logits
  bool dirty = false;      // NaN scores, out-of-range targets, NaN weights (with validate_args off)
  bool per_entry_weight = false;
  int64_t min_rows = 3;       // batches of min_rows to min_rows + 28 rows
  bool float_weight = false;  // float32 weights (else float64)
  bool omit_weight = false;   // a weighted metric updated without weights
  bool ignore_unused = false; // no target takes the ignore_index
  bool bad_weights = false;   // clean scores and targets, and a NaN, an infinite or a negative weight, or a -0.0
};

struct Batch {
  at::Tensor preds, target, weight;
};

Batch make_batch(const StreamSpec& spec, int64_t i) {
  auto gen = generator(90000 + i);
  const auto& o = spec.options;
  const int64_t n = spec.min_rows + (i * 7) % 29;
  // num_classes unknown: scores 1 to 4 classes wide, changing between batches; labels in [-2, 6)
  const bool unknown = o.num_classes() == kUnknownClasses;
  const int64_t k = unknown ? 1 + i % 4 : o.num_classes();
  std::vector<int64_t> shape = {n};
  if (o.task() == Task::Multilabel) shape.push_back(k);
  if (spec.extra_dims) shape.push_back(3);
  Batch b;
  const int64_t target_high = o.task() == Task::Multiclass ? k : 2;
  b.target = unknown ? at::randint(-2, 6, shape, gen, at::kLong) : at::randint(target_high, shape, gen, at::kLong);
  if (o.task() == Task::Multiclass && !spec.labels) {
    auto score_shape = shape;
    score_shape.insert(score_shape.begin() + 1, k);
    b.preds = at::randn(score_shape, gen);
    if (i % 3 == 1) b.preds = b.preds.round();  // ties
  } else if (o.task() == Task::Multiclass) {
    b.preds = unknown ? at::randint(-2, 6, shape, gen, at::kLong) : at::randint(k, shape, gen, at::kLong);
  } else {
    b.preds = spec.logits ? at::randn(shape, gen) * 3 : at::rand(shape, gen);
  }
  if (o.ignore_index() && !spec.ignore_unused) {
    const auto mask = at::rand(shape, gen) < 0.2;
    b.target.masked_fill_(mask, *o.ignore_index());
  }
  if (o.weighted() && !spec.omit_weight) {
    const auto dtype = spec.float_weight ? at::kFloat : at::kDouble;
    b.weight = spec.per_entry_weight ? at::rand(shape, gen, dtype) : at::rand({n}, gen, dtype);
  }
  if (spec.dirty) {
    b.target.view({-1})[0] = o.task() == Task::Multiclass ? k + 3 : 2;
    b.preds.view({-1})[1] = b.preds.is_floating_point() ? at::Scalar(std::nan("")) : at::Scalar(-1);
    if (b.weight.defined()) b.weight.view({-1})[2] = std::nan("");
  }
  if (spec.bad_weights && i < 4) {  // one kind a batch (a -0.0 is a good weight), then a clean batch
    const double inf = std::numeric_limits<double>::infinity();
    b.weight.view({-1})[i] = std::array<double, 4>{std::nan(""), inf, -0.5, -0.0}[i];
  }
  return b;
}

std::vector<StreamSpec> stream_specs() {
  std::vector<StreamSpec> specs = {
      {"Binary", Opts::binary()},
      {"BinaryLogits", Opts::binary(), false, false, true},
      {"BinaryThreshold03", Opts::binary(0.3)},
      {"BinaryIgnore", Opts::binary().ignore_index(-1), false, true},
      {"BinaryWeighted", Opts::binary().weighted(true), false, true, true},
      {"BinaryDirty", Opts::binary().validate_args(false).weighted(true), false, false, false, true},
      {"Multiclass", Opts::multiclass(5)},
      {"MulticlassWide", Opts::multiclass(70)},
      {"MulticlassTwo", Opts::multiclass(2)},
      {"MulticlassTop2", Opts::multiclass(5).top_k(2)},
      {"MulticlassTop3Wide", Opts::multiclass(40).top_k(3)},
      {"MulticlassLabels", Opts::multiclass(5), true},
      {"MulticlassExtraDims", Opts::multiclass(4), false, true},
      {"MulticlassIgnoreInRange", Opts::multiclass(5).ignore_index(2)},
      {"MulticlassIgnoreOutside", Opts::multiclass(5).ignore_index(-100), true},
      {"MulticlassWeighted", Opts::multiclass(6).weighted(true)},
      {"MulticlassWeightedPerPixel", Opts::multiclass(3).weighted(true), false, true, false, false, true},
      {"MulticlassDirty", Opts::multiclass(5).validate_args(false).weighted(true), false, false, false, true},
      {"MulticlassLabelsDirty", Opts::multiclass(5).validate_args(false), true, false, false, true},
      {"Multilabel", Opts::multilabel(4)},
      {"MultilabelLogits", Opts::multilabel(4, 0.7), false, false, true},
      {"MultilabelIgnore", Opts::multilabel(3).ignore_index(-1)},
      {"MultilabelExtraDims", Opts::multilabel(3), false, true},
      {"MultilabelWeighted", Opts::multilabel(5).weighted(true)},
      {"MultilabelWeightedPerEntry", Opts::multilabel(3).weighted(true), false, false, false, false, true},
      {"MultilabelDirty", Opts::multilabel(4).validate_args(false).weighted(true), false, false, true, true},
      // the weighted vector kernels (weighted_entry_counts.h): full blocks of 16 lanes and the rest,
      // float32 and float64 weights, per row and per entry, and none; an ignore_index no target
      // takes (clean batches) and one some do (the general kernel)
      {"BinaryWeightedLong", Opts::binary().weighted(true), false, false, false, false, false, 100, true},
      {"BinaryWeightedLongLogits", Opts::binary(0.3).weighted(true), false, false, true, false, false, 100},
      {"BinaryWeightedLongIgnore", Opts::binary().ignore_index(-1).weighted(true), false, false, false, false, false,
       100, true},
      {"BinaryWeightedNoWeight", Opts::binary().weighted(true), false, false, false, false, false, 100, false, true},
      {"MultilabelWeightedWide", Opts::multilabel(37).weighted(true), false, false, false, false, false, 3, true},
      {"MultilabelWeightedWideLogits", Opts::multilabel(16, 0.3).weighted(true), false, false, true},
      {"MultilabelWeightedWidePerEntry", Opts::multilabel(37).weighted(true), false, false, false, false, true, 3,
       true},
      {"MultilabelWeightedWideIgnoreUnused", Opts::multilabel(20).ignore_index(5).weighted(true), false, false, false,
       false, false, 3, false, false, true},
      {"MultilabelWeightedWideIgnore", Opts::multilabel(20).ignore_index(-1).weighted(true)},
      {"MultilabelWeightedWideDirty", Opts::multilabel(18).validate_args(false).weighted(true), false, false, false,
       true, false, 3, true},
      {"MultilabelWeightedWideNoWeight", Opts::multilabel(33).weighted(true), false, false, false, false, false, 3,
       false, true},
      {"BinaryWeightedLongBadWeights", Opts::binary().validate_args(false).weighted(true), false, false, false, false,
       false, 100, true, false, false, true},
      {"MultilabelWeightedWideBadWeights", Opts::multilabel(37).validate_args(false).weighted(true), false, false,
       false, false, false, 3, false, false, false, true},
      {"MultilabelWeightedWidePerEntryBadWeights", Opts::multilabel(20).validate_args(false).weighted(true), false,
       false, false, false, true, 3, true, false, false, true},
  };
  return specs;
}

class ClassificationStream : public ::testing::TestWithParam<StreamSpec> {};

void expect_values(const at::Tensor& got, const std::vector<double>& want, const std::string& what) {
  const auto want_t = at::tensor(want, at::kDouble).reshape(got.sizes());
  EXPECT_TRUE(tensors_close(got, want_t, 1e-5, 1e-6)) << what;
}

TEST_P(ClassificationStream, CountsAndScoresMatchTheReferenceOnBothPaths) {
  const auto& spec = GetParam();
  for (bool aten : {false, true}) {
    std::unique_ptr<ForceAtenPath> force;
    if (aten) force = std::make_unique<ForceAtenPath>();
    for (auto average : {Average::Micro, Average::Macro, Average::Weighted, Average::None}) {
      for (double zero_division : {0.0, 1.0}) {
        const auto o = Opts(spec.options).average(average).zero_division(zero_division);
        Reference ref(o.num_classes());
        Accuracy accuracy(o);
        Precision precision(o);
        Recall recall(o);
        FBetaScore f2(2.0, o);
        StatScores stat_scores(o);
        ConfusionMatrix confmat(o);
        for (int64_t i = 0; i < 5; ++i) {
          const auto b = make_batch(spec, i);
          const c10::optional<at::Tensor> w = b.weight.defined() ? c10::optional<at::Tensor>(b.weight) : c10::nullopt;
          for (ClassificationMetric* m : std::initializer_list<ClassificationMetric*>{&accuracy, &precision, &recall,
                                                                                     &f2, &stat_scores, &confmat}) {
            m->update(b.preds, b.target, w);
          }
          reference_update(ref, o, b.preds, b.target, b.weight);
        }
        const std::string where = spec.name + (aten ? " aten" : " cpu");
        const auto counts = accuracy.stat_counts();
        expect_values(counts.tp, ref.tp, where + " tp");
        expect_values(counts.fp, ref.fp, where + " fp");
        expect_values(counts.tn, ref.tn, where + " tn");
        expect_values(counts.fn, ref.fn, where + " fn");
        if (o.task() == Task::Multiclass) expect_values(confmat.compute(), ref.matrix, where + " confmat");
        expect_values(accuracy.compute(), expected_score(Score::Accuracy, ref, o), where + " accuracy");
        expect_values(precision.compute(), expected_score(Score::Precision, ref, o), where + " precision");
        expect_values(recall.compute(), expected_score(Score::Recall, ref, o), where + " recall");
        expect_values(f2.compute(), expected_score(Score::FBeta, ref, o, 2.0), where + " f2");
        if (o.task() == Task::Binary || average == Average::Micro) {
          const auto sum = [](const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); };
          expect_values(stat_scores.compute(),
                        {sum(ref.tp), sum(ref.fp), sum(ref.tn), sum(ref.fn), sum(ref.tp) + sum(ref.fn)},
                        where + " stat_scores");
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Classification, ClassificationStream, ::testing::ValuesIn(stream_specs()),
                         [](const auto& info) { return info.param.name; });

// num_classes unknown (TorchMetrics' num_classes=None): micro averaging only, one class.
std::vector<StreamSpec> unknown_classes_specs() {
  const auto o = Opts::multiclass(kUnknownClasses).average(Average::Micro);
  return {
      {"NoClasses", o},
      {"NoClassesLabels", o, true},
      {"NoClassesExtraDims", o, false, true},
      {"NoClassesIgnore", Opts(o).ignore_index(-1), true},
      {"NoClassesIgnoreScores", Opts(o).ignore_index(2)},
      {"NoClassesWeighted", Opts(o).weighted(true)},
      {"NoClassesWeightedPerPixel", Opts(o).weighted(true), false, true, false, false, true},
      {"NoClassesDirty", Opts(o).validate_args(false).weighted(true), false, false, false, true},
      {"NoClassesLabelsDirty", Opts(o).validate_args(false), true, false, false, true},
  };
}

class UnknownClassesStream : public ::testing::TestWithParam<StreamSpec> {};

TEST_P(UnknownClassesStream, CountsAndScoresMatchTheReferenceOnBothPaths) {
  const auto& spec = GetParam();
  for (bool aten : {false, true}) {
    std::unique_ptr<ForceAtenPath> force;
    if (aten) force = std::make_unique<ForceAtenPath>();
    for (double zero_division : {0.0, 1.0}) {
      const auto o = Opts(spec.options).zero_division(zero_division);
      Reference ref(1);
      Accuracy accuracy(o);
      Precision precision(o);
      Recall recall(o);
      FBetaScore f2(2.0, o);
      StatScores stat_scores(o);
      for (int64_t i = 0; i < 5; ++i) {
        const auto b = make_batch(spec, i);
        const c10::optional<at::Tensor> w = b.weight.defined() ? c10::optional<at::Tensor>(b.weight) : c10::nullopt;
        for (ClassificationMetric* m :
             std::initializer_list<ClassificationMetric*>{&accuracy, &precision, &recall, &f2, &stat_scores}) {
          m->update(b.preds, b.target, w);
        }
        reference_update(ref, o, b.preds, b.target, b.weight);
      }
      const std::string where = spec.name + (aten ? " aten" : " cpu");
      expect_values(stat_scores.compute(), {ref.tp[0], ref.fp[0], ref.tn[0], ref.fn[0], ref.tp[0] + ref.fn[0]},
                    where + " stat_scores");
      EXPECT_LE(ref.tn[0], 0.0) << where;  // tn = -wrong, as TorchMetrics counts it
      expect_values(accuracy.compute(), expected_score(Score::Accuracy, ref, o), where + " accuracy");
      expect_values(precision.compute(), expected_score(Score::Precision, ref, o), where + " precision");
      expect_values(recall.compute(), expected_score(Score::Recall, ref, o), where + " recall");
      expect_values(f2.compute(), expected_score(Score::FBeta, ref, o, 2.0), where + " f2");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Classification, UnknownClassesStream, ::testing::ValuesIn(unknown_classes_specs()),
                         [](const auto& info) { return info.param.name; });

// ---------------------------------------------------------------- contract

template <typename M, typename... Extra>
testing::ContractCase contract_case(const StreamSpec& spec, const std::string& metric, Extra... extra) {
  return {metric + spec.name, [=] { return std::make_unique<M>(extra..., spec.options); },
          [spec](Metric& m, int64_t i) {
            const auto b = make_batch(spec, i);
            const c10::optional<at::Tensor> w = b.weight.defined() ? c10::optional<at::Tensor>(b.weight) : c10::nullopt;
            static_cast<ClassificationMetric&>(m).update(b.preds, b.target, w);
          }};
}

std::vector<testing::ContractCase> classification_cases() {
  std::vector<testing::ContractCase> cases;
  for (const auto& spec : stream_specs()) {
    cases.push_back(contract_case<Accuracy>(spec, "Accuracy"));
    cases.push_back(contract_case<ConfusionMatrix>(spec, "ConfusionMatrix"));
  }
  for (const auto& spec : unknown_classes_specs()) cases.push_back(contract_case<Accuracy>(spec, "Accuracy"));
  for (const auto& spec : {stream_specs()[0], stream_specs()[6], stream_specs()[19], unknown_classes_specs()[0]}) {
    cases.push_back(contract_case<Precision>(spec, "Precision"));
    cases.push_back(contract_case<Recall>(spec, "Recall"));
    cases.push_back(contract_case<F1Score>(spec, "F1Score"));
    cases.push_back(contract_case<FBetaScore>(spec, "FBetaScore", 0.5));
    cases.push_back(contract_case<StatScores>(spec, "StatScores"));
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Classification, MetricContract, ::testing::ValuesIn(classification_cases()),
                         testing::contract_case_name);

}  // namespace
}  // namespace metrics
