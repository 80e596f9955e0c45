#include "entry_counts_simd.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "lane_shuffles_avx2.h"

namespace metrics::detail::cpu {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// 1.0f's bits: a score's bits, unsigned, are at most these where it is inside [+0, 1] (not -0.0,
// not NaN).
constexpr uint32_t kOneBits = 0x3f800000u;

// Lane counters are int32: a kernel call counts at most this many rows, so that none overflows.
constexpr int64_t kRowChunk = int64_t{1} << 30;

// p + offset, as an address: a masked load reads only its lanes' entries, and the first of them
// may lie before the buffer (where a row's labels are fewer than its lanes).
template <typename T>
const T* lane_base(const T* p, int64_t offset) {
  return reinterpret_cast<const T*>(reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(offset) * sizeof(T));
}

// Targets are clean when no bit but the lowest is set anywhere; scores, when their sum is finite:
// it is NaN or infinite whenever a score is (and, harmlessly, when finite scores overflow it,
// which sends the batch to the scalar loop).
// (Lanes past the width hold zeros, which are no evidence of logits.)
LabelScan scan_of(bool targets_clean, float lo, float hi, float sum) {
  return {targets_clean && std::isfinite(sum), lo < 0.0f || hi > 1.0f};
}

// Counting under one reading: the targets clean, and the scores judged as it needs them (the
// largest of their bits at most 1.0's; or their sum finite).
template <Thresholds counted>
LabelScan scan_as_read(bool targets_clean, uint32_t largest_bits, float sum) {
  static_assert(counted != Thresholds::Both);
  const bool as_read = counted == Thresholds::Probabilities ? largest_bits <= kOneBits : std::isfinite(sum);
  return {targets_clean && as_read, false};
}

#ifdef METRICS_HAS_X86

// Adds each row's lanes [0, width) to the labels' sums (the lanes of 16 / row_lanes rows side by side).
METRICS_TARGET_AVX512 void add_lanes_avx512(__m512i lanes, int64_t width, int64_t row_lanes, int64_t* out) {
  alignas(64) int32_t values[16];
  _mm512_store_si512(values, lanes);
  for (int64_t first = 0; first < 16; first += row_lanes) {
    for (int64_t l = 0; l < width; ++l) out[l] += values[first + l];
  }
}

// Row by row over 16 labels: the int64 targets' low halves as 16 int32 lanes are 0 or 1 in a
// clean batch, so positives and true positives are sums of them (under the prediction mask for
// the latter); an OR of all target bits finds the batch unclean. No branch depends on the data.
// `full`: all 16 lanes, read without masks; else `width` of them, or, kRows > 1, the `width`
// (<= 16 / kRows) labels of kRows rows side by side, each row's in 16 / kRows lanes, so that a
// narrow last block of labels takes a vector per kRows rows; `rows` is then a multiple of kRows.
// Ignoring, the entries whose target is the ignore_index are masked out of every sum but `ignored`
// (and out of the OR; JudgeKept: out of the scores judged too).
template <bool full, Thresholds counted, Ignoring ignoring, int kRows>
METRICS_TARGET_AVX512 LabelScan count_avx512(const float* preds, const int64_t* target, int64_t rows,
                                             int64_t stride, int64_t width, const float (&thresholds)[2],
                                             const LabelSums& sums, int64_t ignore_index) {
  constexpr int64_t kRowLanes = 16 / kRows;
  static_assert(kRows == 1 || !full);
  const auto row_mask = static_cast<__mmask16>(full || width >= 16 ? 0xFFFFu : (1u << width) - 1);
  __mmask16 lanes = 0;
  for (int j = 0; j < kRows; ++j) lanes |= static_cast<__mmask16>(row_mask << (j * kRowLanes));
  const auto low = static_cast<__mmask8>(lanes & 0xFF), high = static_cast<__mmask8>(lanes >> 8);
  const __m512i low_half_lanes = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i minus_one = _mm512_set1_epi32(-1), ignore = _mm512_set1_epi64(ignore_index);
  const __m512 probability = _mm512_set1_ps(thresholds[0]), logit = _mm512_set1_ps(thresholds[1]);
  __m512i positives = _mm512_setzero_si512(), bits = positives, kept_count = positives, largest = positives;
  __m512i predicted0 = positives, both0 = positives, predicted1 = positives, both1 = positives;
  __m512 lo = _mm512_set1_ps(kInf), hi = _mm512_set1_ps(-kInf), sum = _mm512_setzero_ps();
#pragma GCC unroll 2
  for (int64_t r = 0; r < rows; r += kRows) {
    const float* p = preds + r * stride;
    const int64_t* t = target + r * stride;
    __m512 x;
    __m512i t0, t1;
    if constexpr (kRows == 1) {
      x = full ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(lanes, p);
      t0 = full ? _mm512_loadu_si512(t) : _mm512_maskz_loadu_epi64(low, t);
      t1 = full ? _mm512_loadu_si512(t + 8) : _mm512_maskz_loadu_epi64(high, t + 8);
    } else {
      x = _mm512_setzero_ps(), t0 = t1 = _mm512_setzero_si512();
      for (int j = 0; j < kRows; ++j) {
        // row j's labels into lanes from j * kRowLanes on: a masked load from as many entries before it
        const auto in_row = static_cast<__mmask16>(row_mask << (j * kRowLanes));
        const int64_t offset = j * (stride - kRowLanes);
        x = _mm512_mask_loadu_ps(x, in_row, lane_base(p, offset));
        if (j * kRowLanes < 8) {
          t0 = _mm512_mask_loadu_epi64(t0, static_cast<__mmask8>(in_row), lane_base(t, offset));
        } else {
          t1 = _mm512_mask_loadu_epi64(t1, static_cast<__mmask8>(in_row >> 8), lane_base(t, offset + 8));
        }
      }
    }
    const __m512i t32 = _mm512_permutex2var_epi32(t0, low_half_lanes, t1);
    __mmask16 kept = lanes;
    if constexpr (ignoring == Ignoring::None) {
      bits = _mm512_ternarylogic_epi64(bits, t0, t1, 0xFE);  // bits | t0 | t1
    } else {
      const __mmask8 kept0 = _mm512_cmpneq_epi64_mask(t0, ignore), kept1 = _mm512_cmpneq_epi64_mask(t1, ignore);
      kept = full ? _mm512_kunpackb(kept1, kept0) : static_cast<__mmask16>(lanes & _mm512_kunpackb(kept1, kept0));
      bits = _mm512_mask_or_epi64(bits, kept0, bits, t0);
      bits = _mm512_mask_or_epi64(bits, kept1, bits, t1);
      kept_count = _mm512_mask_sub_epi32(kept_count, kept, kept_count, minus_one);
    }
    positives = _mm512_mask_add_epi32(positives, kept, positives, t32);
    const __mmask16 yes0 = _mm512_mask_cmp_ps_mask(kept, x, probability, _CMP_GT_OQ);
    predicted0 = _mm512_mask_sub_epi32(predicted0, yes0, predicted0, minus_one);
    both0 = _mm512_mask_add_epi32(both0, yes0, both0, t32);
    // the scores judged: every one, or (JudgeKept) the kept ones
    const __mmask16 judged = ignoring == Ignoring::JudgeKept ? kept : static_cast<__mmask16>(0xFFFFu);
    if constexpr (counted == Thresholds::Both) {
      const __mmask16 yes1 = _mm512_mask_cmp_ps_mask(kept, x, logit, _CMP_GT_OQ);
      predicted1 = _mm512_mask_sub_epi32(predicted1, yes1, predicted1, minus_one);
      both1 = _mm512_mask_add_epi32(both1, yes1, both1, t32);
      lo = _mm512_mask_min_ps(lo, judged, lo, x), hi = _mm512_mask_max_ps(hi, judged, hi, x);
      sum = _mm512_mask_add_ps(sum, judged, sum, x);
    } else if constexpr (counted == Thresholds::Probabilities) {
      largest = _mm512_mask_max_epu32(largest, judged, largest, _mm512_castps_si512(x));
    } else {
      sum = _mm512_mask_add_ps(sum, judged, sum, x);
    }
  }
  add_lanes_avx512(positives, width, kRowLanes, sums.positives);
  if constexpr (ignoring != Ignoring::None) {  // the ignored entries: each lane's rows but the kept ones
    const __m512i lane_rows = _mm512_set1_epi32(static_cast<int32_t>(rows / kRows));
    add_lanes_avx512(_mm512_sub_epi32(lane_rows, kept_count), width, kRowLanes, sums.ignored);
  }
  add_lanes_avx512(predicted0, width, kRowLanes, sums.predicted[0]);
  add_lanes_avx512(both0, width, kRowLanes, sums.both[0]);
  if constexpr (counted == Thresholds::Both) {
    add_lanes_avx512(predicted1, width, kRowLanes, sums.predicted[1]);
    add_lanes_avx512(both1, width, kRowLanes, sums.both[1]);
  }
  const bool targets_clean = _mm512_test_epi64_mask(bits, _mm512_set1_epi64(~int64_t{1})) == 0;
  if constexpr (counted == Thresholds::Both) {
    return scan_of(targets_clean, _mm512_reduce_min_ps(lo), _mm512_reduce_max_ps(hi), _mm512_reduce_add_ps(sum));
  } else {
    return scan_as_read<counted>(targets_clean, _mm512_reduce_max_epu32(largest), _mm512_reduce_add_ps(sum));
  }
}

// Adds lanes in shuffled order to `out`, a label's rows of lanes at a time.
METRICS_TARGET_AVX2 void add_lanes_avx2(__m256i shuffled, int64_t width, int64_t row_lanes, int64_t* out) {
  alignas(32) int32_t values[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(values), shuffled_order(shuffled));
  for (int64_t first = 0; first < 8; first += row_lanes) {
    for (int64_t l = 0; l < width; ++l) out[l] += values[first + l];
  }
}

METRICS_TARGET_AVX2 float lane_fold(__m256 v, float (*fold)(float, float)) {
  alignas(32) float values[8];
  _mm256_store_ps(values, v);
  float result = values[0];
  for (int l = 1; l < 8; ++l) result = fold(result, values[l]);
  return result;
}

METRICS_TARGET_AVX2 uint32_t lane_max_u32(__m256i v) {
  alignas(32) uint32_t values[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(values), v);
  return *std::max_element(values, values + 8);
}

// As count_avx512, over 8 labels; kRows 2: the `width` (<= 4) labels of two rows side by side.
// The targets are read as their halves, the scores in the order a shuffle leaves those in.
// Ignoring, a target is the ignore_index where its low half is the index's (never 0 or 1 there:
// vector_kernels_take), and clean where its high half is the index's (else 0); an ignored entry's
// target is zeroed for the sums and its score read as NaN by the compares, which no threshold is
// below (JudgeKept: as +0.0 where scores are judged, inside [0, 1]).
template <bool full, Thresholds counted, Ignoring ignoring, int kRows>
METRICS_TARGET_AVX2 LabelScan count_avx2(const float* preds, const int64_t* target, int64_t rows, int64_t stride,
                                         int64_t width, const float (&thresholds)[2], const LabelSums& sums,
                                         int64_t ignore_index) {
  constexpr int64_t kRowLanes = 8 / kRows;
  static_assert(kRows == 1 || !full);
  const __m256i lanes = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(width)),
                                           kRows == 1 ? _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)
                                                      : _mm256_setr_epi32(0, 1, 2, 3, 0, 1, 2, 3));
  const __m256i low = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(lanes));
  const __m256i high = _mm256_cvtepi32_epi64(_mm256_extracti128_si256(lanes, 1));
  // where the second vector of targets starts: the row's next 4 labels, or the next row's
  const int64_t second = kRows == 1 ? 4 : stride;
  const __m256i ignore_low = _mm256_set1_epi32(static_cast<int32_t>(ignore_index));
  const __m256i ignore_high = _mm256_set1_epi32(static_cast<int32_t>(ignore_index >> 32));
  const __m256 probability = _mm256_set1_ps(thresholds[0]), logit = _mm256_set1_ps(thresholds[1]);
  __m256i positives = _mm256_setzero_si256(), bits = positives, high_bits = positives, ignored = positives;
  __m256i largest = positives;
  __m256i predicted0 = positives, both0 = positives, predicted1 = positives, both1 = positives;
  __m256 lo = _mm256_set1_ps(kInf), hi = _mm256_set1_ps(-kInf), sum = _mm256_setzero_ps();
#pragma GCC unroll 2
  for (int64_t r = 0; r < rows; r += kRows) {
    const float* p = preds + r * stride;
    const auto* t = reinterpret_cast<const long long*>(target + r * stride);
    __m256 x;
    if constexpr (kRows == 1) {
      x = full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, lanes);
    } else {
      const __m128i row_lanes = _mm256_castsi256_si128(lanes);
      x = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_maskload_ps(p, row_lanes)),
                               _mm_maskload_ps(p + stride, row_lanes), 1);
    }
    x = _mm256_castsi256_ps(shuffled_order(_mm256_castps_si256(x)));
    const __m256i t0 = full ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t)) : _mm256_maskload_epi64(t, low);
    const __m256i t1 = full ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t + 4))
                            : _mm256_maskload_epi64(t + second, high);
    __m256i t32 = shuffled_halves<0>(t0, t1);
    __m256 scored = x, judged = x;
    if constexpr (ignoring != Ignoring::None) {
      const __m256i skip = _mm256_cmpeq_epi32(t32, ignore_low);
      t32 = _mm256_andnot_si256(skip, t32);
      const __m256i high_error = _mm256_xor_si256(shuffled_halves<1>(t0, t1), _mm256_and_si256(skip, ignore_high));
      bits = _mm256_or_si256(bits, t32), high_bits = _mm256_or_si256(high_bits, high_error);
      ignored = _mm256_sub_epi32(ignored, skip);
      scored = _mm256_or_ps(x, _mm256_castsi256_ps(skip));
      if constexpr (ignoring == Ignoring::JudgeKept) judged = _mm256_andnot_ps(_mm256_castsi256_ps(skip), x);
    } else {
      bits = _mm256_or_si256(bits, _mm256_or_si256(t0, t1));
    }
    if constexpr (counted == Thresholds::Both) {
      lo = _mm256_min_ps(lo, judged), hi = _mm256_max_ps(hi, judged), sum = _mm256_add_ps(sum, judged);
    } else if constexpr (counted == Thresholds::Probabilities) {
      largest = _mm256_max_epu32(largest, _mm256_castps_si256(judged));
    } else {
      sum = _mm256_add_ps(sum, judged);
    }
    positives = _mm256_add_epi32(positives, t32);
    // A predicted lane is all ones: -1. (Lanes past the width count too, their scores zeros: no sum
    // takes them.)
    const __m256i yes0 = _mm256_castps_si256(_mm256_cmp_ps(scored, probability, _CMP_GT_OQ));
    predicted0 = _mm256_sub_epi32(predicted0, yes0);
    both0 = _mm256_add_epi32(both0, _mm256_and_si256(yes0, t32));
    if constexpr (counted == Thresholds::Both) {
      const __m256i yes1 = _mm256_castps_si256(_mm256_cmp_ps(scored, logit, _CMP_GT_OQ));
      predicted1 = _mm256_sub_epi32(predicted1, yes1);
      both1 = _mm256_add_epi32(both1, _mm256_and_si256(yes1, t32));
    }
  }
  add_lanes_avx2(positives, width, kRowLanes, sums.positives);
  if constexpr (ignoring != Ignoring::None) add_lanes_avx2(ignored, width, kRowLanes, sums.ignored);
  add_lanes_avx2(predicted0, width, kRowLanes, sums.predicted[0]);
  add_lanes_avx2(both0, width, kRowLanes, sums.both[0]);
  if constexpr (counted == Thresholds::Both) {
    add_lanes_avx2(predicted1, width, kRowLanes, sums.predicted[1]);
    add_lanes_avx2(both1, width, kRowLanes, sums.both[1]);
  }
  // (ignoring, `bits` holds the targets' low halves, `high_bits` what their high halves differ by)
  const __m256i clean_bits = ignoring == Ignoring::None ? _mm256_set1_epi64x(~int64_t{1}) : _mm256_set1_epi32(~1);
  const bool targets_clean = _mm256_testz_si256(bits, clean_bits) && _mm256_testz_si256(high_bits, high_bits);
  const float score_sum = lane_fold(sum, [](float a, float b) { return a + b; });
  if constexpr (counted == Thresholds::Both) {
    return scan_of(targets_clean, lane_fold(lo, [](float a, float b) { return std::min(a, b); }),
                   lane_fold(hi, [](float a, float b) { return std::max(a, b); }), score_sum);
  } else {
    return scan_as_read<counted>(targets_clean, lane_max_u32(largest), score_sum);
  }
}

#endif  // METRICS_HAS_X86

LabelScan merged(const LabelScan& a, const LabelScan& b) { return {a.clean && b.clean, a.logits || b.logits}; }

using Kernel = LabelScan (*)(const float*, const int64_t*, int64_t, int64_t, int64_t, const float (&)[2],
                             const LabelSums&, int64_t);

// A block's kernels: `packed` takes rows in groups of `rows_per_vector`, `single` the rest.
struct BlockKernels {
  Kernel packed;
  int64_t rows_per_vector;
  Kernel single;
};

template <Thresholds counted, Ignoring ignoring>
BlockKernels block_kernels(Isa isa, int64_t width) {
#ifdef METRICS_HAS_X86
  if (isa == Isa::Avx512) {
    if (width == 16) return {count_avx512<true, counted, ignoring, 1>, 1, nullptr};
    const Kernel single = count_avx512<false, counted, ignoring, 1>;
    if (width <= 4) return {count_avx512<false, counted, ignoring, 4>, 4, single};
    if (width <= 8) return {count_avx512<false, counted, ignoring, 2>, 2, single};
    return {single, 1, nullptr};
  }
  if (isa == Isa::Avx2) {
    if (width == 8) return {count_avx2<true, counted, ignoring, 1>, 1, nullptr};
    const Kernel single = count_avx2<false, counted, ignoring, 1>;
    if (width <= 4) return {count_avx2<false, counted, ignoring, 2>, 2, single};
    return {single, 1, nullptr};
  }
#endif
  TORCH_INTERNAL_ASSERT(false, "count_labels: no vector kernel for this instruction set");
}

template <Thresholds counted, Ignoring ignoring>
LabelScan count_chunk(const float* preds, const int64_t* target, int64_t rows, int64_t stride, int64_t width,
                      const float (&thresholds)[2], Isa isa, const LabelSums& sums, int64_t ignore_index) {
  const auto kernels = block_kernels<counted, ignoring>(isa, width);
  const int64_t packed = rows / kernels.rows_per_vector * kernels.rows_per_vector;
  LabelScan scan;
  if (packed > 0) scan = kernels.packed(preds, target, packed, stride, width, thresholds, sums, ignore_index);
  if (packed < rows) {
    const int64_t offset = packed * stride;
    scan = merged(scan, kernels.single(preds + offset, target + offset, rows - packed, stride, width, thresholds,
                                       sums, ignore_index));
  }
  return scan;
}

// count_chunk for the thresholds counted and the ignoring.
template <Ignoring ignoring>
auto chunk_counter(Thresholds counted) {
  return counted == Thresholds::Both            ? count_chunk<Thresholds::Both, ignoring>
         : counted == Thresholds::Probabilities ? count_chunk<Thresholds::Probabilities, ignoring>
                                                : count_chunk<Thresholds::Logits, ignoring>;
}

}  // namespace

int64_t label_lanes(Isa isa) { return isa == Isa::Avx512 ? 16 : 8; }

LabelScan count_labels(const float* preds, const int64_t* target, int64_t rows, int64_t stride, int64_t width,
                       const float (&thresholds)[2], Isa isa, const LabelSums& sums,
                       const std::optional<Ignore>& ignore, Thresholds counted) {
  TORCH_INTERNAL_ASSERT(width >= 0 && width <= label_lanes(isa));
  TORCH_INTERNAL_ASSERT(!ignore || vector_kernels_take(ignore->index));
  LabelScan scan;
  if (width == 0) return scan;  // nothing to read (an empty tensor's data pointer may be null)
  const Ignoring ignoring = ignoring_of(ignore);
  const auto chunk = ignoring == Ignoring::None         ? chunk_counter<Ignoring::None>(counted)
                     : ignoring == Ignoring::JudgeEvery ? chunk_counter<Ignoring::JudgeEvery>(counted)
                                                        : chunk_counter<Ignoring::JudgeKept>(counted);
  const int64_t ignore_index = compared_index(ignore);
  for (int64_t start = 0; start < rows; start += kRowChunk) {
    const int64_t offset = start * stride;
    const auto part = chunk(preds + offset, target + offset, std::min(kRowChunk, rows - start), stride, width,
                            thresholds, isa, sums, ignore_index);
    scan = merged(scan, part);
  }
  return scan;
}

}  // namespace metrics::detail::cpu
