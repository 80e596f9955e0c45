#pragma once

// What the ATen paths of classification share: an update's additions to the state's count buffer
// are pieces (a position and a value each), added by one put_ with accumulate. The index and value
// tensors are made once per batch shape and kept in the state's scratch, so that consecutive
// updates of one shape dispatch the same ops on the same tensors (CUDA-graph replay).

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include <metrics/metric_state.h>

namespace metrics::detail {

/// The pieces every update ends with: the update count's 1, then since_bad's and bad_updates'
/// increments where the state tracks bad input (see BadInput), written by count_tail().
constexpr int64_t kTailPieces = 3;

/// The tail's positions in the count buffer; where the state tracks no bad input the increments go
/// to `spare`, a scratch slot that nothing reads.
std::vector<int64_t> tail_positions(const MetricState& state, int64_t spare);

/// Writes since_bad's increment, min(1, bad_updates) as the update begins, into `since_bad` (a
/// value of the tail): one op.
void count_since_bad(MetricState& state, at::Tensor since_bad);

/// A tensor of `values` on `options`' device, made without a copy from the host (a copy to an
/// accelerator is a synchronization): one full per run of equal values, and one cat.
at::Tensor upload(const std::vector<int64_t>& values, const at::TensorOptions& options);
at::Tensor upload(const std::vector<double>& values, const at::TensorOptions& options);

/// Whether `key` (host integers) differs from the one kept in the state's scratch slot `slot`,
/// which then keeps `key`: what an update's cached tensors were made for.
bool key_changed(MetricState& state, size_t slot, const std::vector<int64_t>& key);

}  // namespace metrics::detail
