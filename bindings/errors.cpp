// c10's typed errors reach Python as the matching built-in exceptions, with the C++ message
// (without the C++ backtrace).

#include <cstring>

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

}  // namespace

void init_errors(py::module_& /*m*/) {
  py::register_exception_translator([](std::exception_ptr error) {
    try {
      if (error) std::rethrow_exception(error);
    } catch (const c10::ValueError& e) {
      set_python_error(PyExc_ValueError, e.what_without_backtrace());
    } catch (const c10::TypeError& e) {
      set_python_error(PyExc_TypeError, e.what_without_backtrace());
    } catch (const c10::IndexError& e) {
      set_python_error(PyExc_IndexError, e.what_without_backtrace());
    } catch (const c10::NotImplementedError& e) {
      set_python_error(PyExc_NotImplementedError, e.what_without_backtrace());
    } catch (const c10::Error& e) {
      set_python_error(PyExc_RuntimeError, e.what_without_backtrace());
    }
  });
}

}  // namespace metrics::python
