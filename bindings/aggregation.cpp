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
void bind_aggregator(py::module_& m, const char* python_name, const char* metric, const char* doc) {
  bind_metric<M>(m, python_name, doc)
      .def(py::init([metric](const py::object& nan_strategy, const py::object& dtype, const py::object& device) {
             return std::make_shared<M>(options(metric, nan_strategy, dtype, device));
           }),
           py::arg("nan_strategy") = "warn", py::kw_only(), py::arg("dtype") = py::none(),
           py::arg("device") = py::none());
}

}  // namespace

void init_aggregation(py::module_& m) {
  bind_aggregator<Mean>(m, "MeanMetric", "Mean",
                      "Weighted mean sum(w * x) / sum(w), float64 accumulators. NaN with no data.");
  bind_aggregator<Sum>(m, "SumMetric", "Sum", "sum(w * x), float64 accumulators.");
  bind_aggregator<Min>(m, "MinMetric", "Min", "Smallest value seen; inf with no data.");
  bind_aggregator<Max>(m, "MaxMetric", "Max", "Largest value seen; -inf with no data.");
}

}  // namespace metrics::python
