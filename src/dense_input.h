#pragma once

// Metrics read tensors as dense (strided) ones: a sparse, MKL-DNN or nested tensor would reach a
// kernel that cannot read it, and fail there without naming the argument.

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <string>

#include <metrics/update_call.h>

namespace metrics::detail {

inline bool is_dense(const at::Tensor& t) { return t.layout() == at::kStrided && !t.is_nested(); }

/// What `t`, not dense, is: " is a nested tensor; ..." or " has layout Sparse; ...".
inline std::string not_dense(const at::Tensor& t) {
  if (t.is_nested()) return " is a nested tensor; expected a dense tensor";
  return c10::str(" has layout ", t.layout(), "; expected a dense tensor (call .to_dense() first)");
}

/// Refuses `t`, argument `name` of `metric`'s update, unless it is a dense tensor.
inline void check_dense(const std::string& metric, const char* name, const at::Tensor& t) {
  TORCH_CHECK_TYPE(is_dense(t), UpdateCall::prefix(metric), name, not_dense(t));
}

}  // namespace metrics::detail
