#pragma once

#include <cstdint>
#include <optional>

namespace metrics::detail::cpu {

/// An ignore_index, as the vector kernels take it (one vector_kernels_take), and whether its
/// entries' scores take part in the scores' range, which decides whether they are logits:
/// TorchMetrics' binary metrics judge every score, its BinaryConfusionMatrix the ones ignore_index
/// keeps. An ignored entry counts in no cell and is never bad input.
struct Ignore {
  int64_t index;
  bool judges_every_score;
};

/// Whether the vector kernels take an ignore_index: not one whose low 32 bits are 0 or 1, so not 0
/// or 1 (they would count its entries), nor past 32 bits with those low bits (the AVX2 kernels
/// compare a target's low half with the index's, which must not be a clean target's).
inline bool vector_kernels_take(int64_t ignore_index) { return static_cast<uint32_t>(ignore_index) > 1; }

/// Whether targets may be an ignore_index, and whose scores the range judges then: a kernel's
/// template argument.
enum class Ignoring { None, JudgeEvery, JudgeKept };

inline Ignoring ignoring_of(const std::optional<Ignore>& ignore) {
  return !ignore ? Ignoring::None : ignore->judges_every_score ? Ignoring::JudgeEvery : Ignoring::JudgeKept;
}

/// The index a kernel compares targets with: the ignore_index, or 0 where there is none (never one).
inline int64_t compared_index(const std::optional<Ignore>& ignore) { return ignore ? ignore->index : 0; }

}  // namespace metrics::detail::cpu
