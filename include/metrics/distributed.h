#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

#include <metrics/collection.h>
#include <metrics/metric.h>
#include <metrics/state_entry.h>

namespace c10d {
class ProcessGroup;
}  // namespace c10d

namespace metrics {

/// State tensors packed for collectives: one contiguous 1-D buffer per (reduction, dtype), so
/// that a metric or a whole collection costs one collective per pair, not one per tensor. Cat
/// entries (rows of any number) are not packed: one all-gather of every rank's row counts, then
/// one of each entry's rows.
///
/// A floating Min or Max buffer carries NaN through the all-reduce, as torch.amin and amax (and
/// so updates and merges) do, where the backends' MIN and MAX may drop it: its values go with NaN
/// replaced by the reduction's identity, followed by a flag per value (-1 for Min, 1 for Max where
/// NaN, else 0) that the same reduction brings together; unpack() puts NaN back where a flag is set.
class PackedState {
 public:
  struct Buffer {
    Reduction reduction;
    at::Tensor tensor;
  };
  struct Rows {
    std::string name;
    at::Tensor tensor;
  };

  /// Copies `entries` (a state walk: metric.state().entries() or collection.state_entries()).
  explicit PackedState(const std::vector<StateEntry>& entries);

  std::vector<Buffer>& buffers() { return buffers_; }
  const std::vector<Buffer>& buffers() const { return buffers_; }
  /// The Cat entries: replace each tensor by the rows of every rank, in rank order.
  std::vector<Rows>& rows() { return rows_; }
  const std::vector<Rows>& rows() const { return rows_; }
  /// The entries' values, read from the buffers and the rows, keyed by the walk's names.
  StateDict unpack() const;

 private:
  struct Slot {
    std::string name;
    size_t buffer;
    int64_t offset;
    std::vector<int64_t> shape;
  };
  // Buffer b's values: its first value_counts_[b] elements; its NaN flags follow where it has them.
  bool carries_nan(size_t b) const { return buffers_[b].tensor.numel() > value_counts_[b]; }
  std::vector<Buffer> buffers_;
  std::vector<int64_t> value_counts_;
  std::vector<Slot> slots_;
  std::vector<Rows> rows_;
};

/// The metric's state packed (a copy, pending work folded in), read under its update lock.
PackedState packed_state(const Metric& metric);

/// What a rank's collection is, for the check that every rank holds the same one: each metric's
/// name and description(), then its groups.
std::string describe_for_sync(const MetricCollection& collection);

/// Raises ValueError (naming `who`, the first rank that differs from rank 0 and the first line
/// that differs) unless every rank's describe_for_sync text in `texts` is the same.
void check_same_texts(const std::vector<std::string>& texts, const std::string& who);

/// Where a collective runs: on the state's device, except where the backend cannot serve it:
/// NCCL takes CUDA tensors only, so a CPU state goes to the current CUDA device and back.
at::Device collective_device(const std::string& backend, at::Device state_device);

/// The metric with its state reduced over every rank of `group`, each tensor by its declared
/// reduction (update count and bad-input tally included), so compute() on it gives the global
/// value on every rank; `metric` itself is unchanged and goes on accumulating locally. Costs one
/// small all-gather that checks that every rank holds the same metric (a ValueError naming the
/// first difference on every rank otherwise, never a hang), then one all-reduce per (reduction,
/// dtype), and two all-gathers per Cat entry (row counts, then the rows padded to the longest).
/// Every rank of the group must call it.
std::unique_ptr<Metric> synced(const Metric& metric, c10d::ProcessGroup& group);
/// The same for a collection: one all-reduce per (reduction, dtype) for all its states together.
MetricCollection synced(const MetricCollection& collection, c10d::ProcessGroup& group);

}  // namespace metrics
