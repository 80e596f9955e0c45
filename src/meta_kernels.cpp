#include "meta_kernels.h"

#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <torch/library.h>

#include <memory>

#include "aten_masks.h"

namespace metrics::detail {
namespace {

// bucketize's output: the input's shape, int64 (or int32), no values.
at::Tensor& bucketize_out_meta(const at::Tensor& self, const at::Tensor& /*boundaries*/, bool out_int32,
                               bool /*right*/, at::Tensor& out) {
  TORCH_CHECK(out.scalar_type() == (out_int32 ? at::kInt : at::kLong), "bucketize: out has dtype ",
              out.scalar_type());
  out.resize_(self.sizes());
  return out;
}

at::Tensor bucketize_meta(const at::Tensor& self, const at::Tensor& boundaries, bool out_int32, bool right) {
  auto out = at::empty(self.sizes(), self.options().dtype(out_int32 ? at::kInt : at::kLong));
  return bucketize_out_meta(self, boundaries, out_int32, right, out);
}

// where's output: the three shapes broadcast together.
at::Tensor& where_out_meta(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other,
                           at::Tensor& out) {
  out.resize_(at::infer_size(at::infer_size(condition.sizes(), self.sizes()), other.sizes()));
  return out;
}

// nan_to_num's output: the input's shape and dtype, no values.
at::Tensor& nan_to_num_out_meta(const at::Tensor& self, c10::optional<double> /*nan*/, c10::optional<double> /*posinf*/,
                                c10::optional<double> /*neginf*/, at::Tensor& out) {
  out.resize_(self.sizes());
  return out;
}

}  // namespace

void register_missing_meta_kernels() {
  static const auto library = [] {
    auto lib = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", c10::DispatchKey::Meta, __FILE__, __LINE__);
    if (!has_meta_kernel("aten::bucketize", "Tensor")) lib->impl("bucketize.Tensor", TORCH_FN(bucketize_meta));
    if (!has_meta_kernel("aten::bucketize", "Tensor_out")) lib->impl("bucketize.Tensor_out", TORCH_FN(bucketize_out_meta));
    if (!has_meta_kernel("aten::where", "self_out")) lib->impl("where.self_out", TORCH_FN(where_out_meta));
    if (!has_meta_kernel("aten::nan_to_num", "out")) lib->impl("nan_to_num.out", TORCH_FN(nan_to_num_out_meta));
    return lib;
  }();
  (void)library;
}

}  // namespace metrics::detail
