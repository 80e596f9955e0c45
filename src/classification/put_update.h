#pragma once

// What the ATen paths of classification share: an update's additions to the state's count buffer
// are pieces (a position and a value each), added by one put_ with accumulate. The index and value
// tensors are made once per batch shape and kept in the state's scratch (../aten_scratch.h), so
// that consecutive updates of one shape dispatch the same ops on the same tensors (CUDA-graph
// replay).

#include <cstdint>
#include <vector>

#include <metrics/metric_state.h>

#include "../aten_scratch.h"

namespace metrics::detail {

/// The pieces every update ends with: the update count's 1, then since_bad's and bad_updates'
/// increments where the state tracks bad input (see BadInput), written by count_since_bad() and
/// the update's own flags.
constexpr int64_t kTailPieces = 3;

/// The tail's positions in the count buffer; where the state tracks no bad input the increments go
/// to `spare`, a scratch slot that nothing reads.
std::vector<int64_t> tail_positions(const MetricState& state, int64_t spare);

}  // namespace metrics::detail
