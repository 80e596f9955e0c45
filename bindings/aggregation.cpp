// MeanMetric, SumMetric, MinMetric, MaxMetric, with TorchMetrics' names and nan_strategy.

#include "common.h"

#include <metrics/aggregation.h>

namespace metrics::python {
namespace {

AggregationOptions options(const char* metric, const py::object& nan_strategy, const py::object& dtype,
                           const py::object& device) {
  AggregationOptions o;
  if (py::isinstance<py::str>(nan_strategy)) {
    o.nan_policy(NanPolicy::parse(nan_strategy.cast<std::string>(), metric));
  } else {
    TORCH_CHECK_VALUE(is_number(nan_strategy), metric, ": nan_strategy must be 'error', 'warn', 'ignore', 'disable' or a float, got ",
                      py::repr(nan_strategy).cast<std::string>());
    o.nan_policy(NanPolicy::replace(nan_strategy.cast<double>()));
  }
  if (!dtype.is_none()) o.dtype(to_dtype(dtype, "dtype"));
  return o.device(to_device(device));
}

template <class M>
py::class_<M, Metric, std::shared_ptr<M>> bind_aggregator(py::module_& m, const char* python_name, const char* metric,
                                                        const char* doc) {
  py::class_<M, Metric, std::shared_ptr<M>> cls(m, python_name, doc);
  cls.def(py::init([metric](const py::object& nan_strategy, const py::object& dtype, const py::object& device) {
            return std::make_shared<M>(options(metric, nan_strategy, dtype, device));
          }),
          py::arg("nan_strategy") = "warn", py::kw_only(), py::arg("dtype") = py::none(), py::arg("device") = py::none());
  return cls;
}

// update/forward(value, weight=1.0): Mean and Sum take weights.
template <class M>
void bind_weighted(py::module_& m, const char* python_name, const char* metric, const char* doc) {
  auto update = [](M& self, const py::object& value, const py::object& weight) {
    const HostOrTensor v(value, self.name(), "value"), w(weight, self.name(), "weight");
    py::gil_scoped_release release;
    self.update(v.arg(), w.arg());
  };
  auto forward = [](M& self, const py::object& value, const py::object& weight) {
    const HostOrTensor v(value, self.name(), "value"), w(weight, self.name(), "weight");
    return self.forward(v.arg(), w.arg());
  };
  bind_aggregator<M>(m, python_name, metric, doc)
      .def("update", update, py::arg("value"), py::arg("weight") = 1.0)
      .def("forward", forward, py::arg("value"), py::arg("weight") = 1.0)
      .def("__call__", forward, py::arg("value"), py::arg("weight") = 1.0);
}

template <class M>
void bind_extremum(py::module_& m, const char* python_name, const char* metric, const char* doc) {
  auto update = [](M& self, const py::object& value) {
    const HostOrTensor v(value, self.name(), "value");
    py::gil_scoped_release release;
    self.update(v.arg());
  };
  auto forward = [](M& self, const py::object& value) {
    return self.forward(HostOrTensor(value, self.name(), "value").arg());
  };
  bind_aggregator<M>(m, python_name, metric, doc)
      .def("update", update, py::arg("value"))
      .def("forward", forward, py::arg("value"))
      .def("__call__", forward, py::arg("value"));
}

}  // namespace

void init_aggregation(py::module_& m) {
  bind_weighted<Mean>(m, "MeanMetric", "Mean",
                      "Weighted mean sum(w * x) / sum(w), float64 accumulators. NaN with no data.");
  bind_weighted<Sum>(m, "SumMetric", "Sum", "sum(w * x), float64 accumulators.");
  bind_extremum<Min>(m, "MinMetric", "Min", "Smallest value seen; inf with no data.");
  bind_extremum<Max>(m, "MaxMetric", "Max", "Largest value seen; -inf with no data.");
}

}  // namespace metrics::python
