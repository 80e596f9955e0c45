#include "weighted_entry_counts.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "lane_shuffles_avx2.h"

// Plain loops, inlined into functions built for each instruction set, where the compiler
// vectorizes them: every reduction is exact (min, max, integer sums) or lane by lane (a block's
// lanes are labels, or binary entries summed apart and joined at the end), so the compiler needs
// to reorder no floating-point sum: the general kernel. The one-pass kernels (one_pass) are written
// with intrinsics: they add under masks, which the compiler spelled as a blend and a multiply.
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

// One step of a float64's exponent, in its bits.
constexpr int64_t kExponentStep = int64_t{1} << 52;

// Whether every weight is finite and not negative, from their bits: integer ORs, which the compiler
// vectorizes (it left a float minimum lane by lane, a third of the weighted binary kernel's time).
// A sign bit is set in a negative weight's bits, or in a positive one's plus one exponent step where
// its exponent is all ones (infinite or NaN), which carries into it. A -0.0 counts as negative
// here, which sends the batch to the scalar loop, harmlessly.
METRICS_ALWAYS_INLINE bool weights_clean(const double* weight, int64_t weights) {
  constexpr uint64_t kSign = uint64_t{1} << 63;
  uint64_t signs = 0;
  for (int64_t i = 0; i < weights; ++i) {
    uint64_t bits;
    std::memcpy(&bits, weight + i, sizeof bits);
    signs |= bits | (bits + kExponentStep);
  }
  return (signs & kSign) == 0;
}

// The scores' range and sum and the targets' bits, each lane its own, then the lanes; the weights.
// A sum is finite unless a score is NaN or infinite (or finite scores overflow it, which sends the
// batch to the scalar loop, harmlessly). Ignoring, an ignored entry's target is no evidence, nor
// its score where the range judges the kept ones (read as 0.5, inside [0, 1]). (Each way its own
// loop: the selects left the one loop of all three scalar, twice the time.)
template <Ignoring ignoring>
METRICS_ALWAYS_INLINE Scan scan_as(const WeightedEntries& b, const double* weight) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  constexpr bool ignores = ignoring != Ignoring::None, judges_kept = ignoring == Ignoring::JudgeKept;
  const int64_t entries = b.rows * b.labels, whole = entries / kLanes * kLanes;
  const int64_t ignore = b.ignore_index();
  float lo[kLanes], hi[kLanes], sum[kLanes] = {};
  uint64_t bits[kLanes] = {};
  std::fill(lo, lo + kLanes, kInf);
  std::fill(hi, hi + kLanes, -kInf);
  const auto add = [&](int64_t l, int64_t i) {
    const bool ignored = ignores && b.target[i] == ignore;
    const float x = judges_kept && ignored ? 0.5f : b.preds[i];
    lo[l] = x < lo[l] ? x : lo[l];
    hi[l] = x > hi[l] ? x : hi[l];
    sum[l] += x;
    bits[l] |= static_cast<uint64_t>(b.target[i]) & (static_cast<uint64_t>(ignored) - 1);  // a select stayed scalar
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
  const int64_t weights = weight == nullptr ? 0 : b.weights();
  const bool clean =
      std::isfinite(score_sum) && (target_bits & ~uint64_t{1}) == 0 && weights_clean(weight, weights);
  return {clean, low < 0.0f || high > 1.0f};
}

// The cells from label `first` on.
WeightedCells from_label(const WeightedCells& cells, int64_t first) {
  return {cells.tp + first, cells.fp + first, cells.tn + first, cells.fn + first};
}

METRICS_ALWAYS_INLINE Scan scan(const WeightedEntries& b, const double* weight) {
  switch (ignoring_of(b.ignore)) {
    case Ignoring::None:
      return scan_as<Ignoring::None>(b, weight);
    case Ignoring::JudgeEvery:
      return scan_as<Ignoring::JudgeEvery>(b, weight);
    case Ignoring::JudgeKept:
      return scan_as<Ignoring::JudgeKept>(b, weight);
  }
  return {false, false};
}

// What the count pass reads every entry by: the threshold the batch's scores chose, and (where it
// `ignores`) the ignore_index, whose entries weigh 0.
template <bool kIgnores>
struct Reading {
  static constexpr bool ignores = kIgnores;
  float threshold;
  int64_t ignore;
};

// `rows` rows of `width` (<= kLanes; kLanes fixed where `full`) entries, `stride` apart (the
// weights too where there is one per entry), summed over the rows lane by lane, then the lanes from
// `first_added` on added to `out`. The 0/1 factors make every product exact.
template <Weights kind, bool full, typename W, typename R>
METRICS_ALWAYS_INLINE void count_lanes(const float* preds, const int64_t* target, const W* weight, int64_t rows,
                                       int64_t stride, int64_t width, const R& reading, const WeightedCells& out,
                                       int64_t first_added = 0) {
  const int64_t lanes = full ? kLanes : width;
  const float threshold = reading.threshold;
  const int64_t ignore = reading.ignore;
  double tp[kLanes] = {}, fp[kLanes] = {}, tn[kLanes] = {}, fn[kLanes] = {};
  for (int64_t r = 0; r < rows; ++r) {
    const float* p = preds + r * stride;
    const int64_t* t = target + r * stride;
    const double row_weight = kind == Weights::PerRow ? static_cast<double>(weight[r]) : 1.0;
    for (int64_t l = 0; l < lanes; ++l) {
      const double given = kind == Weights::PerEntry ? static_cast<double>(weight[r * stride + l]) : row_weight;
      const double w = R::ignores && t[l] == ignore ? 0.0 : given;
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
template <Weights kind, typename W, typename R>
METRICS_ALWAYS_INLINE void count_last_labels(const WeightedEntries& b, const W* weight, int64_t first,
                                             const R& reading, const WeightedCells& cells) {
  const int64_t last = b.labels - kLanes;
  count_lanes<kind, true>(b.preds + last, b.target + last, weights_from<kind>(weight, last), b.rows, b.labels,
                          kLanes, reading, from_label(cells, last), first - last);
}

// Multilabel: blocks of kLanes labels over every row, into their cells. Binary: the entries as
// rows of kLanes lanes (and a last, shorter row), then the lanes' sums into the one cell.
template <Weights kind, typename W, typename R>
METRICS_ALWAYS_INLINE void count_cells(const WeightedEntries& b, const W* weight, const R& reading,
                                       const WeightedCells& cells) {
  if (b.labels > 1) {
    int64_t first = 0;
    for (; first + kLanes <= b.labels; first += kLanes) {
      count_lanes<kind, true>(b.preds + first, b.target + first, weights_from<kind>(weight, first), b.rows,
                              b.labels, kLanes, reading, from_label(cells, first));
    }
    if (first == b.labels) return;
    if (first > 0) return count_last_labels<kind>(b, weight, first, reading, cells);
    return count_lanes<kind, false>(b.preds, b.target, weight, b.rows, b.labels, b.labels, reading, cells);
  }
  double sums[4][kLanes] = {};
  const WeightedCells lanes{sums[0], sums[1], sums[2], sums[3]};
  const int64_t whole = b.rows / kLanes * kLanes;
  count_lanes<kind, true>(b.preds, b.target, weight, whole / kLanes, kLanes, kLanes, reading, lanes);
  count_lanes<kind, false>(b.preds + whole, b.target + whole, weights_from<kind>(weight, whole), 1, 0,
                           b.rows - whole, reading, lanes);
  for (int64_t l = 0; l < kLanes; ++l) {
    cells.tp[0] += sums[0][l], cells.fp[0] += sums[1][l], cells.tn[0] += sums[2][l], cells.fn[0] += sums[3][l];
  }
}

// (A function, not a lambda: a lambda's body is compiled for no instruction set but the baseline's,
// and GCC did not inline it, which left the whole count at SSE2, three times the time.)
template <typename R>
METRICS_ALWAYS_INLINE void count_read(const WeightedEntries& b, const double* weight, const R& reading,
                                      const WeightedCells& cells) {
  if (weight == nullptr) {
    count_cells<Weights::None>(b, weight, reading, cells);
  } else if (b.weight_per_entry()) {
    count_cells<Weights::PerEntry>(b, weight, reading, cells);
  } else {
    count_cells<Weights::PerRow>(b, weight, reading, cells);
  }
}

METRICS_ALWAYS_INLINE bool count(const WeightedEntries& b, const double* weight, const float (&thresholds)[2],
                                 const WeightedCells& cells) {
  const auto s = scan(b, weight);
  if (!s.clean) return false;
  const float threshold = thresholds[s.logits ? 1 : 0];
  if (b.ignore) {
    count_read(b, weight, Reading<true>{threshold, b.ignore->index}, cells);
  } else {
    count_read(b, weight, Reading<false>{threshold, 0}, cells);
  }
  return true;
}

// Room for n float64 values: on the stack where they fit (an allocation per update took 2% of the
// weighted multilabel collection's), else on the heap.
class Scratch {
 public:
  explicit Scratch(int64_t n) : heap_(static_cast<size_t>(n > kOnStack ? n : 0)) {
    data_ = n > kOnStack ? heap_.data() : stack_;
  }
  Scratch(const Scratch&) = delete;  // (a copy's data would be the original's stack)
  Scratch& operator=(const Scratch&) = delete;
  double* data() { return data_; }

 private:
  static constexpr int64_t kOnStack = 2048;
  double stack_[kOnStack];
  std::vector<double> heap_;
  double* data_;
};

// Float32 weights as float64, into `out`.
METRICS_ALWAYS_INLINE void widen_into(const float* weight, int64_t n, double* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = weight[i];
}

// Float32 weights widened first: loops that read them as they are vectorized worse, at twice the
// time (a binary (4096,) batch: 21 us, widened 11).
METRICS_ALWAYS_INLINE bool count(const WeightedEntries& b, const float (&thresholds)[2], const WeightedCells& cells) {
  if (!b.float_weight || b.weight == nullptr) return count(b, static_cast<const double*>(b.weight), thresholds, cells);
  Scratch widened(b.weights());
  widen_into(static_cast<const float*>(b.weight), b.weights(), widened.data());
  return count(b, widened.data(), thresholds, cells);
}

#ifdef METRICS_HAS_X86
// One pass over the entries, in blocks of labels (or of binary entries laid out as rows) whose sums
// stay in registers, for any clean batch with weights. Per label, four sums of weights: the cells
// themselves (each entry's weight into the one it falls in; an ignored entry's weight read as 0),
// or, for float32 weights and float64 ones per row whose every sum is exact, three sums (the weight
// where predicted, where positive, where both) and the total of the weights kept, from which the
// cells follow by subtraction, with fewer instructions, and one add fewer per entry where the
// weights are per row and none is ignored (the total is then the rows'). A subtraction is exact
// where every sum is: each weight is a multiple of 2^(e_min - d + 1), d the significant bits any
// weight has (float32's 24; float64 weights' 53 less the trailing zeros all their mantissas share:
// fewer for integers or widened float32 values), and n of them sum below n * 2^(e_max + 1), so
// float64's 53 bits hold every partial sum when e_max - e_min + log2(n) <= 53 - d (float32 weights
// within 2^22 of each other, n = 128), and float64's exponents hold it when that bound is below
// 2^1024 (float64 weights whose sums could reach infinity sum the cells, which keeps an infinite sum
// out of the subtractions); n is the most weights one sum takes (the rows, or every binary entry,
// whose lanes are summed at the end). The threshold is chosen up front from the first scores judged
// (one outside [0, 1] makes the batch logits; inside, they are taken for probabilities) and the
// pass checks the guess with the scores: probabilities have bits no greater than 1.0f's (which also
// rules out NaN, infinities and negatives), logits a finite sum. A batch this does not count
// (unclean, a wrong guess) goes to the general kernel, the cells untouched. Each instruction set
// has its own three kernels (Avx512, Avx2: the weights' exponents, the guess, a block's sums); the
// rest is shared.
namespace one_pass {

// The weights' biased exponents, read with the sign bit (so a negative weight or -0.0 has one
// above the all-ones exponent, 0xff or 0x7ff, that infinities and NaN have): the largest, and the
// least of the nonzero weights' (all ones where there are none); and the most significant bits a
// weight has (float32: 24; float64: 53 less the trailing zeros every mantissa has).
struct Exponents {
  int64_t most, least, digits = 24;
};

// Whether every sum of up to `summands` clean weights is exact (see above; a subnormal weight's
// exponent is taken as 0, one below its own, which only tightens the test) and finite: below the
// bound, any int64 count of float64 weights sums below 2^1024 (float32 weights' exponents, at most
// 0xfe, are always below it: their sums never reach float64's infinity).
bool sums_exact(const Exponents& e, int64_t summands) {
  constexpr int64_t kFiniteSumsBelow = 0x7ff - 63;
  const int64_t spare_bits = 53 - e.digits - (e.most - std::min(e.least, e.most));
  return spare_bits >= 0 && summands <= (int64_t{1} << spare_bits) && e.most < kFiniteSumsBelow;
}

// Float64 weights' Exponents, from their bits: signed maxima and minima and ORs, which the compiler
// vectorizes (a select, or unsigned ones, left the loop scalar). The least nonzero bits are one
// more than the least of the bits less one, where 0 wraps to the largest (the sign bit cleared: a
// negative weight's bits are in `signs`).
METRICS_ALWAYS_INLINE Exponents double_exponents(const double* weight, int64_t n) {
  constexpr int64_t kLargest = std::numeric_limits<int64_t>::max(), kMantissa = (int64_t{1} << 52) - 1;
  int64_t signs = 0, most = 0, least_less_one = kLargest, mantissas = int64_t{1} << 52;
  for (int64_t i = 0; i < n; ++i) {
    int64_t bits;
    std::memcpy(&bits, weight + i, sizeof bits);
    signs |= bits;
    most = std::max(most, bits);
    least_less_one = std::min(least_less_one, static_cast<int64_t>((static_cast<uint64_t>(bits) - 1) & kLargest));
    mantissas |= bits & kMantissa;
  }
  const int64_t least = least_less_one == kLargest ? 0x7ff : (least_less_one + 1) >> 52;
  return {signs < 0 ? int64_t{0x800} : most >> 52, least, 53 - __builtin_ctzll(static_cast<uint64_t>(mantissas))};
}

// The total of float64 weights (summed in lanes, which exactness allows).
METRICS_ALWAYS_INLINE double lane_total(const double* weight, int64_t rows) {
  const int64_t whole = rows / kLanes * kLanes;
  double lanes[kLanes] = {};
  for (int64_t r = 0; r < whole; r += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) lanes[l] += weight[r + l];
  }
  for (int64_t r = whole; r < rows; ++r) lanes[0] += weight[r];
  double total = 0;
  for (const double lane : lanes) total += lane;
  return total;
}

// How a block's weights come: float32, one per entry; float64, one per row (float32 ones widened
// first); float64, one per entry.
enum class BlockWeights { FloatEntries, DoubleRows, DoubleEntries };

// What a block reads and sums (sum_block): its weights; the cells, or the derived sums (`cells`
// false: predicted, positive, both, and the total of the weights kept, where they are per entry or
// may be ignored: else it is the rows'); whether targets may be the ignore_index, and which scores
// the guess is checked against then.
template <BlockWeights kWeights, bool kCells, Ignoring kIgnoring>
struct Form {
  static constexpr BlockWeights weights = kWeights;
  static constexpr bool cells = kCells;
  static constexpr Ignoring ignoring = kIgnoring;
  static constexpr bool per_entry = kWeights != BlockWeights::DoubleRows;  // (binary entries: each its own)
  static constexpr int sums = cells || per_entry || ignoring != Ignoring::None ? 4 : 3;
};

// Per label, the four sums a Form names (cells: tp, fp, fn, tn; derived: predicted, positive, both,
// total), each an array from the block's first label on.
struct Sums {
  double* of[4];
  Sums from(int64_t first) const {
    return {{of[0] + first, of[1] + first, of[2] + first, of[3] ? of[3] + first : nullptr}};
  }
};

// A block's sums (sum_block): `rows` rows of kFixedWidth labels, kLanes or kLanes / 2 (the lanes of
// one half: its targets, weights and float64 sums alone), or of `width` (kFixedWidth 0: the other
// lanes read as zeros and are not stored); each entry's weight into its label's sums; it returns
// whether the block is clean and its scores are as `logits` guessed. An ignored entry's weight
// reads as 0, which leaves a cell's sum as it was.
struct Avx512 {
  static constexpr int64_t kLanes = 16;

  METRICS_TARGET_AVX512 static Exponents exponents(const float* weight, int64_t n) {
    __m512i low = _mm512_set1_epi32(0xff), high = _mm512_setzero_si512();
    for (int64_t i = 0; i < n; i += kLanes) {
      const auto lanes = static_cast<__mmask16>(n - i >= kLanes ? 0xFFFFu : (1u << (n - i)) - 1);
      const __m512i bits = _mm512_maskz_loadu_epi32(lanes, weight + i);  // lanes past the end: zero weights
      const __m512i exponent = _mm512_srli_epi32(bits, 23);
      high = _mm512_max_epu32(high, exponent);
      low = _mm512_mask_min_epu32(low, _mm512_test_epi32_mask(bits, bits), low, exponent);
    }
    return {_mm512_reduce_max_epu32(high), _mm512_reduce_min_epu32(low)};
  }

  // Whether the first (up to 16) scores judged show logits (one outside [0, 1], NaN included): the
  // guess. Those of ignored entries are not judged where the ignoring says so.
  template <Ignoring ignoring>
  METRICS_TARGET_AVX512 static bool first_scores_logits(const float* preds, const int64_t* target, int64_t count,
                                                        int64_t ignore_index) {
    auto lanes = static_cast<__mmask16>(count >= kLanes ? 0xFFFFu : (1u << count) - 1);
    if constexpr (ignoring == Ignoring::JudgeKept) {
      const __m512i ignore = _mm512_set1_epi64(ignore_index);
      const auto low = static_cast<__mmask8>(lanes & 0xFF), high = static_cast<__mmask8>(lanes >> 8);
      lanes = _mm512_kunpackb(_mm512_mask_cmpneq_epi64_mask(high, _mm512_maskz_loadu_epi64(high, target + 8), ignore),
                              _mm512_mask_cmpneq_epi64_mask(low, _mm512_maskz_loadu_epi64(low, target), ignore));
    }
    const __m512 x = _mm512_maskz_loadu_ps(lanes, preds);
    return (_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_NGE_UQ) |
            _mm512_cmp_ps_mask(x, _mm512_set1_ps(1.0f), _CMP_NLE_UQ)) != 0;
  }

  // A row's weights as float64, in two halves of 8 lanes (past the block's: zeros, or the row's one
  // weight, which no stored sum takes).
  template <bool plain, BlockWeights kind>
  METRICS_TARGET_AVX512 static void row_weights(const void* weight, int64_t r, int64_t stride, __mmask16 lanes,
                                                const __mmask8 (&halves)[2], __m512d (&w)[2]) {
    if constexpr (kind == BlockWeights::DoubleRows) {
      w[0] = w[1] = _mm512_set1_pd(static_cast<const double*>(weight)[r]);
    } else if constexpr (kind == BlockWeights::FloatEntries) {
      const float* entry = static_cast<const float*>(weight) + r * stride;
      const __m512 wf = plain ? _mm512_loadu_ps(entry) : _mm512_maskz_loadu_ps(lanes, entry);
      w[0] = _mm512_cvtps_pd(_mm512_castps512_ps256(wf));
      w[1] = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(wf), 1)));
    } else {
      const double* entry = static_cast<const double*>(weight) + r * stride;
      w[0] = plain ? _mm512_loadu_pd(entry) : _mm512_maskz_loadu_pd(halves[0], entry);
      w[1] = plain ? _mm512_loadu_pd(entry + 8) : _mm512_maskz_loadu_pd(halves[1], entry + 8);
    }
  }

  // Bit 1 set in the lanes of negative, infinite or NaN weights (see weights_clean), for a block's
  // `bits`, whose bits above bit 0 fail it.
  METRICS_TARGET_AVX512 static __m512i bad_weight_bits(__m512d w) {
    const __m512i bits = _mm512_castpd_si512(w);
    return _mm512_srli_epi64(_mm512_or_si512(bits, _mm512_add_epi64(bits, _mm512_set1_epi64(kExponentStep))), 62);
  }

  template <int64_t kFixedWidth, bool logits, typename F>
  METRICS_TARGET_AVX512 static bool sum_block(const float* preds, const int64_t* target, const void* weight,
                                              int64_t rows, int64_t stride, int64_t width, float threshold,
                                              int64_t ignore_index, const Sums& out) {
    constexpr bool plain = kFixedWidth == kLanes;  // plain loads, else masked (a half's lanes: the first 8)
    constexpr int kHalves = kFixedWidth == kLanes / 2 ? 1 : 2;
    const auto lanes = static_cast<__mmask16>(plain ? 0xFFFFu : (1u << (kFixedWidth ? kFixedWidth : width)) - 1);
    const __mmask8 halves[2] = {static_cast<__mmask8>(lanes & 0xFF), static_cast<__mmask8>(lanes >> 8)};
    const __m512 cut = _mm512_set1_ps(threshold);
    const __m512i ignore = _mm512_set1_epi64(ignore_index);
    const __m512d zero = _mm512_setzero_pd();
    __m512d sums[4][2] = {{zero, zero}, {zero, zero}, {zero, zero}, {zero, zero}};
    __m512i bits = _mm512_setzero_si512(), largest = bits;  // bits: the targets', and the weights' bad_weight_bits
    __m512 sum = _mm512_setzero_ps();
#pragma GCC unroll 2
    for (int64_t r = 0; r < rows; ++r) {
      const float* p = preds + r * stride;
      const int64_t* t = target + r * stride;
      const __m512 x = plain ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(lanes, p);
      const __m512i targets[2] = {plain ? _mm512_loadu_si512(t) : _mm512_maskz_loadu_epi64(halves[0], t),
                                  plain          ? _mm512_loadu_si512(t + 8)
                                  : kHalves == 2 ? _mm512_maskz_loadu_epi64(halves[1], t + 8)
                                                 : _mm512_setzero_si512()};
      __m512d w[2];
      row_weights<plain, F::weights>(weight, r, stride, lanes, halves, w);
      __mmask16 judged = lanes;  // the scores the guess is checked against
      if constexpr (F::ignoring != Ignoring::None) {  // an ignored entry's weight 0, its target no evidence
        __mmask8 kept[2];
        for (int h = 0; h < 2; ++h) {
          kept[h] = _mm512_cmpneq_epi64_mask(targets[h], ignore);
          w[h] = _mm512_maskz_mov_pd(kept[h], w[h]);
          bits = _mm512_mask_or_epi64(bits, kept[h], bits, targets[h]);
        }
        judged = _mm512_kunpackb(kept[1], kept[0]);
      } else {
        bits = _mm512_ternarylogic_epi64(bits, targets[0], targets[1], 0xFE);  // bits | t0 | t1
      }
      if constexpr (F::weights == BlockWeights::DoubleEntries) {  // checked as read (an ignored one as 0)
        bits = _mm512_ternarylogic_epi64(bits, bad_weight_bits(w[0]), bad_weight_bits(w[1]), 0xFE);
      }
      const __mmask16 yes = _mm512_cmp_ps_mask(x, cut, _CMP_GT_OQ);
      const __mmask8 yes_lanes[2] = {static_cast<__mmask8>(yes), static_cast<__mmask8>(_kshiftri_mask16(yes, 8))};
      __mmask8 no_lanes[2];  // (a compare of its own: AVX-512F has no NOT of an 8-bit mask)
      if constexpr (F::cells) {
        const __mmask16 no = _mm512_cmp_ps_mask(x, cut, _CMP_NGT_UQ);
        no_lanes[0] = static_cast<__mmask8>(no), no_lanes[1] = static_cast<__mmask8>(_kshiftri_mask16(no, 8));
      }
      for (int h = 0; h < kHalves; ++h) {
        // the weight where positive (+0.0 elsewhere; 0 - target is all ones where it is 1, and any
        // target but 0 and 1 fails `bits`): integer ops, which left the mask registers' ports to
        // the scores' (12% of the kernel's time)
        const __m512i all_ones_where_positive = _mm512_sub_epi64(_mm512_setzero_si512(), targets[h]);
        const __m512d positive_weight =
            _mm512_castsi512_pd(_mm512_and_si512(all_ones_where_positive, _mm512_castpd_si512(w[h])));
        if constexpr (F::cells) {
          const __m512d negative_weight =
              _mm512_castsi512_pd(_mm512_andnot_si512(all_ones_where_positive, _mm512_castpd_si512(w[h])));
          sums[0][h] = _mm512_mask_add_pd(sums[0][h], yes_lanes[h], sums[0][h], positive_weight);
          sums[1][h] = _mm512_mask_add_pd(sums[1][h], yes_lanes[h], sums[1][h], negative_weight);
          sums[2][h] = _mm512_mask_add_pd(sums[2][h], no_lanes[h], sums[2][h], positive_weight);
          sums[3][h] = _mm512_mask_add_pd(sums[3][h], no_lanes[h], sums[3][h], negative_weight);
        } else {
          sums[0][h] = _mm512_mask_add_pd(sums[0][h], yes_lanes[h], sums[0][h], w[h]);
          sums[1][h] = _mm512_add_pd(sums[1][h], positive_weight);
          sums[2][h] = _mm512_mask_add_pd(sums[2][h], yes_lanes[h], sums[2][h], positive_weight);
          if constexpr (F::sums == 4) sums[3][h] = _mm512_add_pd(sums[3][h], w[h]);
        }
      }
      if constexpr (F::ignoring == Ignoring::JudgeKept) {
        if constexpr (logits) {
          sum = _mm512_mask_add_ps(sum, judged, sum, x);
        } else {
          largest = _mm512_mask_max_epu32(largest, judged, largest, _mm512_castps_si512(x));
        }
      } else if constexpr (logits) {
        sum = _mm512_add_ps(sum, x);
      } else {
        largest = _mm512_max_epu32(largest, _mm512_castps_si512(x));
      }
    }
    for (int h = 0; h < kHalves; ++h) {
      for (int s = 0; s < F::sums; ++s) _mm512_mask_storeu_pd(out.of[s] + 8 * h, halves[h], sums[s][h]);
    }
    const bool entries_clean = _mm512_test_epi64_mask(bits, _mm512_set1_epi64(~int64_t{1})) == 0;
    const bool scores_as_guessed = logits ? std::isfinite(_mm512_reduce_add_ps(sum))
                                          : _mm512_cmpgt_epu32_mask(largest, _mm512_set1_epi32(0x3f800000)) == 0;
    return entries_clean && scores_as_guessed;
  }
};

// AVX2 has no mask registers: lanes are picked by all-ones masks, 32 bits each (scores, float32
// weights: a block's 8 in one register) or 64 (targets, float64 weights, sums: in two), and a
// masked add is an add of the weight ANDed with the mask (+0.0 elsewhere, which leaves a sum as it
// was). Blocks of 8 labels: with 16, the sums alone would take 12 of the 16 registers, and the rest
// spilled.
struct Avx2 {
  static constexpr int64_t kLanes = 8;

  // The first `count` of 8 32-bit lanes, and of 4 64-bit lanes.
  METRICS_TARGET_AVX2 static __m256i first_lanes32(int64_t count) {
    const auto n = static_cast<int>(std::clamp<int64_t>(count, 0, 8));
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  METRICS_TARGET_AVX2 static __m256i first_lanes64(int64_t count) {
    return _mm256_cmpgt_epi64(_mm256_set1_epi64x(std::clamp<int64_t>(count, 0, 4)), _mm256_setr_epi64x(0, 1, 2, 3));
  }

  METRICS_TARGET_AVX2 static Exponents exponents(const float* weight, int64_t n) {
    __m256i low = _mm256_set1_epi32(0xff), high = _mm256_setzero_si256();
    for (int64_t i = 0; i < n; i += kLanes) {
      const __m256i bits = _mm256_maskload_epi32(reinterpret_cast<const int*>(weight + i), first_lanes32(n - i));
      const __m256i exponent = _mm256_srli_epi32(bits, 23);
      high = _mm256_max_epu32(high, exponent);
      const __m256i zero_weight = _mm256_cmpeq_epi32(bits, _mm256_setzero_si256());
      low = _mm256_blendv_epi8(_mm256_min_epu32(low, exponent), low, zero_weight);
    }
    uint32_t highs[kLanes], lows[kLanes];
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(highs), high);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(lows), low);
    return {*std::max_element(highs, highs + kLanes), *std::min_element(lows, lows + kLanes)};
  }

  // The guess from the first (up to 8) scores judged (where the kept ones are, an ignored entry's
  // read as 0.0, no evidence).
  template <Ignoring ignoring>
  METRICS_TARGET_AVX2 static bool first_scores_logits(const float* preds, const int64_t* target, int64_t count,
                                                      int64_t ignore_index) {
    __m256 x = _mm256_maskload_ps(preds, first_lanes32(count));
    if constexpr (ignoring == Ignoring::JudgeKept) {
      const auto* t = reinterpret_cast<const long long*>(target);
      const __m256i ignore = _mm256_set1_epi64x(ignore_index);
      const __m256i skip0 = _mm256_cmpeq_epi64(_mm256_maskload_epi64(t, first_lanes64(count)), ignore);
      const __m256i skip1 = _mm256_cmpeq_epi64(_mm256_maskload_epi64(t + 4, first_lanes64(count - 4)), ignore);
      x = _mm256_andnot_ps(_mm256_castsi256_ps(low_halves(skip0, skip1)), x);
    }
    return _mm256_movemask_ps(_mm256_or_ps(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_NGE_UQ),
                                           _mm256_cmp_ps(x, _mm256_set1_ps(1.0f), _CMP_NLE_UQ))) != 0;
  }

  template <int64_t kFixedWidth, bool logits, typename F>
  METRICS_TARGET_AVX2 static bool sum_block(const float* preds, const int64_t* target, const void* weight,
                                            int64_t rows, int64_t stride, int64_t width, float threshold,
                                            int64_t ignore_index, const Sums& out) {
    constexpr bool plain = kFixedWidth != 0;  // plain loads and stores, of one half or both
    constexpr int kHalves = kFixedWidth == kLanes / 2 ? 1 : 2;
    return std::signbit(threshold)
               ? sum_rows<plain, kHalves, logits, F, false>(preds, target, weight, rows, stride, width, threshold,
                                                            ignore_index, out)
               : sum_rows<plain, kHalves, logits, F, true>(preds, target, weight, rows, stride, width, threshold,
                                                           ignore_index, out);
  }

  // A row's floats (scores, or weights per entry): 8, or the first 4 where there is one half, then zeros.
  template <bool plain, int kHalves>
  METRICS_TARGET_AVX2 static __m256 row_floats(const float* p, const __m256i& lanes) {
    if constexpr (!plain) {
      return _mm256_maskload_ps(p, lanes);
    } else if constexpr (kHalves == 1) {
      return _mm256_zextps128_ps256(_mm_loadu_ps(p));
    } else {
      return _mm256_loadu_ps(p);
    }
  }

  // A row's weights as float64, in two halves of 4 lanes (past the block's: zeros, or the row's one
  // weight, which no stored sum takes; where there is one half, the second is not read).
  template <bool plain, int kHalves, BlockWeights kind>
  METRICS_TARGET_AVX2 static void row_weights(const void* weight, int64_t r, int64_t stride, const __m256i& lanes,
                                              const __m256i (&halves)[2], __m256d (&w)[2]) {
    if constexpr (kind == BlockWeights::DoubleRows) {
      w[0] = w[1] = _mm256_set1_pd(static_cast<const double*>(weight)[r]);
    } else if constexpr (kind == BlockWeights::FloatEntries) {
      const __m256 wf = row_floats<plain, kHalves>(static_cast<const float*>(weight) + r * stride, lanes);
      w[0] = _mm256_cvtps_pd(_mm256_castps256_ps128(wf));
      w[1] = _mm256_cvtps_pd(_mm256_extractf128_ps(wf, 1));
    } else {
      const double* entry = static_cast<const double*>(weight) + r * stride;
      for (int h = 0; h < kHalves; ++h) {
        w[h] = plain ? _mm256_loadu_pd(entry + 4 * h) : _mm256_maskload_pd(entry + 4 * h, halves[h]);
      }
      if constexpr (kHalves == 1) w[1] = _mm256_setzero_pd();
    }
  }

  // Bit 1 set in the lanes of negative, infinite or NaN weights (see weights_clean), for a block's
  // `bits`, whose bits above bit 0 fail it.
  METRICS_TARGET_AVX2 static __m256i bad_weight_bits(__m256d w) {
    const __m256i bits = _mm256_castpd_si256(w);
    return _mm256_srli_epi64(_mm256_or_si256(bits, _mm256_add_epi64(bits, _mm256_set1_epi64x(kExponentStep))), 62);
  }

  // Whether each score of half h (4 lanes, one 64-bit mask each) is above the cutoff. A cutoff of
  // +0.0 or more (`bits_compare`: `cut` holds its bits in each lane) compares the scores' bits,
  // sign-extended, as integers, which order as the scores do where the cutoff's sign is clear (a
  // negative score's are negative; a positive NaN's are above any cutoff's, which the checks turn
  // away): the scores go straight into 64-bit lanes, where the float compare's masks (`above`, all
  // ones in the 32-bit lanes of scores above it) took an extract and two widenings, shuffles,
  // which fewer of the vector pipes run (6% of the weighted multilabel update with AVX2 kernels).
  // (A half's mask made where it is used: both made up front left too few registers for the
  // summed cells' eight sums, which spilled.)
  template <bool plain, bool bits_compare>
  METRICS_TARGET_AVX2 static __m256i above_cutoff(const float* p, int h, const __m256i& lanes, const __m256i& above,
                                                  const __m256i& cut) {
    if constexpr (bits_compare) {
      const auto* half = reinterpret_cast<const int*>(p + 4 * h);
      const __m128i score_bits = plain ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(half))
                                      : _mm_maskload_epi32(half, h == 0 ? _mm256_castsi256_si128(lanes)
                                                                        : _mm256_extracti128_si256(lanes, 1));
      return _mm256_cmpgt_epi64(_mm256_cvtepi32_epi64(score_bits), cut);
    } else {
      return _mm256_cvtepi32_epi64(h == 0 ? _mm256_castsi256_si128(above) : _mm256_extracti128_si256(above, 1));
    }
  }

  template <bool plain, int kHalves, bool logits, typename F, bool bits_compare>
  METRICS_TARGET_AVX2 static bool sum_rows(const float* preds, const int64_t* target, const void* weight,
                                           int64_t rows, int64_t stride, int64_t width, float threshold,
                                           int64_t ignore_index, const Sums& out) {
    const __m256i lanes = first_lanes32(plain ? kLanes : width);  // scores and float32 weights
    const __m256i halves[2] = {first_lanes64(plain ? 4 : width), first_lanes64(plain ? 4 : width - 4)};  // the rest
    const __m256i ignore = _mm256_set1_epi64x(ignore_index);
    int32_t cutoff_bits;
    std::memcpy(&cutoff_bits, &threshold, sizeof cutoff_bits);
    const __m256i cut_bits = _mm256_set1_epi64x(cutoff_bits);
    const __m256 cut = _mm256_set1_ps(threshold);
    const __m256d zero = _mm256_setzero_pd(), one = _mm256_set1_pd(1.0);
    __m256d sums[4][2] = {{zero, zero}, {zero, zero}, {zero, zero}, {zero, zero}};
    __m256i bits = _mm256_setzero_si256(), largest = bits;  // bits: the targets', and the weights' bad_weight_bits
    __m256 sum = _mm256_setzero_ps();
#pragma GCC unroll 2  // two rows a turn: the loop's own counting was a tenth of its instructions
    for (int64_t r = 0; r < rows; ++r) {
      const float* p = preds + r * stride;
      const auto* t = reinterpret_cast<const long long*>(target + r * stride);
      __m256 x = row_floats<plain, kHalves>(p, lanes);
      const __m256i above =
          bits_compare ? _mm256_setzero_si256() : _mm256_castps_si256(_mm256_cmp_ps(x, cut, _CMP_GT_OQ));
      __m256d w[2];
      row_weights<plain, kHalves, F::weights>(weight, r, stride, lanes, halves, w);
      __m256i skip[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};  // all ones where ignored
      for (int h = 0; h < kHalves; ++h) {
        // (each half's target loaded where it is used: loaded up front, they left too few registers
        // for the sums, which spilled, at 1.5 times the time)
        __m256i th = plain ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t + 4 * h))
                           : _mm256_maskload_epi64(t + 4 * h, halves[h]);
        if constexpr (F::ignoring != Ignoring::None) {
          skip[h] = _mm256_cmpeq_epi64(th, ignore);
          th = _mm256_andnot_si256(skip[h], th);
          w[h] = _mm256_andnot_pd(_mm256_castsi256_pd(skip[h]), w[h]);
        }
        if constexpr (F::weights == BlockWeights::DoubleEntries) {  // checked as read (an ignored one as 0)
          bits = _mm256_or_si256(bits, bad_weight_bits(w[h]));
        }
        bits = _mm256_or_si256(bits, th);
        const __m256i yes = above_cutoff<plain, bits_compare>(p, h, lanes, above, cut_bits);
        if constexpr (F::cells) {
          // positive and negative are 1.0 or 0.0 by the target: factors of fused multiply-adds that add
          // the weight where predicted and where not into the cells, one op each where an and and an
          // add took two (a product with 1.0 or 0.0 is exact)
          const __m256d all_ones_where_positive =
              _mm256_castsi256_pd(_mm256_sub_epi64(_mm256_setzero_si256(), th));
          const __m256d positive = _mm256_and_pd(all_ones_where_positive, one);
          const __m256d negative = _mm256_andnot_pd(all_ones_where_positive, one);
          const __m256d predicted = _mm256_castsi256_pd(yes);
          const __m256d predicted_weight = _mm256_and_pd(predicted, w[h]);
          const __m256d unpredicted_weight = _mm256_andnot_pd(predicted, w[h]);
          sums[0][h] = _mm256_fmadd_pd(positive, predicted_weight, sums[0][h]);
          sums[1][h] = _mm256_fmadd_pd(negative, predicted_weight, sums[1][h]);
          sums[2][h] = _mm256_fmadd_pd(positive, unpredicted_weight, sums[2][h]);
          sums[3][h] = _mm256_fmadd_pd(negative, unpredicted_weight, sums[3][h]);
        } else {
          // a target of 1 shifted into the exponent reads as 2.0 (0 as +0.0), a factor of the fused
          // multiply-adds below, which count twice the weight where positive: one op where a mask
          // and an add took two; the sums are halved when stored
          const __m256d twice_positive = _mm256_castsi256_pd(_mm256_slli_epi64(th, 62));
          const __m256d predicted_weight = _mm256_and_pd(_mm256_castsi256_pd(yes), w[h]);
          sums[0][h] = _mm256_add_pd(sums[0][h], predicted_weight);
          sums[1][h] = _mm256_fmadd_pd(twice_positive, w[h], sums[1][h]);
          sums[2][h] = _mm256_fmadd_pd(twice_positive, predicted_weight, sums[2][h]);
          if constexpr (F::sums == 4) sums[3][h] = _mm256_add_pd(sums[3][h], w[h]);
        }
      }
      if constexpr (F::ignoring == Ignoring::JudgeKept) {  // an ignored score read as 0.0
        x = _mm256_andnot_ps(_mm256_castsi256_ps(low_halves(skip[0], skip[1])), x);
      }
      if constexpr (logits) {
        sum = _mm256_add_ps(sum, x);
      } else {
        largest = _mm256_max_epu32(largest, _mm256_castps_si256(x));
      }
    }
    // a plain block's sums by plain stores: a masked store is microcoded on AMD's cores
    const __m256d half = _mm256_set1_pd(0.5);
    for (int h = 0; h < kHalves; ++h) {
      const __m256d stored[4] = {sums[0][h], F::cells ? sums[1][h] : _mm256_mul_pd(sums[1][h], half),
                                 F::cells ? sums[2][h] : _mm256_mul_pd(sums[2][h], half), sums[3][h]};
      for (int s = 0; s < F::sums; ++s) {
        if constexpr (plain) {
          _mm256_storeu_pd(out.of[s] + 4 * h, stored[s]);
        } else {
          _mm256_maskstore_pd(out.of[s] + 4 * h, halves[h], stored[s]);
        }
      }
    }
    const bool entries_clean = _mm256_testz_si256(bits, _mm256_set1_epi64x(~int64_t{1})) != 0;
    bool scores_as_guessed;
    if constexpr (logits) {
      float lane_sums[kLanes];
      _mm256_storeu_ps(lane_sums, sum);
      scores_as_guessed = std::isfinite(std::accumulate(lane_sums, lane_sums + kLanes, 0.0f));
    } else {
      const __m256i one = _mm256_set1_epi32(0x3f800000);
      scores_as_guessed = _mm256_movemask_epi8(_mm256_cmpeq_epi32(_mm256_max_epu32(largest, one), one)) == -1;
    }
    return entries_clean && scores_as_guessed;
  }
};

// Kernels::sum_block for `rows` rows of `width` <= Kernels::kLanes entries from entry `first` on
// (and its weight, where they are per entry).
template <typename Kernels, bool logits, typename F>
METRICS_ALWAYS_INLINE bool sum_lanes(const WeightedEntries& b, const void* weight, int64_t first, int64_t rows,
                                     int64_t stride, int64_t width, float threshold, const Sums& out) {
  constexpr int64_t kLanes = Kernels::kLanes;
  const auto kernel = width == kLanes       ? Kernels::template sum_block<kLanes, logits, F>
                      : width == kLanes / 2 ? Kernels::template sum_block<kLanes / 2, logits, F>
                                            : Kernels::template sum_block<0, logits, F>;
  const void* weights = weight;
  if constexpr (F::weights == BlockWeights::FloatEntries) weights = static_cast<const float*>(weight) + first;
  if constexpr (F::weights == BlockWeights::DoubleEntries) weights = static_cast<const double*>(weight) + first;
  return kernel(b.preds + first, b.target + first, weights, rows, stride, width, threshold, b.ignore_index(), out);
}

// Each label's cells from its sums: added, or derived (see above) with its weights' total,
// total_of(label) (a function, not a test of a pointer in the loop, which kept the compiler from
// vectorizing it). The cells (the caller's state) overlap neither each other nor the sums (our
// scratch), which GCC is told: it would need more alias checks than it makes, and left the loop
// scalar, 4% of the weighted multilabel update.
template <bool cells_summed, typename Total>
METRICS_ALWAYS_INLINE void add_cells(const Sums& sums, Total total_of, int64_t labels, const WeightedCells& cells) {
  const double* __restrict s0 = sums.of[0];  // tp, or the weight where predicted
  const double* __restrict s1 = sums.of[1];  // fp, or where positive
  const double* __restrict s2 = sums.of[2];  // fn, or where both
  const double* __restrict s3 = sums.of[3];  // tn (where the cells are summed)
  double* __restrict tp = cells.tp;
  double* __restrict fp = cells.fp;
  double* __restrict tn = cells.tn;
  double* __restrict fn = cells.fn;
#if !defined(__clang__)  // (the fuzz build's clang vectorizes as it can)
#pragma GCC ivdep
#endif
  for (int64_t l = 0; l < labels; ++l) {
    if constexpr (cells_summed) {
      tp[l] += s0[l], fp[l] += s1[l], fn[l] += s2[l], tn[l] += s3[l];
    } else {
      tp[l] += s2[l];
      fp[l] += s0[l] - s2[l];
      fn[l] += s1[l] - s2[l];
      tn[l] += total_of(l) - s0[l] - s1[l] + s2[l];
    }
  }
}

// Multilabel: blocks of Kernels::kLanes labels; the labels past the last full one as part of a
// block of the last kLanes labels, or of the last kLanes / 2 where they hold them, which takes
// fewer ops a row (either sums its earlier labels again, to the same values), or masked where there
// are fewer than kLanes in all.
template <typename Kernels, bool logits, typename F>
METRICS_ALWAYS_INLINE bool sum_labels(const WeightedEntries& b, const void* weight, float threshold,
                                      const Sums& out) {
  constexpr int64_t kLanes = Kernels::kLanes;
  for (int64_t first = 0; first < b.labels; first += kLanes) {
    const int64_t left = b.labels - first;
    const int64_t width = left >= kLanes || b.labels <= kLanes ? std::min(left, kLanes)
                          : left <= kLanes / 2                 ? kLanes / 2
                                                               : kLanes;
    const int64_t start = std::min(first, b.labels - width);
    if (!sum_lanes<Kernels, logits, F>(b, weight, start, b.rows, b.labels, width, threshold, out.from(start))) {
      return false;
    }
  }
  return true;
}

template <typename Kernels, bool logits, typename F>
METRICS_ALWAYS_INLINE bool count_multilabel(const WeightedEntries& b, const void* weight, float threshold,
                                            const WeightedCells& cells) {
  const int64_t labels = b.labels;
  Scratch scratch(4 * labels);
  double* s = scratch.data();
  const Sums out{{s, s + labels, s + 2 * labels, F::sums == 4 ? s + 3 * labels : nullptr}};
  if (!sum_labels<Kernels, logits, F>(b, weight, threshold, out)) return false;
  if constexpr (F::sums == 4) {
    add_cells<F::cells>(out, [&](int64_t l) { return out.of[3][l]; }, labels, cells);
  } else {
    const double total = lane_total(static_cast<const double*>(weight), b.rows);
    add_cells<false>(out, [total](int64_t) { return total; }, labels, cells);
  }
  return true;
}

// Binary: the entries as rows of Kernels::kLanes lanes and a last, shorter row, then every lane
// into the one cell.
template <typename Kernels, bool logits, typename F>
METRICS_ALWAYS_INLINE bool count_binary(const WeightedEntries& b, const void* weight, float threshold,
                                        const WeightedCells& cells) {
  constexpr int64_t kLanes = Kernels::kLanes;
  const int64_t entries = b.rows, whole = entries / kLanes * kLanes;
  double lanes[2][4][kLanes] = {};  // the whole rows' and the last row's sums
  for (const int part : {0, 1}) {
    const Sums out{{lanes[part][0], lanes[part][1], lanes[part][2], lanes[part][3]}};
    const bool counted = part == 0 ? sum_lanes<Kernels, logits, F>(b, weight, 0, whole / kLanes, kLanes, kLanes,
                                                                   threshold, out)
                                   : sum_lanes<Kernels, logits, F>(b, weight, whole, 1, 0, entries - whole,
                                                                   threshold, out);
    if (!counted) return false;
  }
  double totals[4] = {};
  for (int s = 0; s < 4; ++s) {
    for (int part = 0; part < 2; ++part) {
      for (int64_t l = 0; l < kLanes; ++l) totals[s] += lanes[part][s][l];
    }
  }
  add_cells<F::cells>({{&totals[0], &totals[1], &totals[2], &totals[3]}}, [&](int64_t) { return totals[3]; }, 1,
                      cells);
  return true;
}

// The batch in Form F, with the threshold its first scores judged guess.
template <typename Kernels, typename F>
METRICS_ALWAYS_INLINE bool count_in(const WeightedEntries& b, const void* weight, const float (&thresholds)[2],
                                    const WeightedCells& cells) {
  const bool logits = Kernels::template first_scores_logits<F::ignoring>(
      b.preds, b.target, b.labels == 1 ? b.rows : b.labels, b.ignore_index());
  const float threshold = thresholds[logits ? 1 : 0];
  if (b.labels == 1) {
    return logits ? count_binary<Kernels, true, F>(b, weight, threshold, cells)
                  : count_binary<Kernels, false, F>(b, weight, threshold, cells);
  }
  return logits ? count_multilabel<Kernels, true, F>(b, weight, threshold, cells)
                : count_multilabel<Kernels, false, F>(b, weight, threshold, cells);
}

// The batch in the Form of its weights, sums and ignoring.
template <typename Kernels, BlockWeights kWeights, bool cells_summed>
METRICS_ALWAYS_INLINE bool count_as(const WeightedEntries& b, const void* weight, const float (&thresholds)[2],
                                    const WeightedCells& cells) {
  switch (ignoring_of(b.ignore)) {
    case Ignoring::None:
      return count_in<Kernels, Form<kWeights, cells_summed, Ignoring::None>>(b, weight, thresholds, cells);
    case Ignoring::JudgeEvery:
      return count_in<Kernels, Form<kWeights, cells_summed, Ignoring::JudgeEvery>>(b, weight, thresholds, cells);
    case Ignoring::JudgeKept:
      return count_in<Kernels, Form<kWeights, cells_summed, Ignoring::JudgeKept>>(b, weight, thresholds, cells);
  }
  return false;
}

// A batch with weights in one pass (the cells derived where they can be), if it is clean and the
// guess right; Counted::None for unclean weights, and for any other batch not counted here.
template <typename Kernels>
METRICS_ALWAYS_INLINE Counted count_one_pass(const WeightedEntries& b, const float (&thresholds)[2],
                                             const WeightedCells& cells) {
  const bool per_entry = b.weight_per_entry();
  const int64_t weights = b.weights();
  bool exact = false;
  if (b.float_weight) {
    const auto e = Kernels::exponents(static_cast<const float*>(b.weight), weights);
    if (e.most >= 0xff) return Counted::None;
    exact = sums_exact(e, b.rows);
  } else if (!per_entry) {  // (per entry, the test's loop cost binary batches more than it saved)
    const auto e = double_exponents(static_cast<const double*>(b.weight), weights);
    if (e.most >= 0x7ff) return Counted::None;
    exact = sums_exact(e, b.rows);
  }  // (float64 weights per entry: the pass checks them as it reads them)
  Scratch widened(b.float_weight && !per_entry ? b.rows : 0);  // float32 weights per row, as float64
  const void* weight = b.weight;
  if (b.float_weight && !per_entry) {
    widen_into(static_cast<const float*>(b.weight), b.rows, widened.data());
    weight = widened.data();
  }
  using B = BlockWeights;
  if (exact) {
    const bool counted = per_entry ? count_as<Kernels, B::FloatEntries, false>(b, weight, thresholds, cells)
                                   : count_as<Kernels, B::DoubleRows, false>(b, weight, thresholds, cells);
    return counted ? Counted::Derived : Counted::None;
  }
  const bool counted = !per_entry        ? count_as<Kernels, B::DoubleRows, true>(b, weight, thresholds, cells)
                       : b.float_weight ? count_as<Kernels, B::FloatEntries, true>(b, weight, thresholds, cells)
                                        : count_as<Kernels, B::DoubleEntries, true>(b, weight, thresholds, cells);
  return counted ? Counted::Cells : Counted::None;
}

// Batches with weights counted here where they can be, else (or with no weights) by the general kernel.
template <typename Kernels>
METRICS_ALWAYS_INLINE Counted count_one_pass_or_general(const WeightedEntries& b, const float (&thresholds)[2],
                                                        const WeightedCells& cells) {
  if (b.weight != nullptr && b.rows > 0 && b.labels > 0) {
    const Counted counted = count_one_pass<Kernels>(b, thresholds, cells);
    if (counted != Counted::None) return counted;
  }
  return cpu::count(b, thresholds, cells) ? Counted::General : Counted::None;
}

}  // namespace one_pass

METRICS_TARGET_AVX512 Counted count_avx512(const WeightedEntries& b, const float (&thresholds)[2],
                                           const WeightedCells& cells) {
  return one_pass::count_one_pass_or_general<one_pass::Avx512>(b, thresholds, cells);
}

METRICS_TARGET_AVX2 Counted count_avx2(const WeightedEntries& b, const float (&thresholds)[2],
                                       const WeightedCells& cells) {
  return one_pass::count_one_pass_or_general<one_pass::Avx2>(b, thresholds, cells);
}
#endif

}  // namespace

Counted count_weighted_entries(const WeightedEntries& batch, const float (&thresholds)[2], Isa isa,
                               const WeightedCells& cells) {
#ifdef METRICS_HAS_X86
  if (isa == Isa::Avx512) return count_avx512(batch, thresholds, cells);
  if (isa == Isa::Avx2) return count_avx2(batch, thresholds, cells);
#endif
  TORCH_INTERNAL_ASSERT(false, "count_weighted_entries: no vector kernel for this instruction set");
}

}  // namespace metrics::detail::cpu
