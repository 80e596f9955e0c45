#pragma once

// Shared by the binding files: conversions from Python values, and C++ warnings re-raised as
// Python warnings.

#include <torch/extension.h>

#include <string>
#include <utility>
#include <vector>

#include <metrics/aggregation.h>
#include <metrics/warning_capture.h>

namespace metrics::python {

namespace py = pybind11;

/// A value or weight from Python: a torch.Tensor, or a float or int kept on the host.
class HostOrTensor {
 public:
  HostOrTensor(const py::handle& object, const std::string& metric, const char* argument);
  ValueArg arg() const { return is_tensor_ ? ValueArg(tensor_) : ValueArg(scalar_); }

 private:
  at::Tensor tensor_;
  double scalar_ = 0.0;
  bool is_tensor_ = false;
};

/// A Python float or int, but not a bool.
bool is_number(const py::handle& object);

/// None (CPU), a string or a torch.device.
at::Device to_device(const py::object& object);
/// A torch.dtype.
at::ScalarType to_dtype(const py::object& object, const char* argument);

/// Runs `body` while collecting c10 warnings (TORCH_WARN), then raises each as a Python
/// UserWarning, so that warnings filters (and `-W error`) apply to them.
template <class Body>
auto with_python_warnings(Body&& body) {
  std::vector<std::string> messages;
  auto emit = [&messages] {
    for (const auto& message : messages) {
      if (PyErr_WarnEx(PyExc_UserWarning, message.c_str(), 1) != 0) throw py::error_already_set();
    }
  };
  if constexpr (std::is_void_v<decltype(body())>) {
    {
      WarningCapture capture([&messages](const std::string& m) { return messages.push_back(m), true; });
      body();
    }
    emit();
  } else {
    auto result = [&] {
      WarningCapture capture([&messages](const std::string& m) { return messages.push_back(m), true; });
      return body();
    }();
    emit();
    return result;
  }
}

void init_errors(py::module_& m);
void init_metric(py::module_& m);
void init_aggregation(py::module_& m);
void init_classification(py::module_& m);
void init_collection(py::module_& m);
void init_sync_counter(py::module_& m);

}  // namespace metrics::python
