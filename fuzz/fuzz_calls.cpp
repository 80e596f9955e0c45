#include "fuzz_calls.h"

#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include <metrics/aggregation.h>
#include <metrics/classification.h>

namespace fuzz {
namespace {

using metrics::Average;
using metrics::ClassificationOptions;
using metrics::kUnknownClasses;
using metrics::MultidimAverage;
using metrics::NanPolicy;
using metrics::Normalize;
using metrics::Task;
using metrics::UpdateArgs;
using metrics::ValueArg;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

bool is_float(at::ScalarType t) { return t == at::kFloat || t == at::kDouble || t == at::kHalf || t == at::kBFloat16; }
bool is_integral(at::ScalarType t) { return at::isIntegralType(t, /*includeBool=*/true); }

// A finite host scalar that a float32 state (Min's, Max's) cannot hold: refused as a replacement.
bool beyond_float32(double v, at::ScalarType state) {
  return state == at::kFloat && std::isfinite(v) && std::fabs(v) > std::numeric_limits<float>::max();
}

NanPolicy draw_policy(Source& in) {
  switch (in.range(0, 4)) {
    case 0:
      return NanPolicy::error();
    case 1:
      return NanPolicy::ignore();
    case 2:
      return NanPolicy::disable();
    case 3:
      return NanPolicy::replace(in.score());
    default:
      return NanPolicy::warn();
  }
}

ClassificationOptions draw_classification_options(Source& in) {
  const auto task = in.pick({Task::Binary, Task::Multiclass, Task::Multiclass, Task::Multilabel});
  int64_t k = task == Task::Binary ? 1 : in.range(2, task == Task::Multiclass ? 6 : 5);
  if (task == Task::Multiclass && in.one_in(8)) k = in.range(30, 70);  // the vector argmax paths
  if (in.one_in(48)) k = in.pick<int64_t>({0, 1, 2});
  ClassificationOptions o(task, k);
  o.threshold(in.pick({0.5, 0.5, 0.5, 0.0, 1.0, 0.25, 0.9}));
  if (in.one_in(48)) o.threshold(in.pick({-0.1, 1.5, kNaN}));
  if (task == Task::Multiclass && in.one_in(3)) o.top_k(in.range(2, std::max<int64_t>(2, k)));
  if (in.one_in(48)) o.top_k(in.pick<int64_t>({0, k + 1, 2}));
  if (in.one_in(3)) o.ignore_index(in.pick<int64_t>({-1, 0, 1, 255, k}));
  o.validate_args(!in.one_in(8));
  o.weighted(in.one_in(3));
  o.average(in.pick({Average::Macro, Average::Micro, Average::Weighted, Average::None}));
  o.zero_division(in.pick({0.0, 1.0}));
  if (in.one_in(48)) o.zero_division(0.5);
  // Samplewise, mostly without weights (which it refuses); num_classes unknown, mostly with the
  // micro average and top_k 1 it needs. Where they do not fit, the constructor must refuse them.
  if (in.one_in(4)) {
    o.multidim_average(MultidimAverage::Samplewise);
    if (!in.one_in(8)) o.weighted(false);
  }
  if (task == Task::Multiclass && in.one_in(5)) {
    o.num_classes(kUnknownClasses);
    if (!in.one_in(8)) o.average(Average::Micro).top_k(1).multidim_average(MultidimAverage::Global);
  }
  return o;
}

}  // namespace

Config draw_config(Source& in) {
  Config c;
  c.classification = in.range(0, 2) != 0;
  if (!c.classification) {
    c.agg = in.pick({AggKind::Mean, AggKind::Sum, AggKind::Min, AggKind::Max});
    c.agg_options.nan_policy(draw_policy(in));
    c.agg_options.dtype(in.pick({at::kDouble, at::kDouble, at::kFloat}));
    if (in.one_in(48)) c.agg_options.dtype(in.pick({at::kHalf, at::kLong}));
    return c;
  }
  c.cls = in.pick({ClsKind::StatScores, ClsKind::Accuracy, ClsKind::Precision, ClsKind::Recall, ClsKind::FBeta,
                   ClsKind::F1, ClsKind::ConfusionMatrix});
  c.cls_options = draw_classification_options(in);
  c.beta = in.pick({1.0, 0.5, 2.0, 0.1, 10.0});
  if (in.one_in(48)) c.beta = in.pick({0.0, -1.0, kNaN});
  c.normalize = in.pick({Normalize::None, Normalize::None, Normalize::True, Normalize::Pred, Normalize::All});
  return c;
}

Config foreign_config(Source& in, const Config& config) {
  Config c = config;
  if (!c.classification) {
    if (in.range(0, 1) == 0) {
      c.agg = static_cast<AggKind>((static_cast<int>(c.agg) + in.range(1, 3)) % 4);
    } else {
      c.agg_options.dtype(c.agg_options.dtype() == at::kDouble ? at::kFloat : at::kDouble);
    }
    return c;
  }
  auto& o = c.cls_options;
  switch (in.range(0, 4)) {
    case 0:
      o.validate_args(!o.validate_args());
      break;
    case 1:
      o.weighted(!o.weighted());
      break;
    case 2:
      o.zero_division(o.zero_division() == 0.0 ? 1.0 : 0.0);
      break;
    case 3:  // the other multidim_average, or num_classes known where it was not and the other way
      if (o.task() == Task::Multiclass && in.range(0, 1) == 0) {
        o.num_classes(o.num_classes() == kUnknownClasses ? 3 : kUnknownClasses);
      } else {
        o.multidim_average(o.multidim_average() == MultidimAverage::Global ? MultidimAverage::Samplewise
                                                                           : MultidimAverage::Global);
      }
      break;
    default:
      c.cls = static_cast<ClsKind>((static_cast<int>(c.cls) + in.range(1, 6)) % 7);
      if ((c.cls == ClsKind::FBeta) != (config.cls == ClsKind::FBeta) || c.cls == config.cls) c.cls = config.cls;
      if (c.cls == config.cls) o.validate_args(!o.validate_args());
      break;
  }
  return c;
}

std::string metric_name(const Config& c) {
  if (!c.classification) {
    static const char* const names[] = {"Mean", "Sum", "Min", "Max"};
    return names[static_cast<int>(c.agg)];
  }
  static const char* const names[] = {"StatScores", "Accuracy", "Precision",      "Recall",
                                      "FBetaScore", "F1Score",  "ConfusionMatrix"};
  return metrics::task_prefix(c.cls_options.task()) + names[static_cast<int>(c.cls)];
}

bool options_valid(const Config& c) {
  if (!c.classification) {
    const auto& policy = c.agg_options.nan_policy();
    const auto dtype = c.agg_options.dtype();
    const bool extremum = c.agg == AggKind::Min || c.agg == AggKind::Max;
    return (dtype == at::kDouble || dtype == at::kFloat) &&
           !(extremum && policy.strategy == metrics::NanStrategy::Replace && beyond_float32(policy.replacement, dtype));
  }
  const auto& o = c.cls_options;
  const auto k = o.num_classes();
  const bool samplewise = o.multidim_average() == MultidimAverage::Samplewise;
  // num_classes unknown: multiclass, micro-averaged scores of the counts only, over the whole stream
  const bool unknown_ok = o.task() == Task::Multiclass && k == kUnknownClasses && o.average() == Average::Micro &&
                          o.top_k() == 1 && !samplewise && c.cls != ClsKind::ConfusionMatrix;
  const bool classes_ok = o.task() == Task::Binary ? k == 1 : k >= 2 || unknown_ok;
  const bool top_k_ok = o.top_k() >= 1 && (o.top_k() == 1 || (o.task() == Task::Multiclass && o.top_k() <= k));
  // samplewise: counts without weights, and no confusion matrix
  const bool samplewise_ok = !samplewise || (!o.weighted() && c.cls != ClsKind::ConfusionMatrix);
  return classes_ok && o.threshold() >= 0 && o.threshold() <= 1 && top_k_ok && samplewise_ok &&
         (o.zero_division() == 0 || o.zero_division() == 1) && (c.cls != ClsKind::FBeta || c.beta > 0);
}

std::unique_ptr<metrics::Metric> make_metric(const Config& c) {
  if (!c.classification) {
    switch (c.agg) {
      case AggKind::Mean:
        return std::make_unique<metrics::Mean>(c.agg_options);
      case AggKind::Sum:
        return std::make_unique<metrics::Sum>(c.agg_options);
      case AggKind::Min:
        return std::make_unique<metrics::Min>(c.agg_options);
      case AggKind::Max:
        return std::make_unique<metrics::Max>(c.agg_options);
    }
  }
  const auto& o = c.cls_options;
  switch (c.cls) {
    case ClsKind::StatScores:
      return std::make_unique<metrics::StatScores>(o);
    case ClsKind::Accuracy:
      return std::make_unique<metrics::Accuracy>(o);
    case ClsKind::Precision:
      return std::make_unique<metrics::Precision>(o);
    case ClsKind::Recall:
      return std::make_unique<metrics::Recall>(o);
    case ClsKind::FBeta:
      return std::make_unique<metrics::FBetaScore>(c.beta, o);
    case ClsKind::F1:
      return std::make_unique<metrics::F1Score>(o);
    case ClsKind::ConfusionMatrix:
      return std::make_unique<metrics::ConfusionMatrix>(o, c.normalize);
  }
  return nullptr;
}

bool raises_on_bad_input(const Config& c) {
  return c.classification || c.agg_options.nan_policy().strategy == metrics::NanStrategy::Error;
}

// ------------------------------------------------------------------------------ binding forms

namespace {

enum class Form { Typed, Positional, Keywords, Broken };

Form draw_form(Source& in) {
  if (in.one_in(24)) return Form::Broken;
  return in.pick({Form::Typed, Form::Typed, Form::Positional, Form::Keywords});
}

// Generic arguments by name ("value", "weight", ...); a broken form breaks the binding rules: too
// many positional arguments, an unknown keyword, one given twice, or a required one missing.
UpdateArgs generic_args(Form form, int broken, const std::vector<std::string>& names,
                        const std::vector<ValueArg>& given, size_t parameters) {
  UpdateArgs args;
  if (form == Form::Positional || (form == Form::Broken && broken != 1)) args.positional = given;
  if (form == Form::Keywords || (form == Form::Broken && broken == 1)) {
    for (size_t i = 0; i < given.size(); ++i) args.keywords.emplace_back(names[i], given[i]);
  }
  if (form != Form::Broken) return args;
  switch (broken) {
    case 0:
      while (args.positional.size() <= parameters) args.positional.emplace_back(1.0);
      break;
    case 1:
      args.keywords.emplace_back("bogus", 1.0);
      break;
    case 2:
      args.keywords.emplace_back(names[0], given[0]);
      break;
    default:
      args = UpdateArgs{};
      break;
  }
  return args;
}

std::string args_text(const std::vector<std::pair<std::string, at::Tensor>>& tensors, Form form, int broken) {
  std::ostringstream text;
  static const char* const forms[] = {"typed", "positional", "keywords", "broken"};
  text << forms[static_cast<int>(form)];
  if (form == Form::Broken) text << " #" << broken;
  for (const auto& [name, t] : tensors) text << ", " << name << " " << (t.defined() ? describe_tensor(t) : "-");
  return text.str();
}

// --------------------------------------------------------------------------------- aggregation

std::vector<int64_t> broadcastable_shape(Source& in, const std::vector<int64_t>& value) {
  std::vector<int64_t> shape(value.begin() + in.range(0, static_cast<int64_t>(value.size())), value.end());
  for (auto& size : shape) {
    if (in.one_in(3)) size = 1;
  }
  if (in.one_in(12)) shape = in.shape(in.range(0, 3));  // most likely not broadcastable
  return shape;
}

Call draw_aggregation_call(Source& in, const Config& c) {
  const bool extremum = c.agg == AggKind::Min || c.agg == AggKind::Max;
  at::Tensor value, weight;
  double scalar = 0.0, weight_scalar = 1.0;
  if (in.one_in(8)) {
    scalar = in.score();
  } else {
    const auto shape = in.shape(in.range(0, 3));
    value = in.tensor(shape, in.float_dtype(/*allow_wrong=*/true), Values::Scores);
  }
  const auto form = draw_form(in);
  const int broken = static_cast<int>(in.range(0, 3));
  int weight_mode = extremum ? 0 : static_cast<int>(in.range(0, 3));  // none, none, host, tensor
  if (weight_mode == 2) weight_scalar = in.weight();
  if (weight_mode == 3) {
    const auto shape = value.defined() ? broadcastable_shape(in, value.sizes().vec()) : in.shape(in.range(0, 2));
    weight = in.tensor(shape, in.float_dtype(/*allow_wrong=*/true), Values::Weights);
  }

  // Values and weights may be floating, integer or bool tensors; a host value is a 0-dim one, which a
  // weight tensor must broadcast to.
  Call call;
  const auto value_sizes = value.defined() ? value.sizes() : c10::IntArrayRef{};
  call.rejected = (weight.defined() && !at::is_expandable_to(weight.sizes(), value_sizes)) || form == Form::Broken;
  call.text = args_text({{"value", value}, {"weight", weight}}, form, broken);
  if (!value.defined()) call.text += c10::str(" value ", scalar);
  if (weight_mode == 2) call.text += c10::str(" weight ", weight_scalar);
  call.run = [=](metrics::Metric& m, bool forward) -> at::Tensor {
    const ValueArg v = value.defined() ? ValueArg(value) : ValueArg(scalar);
    const ValueArg w = weight.defined() ? ValueArg(weight) : ValueArg(weight_scalar);
    std::vector<ValueArg> given{v};
    if (weight_mode >= 2) given.push_back(w);
    if (form == Form::Typed && extremum) {
      auto& typed = dynamic_cast<metrics::detail::ExtremumMetric&>(m);
      return forward ? typed.forward(v) : (typed.update(v), at::Tensor());
    }
    if (form == Form::Typed) {
      auto& typed = dynamic_cast<metrics::detail::WeightedSumMetric&>(m);
      return forward ? typed.forward(v, w) : (typed.update(v, w), at::Tensor());
    }
    const auto args = generic_args(form, broken, {"value", "weight"}, given, m.update_parameters().size());
    return forward ? m.forward(args) : (m.update(args), at::Tensor());
  };
  call.apply_agg = [=](AggReference& r) { r.update(value, scalar, weight, weight_scalar); };
  return call;
}

// ------------------------------------------------------------------------------ classification

// The documented metadata checks of a classification update.
bool classification_rejects(const ClassificationOptions& o, const at::Tensor& preds, const at::Tensor& target,
                            const at::Tensor& weight) {
  // Targets may be integers or floats (whole numbers count as labels, others as bad targets).
  const bool target_ok = is_integral(target.scalar_type()) || is_float(target.scalar_type());
  if (!target_ok || target.dim() < 1) return true;
  if (weight.defined()) {
    const bool per_sample = weight.dim() == 1 && weight.size(0) == target.size(0);
    if (!o.weighted() || !is_float(weight.scalar_type()) || !(per_sample || weight.sizes() == target.sizes())) {
      return true;
    }
  }
  // Samplewise needs a dimension past the batch and any class dimension: (N, P, ...) or (N, C, P, ...).
  const bool with_classes = o.task() == Task::Multilabel || (o.task() == Task::Multiclass && preds.dim() == target.dim() + 1);
  if (o.multidim_average() == MultidimAverage::Samplewise && preds.dim() < (with_classes ? 3 : 2)) return true;
  switch (o.task()) {
    case Task::Binary:
      return preds.sizes() != target.sizes();
    case Task::Multilabel:
      return preds.sizes() != target.sizes() || preds.dim() < 2 || preds.size(1) != o.num_classes();
    case Task::Multiclass:
      break;
  }
  if (preds.dim() == target.dim() + 1) {
    // without num_classes, scores of any width C >= 1
    const bool classes_ok = o.num_classes() == kUnknownClasses ? preds.size(1) >= 1 : preds.size(1) == o.num_classes();
    return !is_float(preds.scalar_type()) || preds.size(0) != target.size(0) || !classes_ok ||
           preds.sizes().slice(2) != target.sizes().slice(1);
  }
  // labels shaped like target: integers, or floats (whole numbers count as labels, others as bad
  // predictions)
  return preds.sizes() != target.sizes() || !(is_integral(preds.scalar_type()) || is_float(preds.scalar_type())) ||
         o.top_k() != 1;
}

// preds and target shapes for the task, `k` classes (the scores' width) or labels, now and then
// one dimension off; samplewise mostly with the extra dimension it needs.
std::pair<std::vector<int64_t>, std::vector<int64_t>> draw_shapes(Source& in, const ClassificationOptions& o,
                                                                  bool scores, int64_t k) {
  const int64_t samples = in.one_in(16) ? 0 : in.range(1, k > 16 ? 3 : 8);
  const bool samplewise = o.multidim_average() == MultidimAverage::Samplewise;
  auto rest = in.shape(in.range(samplewise && !in.one_in(8) ? 1 : 0, 2), k > 16 ? 1 : 8);
  std::vector<int64_t> target{samples}, preds;
  if (o.task() == Task::Multilabel) target.push_back(k);
  target.insert(target.end(), rest.begin(), rest.end());
  preds = target;
  if (o.task() == Task::Multiclass && scores) preds.insert(preds.begin() + 1, k);
  if (in.one_in(16)) {
    auto& victim = in.range(0, 1) == 0 ? preds : target;
    if (!victim.empty()) victim[in.range(0, static_cast<int64_t>(victim.size()) - 1)] += 1;
  }
  if (in.one_in(48)) target.clear();  // a 0-dim target
  return {preds, target};
}

Call draw_classification_call(Source& in, const Config& c) {
  const auto& o = c.cls_options;
  // Without num_classes, scores of a width of their own each update (now and then none, refused),
  // and labels over as many classes.
  int64_t k = o.num_classes();
  if (k == kUnknownClasses) k = in.one_in(16) ? 0 : in.range(1, 6);
  const bool scores = in.range(0, 3) != 0;
  const auto [preds_shape, target_shape] = draw_shapes(in, o, scores, k);
  const auto label_classes = o.task() == Task::Multiclass ? std::max<int64_t>(k, 1) : 2;
  const auto preds = scores ? in.tensor(preds_shape, in.float_dtype(/*allow_wrong=*/true), Values::Scores)
                            : in.tensor(preds_shape, in.label_dtype(/*allow_wrong=*/true, true), Values::Labels,
                                        label_classes);
  const auto target =
      in.tensor(target_shape, in.label_dtype(/*allow_wrong=*/true, true), Values::Labels, label_classes);
  at::Tensor weight;
  if ((o.weighted() && !in.one_in(5)) || in.one_in(24)) {
    auto shape = in.range(0, 1) == 0 || target_shape.empty() ? std::vector<int64_t>{target_shape.empty() ? 1 : target_shape[0]}
                                                             : target_shape;
    if (in.one_in(16)) shape = in.shape(in.range(1, 2));
    weight = in.tensor(shape, in.float_dtype(/*allow_wrong=*/true), Values::Weights);
  }
  const auto form = draw_form(in);
  const int broken = static_cast<int>(in.range(0, 3));

  Call call;
  call.rejected = classification_rejects(o, preds, target, weight) || form == Form::Broken;
  call.text = args_text({{"preds", preds}, {"target", target}, {"weight", weight}}, form, broken);
  call.run = [=](metrics::Metric& m, bool forward) -> at::Tensor {
    c10::optional<at::Tensor> w;
    if (weight.defined()) w = weight;
    if (form == Form::Typed) {
      auto& typed = dynamic_cast<metrics::ClassificationMetric&>(m);
      return forward ? typed.forward(preds, target, w) : (typed.update(preds, target, w), at::Tensor());
    }
    std::vector<ValueArg> given{preds, target};
    if (weight.defined()) given.emplace_back(weight);
    const auto args = generic_args(form, broken, {"preds", "target", "weight"}, given, m.update_parameters().size());
    return forward ? m.forward(args) : (m.update(args), at::Tensor());
  };
  call.apply_cls = [=](ClsReference& r) {
    c10::optional<at::Tensor> w;
    if (weight.defined()) w = weight;
    r.update(preds, target, w);
  };
  return call;
}

}  // namespace

Call draw_call(Source& in, const Config& config) {
  return config.classification ? draw_classification_call(in, config) : draw_aggregation_call(in, config);
}

}  // namespace fuzz
