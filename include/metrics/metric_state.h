#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>

#include <map>
#include <string>
#include <vector>

#include <metrics/input_report.h>

namespace metrics {

/// How a state tensor combines with another metric's (merge) or another process's (all-reduce).
enum class Reduction { Sum, Min, Max };

/// State tensors by name, as state_dict() returns them.
using StateDict = std::map<std::string, at::Tensor>;

/// The tensors a metric accumulates into: registered once, allocated once on the metric's
/// device, updated in place. Optionally also a tally of bad input that update() kept out of the
/// state (counted on the device, read back only by report()).
///
/// Copying a MetricState copies its tensors (a deep copy), so copies never share storage.
class MetricState {
 public:
  MetricState() = default;
  MetricState(const MetricState& other);
  MetricState& operator=(const MetricState& other);
  MetricState(MetricState&&) noexcept = default;
  MetricState& operator=(MetricState&&) noexcept = default;

  /// Registers a tensor of `shape` and `dtype` filled with `fill`; returns its index.
  size_t add(std::string name, at::IntArrayRef shape, at::ScalarType dtype, const c10::Scalar& fill,
             Reduction reduction, at::Device device);

  /// Adds the bad-input tally: one count per kind (labels used in messages), the number of
  /// updates that had any, and the index of the first such update.
  void track_bad_input(std::vector<std::string> kinds, at::Device device);
  bool tracks_bad_input() const { return !bad_input_kinds_.empty(); }
  const std::vector<std::string>& bad_input_kinds() const { return bad_input_kinds_; }
  /// int64 [kinds + 1]: per-kind counts, then the number of updates with bad input.
  at::Tensor& bad_input_counts() { return entries_[bad_counts_index_].tensor; }
  /// int64 [1]: index of the first update with bad input; INT64_MAX while there is none.
  at::Tensor& first_bad_update() { return entries_[first_bad_index_].tensor; }

  at::Tensor& operator[](size_t index) { return entries_[index].tensor; }
  const at::Tensor& operator[](size_t index) const { return entries_[index].tensor; }
  size_t size() const { return entries_.size(); }
  at::Device device() const;

  /// Index of the update now running (0 for the first); counted on the host, never read back.
  int64_t begin_update() { return updates_++; }
  int64_t updates() const { return updates_; }

  void reset();
  /// Reduces `other` into this state (sum, min or max per tensor); `other` is left unchanged.
  /// `metric` names the caller in error messages. Checks everything before changing anything.
  /// With `append`, `other` is taken as the updates that follow this state's (forward() merges a
  /// batch so): its update indices are shifted past this state's. Otherwise the two streams ran
  /// side by side and each keeps its own indices.
  void merge(const MetricState& other, const std::string& metric, bool append = false);
  StateDict state_dict() const;
  /// Copies `dict` in after checking names, shapes and dtypes; on error nothing has changed.
  void load_state_dict(const StateDict& dict, const std::string& metric);
  void to(at::Device device);

  /// Reads the tally back to the host: one small copy, never called by update().
  InputReport report() const;

 private:
  struct Entry {
    std::string name;
    at::Tensor tensor;
    c10::Scalar fill;
    Reduction reduction;
  };
  const Entry* find(const std::string& name) const;

  std::vector<Entry> entries_;
  std::vector<std::string> bad_input_kinds_;
  size_t bad_counts_index_ = 0;
  size_t first_bad_index_ = 0;
  int64_t updates_ = 0;
};

}  // namespace metrics
