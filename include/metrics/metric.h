#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/FunctionRef.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include <metrics/bad_input.h>
#include <metrics/forward_batch.h>
#include <metrics/metric_state.h>
#include <metrics/update_args.h>

namespace metrics {

/// What compute() and check() do when update() counted bad input.
enum class BadInputAction {
  Warn,              ///< TORCH_WARN (a UserWarning in Python)
  RaiseRuntimeError, ///< c10::Error (RuntimeError in Python)
  RaiseValueError,   ///< c10::ValueError (ValueError in Python)
};

/// Which metrics can share one state (in a MetricCollection): those whose `counts` are equal and
/// not empty count the same things the same way. Among them, the state of a metric of a higher
/// `level` serves those of lower ones (a C x C matrix also gives the per-class counts).
struct SharingKey {
  std::string counts;
  int level = 0;
};

/// The contract every metric keeps.
///
/// - State is a MetricState, owned here (shared when metrics share it): named tensors, each with a
///   declared reduction, allocated once on the metric's device and updated in place.
/// - update() never reads a value back to the host and never makes a tensor from host data: zero
///   sync-class ops, checked by SyncCounter. Bad values (NaN, labels out of range) are counted on
///   the device and kept out of the state. Arguments are checked (metadata only) before anything
///   changes: a call that throws leaves the state exactly as it was.
/// - compute() is const and idempotent and returns a tensor on the metric's device. It first reads
///   back the update count and the small bad-input tally (one copy) and raises or warns as the
///   metric's policy says.
/// - merge(other) leaves `other` unchanged; state_dict()/load_state_dict() round-trip exactly;
///   clone() is a deep copy.
///
/// Every update and compute runs inside a record-function scope named
/// "metrics::<Name>::update" / "metrics::<Name>::compute", visible in torch.profiler traces.
class Metric {
 public:
  virtual ~Metric() = default;
  Metric& operator=(const Metric&) = delete;

  /// The metric's name in messages and scopes, e.g. "Mean" or "MulticlassAccuracy".
  const std::string& name() const { return name_; }

  /// Checks and counts one update given in the generic form (see update_parameters()).
  void update(const UpdateArgs& args);
  /// Accumulates, and returns the value of this batch alone (TorchMetrics' forward), counted on a
  /// batch state kept from one forward to the next (see ForwardBatch).
  at::Tensor forward(const UpdateArgs& args);
  /// The names of update()'s arguments in order, e.g. {"preds", "target", "weight"}.
  virtual const std::vector<std::string>& update_parameters() const = 0;
  /// Whether this metric, as built, counts argument `name` of update_parameters(); a collection
  /// hands it only those (TorchMetrics' collection passes each metric the keywords its signature
  /// has, and an unweighted metric there has no weight).
  virtual bool takes(const std::string& /*name*/) const { return true; }
  /// Checks `args` (metadata only; throws, changing nothing) and returns the step that counts them.
  virtual UpdateStep prepare_update(const UpdateArgs& args) = 0;
  /// Runs a step that prepare_update() returned (taking the state's lock if lock_updates() is on);
  /// an error from ATen or the allocator comes back with this metric's name in front.
  void apply(c10::function_ref<void()> step);
  /// Whether update() takes a lock, so that updates from several threads all count. Off by
  /// default in C++, where a metric is updated by one thread at a time (the lock would cost about
  /// a fifth of the smallest update; bench/lock_bench); builds with METRICS_CHECK_THREADS raise
  /// on a second concurrent update. The Python bindings turn it on for every metric.
  void lock_updates(bool on) { state_->lock_updates(on); }
  /// Whether the metric shares its state with group-mates in a MetricCollection: then the calls
  /// that change the state refuse to run on it directly.
  bool shares_state() const { return shared_in_groups_ != 0; }
  /// Reports bad input (see BadInputAction), then returns the value on the metric's device.
  at::Tensor compute() const;
  /// The value from the state as it is: no report, no read-back.
  virtual at::Tensor value() const = 0;
  /// value() under the state's lock: what forward() gives of its batch, whose bad input the next
  /// compute() or check() reports.
  at::Tensor compute_without_report() const;
  /// Raises or warns if update() counted bad input since the last reset; otherwise does nothing.
  void check() const;
  /// The bad-input tally read back to the host (clean when the metric tracks none).
  BadInputReport bad_input_report() const;

  /// Restores the state to what it was at construction.
  void reset();
  /// Folds `other` (the same kind of metric, same options) into this one; `other` is unchanged.
  void merge(const Metric& other, MergeOrder order = MergeOrder::Parallel);
  /// Deep copies of the state tensors in the metric's own layout (own_state_copy(): the same keys
  /// whether or not it shares a larger state in a collection), "update_count" included, plus what
  /// makes the dict checkable when it is loaded again, in a process or a checkpoint: "_version"
  /// (int64, the state format's version) and "_metric" (uint8, the bytes of its description).
  StateDict state_dict() const;
  /// Checks `dict` against this metric (its "_version" and "_metric" where present; every state
  /// tensor's name, shape and dtype), then copies it in; on error nothing has changed.
  void load_state_dict(const StateDict& dict);
  /// What this metric is: "Name(options)" and one line per state entry ("name dtype[shape]
  /// reduction"). Two metrics with equal descriptions can exchange states.
  std::string description() const { return description_of(*state_); }
  /// Moves the state to `device`; a state on meta (which holds no values) arrives reset.
  void to(at::Device device);
  at::Device device() const { return state_->device(); }
  /// Number of updates since construction or the last reset (read back from the device).
  int64_t update_count() const;
  /// The state: its entries() are the reduction seam (name, reduction, dtype of each tensor).
  const MetricState& state() const { return *state_; }

  /// A deep copy with the same options and state, sharing nothing with this metric.
  virtual std::unique_ptr<Metric> clone() const = 0;
  /// A clone() holding own_state_copy(): the state this metric would hold alone, in its own
  /// layout where it shares a larger one in a collection.
  std::unique_ptr<Metric> clone_alone() const;

  /// The options that make this metric what it is, e.g. "num_classes=10, average=macro": in
  /// messages, and compared across ranks before a sync.
  virtual std::string options_text() const = 0;

  /// A copy of the state in this metric's own layout, what it holds when it shares nothing (a
  /// metric that shares a larger state converts the counts); by default a copy as it is. Called
  /// under the state's lock.
  virtual MetricState own_state_copy() const { return *state_; }
  /// Whether the state is laid out as this metric's own, not as a larger one it shares; by
  /// default it is.
  virtual bool holds_own_layout() const { return true; }

  /// What is wrong with the state as it is, beyond the bad-input tally (read back from the device),
  /// reported by check() as the tally is; empty when nothing is. By default nothing.
  virtual std::string state_problem() const { return {}; }
  /// This metric's description() in state format `version` (older than this build's); by default
  /// today's, for a layout that has not changed since.
  virtual std::string description_in_version(int64_t /*version*/) const { return description(); }
  /// Rewrites `dict`, a state of format `version` (older than this build's) whose description was
  /// description_in_version(version), into today's layout; by default nothing. What it cannot read
  /// it leaves for load_state_dict's checks to refuse.
  virtual void upgrade_state(StateDict& /*dict*/, int64_t /*version*/) const {}
  /// What this metric's state can be shared with; by default nothing.
  virtual SharingKey sharing_key() const { return {}; }
  /// Makes this metric count into and read from `other`'s state from now on. `other` must have
  /// the same sharing key counts, a level at least this one's, and the same device.
  void share_state_of(const Metric& other);
  /// Exchanges the states of this metric and `other`, a metric of the same kind and options (as
  /// clone() gives): a metric that shares its state shares the new one.
  void swap_state(Metric& other);

 protected:
  Metric(std::string name, BadInputAction action, MetricState state);
  /// A deep copy of the state.
  Metric(const Metric& other);

  MetricState& mutable_state() { return *state_; }
  const std::string& update_scope() const { return update_scope_; }
  /// The arguments of `args` in the order of update_parameters(); null where not given. Throws
  /// (TypeError) on too many positional arguments, unknown or repeated keywords.
  std::vector<const ValueArg*> bind(const UpdateArgs& args) const;
  /// bound[i] (what bind() gave), or a TypeError naming the argument missing there.
  const ValueArg& required(const std::vector<const ValueArg*>& bound, size_t i) const;
  /// Rethrows `e` unchanged if it names this metric, else with "<Name>.<call> failed" in front,
  /// keeping its type (ValueError, out of memory, ...).
  [[noreturn]] void rethrow_named(const c10::Error& e, const char* call) const;
  // Raises or warns, as the metric's policy says, what `report` (read back under the state's lock,
  // which the caller holds) or state_problem() finds, after ReportContext::current().
  void report_locked(const BadInputReport& report) const;

 private:
  friend class MetricCollection;
  // Folds `batch`, a clone() of this metric reset and updated since (forward's), in appended
  // order: it has this metric's options and state layout, so nothing is checked.
  void merge_batch(const Metric& batch);
  // Gives this metric own_state_copy() as its state, sharing it with no other metric.
  void unshare_state();
  // Refuses `call` made on this metric directly while it shares its state with group-mates in a
  // collection (it would change them too); a collection's own calls pass.
  void check_alone(const char* call) const;
  std::string description_of(const MetricState& state) const;
  // load_state_dict's steps: the dict's format version (taken out of it); its description (taken
  // out) checked against this metric's in that version; an old dict brought into today's layout.
  int64_t take_format_version(StateDict& dict) const;
  void take_description(StateDict& dict, int64_t version) const;
  void upgrade(StateDict& dict, int64_t version) const;

  std::string name_;
  std::string update_scope_;
  std::string compute_scope_;
  BadInputAction action_;
  std::shared_ptr<MetricState> state_;
  ForwardBatch<Metric> batch_;
  // How many collection groups this metric shares its state in, with other metrics, and how many
  // collections hold it (set by MetricCollection; a copy starts at 0).
  std::atomic<int> shared_in_groups_{0};
  std::atomic<int> held_by_collections_{0};
};

/// Whether this build of the library raises on concurrent updates of one metric
/// (METRICS_CHECK_THREADS, on in Debug builds).
bool checks_concurrent_use();

/// The first line where two texts differ, as "'line of a' against 'line of b'"; empty if none.
std::string first_difference(const std::string& a, const std::string& b);

/// Implements clone() for `Derived` (a deep copy through its copy constructor).
template <class Derived, class Base>
class Cloneable : public Base {
 public:
  std::unique_ptr<Metric> clone() const override {
    return std::make_unique<Derived>(static_cast<const Derived&>(*this));
  }

 protected:
  using Base::Base;
};

}  // namespace metrics
