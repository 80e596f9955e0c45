#pragma once

// What the ATen paths of every family keep in a state's update scratch (MetricState::scratch) and
// how they make it: constants uploaded without a copy from the host, host-side keys that say when
// cached tensors must be made again, and the tally's since-bad increment.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include <metrics/metric_state.h>

namespace metrics::detail {

/// A tensor of `values` on `options`' device, made without a copy from the host (a copy to an
/// accelerator is a synchronization): one full per run of equal values, and one cat.
at::Tensor upload(const std::vector<int64_t>& values, const at::TensorOptions& options);
at::Tensor upload(const std::vector<double>& values, const at::TensorOptions& options);

/// Whether the state's scratch slot `slot` keeps `key` (host integers): what an update's cached
/// tensors were made for.
bool keeps_key(MetricState& state, size_t slot, const std::vector<int64_t>& key);

/// The slot `slot` keeps `key`.
void keep_key(MetricState& state, size_t slot, const std::vector<int64_t>& key);

/// Runs `make`, which makes an update's cached tensors for `key`, unless they were made for it. The
/// key is kept once `make` returns: one that throws (out of memory) leaves none, so the next update
/// makes them all again rather than use some made for another key.
template <class Make>
void make_for_key(MetricState& state, size_t slot, const std::vector<int64_t>& key, Make&& make) {
  if (keeps_key(state, slot, key)) return;
  state.scratch(slot) = at::Tensor();  // no key while they are made
  make();
  keep_key(state, slot, key);
}

/// Where the tally's bad_updates count is in the count buffer (the state tracks bad input).
int64_t bad_updates_offset(const MetricState& state);

/// Writes since_bad's increment, min(1, bad_updates) as the update begins, into `since_bad` (a
/// 0-dim view of the update's delta): one op (see BadInput).
void count_since_bad(MetricState& state, at::Tensor since_bad);

}  // namespace metrics::detail
