#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace metrics {

/// What update() found wrong in its input and kept out of the state, read back from the device
/// by compute() or check(). Counting happens on the device, so update() never waits for it.
struct InputReport {
  /// (kind, count) for every kind the metric tracks, e.g. ("NaN values", 3).
  std::vector<std::pair<std::string, int64_t>> counts;
  /// Updates that had at least one bad entry.
  int64_t bad_updates = 0;
  /// Index of the first such update, counting from 0 since the last reset; -1 when none.
  int64_t first_bad_update = -1;

  bool clean() const { return bad_updates == 0; }
  /// e.g. "Mean: 3 NaN values in 2 updates, first at update 1234"
  std::string message(const std::string& metric) const;
};

}  // namespace metrics
