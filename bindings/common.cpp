#include "common.h"

#include <torch/csrc/Dtype.h>

namespace metrics::python {

HostOrTensor::HostOrTensor(const py::handle& object, const std::string& metric, const char* argument) {
  if (THPVariable_Check(object.ptr())) {
    tensor_ = THPVariable_Unpack(object.ptr());
    is_tensor_ = true;
    return;
  }
  TORCH_CHECK_TYPE(is_number(object), metric, ".update: ", argument, " must be a torch.Tensor, a float or an int, got ",
                   py::str(py::type::of(object)).cast<std::string>());
  scalar_ = object.cast<double>();
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
