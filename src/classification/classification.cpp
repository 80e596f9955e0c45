#include <metrics/classification.h>

#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <metrics/functional/classification.h>
#include <metrics/update_call.h>

#include <unistd.h>

#include <limits>
#include <string>
#include <vector>

#include "../allocated_state.h"
#include "../number_text.h"
#include "kernels.h"
#include "unchecked_scores.h"

namespace metrics {
namespace {

std::string task_name(const std::string& base_name, const ClassificationOptions& options) {
  return task_prefix(options.task()) + base_name;
}

// A num_classes too large for memory gets this error rather than the allocator's, before any
// allocation where the size is known to be too large (it overflows, or exceeds the RAM of a CPU).
void check_state_size(const std::string& metric, const ClassificationOptions& o, CountLayout layout) {
  const auto classes = static_cast<uint64_t>(detail::counted_classes(o));
  const uint64_t per_class = layout == CountLayout::Matrix && o.task() == Task::Multiclass ? classes : 4;
  uint64_t cells = 0, bytes = 0;
  const bool overflows = __builtin_mul_overflow(classes, per_class, &cells) || __builtin_mul_overflow(cells, 8, &bytes);
  const auto ram = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const bool too_large = overflows || bytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
                         (o.device().is_cpu() && bytes > ram);
  TORCH_CHECK_VALUE(!too_large, metric, ": ", detail::sizing_option(o), " needs ",
                    overflows ? std::string("more than 2^64 bytes") : std::to_string(bytes) + " bytes",
                    " of state, more than ", o.device().is_cpu() ? "this machine's memory" : "can be addressed");
}

// The options are checked before anything is allocated for them.
MetricState checked_state(const std::string& base_name, const ClassificationOptions& options, CountLayout layout) {
  const auto metric = task_name(base_name, options);
  TORCH_CHECK_VALUE(layout == CountLayout::PerClass || options.num_classes() != kUnknownClasses, metric,
                    ": num_classes is required, got None (only micro-averaged scores count without it)");
  detail::check_options(metric, options);
  check_state_size(metric, options, layout);
  const auto sizing = detail::sizing_option(options);
  const auto what = "the state" + (sizing.empty() ? "" : " for " + sizing) + " on " + options.device().str();
  return detail::allocated_state(metric, what, [&] { return detail::make_count_state(options, layout); });
}

const at::Tensor& tensor_arg(const std::string& metric, const ValueArg& arg, const char* name) {
  TORCH_CHECK_TYPE(arg.is_tensor(), UpdateCall::prefix(metric), name, " must be a tensor, got a number");
  return arg.tensor();
}

// A confusion matrix's layout: with ignore_index, a binary one reads its scores by the entries it
// keeps, so its matrix is counted beside the per-class cells of the other binary metrics.
CountLayout matrix_layout(const ClassificationOptions& o) {
  if (o.task() == Task::Multiclass) return CountLayout::Matrix;
  return o.task() == Task::Binary && o.ignore_index() ? CountLayout::PerClassAndKeptMatrix : CountLayout::PerClass;
}

}  // namespace

ClassificationMetric::ClassificationMetric(const std::string& base_name, ClassificationOptions options,
                                           CountLayout layout)
    : Metric(task_name(base_name, options), BadInputAction::RaiseValueError, checked_state(base_name, options, layout)),
      options_(options),
      layout_(layout) {}

void ClassificationMetric::update(const at::Tensor& preds, const at::Tensor& target,
                                  const c10::optional<at::Tensor>& weight) {
  RECORD_USER_SCOPE(update_scope().c_str());
  const auto batch = batch_of(preds, target, weight);
  apply([&] { detail::count(mutable_state(), options_, batch); });
}

detail::ClassificationBatch ClassificationMetric::batch_of(const at::Tensor& preds, const at::Tensor& target,
                                                           const c10::optional<at::Tensor>& weight) const {
  const bool scalar_pair = preds.defined() && target.defined() && preds.dim() == 0 && target.dim() == 0;
  if (scalar_pair && options_.task() != Task::Multilabel) {
    auto one = weight;
    if (one && one->defined() && one->dim() == 0) one = one->reshape({1});
    return detail::canonicalize(name(), options_, preds.reshape({1}), target.reshape({1}), one, device());
  }
  return detail::canonicalize(name(), options_, preds, target, weight, device());
}

UpdateStep ClassificationMetric::prepare_update(const UpdateArgs& args) {
  const auto bound = bind(args);
  const auto& preds = tensor_arg(name(), required(bound, 0), "preds");
  const auto& target = tensor_arg(name(), required(bound, 1), "target");
  c10::optional<at::Tensor> weight;
  if (bound[2] != nullptr) weight = tensor_arg(name(), *bound[2], "weight");
  auto batch = batch_of(preds, target, weight);
  return [this, batch = std::move(batch)] { detail::count(mutable_state(), options_, batch); };
}

at::Tensor ClassificationMetric::forward(const at::Tensor& preds, const at::Tensor& target,
                                         const c10::optional<at::Tensor>& weight) {
  UpdateArgs args{{preds, target}};
  if (weight) args.positional.emplace_back(*weight);
  return Metric::forward(args);
}

const std::vector<std::string>& ClassificationMetric::update_parameters() const {
  static const std::vector<std::string> names{"preds", "target", "weight"};
  return names;
}

bool ClassificationMetric::takes(const std::string& name) const { return name != "weight" || options_.weighted(); }

SharingKey ClassificationMetric::sharing_key() const {
  return {counting_key(options_), layout_ == CountLayout::PerClass ? 0 : 1};
}

std::string ClassificationMetric::options_text() const { return describe(options_); }

namespace {

// The state format version that added the kept matrix (CountLayout::PerClassAndKeptMatrix).
constexpr int64_t kKeptMatrixVersion = 5;

}  // namespace

std::string ClassificationMetric::description_in_version(int64_t version) const {
  auto text = description();
  if (version >= kKeptMatrixVersion || layout_ != CountLayout::PerClassAndKeptMatrix) return text;
  const auto start = text.find("\nconfmat ") + 1;
  return text.erase(start, text.find('\n', start) + 1 - start);
}

// Its cells were read by the kept scores (since 9639e33; by every score before it, which
// TorchMetrics' matrix does not do).
void ClassificationMetric::upgrade_state(StateDict& dict, int64_t version) const {
  if (version >= kKeptMatrixVersion || layout_ != CountLayout::PerClassAndKeptMatrix) return;
  std::vector<at::Tensor> cells;  // [[tn, fp], [fn, tp]]
  for (const char* name : {"tn", "fp", "fn", "tp"}) {
    const auto cell = dict.find(name);
    if (cell == dict.end() || !cell->second.defined() || cell->second.sizes() != at::IntArrayRef{1}) return;
    cells.push_back(cell->second);
  }
  const auto& first = cells.front();
  for (const auto& cell : cells) {
    if (cell.scalar_type() != first.scalar_type() || cell.device() != first.device()) return;
  }
  dict.emplace("confmat", at::cat(cells).view({2, 2}));
}

CountLayout ClassificationMetric::layout() const { return detail::layout_of(state()); }

StatCounts ClassificationMetric::stat_counts() const { return detail::stat_counts(state()); }

std::string ClassificationMetric::state_problem() const {
  if (!options_.weighted()) return {};
  std::vector<at::Tensor> finite;
  for (const auto& entry : state().entries()) {
    if (entry.tensor.is_floating_point()) finite.push_back(at::isfinite(entry.tensor).all());
  }
  if (finite.empty() || at::stack(finite).all().item<bool>()) return {};
  return name() + ": the weighted counts overflowed float64 (the weights add up past 1.8e308); scale the weights down";
}

bool ClassificationMetric::holds_own_layout() const { return detail::layout_of(state()) == layout_; }

MetricState ClassificationMetric::own_state_copy() const {
  if (holds_own_layout()) return Metric::own_state_copy();
  TORCH_INTERNAL_ASSERT(layout_ == CountLayout::PerClass, "only a per-class metric shares a larger state");
  auto dict = state().state_dict();
  const auto counts = detail::stat_counts(state());
  dict.erase("confmat");
  dict.emplace("tp", counts.tp);
  dict.emplace("fp", counts.fp);
  dict.emplace("tn", counts.tn);
  dict.emplace("fn", counts.fn);
  auto own = detail::make_count_state(options_, layout_);
  own.to(device());
  own.load_state_dict(dict, name());
  return own;
}

at::Tensor ClassificationMetric::confusion_matrix() const {
  TORCH_CHECK_VALUE(options_.task() != Task::Multiclass || layout() == CountLayout::Matrix, name(),
                    ".confusion_matrix: per-class counts hold no C x C matrix; a MulticlassConfusionMatrix counts one, "
                    "and a multiclass metric that shares its state in a collection reads it");
  return detail::confusion_matrix(state(), options_, layout_);
}

StatScores::StatScores(ClassificationOptions options) : Cloneable("StatScores", options) {}

at::Tensor StatScores::value() const { return functional::unchecked::stat_scores(stat_counts(), options()); }

Accuracy::Accuracy(ClassificationOptions options) : Cloneable("Accuracy", options) {}

at::Tensor Accuracy::value() const { return functional::unchecked::accuracy(stat_counts(), options()); }

Precision::Precision(ClassificationOptions options) : Cloneable("Precision", options) {}

at::Tensor Precision::value() const { return functional::unchecked::precision(stat_counts(), options()); }

Recall::Recall(ClassificationOptions options) : Cloneable("Recall", options) {}

at::Tensor Recall::value() const { return functional::unchecked::recall(stat_counts(), options()); }

FBetaScore::FBetaScore(double beta, ClassificationOptions options) : FBetaScore("FBetaScore", beta, options) {}

FBetaScore::FBetaScore(const std::string& base_name, double beta, ClassificationOptions options)
    : Cloneable(base_name, options), beta_(beta) {
  detail::check_beta(name(), beta);
}

std::string FBetaScore::options_text() const {
  return "beta=" + detail::number_text(beta_) + ", " + ClassificationMetric::options_text();
}

at::Tensor FBetaScore::value() const { return functional::unchecked::fbeta_score(stat_counts(), beta_, options()); }

F1Score::F1Score(ClassificationOptions options) : Cloneable("F1Score", 1.0, options) {}

ConfusionMatrix::ConfusionMatrix(ClassificationOptions options, Normalize normalize)
    : Cloneable("ConfusionMatrix", options, matrix_layout(options)),
      normalize_(normalize) {
  TORCH_CHECK_VALUE(options.multidim_average() == MultidimAverage::Global, name(),
                    ": multidim_average=samplewise does not apply to a confusion matrix");
}

std::string ConfusionMatrix::options_text() const {
  static const char* const names[] = {"None", "true", "pred", "all"};
  return ClassificationMetric::options_text() + ", normalize=" + names[static_cast<int>(normalize_)];
}

at::Tensor ConfusionMatrix::value() const {
  return functional::normalize_confusion_matrix(confusion_matrix(), normalize_);
}

}  // namespace metrics
