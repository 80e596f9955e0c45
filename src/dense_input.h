#pragma once

// An update's tensors are dense (strided): a sparse, MKL-DNN or nested tensor would reach a kernel
// that cannot read it, and fail there without naming the argument.

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <string>

namespace metrics::detail {

/// Refuses `t`, argument `name` of `metric`'s update, unless it is a dense tensor.
inline void check_dense(const std::string& metric, const char* name, const at::Tensor& t) {
  TORCH_CHECK_TYPE(!t.is_nested(), metric, ".update: ", name, " is a nested tensor; expected a dense tensor");
  TORCH_CHECK_TYPE(t.layout() == at::kStrided, metric, ".update: ", name, " has layout ", t.layout(),
                   "; expected a dense tensor (call .to_dense() first)");
}

}  // namespace metrics::detail
