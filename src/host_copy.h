#pragma once

// The library's own reads of tensor data on the host. On the CPU the data is there already and
// .cpu() dispatches nothing, so a SyncCounter would see no read; on an accelerator the copy waits
// for the device. Counted as a HostRead, the read is seen on every device, as users' are.

#include <ATen/core/Tensor.h>

#include <vector>

#include <metrics/sync_counter.h>

namespace metrics::detail {

/// `t` in host memory (`t` itself where it is there), counted as the HostRead "Tensor.cpu".
inline at::Tensor host_copy(const at::Tensor& t) {
  const HostRead counted("Tensor.cpu");
  return t.cpu();
}

/// The elements of `tensors` (whole numbers, of any dtype and shape) as int64, in order: one read,
/// counted as host_copy's is (of contiguous CPU int64 or float64 tensors, made with no op at all).
std::vector<int64_t> host_longs(const std::vector<at::Tensor>& tensors);

}  // namespace metrics::detail
