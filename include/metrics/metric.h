#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>

#include <metrics/input_report.h>
#include <metrics/metric_state.h>

namespace metrics {

/// What compute() and check() do when update() counted bad input.
enum class BadInputAction {
  Warn,              ///< TORCH_WARN (a UserWarning in Python)
  RaiseRuntimeError, ///< c10::Error (RuntimeError in Python)
  RaiseValueError,   ///< c10::ValueError (ValueError in Python)
};

/// The contract every metric keeps.
///
/// - State is a set of named tensors (MetricState), each with a declared cross-process reduction,
///   allocated once on the metric's device and updated in place.
/// - update() (declared by each family, with its own arguments) never reads a value back to the
///   host and never makes a tensor from host data: zero sync-class ops, checked by SyncCounter.
///   Bad values (NaN, labels out of range) are counted on the device and kept out of the state.
/// - compute() is const and idempotent and returns a tensor on the metric's device. Where the
///   metric reports bad input, it first reads back the small tally (one copy) and raises or warns.
/// - merge(other) leaves `other` unchanged; state_dict()/load_state_dict() round-trip exactly;
///   clone() is a deep copy. A call that throws leaves the state exactly as it was.
///
/// Every update and compute runs inside a record-function scope named
/// "metrics::<Name>::update" / "metrics::<Name>::compute", visible in torch.profiler traces.
class Metric {
 public:
  virtual ~Metric() = default;
  Metric& operator=(const Metric&) = delete;

  /// The metric's name in messages and scopes, e.g. "Mean" or "MulticlassAccuracy".
  const std::string& name() const { return name_; }

  /// Reports bad input (see BadInputAction), then returns the value on the metric's device.
  at::Tensor compute() const;
  /// Raises or warns if update() counted bad input since the last reset; otherwise does nothing.
  void check() const;
  /// The bad-input tally read back to the host (empty when the metric tracks none).
  InputReport input_report() const;

  /// Restores the state to what it was at construction.
  void reset();
  /// Folds `other` (the same kind of metric, same options) into this one; `other` is unchanged.
  void merge(const Metric& other);
  /// Deep copies of the state tensors, plus "update_count" (int64, on the CPU).
  StateDict state_dict() const;
  void load_state_dict(const StateDict& dict);
  /// Moves the state to `device`.
  void to(at::Device device);
  at::Device device() const;
  /// Number of update() calls since construction or the last reset.
  int64_t update_count() const;

  /// A deep copy with the same options and state, sharing nothing with this metric.
  virtual std::unique_ptr<Metric> clone() const = 0;

 protected:
  Metric(std::string name, BadInputAction action);
  Metric(const Metric&) = default;

  /// The value computed from the state: no reporting, no read-back.
  virtual at::Tensor value() const = 0;
  virtual MetricState& state() = 0;
  virtual const MetricState& state() const = 0;

  /// forward(): applies `update` (called with a Self&) to a fresh copy of this metric, folds the
  /// copy's state into this one as the next update, and returns the copy's value: the batch alone.
  template <class Self, class Update>
  at::Tensor forward_on_copy(Update&& update) {
    const auto batch = clone();
    batch->reset();
    update(static_cast<Self&>(*batch));
    state().merge(batch->state(), name_, /*append=*/true);
    return batch->value();
  }

  const std::string& update_scope() const { return update_scope_; }
  const std::string& compute_scope() const { return compute_scope_; }
  void set_bad_input_action(BadInputAction action) { action_ = action; }

 private:
  std::string name_;
  std::string update_scope_;
  std::string compute_scope_;
  BadInputAction action_;
};

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
