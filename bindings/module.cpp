// nosync_metrics._C: the C++ library for Python. The package nosync_metrics wraps it.

#include "common.h"

PYBIND11_MODULE(_C, m) {
  m.doc() = "nosync-metrics: metrics whose update() never synchronizes (C++ core)";
  m.attr("__version__") = METRICS_VERSION;  // the project's version, from CMake
  metrics::python::init_errors(m);
  metrics::python::init_metric(m);
  metrics::python::init_aggregation(m);
  metrics::python::init_classification(m);
  metrics::python::init_collection(m);
  metrics::python::init_distributed(m);
  metrics::python::init_checkpoint(m);
  metrics::python::init_sync_counter(m);
}
