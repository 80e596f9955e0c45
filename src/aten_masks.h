#pragma once

// Element masks and selection for the ATen paths, written with ops that every backend has, the meta device
// included (LibTorch lacks meta kernels for isnan, isinf and isfinite, which go through abs.out,
// and for logical_and/or.out: bool masks combine with bitwise_* instead).

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

namespace metrics::detail {

/// x is NaN (never for integer tensors).
inline at::Tensor nan_mask(const at::Tensor& x) { return x.ne(x); }

/// x is NaN, +inf or -inf: x - x is NaN exactly there, and 0 elsewhere.
inline at::Tensor non_finite_mask(const at::Tensor& x) { return x.sub(x).ne(0.0); }

/// Whether `op.overload` has a meta kernel (Python's torch registers some that LibTorch lacks).
inline bool has_meta_kernel(const char* op, const char* overload) {
  const auto handle = c10::Dispatcher::singleton().findOp({op, overload});
  return handle && handle->hasKernelForDispatchKey(c10::DispatchKey::Meta);
}

/// at::where(condition, a, b). LibTorch 1.13 has no meta kernel for where, so on meta without one
/// the same selection is spelled with arithmetic (it reads no value either way).
inline at::Tensor select(const at::Tensor& condition, const at::Tensor& a, const at::Tensor& b) {
  static const bool meta_kernel = has_meta_kernel("aten::where", "self");
  if (!condition.is_meta() || meta_kernel) return at::where(condition, a, b);
  const auto type = at::result_type(a, b);
  const auto picked = a.to(type).mul(condition);
  return picked.add_(b.to(type).mul(condition.bitwise_not()));
}

}  // namespace metrics::detail
