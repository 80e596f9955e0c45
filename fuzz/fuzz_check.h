#pragma once

// What the fuzz target asserts, and how it stops: a violated check prints what was expected and
// aborts, which libFuzzer reports as a crash and saves the input that caused it.

#include <ATen/core/Tensor.h>
#include <c10/util/StringUtil.h>

#include <string>

#include <metrics/state_entry.h>

namespace fuzz {

using metrics::StateDict;

[[noreturn]] void fail(const char* file, int line, const char* condition, const std::string& message);

/// The operation under test, printed with any failure ("Mean.update #3 (value float[2, 3] ...)").
void set_context(std::string context);

/// Deep, bit-exact copies of the state tensors (NaN payloads and -0.0 included).
StateDict snapshot(const StateDict& dict);
/// Empty when `a` and `b` hold the same keys, dtypes, shapes and bytes; else the first difference.
std::string bit_difference(const StateDict& a, const StateDict& b);

}  // namespace fuzz

#define FUZZ_CHECK(condition, ...)                                                    \
  do {                                                                                \
    if (!(condition)) ::fuzz::fail(__FILE__, __LINE__, #condition, ::c10::str(__VA_ARGS__)); \
  } while (0)
