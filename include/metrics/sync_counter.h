#pragma once

#include <torch/arg.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace metrics {

/// An ATen op that makes the host wait for an accelerator (or copies host data to it), and why.
struct SyncClassOp {
  const char* name;  ///< e.g. "aten::nonzero"
  const char* why;
};

/// The ops SyncCounter counts. Most always sync; aten::copy_ counts only between two devices and
/// aten::repeat_interleave only without an output_size.
const std::vector<SyncClassOp>& sync_class_ops();

struct SyncCounterOptions {
  /// Throw c10::Error at the first sync-class op or HostRead, naming it and the enclosing metric call.
  TORCH_ARG(bool, strict) = false;
  /// Also count the synchronizations that PyTorch's CUDA sync debug mode reports (builds against
  /// a CUDA LibTorch only; elsewhere the count stays 0), on the constructing thread only, also with
  /// all_threads: they come as warnings, which c10 hands to a handler per thread (WarningCapture).
  TORCH_ARG(bool, cuda_sync_debug) = false;
  /// Count the ops and HostReads of every thread while alive, not only the constructing thread's (a
  /// global observer: every thread pays for it). Not with strict (c10::ValueError), which can only
  /// stop the calling thread.
  TORCH_ARG(bool, all_threads) = false;
};

/// Counts, in its thread (or in every thread: SyncCounterOptions::all_threads) and while alive,
/// the ATen ops that would force a host-device synchronization on an accelerator, by op name. It
/// is an at::RecordFunction observer, so it sees ops from any code on the thread: ours,
/// LibTorch's, the user's, Python's.
///
/// Nesting: an op called while a sync-class op is running (item() calling
/// _local_scalar_dense, bincount calling min and max) is not counted again, so one user-level
/// call counts once, under its outermost name. Counters nest: each live counter on the thread
/// counts every op. With no counter alive the observer is removed and costs nothing. Its figures
/// may be read from any thread.
///
/// Strict mode throws at the op itself: ATen swallows exceptions thrown from RecordFunction
/// observers, so strict mode also turns on c10's generic dispatch-mode key for the thread and
/// throws from a boxed fallback on it, before the op runs.
class SyncCounter {
 public:
  explicit SyncCounter(SyncCounterOptions options = {});
  ~SyncCounter();
  SyncCounter(const SyncCounter&) = delete;
  SyncCounter& operator=(const SyncCounter&) = delete;

  /// Sync-class ops counted so far.
  int64_t total() const;
  /// Counts by op name, e.g. {"aten::item": 2, "aten::nonzero": 1}.
  std::map<std::string, int64_t> by_op() const;
  /// Synchronizations reported by CUDA's sync debug mode (0 without CUDA).
  int64_t cuda_syncs() const;
  /// "3 sync-class ops: aten::item x2, aten::nonzero x1", or "no sync-class ops".
  std::string summary() const;

  /// Called by the observer; not for users.
  void record(const std::string& op);
  void record_cuda_sync();

 private:
  struct Strict;
  struct CudaSyncDebug;

  bool all_threads_;
  mutable std::mutex mutex_;  // an all-threads counter records from every thread
  int64_t total_ = 0;
  int64_t cuda_syncs_ = 0;
  std::map<std::string, int64_t> by_op_;
  std::unique_ptr<Strict> strict_;
  std::unique_ptr<CudaSyncDebug> cuda_sync_debug_;
};

/// A read of tensor data that the dispatcher does not see as a sync-class op, counted as one while
/// alive: Python's Tensor.tolist() and numpy() read host memory directly on the CPU, and copy from
/// the device (and wait) only on an accelerator. Every counter that sees this thread counts it
/// under `name` (unless it runs inside a sync-class op), and the ops it runs are not counted again.
/// In strict mode the constructor throws, naming it.
class HostRead {
 public:
  explicit HostRead(const std::string& name);
  ~HostRead();
  HostRead(const HostRead&) = delete;
  HostRead& operator=(const HostRead&) = delete;
};

}  // namespace metrics
