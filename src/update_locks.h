#pragma once

#include <metrics/metric_state.h>

#include <mutex>

namespace metrics::detail {

/// The locks of two states (one where they are the same) where updates take them (lock_updates):
/// a reset, merge, swap or read then never runs beside an update of either.
class UpdateLocks {
 public:
  UpdateLocks(const MetricState& a, const MetricState& b) {
    if (a.locks_updates()) first_ = std::unique_lock<std::mutex>(a.mutex(), std::defer_lock);
    if (&a.mutex() != &b.mutex() && b.locks_updates()) second_ = std::unique_lock<std::mutex>(b.mutex(), std::defer_lock);
    if (first_.mutex() && second_.mutex()) {
      std::lock(first_, second_);
    } else if (first_.mutex()) {
      first_.lock();
    } else if (second_.mutex()) {
      second_.lock();
    }
  }

 private:
  std::unique_lock<std::mutex> first_, second_;
};

}  // namespace metrics::detail
