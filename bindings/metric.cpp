// The base class: everything every metric offers (compute, reset, merge, state, device, copy).

#include "common.h"

#include <metrics/metric.h>

namespace metrics::python {
namespace {

void merge_one(Metric& self, const py::handle& incoming) {
  if (py::isinstance<py::dict>(incoming)) {
    auto other = self.clone();
    other->load_state_dict(state_from_python(incoming.cast<py::dict>(), self.name()));
    self.merge(*other);
  } else {
    self.merge(incoming.cast<const Metric&>());
  }
}

// TorchMetrics' merge_state takes a metric or a state dict; a list of them is merged in turn, into
// a copy first, so that one bad item leaves this metric as it was.
void merge_state(Metric& self, const py::handle& incoming) {
  if (!py::isinstance<py::list>(incoming) && !py::isinstance<py::tuple>(incoming)) return merge_one(self, incoming);
  auto merged = self.clone();
  for (const auto& item : incoming) merge_one(*merged, item);
  self.load_state_dict(merged->state_dict());
}

void update(Metric& self, const py::args& args, const py::kwargs& kwargs) {
  const PythonUpdateArgs converted(args, kwargs, self.name(), self.device(), self.update_parameters());
  py::gil_scoped_release release;
  self.update(converted.get());
}

at::Tensor forward(Metric& self, const py::args& args, const py::kwargs& kwargs) {
  const PythonUpdateArgs converted(args, kwargs, self.name(), self.device(), self.update_parameters());
  return self.forward(converted.get());
}

}  // namespace

void init_metric(py::module_& m) {
  py::class_<Metric, std::shared_ptr<Metric>>(m, "Metric", "Base of every nosync-metrics metric.")
      .def("update", &update,
           "Accumulates a batch: (value, weight=1.0) for aggregators, (preds, target, weight=None) for "
           "classification. Never synchronizes.")
      .def("forward", &forward, "Accumulates, and returns the value of this batch alone.")
      .def("__call__", &forward, "forward()")
      .def("compute", [](const Metric& self) { return with_python_warnings([&] { return self.compute(); }); },
           "The value over every update since the last reset, on the metric's device. Raises or warns "
           "first if update() counted bad input (NaN values, labels out of range), as the metric's policy says.")
      .def("check", [](const Metric& self) { with_python_warnings([&] { self.check(); }); },
           "Raises or warns if update() counted bad input since the last reset.")
      .def("bad_input", [](const Metric& self) {
             const auto report = self.bad_input_report();
             py::dict counts;
             for (const auto& [kind, count] : report.counts) counts[py::str(kind)] = count;
             py::dict out;
             out["counts"] = counts;
             out["updates"] = report.bad_updates;
             out["first_update"] = report.first_bad_update;
             return out;
           },
           "What update() kept out of the state: counts by kind, the number of updates with bad input, and "
           "the index of the first one (-1 if none). Reads the small tally back to the host.")
      .def("reset", &Metric::reset)
      .def("lock_updates", &Metric::lock_updates, py::arg("on"),
           "Whether update() takes the state's lock, so that updates from several threads all count. "
           "nosync_metrics turns it on for every metric it makes.")
      .def("_merge_appended", [](Metric& self, const Metric& batch) { self.merge(batch, MergeOrder::Appended); },
           "Folds in `batch` as the updates that follow this metric's (what forward() does).")
      .def("merge_state", &merge_state, py::arg("incoming_state"),
           "Folds in another metric of the same kind and options, a state dict, or a list of them.")
      .def("state_dict", [](const Metric& self) { return state_to_python(self.state_dict()); })
      .def("load_state_dict",
           [](Metric& self, const py::dict& dict) { self.load_state_dict(state_from_python(dict, self.name())); },
           py::arg("state_dict"))
      .def("to", [](py::object self, const py::object& device) {
             self.cast<Metric&>().to(to_device(device));
             return self;
           },
           py::arg("device"), "Moves the state to `device`; returns the metric.")
      .def("clone", [](const Metric& self) { return std::shared_ptr<Metric>(self.clone()); }, "A deep copy.")
      .def("__copy__", [](const Metric& self) { return std::shared_ptr<Metric>(self.clone()); })
      .def("__deepcopy__", [](const Metric& self, const py::dict&) { return std::shared_ptr<Metric>(self.clone()); })
      .def_property_readonly("device", &Metric::device)
      .def_property_readonly("update_count", &Metric::update_count)
      .def_property_readonly("metric_name", &Metric::name, "The name used in messages, e.g. 'MulticlassAccuracy'.");
}

}  // namespace metrics::python
