#include "host_copy.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace metrics::detail {

namespace {

bool readable_in_place(const at::Tensor& t) {
  return t.is_cpu() && t.is_contiguous() && (t.scalar_type() == at::kLong || t.scalar_type() == at::kDouble);
}

template <class T>
void append_values(std::vector<int64_t>& values, const at::Tensor& t) {
  const auto* data = t.data_ptr<T>();
  for (int64_t i = 0; i < t.numel(); ++i) values.push_back(static_cast<int64_t>(data[i]));
}

}  // namespace

std::vector<int64_t> host_longs(const std::vector<at::Tensor>& tensors) {
  if (!std::all_of(tensors.begin(), tensors.end(), readable_in_place)) {
    std::vector<at::Tensor> flat;
    for (const auto& t : tensors) flat.push_back(t.reshape({-1}));
    const auto host = host_copy(at::cat(flat)).to(at::kLong);
    return {host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + host.numel()};
  }
  const HostRead counted("Tensor.cpu");
  std::vector<int64_t> values;
  for (const auto& t : tensors) {
    t.scalar_type() == at::kLong ? append_values<int64_t>(values, t) : append_values<double>(values, t);
  }
  return values;
}

}  // namespace metrics::detail
