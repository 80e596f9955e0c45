// nosync_metrics.MetricCollection wraps this: the C++ MetricCollection, for metrics of any family.

#include "common.h"

#include <metrics/collection.h>
#include <metrics/update_call.h>

namespace metrics::python {
namespace {

// Where arrays and lists given to update() go: the metrics' device (the CPU for an empty collection).
at::Device device_of(const MetricCollection& self) {
  const auto names = self.names();
  return names.empty() ? at::Device(at::kCPU) : self.at(names.front()).device();
}

constexpr char kName[] = "MetricCollection";

// name -> value in the order the metrics were added.
py::dict in_order(const MetricCollection& self, const std::map<std::string, at::Tensor>& values) {
  py::dict dict;
  for (const auto& name : self.names()) {
    if (values.count(name)) dict[py::str(name)] = values.at(name);  // none for a metric updated apart
  }
  return dict;
}

}  // namespace

void init_collection(py::module_& m) {
  py::class_<MetricCollection>(m, "MetricCollectionCore",
                               "The C++ MetricCollection under nosync_metrics.MetricCollection.")
      .def(py::init([](bool compute_groups) {
             return MetricCollection(MetricCollectionOptions().compute_groups(compute_groups));
           }),
           py::arg("compute_groups") = true)
      .def(
          "add",
          [](MetricCollection& self, const std::string& name, std::shared_ptr<Metric> metric, bool apart) {
            self.add(name, std::move(metric), apart ? Updates::Apart : Updates::Together);
          },
          py::arg("name"), py::arg("metric"), py::arg("updated_apart") = false)
      .def("update", [](MetricCollection& self, const py::args& args, const py::kwargs& kwargs) {
             const PythonUpdateArgs converted(args, kwargs, kName, device_of(self));
             py::gil_scoped_release release;
             self.update(converted.get());
           })
      .def("forward", [](MetricCollection& self, const py::args& args, const py::kwargs& kwargs) {
             const UpdateCall forwarding("forward");  // (the conversions' refusals too)
             const PythonUpdateArgs converted(args, kwargs, kName, device_of(self));
             return in_order(self, self.forward(converted.get()));
           })
      .def("compute", [](const MetricCollection& self) {
             return in_order(self, with_python_warnings([&] { return self.compute(); }));
           })
      .def("_compute_without_report",
           [](const MetricCollection& self) { return in_order(self, self.compute_without_report()); })
      .def("check", [](const MetricCollection& self) { with_python_warnings([&] { self.check(); }); })
      .def("reset", &MetricCollection::reset)
      .def("clone", &MetricCollection::clone)
      .def("merge", [](MetricCollection& self, const MetricCollection& other) { self.merge(other); })
      .def("_merge_appended",
           [](MetricCollection& self, const MetricCollection& batch) { self.merge(batch, MergeOrder::Appended); })
      .def("to", [](MetricCollection& self, const py::object& device) { self.to(to_device(device)); })
      .def("state_dict", [](const MetricCollection& self) { return state_to_python(self.state_dict()); })
      .def("load_state_dict",
           [](MetricCollection& self, const py::dict& dict) { self.load_state_dict(state_from_python(dict, kName)); })
      .def("_load_following_groups",
           [](MetricCollection& self, const py::dict& dict) {
             self.load_state_dict(state_from_python(dict, kName), AbsentMetric::FollowsItsGroup);
           })
      .def("_detach", &MetricCollection::detach)
      .def("_keep_alone", &MetricCollection::keep_alone)
      .def("_regroup", &MetricCollection::regroup)
      .def("names", &MetricCollection::names)
      .def("groups", &MetricCollection::groups);
}

}  // namespace metrics::python
