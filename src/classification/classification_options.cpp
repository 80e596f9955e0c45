#include <metrics/classification_options.h>

#include <sstream>

#include "../number_text.h"
#include "kernels.h"

namespace metrics {

ClassificationOptions::ClassificationOptions(Task task, int64_t num_classes) : task_(task), num_classes_(num_classes) {}

ClassificationOptions ClassificationOptions::binary(double threshold) {
  return ClassificationOptions(Task::Binary, 1).threshold(threshold);
}

ClassificationOptions ClassificationOptions::multiclass(int64_t num_classes) {
  return ClassificationOptions(Task::Multiclass, num_classes);
}

ClassificationOptions ClassificationOptions::multilabel(int64_t num_labels, double threshold) {
  return ClassificationOptions(Task::Multilabel, num_labels).threshold(threshold);
}

namespace {

std::string classes_text(const ClassificationOptions& o) {
  return o.num_classes() == kUnknownClasses ? "None" : std::to_string(o.num_classes());
}

}  // namespace

std::string counting_key(const ClassificationOptions& o) {
  std::ostringstream key;
  key << task_prefix(o.task()) << "/classes=" << classes_text(o)
      << "/threshold=" << detail::number_text(o.threshold()) << "/top_k=" << o.top_k()
      << "/ignore=" << (o.ignore_index() ? std::to_string(*o.ignore_index()) : "none")
      << "/validate=" << o.validate_args() << "/weighted=" << o.weighted()
      << (o.multidim_average() == MultidimAverage::Samplewise ? "/samplewise" : "");
  return key.str();
}

const char* average_name(Average average) {
  switch (average) {
    case Average::Micro:
      return "micro";
    case Average::Macro:
      return "macro";
    case Average::Weighted:
      return "weighted";
    case Average::None:
      return "none";
  }
  return "";
}

std::string describe(const ClassificationOptions& o) {
  std::ostringstream text;
  switch (o.task()) {
    case Task::Binary:
      text << "threshold=" << detail::number_text(o.threshold());
      break;
    case Task::Multiclass:
      text << "num_classes=" << classes_text(o) << ", top_k=" << o.top_k() << ", average=" << average_name(o.average());
      break;
    case Task::Multilabel:
      text << "num_labels=" << o.num_classes() << ", threshold=" << detail::number_text(o.threshold())
           << ", average=" << average_name(o.average());
      break;
  }
  text << ", ignore_index=" << (o.ignore_index() ? std::to_string(*o.ignore_index()) : "None")
       << ", validate_args=" << (o.validate_args() ? "True" : "False")
       << ", zero_division=" << detail::number_text(o.zero_division())
       << ", weighted=" << (o.weighted() ? "True" : "False");
  // only where it is not the default: a global metric's description (in its state_dict) is unchanged
  if (o.multidim_average() == MultidimAverage::Samplewise) text << ", multidim_average=samplewise";
  return text.str();
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

namespace detail {

void check_options(const std::string& metric, const ClassificationOptions& o) {
  const auto k = o.num_classes();
  switch (o.task()) {
    case Task::Binary:
      TORCH_CHECK_VALUE(k == 1, metric, ": a binary task has num_classes 1, got ", k);
      break;
    case Task::Multiclass:
      if (k == kUnknownClasses) {
        TORCH_CHECK_VALUE(o.average() == Average::Micro, metric,
                          ": num_classes can only be None (unknown) for average='micro', got average='",
                          average_name(o.average()), "'");
        TORCH_CHECK_VALUE(o.top_k() == 1, metric, ": top_k = ", o.top_k(), " needs num_classes, got None");
        TORCH_CHECK_VALUE(o.multidim_average() == MultidimAverage::Global, metric,
                          ": multidim_average=samplewise needs num_classes, got None");
        break;
      }
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
  TORCH_CHECK_VALUE(o.top_k() <= k || o.task() != Task::Multiclass || k == kUnknownClasses, metric,
                    ": top_k = ", o.top_k(), " is larger than num_classes = ", k);
  TORCH_CHECK_VALUE(o.zero_division() == 0.0 || o.zero_division() == 1.0, metric,
                    ": zero_division must be 0 or 1, got ", o.zero_division());
  TORCH_CHECK_VALUE(o.multidim_average() == MultidimAverage::Global || !o.weighted(), metric,
                    ": multidim_average=samplewise counts without weights; build it with weighted=False (C++: ",
                    ".weighted(false))");
}

std::string sizing_option(const ClassificationOptions& o) {
  if (o.task() == Task::Binary) return "";
  const auto value = o.num_classes() == kUnknownClasses ? std::string("None") : std::to_string(o.num_classes());
  return (o.task() == Task::Multilabel ? "num_labels = " : "num_classes = ") + value;
}

}  // namespace detail
}  // namespace metrics
