#include <metrics/classification.h>

#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <metrics/functional/classification.h>

namespace metrics {
namespace {

using Layout = ClassificationState::Layout;

void check_options(const std::string& metric, const ClassificationOptions& o) {
  const auto k = o.num_classes();
  switch (o.task()) {
    case Task::Binary:
      TORCH_CHECK_VALUE(k == 1, metric, ": a binary task has num_classes 1, got ", k);
      break;
    case Task::Multiclass:
      TORCH_CHECK_VALUE(k >= 2, metric, ": num_classes must be at least 2, got ", k);
      break;
    case Task::Multilabel:
      TORCH_CHECK_VALUE(k >= 2, metric, ": num_labels must be at least 2, got ", k);
      break;
  }
  TORCH_CHECK_VALUE(o.threshold() >= 0.0 && o.threshold() <= 1.0, metric, ": threshold must be in [0, 1], got ",
                    o.threshold());
  TORCH_CHECK_VALUE(o.top_k() >= 1, metric, ": top_k must be at least 1, got ", o.top_k());
  TORCH_CHECK_VALUE(o.top_k() == 1 || o.task() == Task::Multiclass, metric,
                    ": top_k applies to multiclass tasks only, got top_k = ", o.top_k());
  TORCH_CHECK_VALUE(o.top_k() <= k || o.task() != Task::Multiclass, metric, ": top_k = ", o.top_k(),
                    " is larger than num_classes = ", k);
  TORCH_CHECK_VALUE(o.zero_division() == 0.0 || o.zero_division() == 1.0, metric,
                    ": zero_division must be 0 or 1, got ", o.zero_division());
}

std::string checked_name(const std::string& base_name, const ClassificationOptions& options) {
  auto name = task_prefix(options.task()) + base_name;
  check_options(name, options);
  return name;
}

}  // namespace

ClassificationMetric::ClassificationMetric(const std::string& base_name, ClassificationOptions options,
                                           Layout layout)
    : Metric(checked_name(base_name, options), BadInputAction::RaiseValueError),
      options_(options),
      layout_(layout),
      counts_(std::make_shared<ClassificationState>(options, layout)) {}

ClassificationMetric::ClassificationMetric(const ClassificationMetric& other)
    : Metric(other),
      options_(other.options_),
      layout_(other.layout_),
      counts_(std::make_shared<ClassificationState>(*other.counts_)) {}

void ClassificationMetric::update(const at::Tensor& preds, const at::Tensor& target,
                                  const c10::optional<at::Tensor>& weight) {
  RECORD_USER_SCOPE(update_scope().c_str());
  counts_->update(name(), preds, target, weight);
}

at::Tensor ClassificationMetric::forward(const at::Tensor& preds, const at::Tensor& target,
                                         const c10::optional<at::Tensor>& weight) {
  return forward_on_copy<ClassificationMetric>([&](ClassificationMetric& batch) { batch.update(preds, target, weight); });
}

StatScores::StatScores(ClassificationOptions options) : Cloneable("StatScores", options) {}

at::Tensor StatScores::value() const { return functional::stat_scores(counts().stat_counts(), options()); }

Accuracy::Accuracy(ClassificationOptions options) : Cloneable("Accuracy", options) {}

at::Tensor Accuracy::value() const { return functional::accuracy(counts().stat_counts(), options()); }

Precision::Precision(ClassificationOptions options) : Cloneable("Precision", options) {}

at::Tensor Precision::value() const { return functional::precision(counts().stat_counts(), options()); }

Recall::Recall(ClassificationOptions options) : Cloneable("Recall", options) {}

at::Tensor Recall::value() const { return functional::recall(counts().stat_counts(), options()); }

FBetaScore::FBetaScore(double beta, ClassificationOptions options) : FBetaScore("FBetaScore", beta, options) {}

FBetaScore::FBetaScore(const std::string& base_name, double beta, ClassificationOptions options)
    : Cloneable(base_name, options), beta_(beta) {
  TORCH_CHECK_VALUE(beta > 0.0, name(), ": beta must be larger than 0, got ", beta);
}

at::Tensor FBetaScore::value() const { return functional::fbeta_score(counts().stat_counts(), beta_, options()); }

F1Score::F1Score(ClassificationOptions options) : Cloneable("F1Score", 1.0, options) {}

ConfusionMatrix::ConfusionMatrix(ClassificationOptions options, Normalize normalize)
    : Cloneable("ConfusionMatrix", options,
                options.task() == Task::Multiclass ? Layout::Matrix : Layout::PerClass),
      normalize_(normalize) {}

at::Tensor ConfusionMatrix::value() const {
  return functional::normalize_confusion_matrix(counts().confusion_matrix(), normalize_);
}

}  // namespace metrics
