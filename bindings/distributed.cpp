// What nosync_metrics.distributed needs to sync over torch.distributed from Python: the packed
// state of a metric or a collection, its description, and a copy loaded with reduced buffers.

#include "common.h"

#include <metrics/collection.h>
#include <metrics/distributed.h>

namespace metrics::python {

void init_distributed(py::module_& m) {
  py::class_<PackedState>(m, "PackedState", "State tensors packed into one buffer per (reduction, dtype).")
      .def_property_readonly("buffers",
                             [](PackedState& self) {
                               py::list buffers;
                               for (const auto& b : self.buffers()) {
                                 buffers.append(py::make_tuple(reduction_name(b.reduction), b.tensor));
                               }
                               return buffers;
                             },
                             "[(reduction, tensor)]: the tensors themselves; reduce them in place.")
      .def_property_readonly("rows",
                             [](PackedState& self) {
                               py::list rows;
                               for (const auto& r : self.rows()) rows.append(r.tensor);
                               return rows;
                             },
                             "The Cat entries' rows, one tensor each; replace them with set_rows.")
      .def(
          "set_rows", [](PackedState& self, size_t i, const at::Tensor& rows) { self.rows().at(i).tensor = rows; },
          py::arg("index"), py::arg("rows"), "Replaces Cat entry `index`'s rows (with every rank's).");
  m.def("collective_device", [](const std::string& backend, const py::object& device) {
    return collective_device(backend, to_device(device));
  });
  m.def("check_same_texts", &check_same_texts, py::arg("texts"), py::arg("who"));

  auto metric = py::reinterpret_borrow<py::object>(m.attr("Metric"));
  metric.attr("_pack") = py::cpp_function(
      [](const Metric& self) { return packed_state(self); }, py::is_method(metric));
  metric.attr("_describe") =
      py::cpp_function([](const Metric& self) { return self.description(); }, py::is_method(metric));
  metric.attr("_synced_copy") = py::cpp_function(
      [](const Metric& self, const PackedState& packed) {
        auto copy = std::shared_ptr<Metric>(self.clone());
        copy->load_state_dict(packed.unpack());
        return copy;
      },
      py::is_method(metric));

  auto collection = py::reinterpret_borrow<py::object>(m.attr("MetricCollectionCore"));
  collection.attr("_pack") = py::cpp_function(
      [](const MetricCollection& self) { return PackedState(self.state_entries()); }, py::is_method(collection));
  collection.attr("_describe") = py::cpp_function(
      [](const MetricCollection& self) { return describe_for_sync(self); }, py::is_method(collection));
  collection.attr("_synced_copy") = py::cpp_function(
      [](const MetricCollection& self, const PackedState& packed) {
        auto copy = self.clone();
        copy.load_state_entries(packed.unpack());
        return copy;
      },
      py::is_method(collection));
}

}  // namespace metrics::python
