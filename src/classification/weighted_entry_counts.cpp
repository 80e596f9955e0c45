#include "weighted_entry_counts.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

// Plain loops, inlined into functions built for each instruction set, where the compiler
// vectorizes them: every reduction is exact (min, max, integer sums) or lane by lane (a block's
// lanes are labels, or binary entries summed apart and joined at the end), so the compiler needs
// to reorder no floating-point sum.
#define METRICS_ALWAYS_INLINE inline __attribute__((always_inline))

namespace metrics::detail::cpu {
namespace {

enum class Weights { None, PerRow, PerEntry };

// The lanes of a block: labels counted together over every row (multilabel), or the columns of
// the binary entries laid out as rows; a block's sums stay in registers.
constexpr int64_t kLanes = 16;

struct Scan {
  bool clean, logits;
};

// Whether every weight is finite and not negative, from their bits: integer ORs, which the compiler
// vectorizes (it left a float minimum lane by lane, a third of the weighted binary kernel's time).
// A -0.0 counts as negative here, which sends the batch to the scalar loop, harmlessly.
template <typename W>
METRICS_ALWAYS_INLINE bool weights_clean(const W* weight, int64_t weights) {
  using Bits = std::conditional_t<sizeof(W) == 4, uint32_t, uint64_t>;
  constexpr Bits kSign = Bits{1} << (8 * sizeof(W) - 1);
  constexpr Bits kExponent = (kSign - 1) & ~((Bits{1} << (std::numeric_limits<W>::digits - 1)) - 1);
  Bits signs = 0, specials = 0;  // an exponent of all ones: infinite or NaN
  for (int64_t i = 0; i < weights; ++i) {
    Bits bits;
    std::memcpy(&bits, weight + i, sizeof bits);
    signs |= bits;
    specials |= (bits & kExponent) == kExponent ? kSign : 0;
  }
  return ((signs | specials) & kSign) == 0;
}

// The scores' range and sum and the targets' bits, each lane its own, then the lanes; the weights.
// A sum is finite unless a score is NaN or infinite (or finite scores overflow it, which sends the
// batch to the scalar loop, harmlessly).
template <typename W>
METRICS_ALWAYS_INLINE Scan scan(const WeightedEntries& b, const W* weight) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const int64_t entries = b.rows * b.labels, whole = entries / kLanes * kLanes;
  float lo[kLanes], hi[kLanes], sum[kLanes] = {};
  uint64_t bits[kLanes] = {};
  std::fill(lo, lo + kLanes, kInf);
  std::fill(hi, hi + kLanes, -kInf);
  const auto add = [&](int64_t l, int64_t i) {
    const float x = b.preds[i];
    lo[l] = x < lo[l] ? x : lo[l];
    hi[l] = x > hi[l] ? x : hi[l];
    sum[l] += x;
    bits[l] |= static_cast<uint64_t>(b.target[i]);
  };
  for (int64_t i = 0; i < whole; i += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) add(l, i + l);
  }
  for (int64_t i = whole; i < entries; ++i) add(0, i);
  float low = kInf, high = -kInf, score_sum = 0;
  uint64_t target_bits = 0;
  for (int64_t l = 0; l < kLanes; ++l) {
    low = std::min(low, lo[l]), high = std::max(high, hi[l]), score_sum += sum[l], target_bits |= bits[l];
  }
  const int64_t weights = weight == nullptr ? 0 : b.per_entry ? entries : b.rows;
  const bool clean =
      std::isfinite(score_sum) && (target_bits & ~uint64_t{1}) == 0 && weights_clean(weight, weights);
  return {clean, low < 0.0f || high > 1.0f};
}

// The cells from label `first` on.
WeightedCells from_label(const WeightedCells& cells, int64_t first) {
  return {cells.tp + first, cells.fp + first, cells.tn + first, cells.fn + first};
}

// `rows` rows of `width` (<= kLanes; kLanes fixed where `full`) entries, `stride` apart (the
// weights too where there is one per entry), summed over the rows lane by lane, then the lanes from
// `first_added` on added to `out`. The 0/1 factors make every product exact.
template <Weights kind, bool full, typename W>
METRICS_ALWAYS_INLINE void count_lanes(const float* preds, const int64_t* target, const W* weight, int64_t rows,
                                       int64_t stride, int64_t width, float threshold, const WeightedCells& out,
                                       int64_t first_added = 0) {
  const int64_t lanes = full ? kLanes : width;
  double tp[kLanes] = {}, fp[kLanes] = {}, tn[kLanes] = {}, fn[kLanes] = {};
  for (int64_t r = 0; r < rows; ++r) {
    const float* p = preds + r * stride;
    const int64_t* t = target + r * stride;
    const double row_weight = kind == Weights::PerRow ? static_cast<double>(weight[r]) : 1.0;
    for (int64_t l = 0; l < lanes; ++l) {
      const double w = kind == Weights::PerEntry ? static_cast<double>(weight[r * stride + l]) : row_weight;
      const double positive = t[l] != 0 ? 1.0 : 0.0, predicted = p[l] > threshold ? 1.0 : 0.0;
      const double both = positive * predicted;
      tp[l] += w * both;
      fp[l] += w * (predicted - both);
      fn[l] += w * (positive - both);
      tn[l] += w * ((1.0 - positive) - (predicted - both));
    }
  }
  for (int64_t l = first_added; l < lanes; ++l) {
    out.tp[l] += tp[l], out.fp[l] += fp[l], out.tn[l] += tn[l], out.fn[l] += fn[l];
  }
}

// The weights of the entries from `first` on (null stays null; a row's is every label's).
template <Weights kind, typename W>
METRICS_ALWAYS_INLINE const W* weights_from(const W* weight, int64_t first) {
  return kind == Weights::PerEntry ? weight + first : weight;
}

// Multilabel labels from `first` on, fewer than kLanes, after full blocks: the last kLanes labels
// as one full block, of which the lanes from `first` on are added. A block of fewer lanes is not
// vectorized (its loop bound is not fixed): the last 4 of 100 labels took as long as 2.5 full blocks.
template <Weights kind, typename W>
METRICS_ALWAYS_INLINE void count_last_labels(const WeightedEntries& b, const W* weight, int64_t first, float threshold,
                                             const WeightedCells& cells) {
  const int64_t last = b.labels - kLanes;
  count_lanes<kind, true>(b.preds + last, b.target + last, weights_from<kind>(weight, last), b.rows, b.labels,
                          kLanes, threshold, from_label(cells, last), first - last);
}

// Multilabel: blocks of kLanes labels over every row, into their cells. Binary: the entries as
// rows of kLanes lanes (and a last, shorter row), then the lanes' sums into the one cell.
template <Weights kind, typename W>
METRICS_ALWAYS_INLINE void count_cells(const WeightedEntries& b, const W* weight, float threshold,
                                       const WeightedCells& cells) {
  if (b.labels > 1) {
    int64_t first = 0;
    for (; first + kLanes <= b.labels; first += kLanes) {
      count_lanes<kind, true>(b.preds + first, b.target + first, weights_from<kind>(weight, first), b.rows,
                              b.labels, kLanes, threshold, from_label(cells, first));
    }
    if (first == b.labels) return;
    if (first > 0) return count_last_labels<kind>(b, weight, first, threshold, cells);
    return count_lanes<kind, false>(b.preds, b.target, weight, b.rows, b.labels, b.labels, threshold, cells);
  }
  double sums[4][kLanes] = {};
  const WeightedCells lanes{sums[0], sums[1], sums[2], sums[3]};
  const int64_t whole = b.rows / kLanes * kLanes;
  count_lanes<kind, true>(b.preds, b.target, weight, whole / kLanes, kLanes, kLanes, threshold, lanes);
  count_lanes<kind, false>(b.preds + whole, b.target + whole, weights_from<kind>(weight, whole), 1, 0,
                           b.rows - whole, threshold, lanes);
  for (int64_t l = 0; l < kLanes; ++l) {
    cells.tp[0] += sums[0][l], cells.fp[0] += sums[1][l], cells.tn[0] += sums[2][l], cells.fn[0] += sums[3][l];
  }
}

template <typename W>
METRICS_ALWAYS_INLINE bool count(const WeightedEntries& b, const W* weight, const float (&thresholds)[2],
                                 const WeightedCells& cells) {
  const auto s = scan(b, weight);
  if (!s.clean) return false;
  const float threshold = thresholds[s.logits ? 1 : 0];
  if (weight == nullptr) {
    count_cells<Weights::None>(b, weight, threshold, cells);
  } else if (b.per_entry || b.labels == 1) {
    count_cells<Weights::PerEntry>(b, weight, threshold, cells);
  } else {
    count_cells<Weights::PerRow>(b, weight, threshold, cells);
  }
  return true;
}

METRICS_ALWAYS_INLINE bool count(const WeightedEntries& b, const float (&thresholds)[2], const WeightedCells& cells) {
  return b.float_weight ? count(b, static_cast<const float*>(b.weight), thresholds, cells)
                        : count(b, static_cast<const double*>(b.weight), thresholds, cells);
}

#ifdef METRICS_HAS_X86
METRICS_TARGET_AVX512 bool count_avx512(const WeightedEntries& b, const float (&thresholds)[2],
                                        const WeightedCells& cells) {
  return count(b, thresholds, cells);
}

METRICS_TARGET_AVX2 bool count_avx2(const WeightedEntries& b, const float (&thresholds)[2],
                                    const WeightedCells& cells) {
  return count(b, thresholds, cells);
}
#endif

}  // namespace

bool count_weighted_entries(const WeightedEntries& batch, const float (&thresholds)[2], Isa isa,
                            const WeightedCells& cells) {
#ifdef METRICS_HAS_X86
  if (isa == Isa::Avx512) return count_avx512(batch, thresholds, cells);
  if (isa == Isa::Avx2) return count_avx2(batch, thresholds, cells);
#endif
  TORCH_INTERNAL_ASSERT(false, "count_weighted_entries: no vector kernel for this instruction set");
}

}  // namespace metrics::detail::cpu
