// c10's typed errors reach Python as the matching built-in exceptions, with the C++ message
// (without the C++ backtrace).

#include <cstring>

#include <metrics/shape_error.h>

#include "common.h"

namespace metrics::python {
namespace {

// Sets the Python error `type` to `message`, any bytes of it that are not UTF-8 shown as \xNN
// escapes: PyErr_SetString would raise with an empty message instead.
void set_python_error(PyObject* type, const char* message) {
  PyObject* text = PyUnicode_DecodeUTF8(message, static_cast<Py_ssize_t>(std::strlen(message)), "backslashreplace");
  if (text == nullptr) return;  // (no memory: that error stands)
  PyErr_SetObject(type, text);
  Py_DECREF(text);
}

// NotConstructedError and ShapeError, made by init_errors; torch's OutOfMemoryError, found there.
PyObject* not_constructed_error = nullptr;
PyObject* shape_error = nullptr;
PyObject* out_of_memory_error = nullptr;

}  // namespace

void raise_not_constructed(const py::handle& object) {
  const auto name = py::type::handle_of(object).attr("__name__").cast<std::string>();
  const auto message =
      name + " object was made without its constructor (by __new__ alone?); create it as " + name + "(...)";
  PyErr_SetString(not_constructed_error, message.c_str());
  throw py::error_already_set();
}

void init_errors(py::module_& m) {
  // an AttributeError too, so that hasattr() and getattr() with a default work on such an object (a
  // subclass's __init__ that asks before it calls its base's)
  const auto bases = py::make_tuple(py::handle(PyExc_TypeError), py::handle(PyExc_AttributeError));
  not_constructed_error = PyErr_NewExceptionWithDoc(
      "nosync_metrics._C.NotConstructedError",
      "A metric or collection used before its constructor ran: a TypeError and an AttributeError.", bases.ptr(),
      nullptr);
  m.attr("NotConstructedError") = py::reinterpret_borrow<py::object>(not_constructed_error);
  // a RuntimeError too, as TorchMetrics raises one for preds and target of different shapes
  const auto shape_bases = py::make_tuple(py::handle(PyExc_ValueError), py::handle(PyExc_RuntimeError));
  shape_error = PyErr_NewExceptionWithDoc(
      "nosync_metrics._C.ShapeError", "Inputs whose shapes do not fit together: a ValueError and a RuntimeError.",
      shape_bases.ptr(), nullptr);
  m.attr("ShapeError") = py::reinterpret_borrow<py::object>(shape_error);
  // torch.cuda.OutOfMemoryError (a RuntimeError), as torch raises for c10::OutOfMemoryError: code
  // that catches it around a step catches ours too (kept alive for the process, as the module is)
  out_of_memory_error = py::object(py::module_::import("torch.cuda").attr("OutOfMemoryError")).release().ptr();
  py::register_exception_translator([](std::exception_ptr error) {
    try {
      if (error) std::rethrow_exception(error);
    } catch (const ShapeError& e) {
      set_python_error(shape_error, e.what_without_backtrace());
    } catch (const c10::ValueError& e) {
      set_python_error(PyExc_ValueError, e.what_without_backtrace());
    } catch (const c10::TypeError& e) {
      set_python_error(PyExc_TypeError, e.what_without_backtrace());
    } catch (const c10::IndexError& e) {
      set_python_error(PyExc_IndexError, e.what_without_backtrace());
    } catch (const c10::NotImplementedError& e) {
      set_python_error(PyExc_NotImplementedError, e.what_without_backtrace());
    } catch (const c10::OutOfMemoryError& e) {
      set_python_error(out_of_memory_error, e.what_without_backtrace());
    } catch (const c10::Error& e) {
      set_python_error(PyExc_RuntimeError, e.what_without_backtrace());
    }
  });
}

}  // namespace metrics::python
