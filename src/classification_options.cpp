#include <metrics/classification_options.h>

namespace metrics {

ClassificationOptions ClassificationOptions::binary(double threshold) {
  return ClassificationOptions().task(Task::Binary).num_classes(1).threshold(threshold);
}

ClassificationOptions ClassificationOptions::multiclass(int64_t num_classes) {
  return ClassificationOptions().task(Task::Multiclass).num_classes(num_classes);
}

ClassificationOptions ClassificationOptions::multilabel(int64_t num_labels, double threshold) {
  return ClassificationOptions().task(Task::Multilabel).num_classes(num_labels).threshold(threshold);
}

bool same_counting(const ClassificationOptions& a, const ClassificationOptions& b) {
  return a.task() == b.task() && a.num_classes() == b.num_classes() && a.threshold() == b.threshold() &&
         a.top_k() == b.top_k() && a.ignore_index() == b.ignore_index() && a.validate_args() == b.validate_args() &&
         a.weighted() == b.weighted();
}

std::string task_prefix(Task task) {
  switch (task) {
    case Task::Binary:
      return "Binary";
    case Task::Multiclass:
      return "Multiclass";
    case Task::Multilabel:
      return "Multilabel";
  }
  return "";
}

}  // namespace metrics
