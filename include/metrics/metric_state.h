#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/Optional.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
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
/// and updated in place. Every state has "update_count" ([], Sum) on that device, counted without
/// a read-back; it may also have a BadInput tally. Both are in the state's count dtype: int64, or
/// float64 where the metric's other sums are float64 (exact up to 2^53), so that one in-place op
/// can update them together. entries() is the reduction seam: each tensor with its name,
/// reduction and dtype, in registration order.
///
/// The entries of one dtype are views into one packed buffer, in registration order, so an update
/// can write many of them with one op (span()). The Cat entries (rows that grow) are views into the
/// rows buffer: one row per sample holding each Cat entry's row side by side, with room for more
/// rows, so that an update writes its samples' rows in place (grow_rows()).
///
/// Copying a MetricState copies its tensors (a deep copy), so copies never share storage.
class MetricState {
 public:
  explicit MetricState(at::Device device, at::ScalarType count_dtype = at::kLong);
  MetricState(const MetricState& other);
  MetricState& operator=(const MetricState& other);
  MetricState(MetricState&&) noexcept = default;
  MetricState& operator=(MetricState&&) noexcept = default;

  /// Registers a tensor of `shape` and `dtype` filled with `fill`; returns its slot. A Cat entry
  /// starts with 0 rows (shape[0] == 0) and goes to the rows buffer (all of one dtype): append()
  /// and grow_rows() grow it.
  size_t add(std::string name, at::IntArrayRef shape, at::ScalarType dtype, const c10::Scalar& fill,
             Reduction reduction, Counts counts = Counts::kNo);
  /// Adds the bad-input tally with these kinds (labels, in the order the kernels count them).
  /// `cumulative`: the kernels count kind k as every entry bad in kinds 0..k (see BadInput).
  void track_bad_input(std::vector<std::string> kinds, bool cumulative = false);
  bool tracks_bad_input() const { return bad_input_.has_value(); }
  /// Entry `slot` (of the count dtype) holds, element by element, what the additions to the count
  /// buffer before it round off (a compensated sum's low parts): merge() adds the Sum entries it
  /// covers with TwoSum, what that rounds off going into it too.
  void compensate_in(size_t slot);

  /// A tensor the metric registered (never the update count or the tally: see finish_update).
  at::Tensor& operator[](size_t slot);
  const at::Tensor& operator[](size_t slot) const {
    settle_values();
    return entries_[slot].tensor;
  }
  /// The update count (0-dim), as an update reads it: nothing settled.
  const at::Tensor& update_count_tensor() const { return entries_.front().tensor; }
  /// The packed 1-D view from the start of entry `first` to the end of entry `last` (two entries of
  /// one dtype) in their buffer: writing it writes them and the entries of that dtype between them.
  at::Tensor span(size_t first, size_t last) const;
  /// Where entry `slot` starts in the packed buffer of its dtype; for a Cat entry, where its part
  /// of a row starts in a row of the rows buffer.
  int64_t offset(size_t slot) const { return offsets_[slot]; }
  /// Reserves `length` elements of the count buffer (the buffer of count_dtype()) that belong to
  /// no entry, after every entry: update scratch that ops must address together with the state
  /// (one put_ into the buffer, a view over the state and the scratch). Copied and moved with the
  /// state, never merged, reduced, saved, loaded or zeroed (reset() leaves it: the ATen paths keep
  /// constants there, as an update row's 1 for the update count). Returns its offset there.
  int64_t add_scratch(int64_t length);
  /// A 0-dim slot of the count buffer whose value belongs to every element of entry `target` (of
  /// the count dtype): an update adds to it, one place, where it would add to all of `target`.
  /// entries() folds it in (see settle()). Returns its offset in the count buffer. For a Cat
  /// `target` ([rows, n]), a column of the rows buffer instead, whose value in a row belongs to
  /// every element of that row of `target`; returns its offset in a row.
  int64_t add_pending_addend(size_t target);
  /// A column of the rows buffer that belongs to no entry, where an update adds what counts nothing
  /// (never read; zeroed by reset()). Returns its offset in a row.
  int64_t add_row_spare();
  /// The offset in a row of the spare column (add_row_spare), -1 where there is none.
  int64_t row_spare_offset() const;
  /// The offset of the `nth` scratch range registered (add_scratch), and of entry `target`'s pending
  /// addend (-1 where it has none).
  int64_t scratch_offset(size_t nth) const;
  int64_t pending_addend_offset(size_t target) const;
  /// The count buffer: every entry of the count dtype, the tally's and the scratch, in one 1-D
  /// tensor (updates address it by offset()).
  const at::Tensor& count_buffer() const { return buffers_[buffer_of(count_dtype())]; }
  /// Folds the work updates leave pending into the entries: each pending addend into its target,
  /// and the first bad update that the tally's since-bad count implies (a few ops where there is a
  /// tally or a pending addend; a rows buffer's pending columns, over the rows added since the last
  /// settle only). entries() calls it (the reads of values call settle_values()); it changes what
  /// the tensors hold, never what the state means. Readers on several threads may call it together;
  /// beside an update it must not run (it writes what the update adds to): a read beside updates
  /// takes the update lock (Metric::compute and the others do where lock_updates() is on).
  void settle() const;
  /// settle() without the tally's step (its first bad update): what the reads of the metric's own
  /// entries need (on a device, six launches fewer).
  void settle_values() const;

  /// Tensor `index` of the metric's update scratch (what updates reuse: delta rows, constants on the
  /// state's device, host-side keys), never part of the state: a copy or a move to another device
  /// starts with none. Undefined until the metric sets it.
  at::Tensor& scratch(size_t index);
  /// scratch(index), made by `make()` where the metric has not set it yet.
  template <class Make>
  const at::Tensor& scratch(size_t index, Make make) {
    auto& tensor = scratch(index);
    if (!tensor.defined()) tensor = make();
    return tensor;
  }
  at::ScalarType count_dtype() const { return entries_.front().tensor.scalar_type(); }
  /// The number of entries (no settle, unlike entries().size()).
  size_t size() const { return entries_.size(); }
  /// Entry `slot`'s reduction, name, dtype and size, as an update reads them (metadata: no settle).
  Reduction reduction(size_t slot) const { return entries_[slot].reduction; }
  const std::string& name(size_t slot) const { return entries_[slot].name; }
  at::ScalarType dtype(size_t slot) const { return entries_[slot].tensor.scalar_type(); }
  int64_t numel(size_t slot) const { return entries_[slot].tensor.numel(); }
  /// The tally, where the state tracks bad input.
  const BadInput* bad_input() const { return bad_input_ ? &*bad_input_ : nullptr; }
  /// Every tensor with its name, reduction and dtype, pending work folded in (settle()): read
  /// them, never write them.
  const std::vector<StateEntry>& entries() const {
    settle();
    return entries_;
  }
  /// entries() for reads of the metric's own entries, never of the tally (see settle_values()).
  const std::vector<StateEntry>& value_entries() const {
    settle_values();
    return entries_;
  }
  /// The entries for their names, reductions, dtypes and shapes alone: nothing settled, so their
  /// values may not be the state's (what entries() gives).
  const std::vector<StateEntry>& entry_layout() const { return entries_; }
  at::Device device() const { return entries_.front().tensor.device(); }

  /// Appends rows (the entry's shape past dim 0) to the Cat entries: (slot, rows) pairs, as many
  /// rows each; the Cat entries not given gain rows of zeros.
  void append(const std::vector<std::pair<size_t, at::Tensor>>& rows);
  /// Adds `n` rows of zeros to every Cat entry and returns them as they lie in the rows buffer, 1-D
  /// (n * row_width() elements, rows of row_width(), each laid out as offset() and the pending
  /// addends' offsets say): an update adds its samples there. Never reads anything back.
  at::Tensor grow_rows(int64_t n);
  /// The elements of one row of the rows buffer.
  int64_t row_width() const { return rows_.defined() ? rows_.size(1) : 0; }

  /// Ends an update whose bad entries the host counted: adds them to the tally, then counts the
  /// update. Never reads anything back.
  void finish_update(c10::ArrayRef<int64_t> bad_counts = {});

  /// Reads the update count back (a copy from the device).
  int64_t update_count() const;
  /// Reads the tally back (one small copy); clean when the state tracks no bad input.
  BadInputReport bad_input_report() const;
  /// Reads the update count and the tally back in one small copy.
  std::pair<int64_t, BadInputReport> update_count_and_report() const;

  void reset();
  /// Whether it holds what reset() leaves (settles it, then reads one flag back; a meta state does):
  /// a loaded state may hold counts with no update counted. Take the update lock around it.
  bool holds_fresh_values() const;
  /// Reduces `other` into this state (sum, min or max per tensor); `other` is left unchanged.
  /// `metric` names the caller in error messages. Checks everything before changing anything.
  void merge(const MetricState& other, const std::string& metric, MergeOrder order = MergeOrder::Parallel);
  /// Exchanges the tensors (entries, buffers, scratch, tally) with `other`; each keeps its lock.
  void swap_tensors(MetricState& other);
  StateDict state_dict() const;
  /// Copies `dict` in after checking names, shapes and dtypes; on error nothing has changed.
  void load_state_dict(const StateDict& dict, const std::string& metric);
  /// Moves the tensors to `device`; from meta, where they hold no values, they arrive reset.
  void to(at::Device device);
  /// Whether `other` has the same entries (names, dtypes), wherever it is.
  bool same_entries(const MetricState& other) const;
  /// Whether `other` has the same entries on the same device.
  bool same_layout(const MetricState& other) const { return device() == other.device() && same_entries(other); }

  /// Whether updates of this state take its lock (see Metric::lock_updates); a state shared by
  /// several metrics has one lock.
  bool locks_updates() const { return threads_->locks; }
  void lock_updates(bool on) { threads_->locks = on; }
  std::mutex& mutex() const { return threads_->mutex; }
  /// Set while an update runs, where the build checks for concurrent use (METRICS_CHECK_THREADS).
  std::atomic<bool>& busy() const { return threads_->busy; }

 private:
  // Where the count buffer has room for no entry: `length` elements just before entry `before`
  // (entries_.size(): after every entry).
  struct Hidden {
    static constexpr int64_t kScratch = -1;
    static constexpr int64_t kSinceBad = -2;
    size_t before;
    int64_t length;
    int64_t target = kScratch;  // the entry a pending addend belongs to, or what else the room is
  };
  // Copies the entries into new packed buffers, one per dtype (hidden room zeroed), and views them there.
  void pack();
  // Points every entry at its place in the packed buffer of its dtype, the Cat entries at theirs in
  // the rows buffer.
  void view_buffers();
  // Copies the Cat entries' rows (and zeros for their pending addends) into a new rows buffer.
  void pack_rows();
  // The Cat entries' part of a row, where the pending addends' columns start.
  int64_t cat_width() const;
  // Empties the Cat entries, leaving the rows buffer's room (zeros).
  void clear_rows();
  // Walks the count buffer's layout: `entry(slot, offset)` for each entry of the count dtype and
  // `hidden(index, offset)` for each hidden range, in buffer order.
  template <class Entry, class HiddenRange>
  void walk_count_buffer(Entry entry, HiddenRange hidden) const;
  int64_t add_hidden(Hidden hidden);
  void zero_hidden();
  // settle()'s folds of the pending addends and rows, under the settling lock.
  void fold_pending() const;
  size_t buffer_of(at::ScalarType dtype) const;
  // The last of the Sum entries from `first` (a Sum entry) on that lie back to back in one buffer,
  // as they do in `other`, on this device, short of the compensation (merge() adds them with one
  // add): `first` where the next does not.
  size_t last_of_sums_packed_alike(const MetricState& other, size_t first) const;
  // The part of the compensate_in() entry that holds what entries first..last (packed) round off;
  // undefined where it does not cover them all, or where they are all counts.
  at::Tensor compensation_of(size_t first, size_t last) const;
  // The other state's entries on this device, once they are checked to merge into these.
  std::vector<at::Tensor> mergeable(const MetricState& other, const std::string& metric) const;
  // Whether the entry holds counts: the update count, the tally, or one added as Counts (checked as
  // such when loaded).
  bool is_count(size_t slot) const;
  bool is_update_count_or_tally(size_t slot) const;
  void check_rows_agree(const std::vector<at::Tensor>& incoming, const std::string& metric) const;
  void check_tally_agrees(const std::vector<at::Tensor>& incoming, const std::string& metric) const;
  // Until the update count and the tally moved into the counts' dtype (float64 for a weighted
  // classification metric), they were int64 in every state, and first_bad_update's none was
  // INT64_MAX: such a dict still loads, exactly.
  at::Tensor widened(const at::Tensor& given, size_t slot) const;

  std::vector<StateEntry> entries_;  // entries_[0] is "update_count"
  std::vector<at::Tensor> buffers_;  // one per dtype, in the order the dtypes were first registered
  std::vector<int64_t> offsets_;     // each entry's offset in its buffer
  std::map<size_t, at::Tensor> scratch_;  // a map: references stay valid as it grows
  std::vector<Hidden> hidden_;
  std::vector<int64_t> hidden_offsets_;
  at::Tensor rows_;                  // [capacity, row_width]: rows past row_count_ hold zeros
  int64_t row_count_ = 0;
  mutable int64_t rows_settled_ = 0;  // the rows whose pending columns settle() has folded (the rest are newer)
  // the Cat targets of the rows buffer's columns past the Cat entries', in column order (kNoEntry: a spare)
  std::vector<size_t> row_pending_;
  static constexpr size_t kNoEntry = static_cast<size_t>(-1);
  at::Tensor since_bad_;  // the tally's since-bad slot (a view of the count buffer, made once: updates read it)
  c10::optional<BadInput> bad_input_;
  c10::optional<size_t> compensation_;  // see compensate_in()
  struct Threads {
    std::mutex mutex;
    std::mutex settling;  // settle() from several readers at once folds each addend once
    std::atomic<bool> busy{false};
    bool locks = false;
  };
  std::unique_ptr<Threads> threads_ = std::make_unique<Threads>();
};

}  // namespace metrics
