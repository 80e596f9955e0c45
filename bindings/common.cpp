#include "common.h"

#include <torch/csrc/Dtype.h>

#include <metrics/update_call.h>

namespace metrics::python {

bool constructed(const py::handle& object) {
  auto* instance = reinterpret_cast<py::detail::instance*>(object.ptr());
  return instance->get_value_and_holder().holder_constructed();
}

HostOrTensor::HostOrTensor(const py::handle& object, const std::string& metric, const char* argument,
                           at::Device device) {
  if (THPVariable_Check(object.ptr())) {
    tensor_ = THPVariable_Unpack(object.ptr());
    is_tensor_ = true;
    return;
  }
  if (is_number(object) || PyBool_Check(object.ptr())) {
    scalar_ = PyFloat_AsDouble(object.ptr());
    if (scalar_ == -1.0 && PyErr_Occurred()) {  // an int beyond float64's range
      PyErr_Clear();
      TORCH_CHECK_VALUE(false, UpdateCall::prefix(metric), argument, " is an int too large for a float64");
    }
    return;
  }
  // NumPy scalars and arrays, lists and tuples, as torch.as_tensor reads them. A 0-dim result is a
  // host scalar, as a float is; anything else is copied to the metric's device (a host-to-device
  // copy that count_syncs counts where the device is an accelerator).
  const bool array_like = py::isinstance<py::list>(object) || py::isinstance<py::tuple>(object) ||
                          py::hasattr(object, "__array_interface__");
  TORCH_CHECK_TYPE(array_like, UpdateCall::prefix(metric), argument,
                   " must be a torch.Tensor, a number, a NumPy array or scalar, or a list, got ",
                   py::str(py::type::of(object)).cast<std::string>());
  at::Tensor host;
  try {
    host = THPVariable_Unpack(py::module_::import("torch").attr("as_tensor")(object).ptr());
  } catch (const py::error_already_set& e) {
    TORCH_CHECK_TYPE(false, UpdateCall::prefix(metric), argument, " could not be read as a tensor: ", e.what());
  }
  if (host.dim() == 0) {
    TORCH_CHECK_TYPE(!host.is_complex(), UpdateCall::prefix(metric), argument, " is complex");
    scalar_ = host.item<double>();
    return;
  }
  tensor_ = host.to(device);
  is_tensor_ = true;
}

PythonUpdateArgs::PythonUpdateArgs(const py::args& args, const py::kwargs& kwargs, const std::string& metric,
                                   at::Device device, const std::vector<std::string>& parameters) {
  auto given = args.size();
  while (given > 0 && args[given - 1].is_none()) --given;
  for (size_t i = 0; i < given; ++i) {
    const auto name = i < parameters.size() ? parameters[i] : "argument " + std::to_string(i + 1);
    TORCH_CHECK_TYPE(!args[i].is_none(), UpdateCall::prefix(metric), name, " is None");
    args_.positional.push_back(HostOrTensor(args[i], metric, name.c_str(), device).arg());
  }
  for (const auto& [key, value] : kwargs) {
    if (value.is_none()) continue;
    const auto name = py::str(key).cast<std::string>();
    args_.keywords.emplace_back(name, HostOrTensor(value, metric, name.c_str(), device).arg());
  }
}

StateDict state_from_python(const py::dict& dict, const std::string& metric) {
  StateDict state;
  for (const auto& [key, value] : dict) {
    const auto name = py::str(key).cast<std::string>();
    TORCH_CHECK_TYPE(THPVariable_Check(value.ptr()), metric, ".load_state_dict: '", name, "' must be a torch.Tensor");
    state.emplace(name, THPVariable_Unpack(value.ptr()));
  }
  return state;
}

py::dict state_to_python(const StateDict& state) {
  py::dict dict;
  for (const auto& [key, value] : state) dict[py::str(key)] = value;
  return dict;
}

bool is_number(const py::handle& object) {
  return (PyFloat_Check(object.ptr()) || PyLong_Check(object.ptr())) && !PyBool_Check(object.ptr());
}

at::Device to_device(const py::object& object) {
  if (object.is_none()) return at::Device(at::kCPU);
  if (py::isinstance<py::str>(object)) return at::Device(object.cast<std::string>());
  return object.cast<at::Device>();
}

at::ScalarType to_dtype(const py::object& object, const char* argument) {
  TORCH_CHECK_TYPE(THPDtype_Check(object.ptr()), argument, " must be a torch.dtype, got ",
                   py::str(py::type::of(object)).cast<std::string>());
  return reinterpret_cast<THPDtype*>(object.ptr())->scalar_type;
}

}  // namespace metrics::python
