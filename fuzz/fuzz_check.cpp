#include "fuzz_check.h"

#include <ATen/ATen.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace fuzz {
namespace {

std::string& context() {
  static std::string text;
  return text;
}

}  // namespace

void fail(const char* file, int line, const char* condition, const std::string& message) {
  std::fprintf(stderr, "\n==== metrics fuzz: check failed at %s:%d: %s\n  during: %s\n  %s\n", file, line, condition,
               context().c_str(), message.c_str());
  std::fflush(stderr);
  std::abort();
}

void set_context(std::string text) {
  static const bool trace = std::getenv("FUZZ_TRACE") != nullptr;  // every call, for looking at what runs
  if (trace) std::fprintf(stderr, "%s\n", text.c_str());
  context() = std::move(text);
}

StateDict snapshot(const StateDict& dict) {
  StateDict copy;
  for (const auto& [name, tensor] : dict) copy.emplace(name, tensor.clone().contiguous());
  return copy;
}

std::string bit_difference(const StateDict& a, const StateDict& b) {
  if (a.size() != b.size()) return c10::str(a.size(), " entries against ", b.size());
  for (const auto& [name, x] : a) {
    const auto it = b.find(name);
    if (it == b.end()) return c10::str("'", name, "' missing");
    const auto y = it->second.contiguous();
    const auto xc = x.contiguous();
    if (xc.scalar_type() != y.scalar_type() || xc.sizes() != y.sizes()) {
      return c10::str("'", name, "' is ", xc.scalar_type(), xc.sizes(), " against ", y.scalar_type(), y.sizes());
    }
    // an empty tensor (a samplewise state with no rows) may have no data pointer at all
    if (xc.nbytes() != 0 && std::memcmp(xc.data_ptr(), y.data_ptr(), xc.nbytes()) != 0) {
      return c10::str("'", name, "' holds ", xc, " against ", y);
    }
  }
  return "";
}

}  // namespace fuzz
