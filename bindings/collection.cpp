// The C++ MetricCollection under nosync_metrics.MetricCollection: shared counting states.

#include "common.h"

#include <metrics/collection.h>

namespace metrics::python {
namespace {

py::dict to_python(const std::map<std::string, at::Tensor>& values) {
  py::dict dict;
  for (const auto& [name, value] : values) dict[py::str(name)] = value;
  return dict;
}

}  // namespace

void init_collection(py::module_& m) {
  using Weight = c10::optional<at::Tensor>;
  py::class_<MetricCollection>(m, "ClassificationCollection",
                               "Classification metrics sharing counting states; see nosync_metrics.MetricCollection.")
      .def(py::init<>())
      .def("add", [](MetricCollection& self, const std::string& name,
                     std::shared_ptr<ClassificationMetric> metric) { self.add(name, std::move(metric)); })
      .def("update", [](MetricCollection& self, const at::Tensor& preds, const at::Tensor& target,
                        const Weight& weight) {
             py::gil_scoped_release release;
             self.update(preds, target, weight);
           },
           py::arg("preds"), py::arg("target"), py::arg("weight") = py::none())
      .def("compute", [](const MetricCollection& self) {
        return to_python(with_python_warnings([&] { return self.compute(); }));
      })
      .def("forward", [](MetricCollection& self, const at::Tensor& preds, const at::Tensor& target,
                         const Weight& weight) { return to_python(self.forward(preds, target, weight)); },
           py::arg("preds"), py::arg("target"), py::arg("weight") = py::none())
      .def("check", [](const MetricCollection& self) { with_python_warnings([&] { self.check(); }); })
      .def("reset", &MetricCollection::reset)
      .def("merge", &MetricCollection::merge)
      .def("to", [](MetricCollection& self, const py::object& device) { self.to(to_device(device)); })
      .def("groups", &MetricCollection::groups);
}

}  // namespace metrics::python
