#pragma once

#include <memory>
#include <mutex>

namespace metrics {

/// forward()'s batch: a clone of the metric (or collection) that forwards, made on its first
/// forward and reset before each one. Kept, it keeps the scratch its updates made, so a forward
/// allocates nothing and dispatches the same ops as the one before; it costs a second state of the
/// metric's size. A copy of its owner starts without one.
template <class T>
class ForwardBatch {
 public:
  ForwardBatch() = default;
  ForwardBatch(const ForwardBatch&) {}
  ForwardBatch& operator=(const ForwardBatch&) {
    clear();
    return *this;
  }

  /// The batch, made by `make()` (a std::unique_ptr<T>) where there is none or `fits(batch)` says
  /// it no longer fits (the owner's state moved); hold mutex() while using it.
  template <class Make, class Fits>
  T& get(Make make, Fits fits) {
    if (!batch_ || !fits(*batch_)) batch_ = make();
    return *batch_;
  }
  /// Drops the batch (its owner's state changed device or layout), once no forward() uses it.
  /// Never call it holding a lock that a forward() takes while it holds mutex().
  void clear() {
    const std::lock_guard<std::mutex> lock(*mutex_);
    batch_.reset();
  }
  std::mutex& mutex() { return *mutex_; }

 private:
  std::unique_ptr<T> batch_;
  std::unique_ptr<std::mutex> mutex_ = std::make_unique<std::mutex>();
};

}  // namespace metrics
