#pragma once

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <metrics/metric.h>

#include <memory>
#include <string>
#include <vector>

// Runs `statement`, expects it to throw `exception_type` (a c10 error type) whose message,
// without backtrace, contains `substring`.
#define EXPECT_THROWS_WITH(statement, exception_type, substring)                                     \
  do {                                                                                               \
    try {                                                                                            \
      statement;                                                                                     \
      ADD_FAILURE() << "expected " #exception_type " from: " #statement;                            \
    } catch (const exception_type& e) {                                                              \
      EXPECT_THAT(std::string(e.what_without_backtrace()), ::testing::HasSubstr(substring));         \
    }                                                                                                \
  } while (0)

namespace metrics::testing {

/// Same shape and values (NaN equal to NaN), to a relative tolerance.
inline ::testing::AssertionResult tensors_close(const at::Tensor& a, const at::Tensor& b, double rtol = 1e-12,
                                                double atol = 1e-12) {
  if (a.sizes() != b.sizes()) {
    return ::testing::AssertionFailure() << "shapes differ: " << a.sizes() << " vs " << b.sizes();
  }
  const auto ad = a.to(at::kDouble).cpu();
  const auto bd = b.to(at::kDouble).cpu();
  if (at::allclose(ad, bd, rtol, atol, /*equal_nan=*/true)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\n" << ad << "\nvs\n" << bd;
}

/// Same keys, dtypes and values (NaN equal to NaN).
inline ::testing::AssertionResult states_equal(const StateDict& a, const StateDict& b, double rtol = 0.0) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << "different keys";
  for (const auto& [name, tensor] : a) {
    auto it = b.find(name);
    if (it == b.end()) return ::testing::AssertionFailure() << "missing " << name;
    if (tensor.scalar_type() != it->second.scalar_type()) return ::testing::AssertionFailure() << name << ": dtype";
    auto close = tensors_close(tensor, it->second, rtol, rtol == 0.0 ? 0.0 : 1e-12);
    if (!close) return close << " (state '" << name << "')";
  }
  return ::testing::AssertionSuccess();
}

/// The names of the ATen ops this thread runs while alive, the ones an op's kernel calls included
/// (the hidden work of what the device path counts as one launch). One at a time on a thread.
class OpsRun {
 public:
  OpsRun() {
    TORCH_INTERNAL_ASSERT(current() == nullptr, "one OpsRun at a time on a thread");
    current() = &names_;
    handle_ = at::addThreadLocalCallback(at::RecordFunctionCallback(record).scopes({at::RecordScope::FUNCTION}));
  }
  ~OpsRun() {
    at::removeCallback(handle_);
    current() = nullptr;
  }
  OpsRun(const OpsRun&) = delete;
  OpsRun& operator=(const OpsRun&) = delete;
  const std::vector<std::string>& names() const { return names_; }
  /// The ops among them that copy a tensor (clone, contiguous): inside another op, a kernel and an
  /// allocation that the launch count does not show.
  std::vector<std::string> copies() const {
    std::vector<std::string> found;
    for (const auto& name : names_) {
      if (name == "aten::clone" || name == "aten::contiguous") found.push_back(name);
    }
    return found;
  }
  void clear() { names_.clear(); }

 private:
  static std::vector<std::string>*& current() {
    thread_local std::vector<std::string>* names = nullptr;
    return names;
  }
  static std::unique_ptr<at::ObserverContext> record(const at::RecordFunction& fn) {
    if (auto* names = current()) names->emplace_back(fn.name());  // (a thread the callback reached too)
    return nullptr;
  }

  std::vector<std::string> names_;
  at::CallbackHandle handle_ = 0;
};

/// A CPU generator, so that batch i of a stream is the same wherever it is drawn.
inline at::Generator generator(uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  return gen;
}

}  // namespace metrics::testing
