#pragma once

namespace metrics {

/// update() runs one of two implementations: a hand-written single pass for CPU tensors, and a
/// chain of ATen ops that serves every other device. Aggregators take the ATen path for a
/// non-contiguous CPU input too; classification copies one to contiguous and stays on the CPU
/// path (save samplewise counting, which is ATen ops everywhere). Both are sync-free and give the
/// same counts (sums agree to rounding).
///
/// While a ForceAtenPath is alive, this thread's updates take the ATen path even on the CPU: to
/// compare the two paths, or to measure the ATen path.
class ForceAtenPath {
 public:
  ForceAtenPath();
  ~ForceAtenPath();
  ForceAtenPath(const ForceAtenPath&) = delete;
  ForceAtenPath& operator=(const ForceAtenPath&) = delete;

 private:
  bool previous_;
};

/// Whether this thread may use the CPU fast path (false inside a ForceAtenPath).
bool cpu_fast_path_enabled();

}  // namespace metrics
