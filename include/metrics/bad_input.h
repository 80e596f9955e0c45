#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <metrics/state_entry.h>

namespace metrics {

/// What update() found wrong in its input and kept out of the state, read back from the device
/// by compute(), check() or bad_input().
struct BadInputReport {
  /// (kind, count) for every kind the metric tracks, e.g. ("NaN values", 3).
  std::vector<std::pair<std::string, int64_t>> counts;
  /// Updates that had at least one bad entry.
  int64_t bad_updates = 0;
  /// Index of the first such update, counting from 0 since the last reset; -1 when none.
  int64_t first_bad_update = -1;

  bool clean() const { return bad_updates == 0; }
  /// e.g. "Mean: 3 NaN values in 2 updates, first at update 1234 (kept out of the state)"
  std::string message(const std::string& metric) const;
};

/// The bad-input tally of a metric. update() counts bad entries on the device by kind and keeps
/// them out of the state; the tally adds them up without a read-back. Its two tensors are state
/// entries (in the state's count dtype, int64 or float64), so merge, state_dict, reset and
/// cross-process reductions treat them like the rest:
///   "bad_input_counts" [kinds + 1], Sum: per-kind counts, then the updates that had any;
///   "first_bad_update" [1], Min: the index of the first such update, kNone while none.
/// Only BadInput, or a metric's fused update that adds to them as BadInput would, writes into them.
///
/// An update never writes first_bad_update itself (that would take a reduction, a select and a
/// minimum on the device): it adds 1 to a slot of the count buffer beside the tally, "since bad",
/// when bad_updates was above 0 as it began (the device paths add min(bad_updates, 1)). While
/// first_bad_update holds kNone and bad_updates is above 0, the first bad update is then
/// update_count - 1 - since_bad, which settle() writes (MetricState::settle()).
///
/// Where `cumulative`, count k holds the entries bad in any of kinds 0..k (what one reduction of
/// nested masks gives); reports give each kind's own count.
class BadInput {
 public:
  /// first_bad_update while no update had bad input: 2^62, exact in float64 too.
  static constexpr int64_t kNone = int64_t{1} << 62;

  /// `kinds`: the labels of the kinds in the order the metric's kernels count them; `counts_slot`
  /// and `first_slot`: where the state registered the two entries; `since_bad_offset`: the slot of
  /// the count buffer that counts updates since a bad one.
  BadInput(std::vector<std::string> kinds, size_t counts_slot, size_t first_slot, int64_t since_bad_offset,
           bool cumulative);

  const std::vector<std::string>& kinds() const { return kinds_; }
  size_t counts_slot() const { return counts_slot_; }
  size_t first_slot() const { return first_slot_; }
  int64_t since_bad_offset() const { return since_bad_offset_; }
  bool cumulative() const { return cumulative_; }

  /// Counts one update whose bad entries the host knows (the CPU kernels'; nothing when all are
  /// 0) into `entries` and `since_bad` (the count buffer's slot); `update_index` is the update
  /// count before this update. (The device paths add to them in their own fused update, as this
  /// would.)
  void record(std::vector<StateEntry>& entries, const at::Tensor& since_bad, c10::ArrayRef<int64_t> kind_counts,
              const at::Tensor& update_index) const;
  /// Writes the first bad update that `since_bad` implies into first_bad_update, and zeroes it.
  void settle(const std::vector<StateEntry>& entries, const at::Tensor& since_bad) const;
  /// Another stream's first_bad_update as seen after `offset` updates of this one (forward()
  /// appends a batch so), for the Min that merges it: kNone shifted stays above every index.
  static at::Tensor shift_first(const at::Tensor& theirs, const at::Tensor& offset);
  /// "bad_input_counts" as a state dict of format version 2 held it (each kind's own count), in
  /// this tally's form.
  at::Tensor from_version_2(const at::Tensor& counts) const;

  /// Reads the tally back: one small copy.
  BadInputReport report(const std::vector<StateEntry>& entries) const;
  /// The tally's tensors, to read back with others in one copy, and the report from their values
  /// read back in that order (as int64).
  std::vector<at::Tensor> tally(const std::vector<StateEntry>& entries) const;
  BadInputReport report_of(const int64_t* values) const;

 private:
  std::vector<std::string> kinds_;
  size_t counts_slot_;
  size_t first_slot_;
  int64_t since_bad_offset_;
  bool cumulative_;
};

}  // namespace metrics
