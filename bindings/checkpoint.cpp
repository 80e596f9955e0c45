// save_checkpoint / load_checkpoint for metrics and collections: files torch.load reads too.

#include "common.h"

#include <metrics/checkpoint.h>

namespace metrics::python {

void init_checkpoint(py::module_& m) {
  m.def("save_checkpoint", py::overload_cast<const Metric&, const std::string&>(&save_checkpoint), py::arg("metric"),
        py::arg("path"), "Writes metric.state_dict() as torch.save would.");
  m.def("load_checkpoint", py::overload_cast<Metric&, const std::string&>(&load_checkpoint), py::arg("metric"),
        py::arg("path"), "Loads a checkpoint after checking it is this metric's; on error nothing changes.");
  m.def("save_checkpoint", py::overload_cast<const MetricCollection&, const std::string&>(&save_checkpoint),
        py::arg("collection"), py::arg("path"));
  m.def("load_checkpoint", py::overload_cast<MetricCollection&, const std::string&>(&load_checkpoint),
        py::arg("collection"), py::arg("path"));
}

}  // namespace metrics::python
