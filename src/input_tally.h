#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <metrics/metric_state.h>

namespace metrics::detail {

/// Adds one update's bad-input counts (`kind_counts`: int64 [kinds] on the state's device) to the
/// tally, with ATen ops only: nothing is read back.
void tally_on_device(MetricState& state, const at::Tensor& kind_counts, int64_t update_index);

/// The same for counts the host already knows: a CPU state is written directly, a device state
/// gets ops with scalar arguments. Does nothing when every count is 0.
void tally_on_host(MetricState& state, c10::ArrayRef<int64_t> kind_counts, int64_t update_index);

}  // namespace metrics::detail
