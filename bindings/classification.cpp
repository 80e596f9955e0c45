// The classification metrics. nosync_metrics builds TorchMetrics' task classes (BinaryAccuracy,
// MulticlassF1Score, ...) on these, with an options object from classification_options().

#include "common.h"

#include <metrics/classification.h>

namespace metrics::python {
namespace {

Task parse_task(const std::string& task) {
  if (task == "binary") return Task::Binary;
  if (task == "multiclass") return Task::Multiclass;
  if (task == "multilabel") return Task::Multilabel;
  TORCH_CHECK_VALUE(false, "task must be 'binary', 'multiclass' or 'multilabel', got '", task, "'");
}

Average parse_average(const py::object& average) {
  if (average.is_none()) return Average::None;
  const auto text = py::str(average).cast<std::string>();
  if (text == "micro") return Average::Micro;
  if (text == "macro") return Average::Macro;
  if (text == "weighted") return Average::Weighted;
  if (text == "none") return Average::None;
  TORCH_CHECK_VALUE(false, "average must be 'micro', 'macro', 'weighted', 'none' or None, got '", text, "'");
}

Normalize parse_normalize(const py::object& normalize) {
  if (normalize.is_none()) return Normalize::None;
  const auto text = py::str(normalize).cast<std::string>();
  if (text == "none") return Normalize::None;
  if (text == "true") return Normalize::True;
  if (text == "pred") return Normalize::Pred;
  if (text == "all") return Normalize::All;
  TORCH_CHECK_VALUE(false, "normalize must be 'true', 'pred', 'all', 'none' or None, got '", text, "'");
}

ClassificationOptions make_options(const std::string& task, const py::object& num_classes, double threshold,
                                   int64_t top_k, const py::object& average, const std::string& multidim_average,
                                   const py::object& ignore_index, bool validate_args, double zero_division,
                                   bool weighted, const py::object& device) {
  TORCH_CHECK_VALUE(multidim_average == "global" || multidim_average == "samplewise",
                    "multidim_average must be 'global' or 'samplewise', got '", multidim_average, "'");
  const auto parsed = parse_task(task);
  int64_t classes = 1;
  if (parsed == Task::Multiclass && num_classes.is_none()) {
    classes = kUnknownClasses;  // TorchMetrics' num_classes=None: the metric checks average and top_k
  } else if (parsed != Task::Binary) {
    TORCH_CHECK_VALUE(!num_classes.is_none(), "a ", task, " metric needs num_labels");
    classes = num_classes.cast<int64_t>();
    // an int never means "unknown": only None does
    TORCH_CHECK_VALUE(classes != kUnknownClasses, parsed == Task::Multiclass ? "num_classes" : "num_labels",
                      " must be at least 2, got ", classes);
  }
  ClassificationOptions o(parsed, classes);
  o.threshold(threshold);
  if (!ignore_index.is_none()) o.ignore_index(ignore_index.cast<int64_t>());
  return o.top_k(top_k)
      .multidim_average(multidim_average == "global" ? MultidimAverage::Global : MultidimAverage::Samplewise)
      .average(parse_average(average))
      .validate_args(validate_args)
      .zero_division(zero_division)
      .weighted(weighted)
      .device(to_device(device));
}

template <class M>
py::class_<M, ClassificationMetric, std::shared_ptr<M>> bind(py::module_& m, const char* name, const char* doc) {
  return bind_metric<M, ClassificationMetric>(m, name, doc);
}

}  // namespace

void init_classification(py::module_& m) {
  py::class_<ClassificationOptions>(m, "ClassificationOptions", "Options of a classification metric.");
  m.def("classification_options", &make_options, py::kw_only(), py::arg("task"), py::arg("num_classes") = py::none(),
        py::arg("threshold") = 0.5, py::arg("top_k") = 1, py::arg("average") = "macro",
        py::arg("multidim_average") = "global", py::arg("ignore_index") = py::none(), py::arg("validate_args") = true,
        py::arg("zero_division") = 0.0, py::arg("weighted") = false, py::arg("device") = py::none());

  auto base = bind_metric<ClassificationMetric>(
      m, "ClassificationMetric", "Base of the classification metrics: update(preds, target, weight=None).");
  refuse_new_metrics(base, "ClassificationMetric");

  bind<StatScores>(m, "StatScores", "[tp, fp, tn, fn, support]").def(py::init<ClassificationOptions>());
  bind<Accuracy>(m, "Accuracy", "Accuracy").def(py::init<ClassificationOptions>());
  bind<Precision>(m, "Precision", "tp / (tp + fp)").def(py::init<ClassificationOptions>());
  bind<Recall>(m, "Recall", "tp / (tp + fn)").def(py::init<ClassificationOptions>());
  bind<FBetaScore>(m, "FBetaScore", "F-beta score").def(py::init<double, ClassificationOptions>());
  bind<F1Score>(m, "F1Score", "F1 score").def(py::init<ClassificationOptions>());
  bind<ConfusionMatrix>(m, "ConfusionMatrix", "Confusion matrix, rows targets and columns predictions")
      .def(py::init([](const ClassificationOptions& o, const py::object& normalize) {
        return std::make_shared<ConfusionMatrix>(o, parse_normalize(normalize));
      }));
}

}  // namespace metrics::python
