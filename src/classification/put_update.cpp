#include "put_update.h"

namespace metrics::detail {

std::vector<int64_t> tail_positions(const MetricState& state, int64_t spare) {
  const auto* tally = state.bad_input();
  if (!tally) return {state.offset(0), spare, spare};
  return {state.offset(0), tally->since_bad_offset(), bad_updates_offset(state)};
}

}  // namespace metrics::detail
