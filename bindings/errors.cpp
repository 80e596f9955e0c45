// c10's typed errors reach Python as the matching built-in exceptions, with the C++ message
// (without the C++ backtrace).

#include <cstring>

#include "common.h"

namespace metrics::python {
namespace {

// Raises `type` with `message`, whose bytes that are not UTF-8 (quoted from a loaded state, say)
// show as \xNN escapes: PyErr_SetString would raise with an empty message instead.
void raise(PyObject* type, const char* message) {
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
      raise(PyExc_ValueError, e.what_without_backtrace());
    } catch (const c10::TypeError& e) {
      raise(PyExc_TypeError, e.what_without_backtrace());
    } catch (const c10::IndexError& e) {
      raise(PyExc_IndexError, e.what_without_backtrace());
    } catch (const c10::NotImplementedError& e) {
      raise(PyExc_NotImplementedError, e.what_without_backtrace());
    } catch (const c10::Error& e) {
      raise(PyExc_RuntimeError, e.what_without_backtrace());
    }
  });
}

}  // namespace metrics::python
