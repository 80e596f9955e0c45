#pragma once

// Shared by the binding files: conversions from Python values, and C++ warnings re-raised as
// Python warnings.

#include <torch/extension.h>

#include <string>
#include <utility>
#include <vector>

#include <metrics/collection.h>
#include <metrics/metric.h>
#include <metrics/update_args.h>
#include <metrics/warning_capture.h>

namespace metrics::python {

namespace py = pybind11;

/// Whether Python ran `object`'s constructor: an object made by __new__ alone has no C++ object
/// behind it, and a method called on it would touch freed or null memory.
bool constructed(const py::handle& object);
/// Raises NotConstructedError (a TypeError and an AttributeError, made by init_errors) naming
/// `object`'s class.
[[noreturn]] void raise_not_constructed(const py::handle& object);

/// Raises the error of raise_not_constructed when `source` is a T that was never constructed.
/// It must run before pybind11's own load, which gives such an instance a T-sized value that is
/// later freed as the subclass (a sized delete of the wrong size).
template <class T>
void refuse_unconstructed(py::handle source) {
  if (!source.is_none() && py::isinstance<T>(source) && !constructed(source)) raise_not_constructed(source);
}

/// Loads a metric or a collection as pybind11 does, after refusing one that was never constructed
/// (TypeError naming its class), wherever it is taken: as self or as an argument.
template <class T>
class ConstructedCaster : public py::detail::type_caster_base<T> {
 public:
  bool load(py::handle source, bool convert) {
    refuse_unconstructed<T>(source);
    return py::detail::type_caster_base<T>::load(source, convert);
  }
};

/// A value or weight from Python: a torch.Tensor; a float, int, bool or NumPy scalar kept on the
/// host; or a NumPy array, list or tuple made a tensor on `device`.
class HostOrTensor {
 public:
  HostOrTensor(const py::handle& object, const std::string& metric, const char* argument, at::Device device);
  ValueArg arg() const { return is_tensor_ ? ValueArg(tensor_) : ValueArg(scalar_); }

 private:
  at::Tensor tensor_;
  double scalar_ = 0.0;
  bool is_tensor_ = false;
};

/// update()'s arguments from Python (*args, **kwargs) in the form every metric takes. None means
/// "not given" (a trailing positional None, or a keyword).
class PythonUpdateArgs {
 public:
  /// `device`: where arrays and lists go; `parameters`: the names of the positional arguments,
  /// for error messages.
  PythonUpdateArgs(const py::args& args, const py::kwargs& kwargs, const std::string& metric, at::Device device,
                   const std::vector<std::string>& parameters = {});
  const UpdateArgs& get() const { return args_; }

 private:
  UpdateArgs args_;
};

/// A state dict from Python: str -> torch.Tensor (TypeError naming `metric` otherwise).
StateDict state_from_python(const py::dict& dict, const std::string& metric);
py::dict state_to_python(const StateDict& state);

/// A Python float or int, but not a bool.
bool is_number(const py::handle& object);

/// None (CPU), a string or a torch.device.
at::Device to_device(const py::object& object);
/// A torch.dtype.
at::ScalarType to_dtype(const py::object& object, const char* argument);

/// Runs `body` while collecting c10 warnings (TORCH_WARN), then raises each as a Python
/// UserWarning, so that warnings filters (and `-W error`) apply to them; where `body` throws, after
/// warning what it warned before (a collection's metric that warns, then one that raises), its
/// exception is raised.
template <class Body>
auto with_python_warnings(Body&& body) {
  std::vector<std::string> messages;
  const auto emit = [&messages](bool body_threw) {
    for (const auto& message : messages) {
      if (PyErr_WarnEx(PyExc_UserWarning, message.c_str(), 1) == 0) continue;
      if (!body_threw || !PyErr_ExceptionMatches(PyExc_Warning)) throw py::error_already_set();
      return PyErr_Clear();  // a filter made the warning an error: the body's stays the one raised
    }
  };
  const auto run = [&] {
    try {
      WarningCapture capture([&messages](const std::string& m) { return messages.push_back(m), true; });
      return body();
    } catch (...) {
      emit(true);
      throw;
    }
  };
  if constexpr (std::is_void_v<decltype(body())>) {
    run();
    emit(false);
  } else {
    auto result = run();
    emit(false);
    return result;
  }
}

/// The __init__ of a base class that makes no metric (Metric, ClassificationMetric): a Python class
/// written on it, as TorchMetrics' custom metrics are, gets this TypeError, not pybind11's "No
/// constructor defined!".
template <class Class>
void refuse_new_metrics(Class& base, const char* python_name) {
  py::options options;
  options.disable_function_signatures();
  base.def(py::init([python_name](const py::args&, const py::kwargs&) -> std::shared_ptr<typename Class::type> {
             throw py::type_error(std::string(python_name) +
                                  " is the base of this library's metrics, not one for new metrics (there is no "
                                  "add_state): subclass one of its metrics (MeanMetric, MulticlassAccuracy, ...) and "
                                  "override update() and compute(), which are called as TorchMetrics calls them");
           }),
           "__init__(self, *args, **kwargs)\n--\n\nRefuses: a base makes no metric (subclass a metric instead).");
}

/// Binds metric class `M` under `python_name`: its constructors are the family's to add; update,
/// forward, compute, state and the rest come from the Metric binding.
template <class M, class Parent = Metric>
py::class_<M, Parent, std::shared_ptr<M>> bind_metric(py::module_& m, const char* python_name, const char* doc) {
  return py::class_<M, Parent, std::shared_ptr<M>>(m, python_name, doc);
}

void init_errors(py::module_& m);
void init_metric(py::module_& m);
void init_aggregation(py::module_& m);
void init_classification(py::module_& m);
void init_collection(py::module_& m);
void init_distributed(py::module_& m);
void init_checkpoint(py::module_& m);
void init_sync_counter(py::module_& m);

}  // namespace metrics::python

namespace pybind11::detail {
template <>
class type_caster<metrics::Metric> : public metrics::python::ConstructedCaster<metrics::Metric> {};
template <>
class type_caster<metrics::MetricCollection> : public metrics::python::ConstructedCaster<metrics::MetricCollection> {};
// A metric taken by its holder (added to a collection): refused before pybind11's own cast, whose
// error says nothing of the metric.
template <>
class type_caster<std::shared_ptr<metrics::Metric>>
    : public copyable_holder_caster<metrics::Metric, std::shared_ptr<metrics::Metric>> {
 public:
  bool load(handle source, bool convert) {
    metrics::python::refuse_unconstructed<metrics::Metric>(source);
    return copyable_holder_caster::load(source, convert);
  }
};
}  // namespace pybind11::detail
