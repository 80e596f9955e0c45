#pragma once

// Vector kernels of the weighted binary and multilabel CPU path, for float32 scores, int64
// targets and float32 or float64 weights (one per row or one per entry, or none: 1 each). A batch
// with weights takes one pass, which checks that it is clean (finite scores, targets 0 or 1 or the
// ignore_index, weights finite and not negative) and that its scores are logits (one outside
// [0, 1]) or not as its first scores made it guess, and sums each entry's weight into the one cell
// it falls in (an ignored entry's in none), as the scalar loop in classification_cpu.cpp does.
// Float32 weights, and float64 ones per row, whose every sum is exact in float64 (their exponents
// close enough for the number of weights a sum takes and their significant bits: float32 weights
// within 2^22 of each other for 128 rows) take three sums per label and the total of the weights
// kept instead, from which the cells follow by subtraction, the same exact sums. A batch the guess
// got wrong, and one without weights, takes two passes: one finds whether it is clean and logits,
// one counts. Any other batch is left to the scalar loop.

#include <cstdint>
#include <optional>

#include "../cpu_isa.h"
#include "ignore.h"

namespace metrics::detail::cpu {

/// `rows` rows of `labels` entries, row-major; `weight`: one per row, one per entry
/// (`per_entry`), or null (1 each), float32 (`float_weight`) or float64; the ignore_index its
/// targets may hold.
struct WeightedEntries {
  const float* preds;
  const int64_t* target;
  const void* weight;
  bool float_weight;
  int64_t rows, labels;
  bool per_entry;
  std::optional<Ignore> ignore;
  int64_t ignore_index() const { return compared_index(ignore); }
  /// Whether each entry has a weight of its own (a binary entry is a row of one).
  bool weight_per_entry() const { return per_entry || labels == 1; }
  /// How many weights there are (with `weight` null: the count there would be).
  int64_t weights() const { return weight_per_entry() ? rows * labels : rows; }
};

/// Each label's four cells, float64 arrays of `labels` values.
struct WeightedCells {
  double *tp, *fp, *tn, *fn;
};

/// Which kernel counted a batch: none (the cells untouched), the one pass deriving the cells from
/// exact sums (float32 weights), the one pass summing the cells, or the general two passes.
enum class Counted { None, Derived, Cells, General };

/// Counts a clean batch into `cells` (labels == 1: binary), with thresholds[0] (probabilities) or
/// thresholds[1] (logits) as its scores say; leaves the cells untouched for any other batch
/// (Counted::None). `isa` is Avx2 or Avx512.
Counted count_weighted_entries(const WeightedEntries& batch, const float (&thresholds)[2], Isa isa,
                            const WeightedCells& cells);

}  // namespace metrics::detail::cpu
