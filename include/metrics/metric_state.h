#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/Optional.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <metrics/bad_input.h>
#include <metrics/state_entry.h>

namespace metrics {

/// How two streams of updates relate when one state is merged into another.
enum class MergeOrder {
  Parallel,  ///< side by side (another process, another shard): each keeps its update indices
  Appended,  ///< the other stream follows this one (forward() folds a batch in): its indices shift
};

/// The tensors a metric accumulates into, registered once, allocated once on the metric's device
/// and updated in place. Every state has "update_count" (int64 [], Sum) on that device, counted
/// without a read-back; it may also have a BadInput tally. entries() is the reduction seam: each
/// tensor with its name, reduction and dtype, in registration order.
///
/// Copying a MetricState copies its tensors (a deep copy), so copies never share storage.
class MetricState {
 public:
  explicit MetricState(at::Device device);
  MetricState(const MetricState& other);
  MetricState& operator=(const MetricState& other);
  MetricState(MetricState&&) noexcept = default;
  MetricState& operator=(MetricState&&) noexcept = default;

  /// Registers a tensor of `shape` and `dtype` filled with `fill`; returns its slot.
  size_t add(std::string name, at::IntArrayRef shape, at::ScalarType dtype, const c10::Scalar& fill,
             Reduction reduction);
  /// Adds the bad-input tally with these kinds (labels, in the order the kernels count them).
  void track_bad_input(std::vector<std::string> kinds);
  bool tracks_bad_input() const { return bad_input_.has_value(); }

  /// A tensor the metric registered (never the update count or the tally: see finish_update).
  at::Tensor& operator[](size_t slot);
  const at::Tensor& operator[](size_t slot) const { return entries_[slot].tensor; }
  /// Every tensor with its name, reduction and dtype: read them, never write them.
  const std::vector<StateEntry>& entries() const { return entries_; }
  at::Device device() const { return entries_.front().tensor.device(); }

  /// Ends an update: adds the bad entries it kept out (int64 [kinds] on the device, or counts the
  /// host knows) to the tally, then counts the update. Never reads anything back.
  void finish_update(const at::Tensor& bad_counts);
  void finish_update(c10::ArrayRef<int64_t> bad_counts = {});

  /// Reads the update count back (a copy from the device).
  int64_t update_count() const;
  /// Reads the tally back (one small copy); clean when the state tracks no bad input.
  BadInputReport bad_input_report() const;

  void reset();
  /// Reduces `other` into this state (sum, min or max per tensor); `other` is left unchanged.
  /// `metric` names the caller in error messages. Checks everything before changing anything.
  void merge(const MetricState& other, const std::string& metric, MergeOrder order = MergeOrder::Parallel);
  StateDict state_dict() const;
  /// Copies `dict` in after checking names, shapes and dtypes; on error nothing has changed.
  void load_state_dict(const StateDict& dict, const std::string& metric);
  void to(at::Device device);

  /// Whether updates of this state take its lock (see Metric::lock_updates); a state shared by
  /// several metrics has one lock.
  bool locks_updates() const { return threads_->locks; }
  void lock_updates(bool on) { threads_->locks = on; }
  std::mutex& mutex() const { return threads_->mutex; }
  /// Set while an update runs, where the build checks for concurrent use (METRICS_CHECK_THREADS).
  std::atomic<bool>& busy() const { return threads_->busy; }

 private:
  at::Tensor& update_count_tensor() { return entries_.front().tensor; }

  std::vector<StateEntry> entries_;  // entries_[0] is "update_count"
  c10::optional<BadInput> bad_input_;
  struct Threads {
    std::mutex mutex;
    std::atomic<bool> busy{false};
    bool locks = false;
  };
  std::unique_ptr<Threads> threads_ = std::make_unique<Threads>();
};

}  // namespace metrics
