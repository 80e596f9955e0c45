#include "entry_counts_simd.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "low_halves_avx2.h"

namespace metrics::detail::cpu {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Lane counters are int32: a kernel call counts at most this many rows, so that none overflows.
constexpr int64_t kRowChunk = int64_t{1} << 30;

// Targets are clean when no bit but the lowest is set anywhere; scores, when their sum is finite:
// it is NaN or infinite whenever a score is (and, harmlessly, when finite scores overflow it,
// which sends the batch to the scalar loop).
// (Lanes past the width hold zeros, which are no evidence of logits.)
LabelScan scan_of(bool targets_clean, float lo, float hi, float sum) {
  return {targets_clean && std::isfinite(sum), lo < 0.0f || hi > 1.0f};
}

#ifdef METRICS_HAS_X86

METRICS_TARGET_AVX512 void add_lanes_avx512(__m512i lanes, int64_t width, int64_t* out) {
  alignas(64) int32_t values[16];
  _mm512_store_si512(values, lanes);
  for (int64_t l = 0; l < width; ++l) out[l] += values[l];
}

// Row by row over 16 labels: the int64 targets' low halves as 16 int32 lanes are 0 or 1 in a
// clean batch, so positives and true positives are sums of them (under the prediction mask for
// the latter); an OR of all target bits finds the batch unclean. No branch depends on the data.
// `full`: all 16 lanes, read without masks; `both`: both thresholds counted, else thresholds[0].
// Ignoring, the entries whose target is the ignore_index are masked out of every sum but
// `ignored` (and out of the OR; JudgeKept: out of the range too).
template <bool full, bool both, Ignoring ignoring>
METRICS_TARGET_AVX512 LabelScan count_avx512(const float* preds, const int64_t* target, int64_t rows,
                                             int64_t stride, int64_t width, const float (&thresholds)[2],
                                             const LabelSums& sums, int64_t ignore_index) {
  const auto lanes = static_cast<__mmask16>(full || width >= 16 ? 0xFFFFu : (1u << width) - 1);
  const auto low = static_cast<__mmask8>(lanes & 0xFF), high = static_cast<__mmask8>(lanes >> 8);
  const __m512i low_halves = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i minus_one = _mm512_set1_epi32(-1), ignore = _mm512_set1_epi64(ignore_index);
  const __m512 probability = _mm512_set1_ps(thresholds[0]), logit = _mm512_set1_ps(thresholds[1]);
  __m512i positives = _mm512_setzero_si512(), bits = positives, kept_count = positives;
  __m512i predicted0 = positives, both0 = positives, predicted1 = positives, both1 = positives;
  __m512 lo = _mm512_set1_ps(kInf), hi = _mm512_set1_ps(-kInf), sum = _mm512_setzero_ps();
#pragma GCC unroll 2
  for (int64_t r = 0; r < rows; ++r) {
    const float* p = preds + r * stride;
    const int64_t* t = target + r * stride;
    const __m512 x = full ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(lanes, p);
    const __m512i t0 = full ? _mm512_loadu_si512(t) : _mm512_maskz_loadu_epi64(low, t);
    const __m512i t1 = full ? _mm512_loadu_si512(t + 8) : _mm512_maskz_loadu_epi64(high, t + 8);
    const __m512i t32 = _mm512_permutex2var_epi32(t0, low_halves, t1);
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
    if constexpr (both) {
      const __mmask16 yes1 = _mm512_mask_cmp_ps_mask(kept, x, logit, _CMP_GT_OQ);
      predicted1 = _mm512_mask_sub_epi32(predicted1, yes1, predicted1, minus_one);
      both1 = _mm512_mask_add_epi32(both1, yes1, both1, t32);
    }
    if constexpr (ignoring == Ignoring::JudgeKept) {
      lo = _mm512_mask_min_ps(lo, kept, lo, x), hi = _mm512_mask_max_ps(hi, kept, hi, x);
      sum = _mm512_mask_add_ps(sum, kept, sum, x);
    } else {
      lo = _mm512_min_ps(lo, x), hi = _mm512_max_ps(hi, x), sum = _mm512_add_ps(sum, x);
    }
  }
  add_lanes_avx512(positives, width, sums.positives);
  if constexpr (ignoring != Ignoring::None) {  // the ignored entries: the rows' but the kept ones
    add_lanes_avx512(_mm512_sub_epi32(_mm512_set1_epi32(static_cast<int32_t>(rows)), kept_count), width,
                     sums.ignored);
  }
  add_lanes_avx512(predicted0, width, sums.predicted[0]);
  add_lanes_avx512(both0, width, sums.both[0]);
  if constexpr (both) {
    add_lanes_avx512(predicted1, width, sums.predicted[1]);
    add_lanes_avx512(both1, width, sums.both[1]);
  }
  const bool targets_clean = _mm512_test_epi64_mask(bits, _mm512_set1_epi64(~int64_t{1})) == 0;
  return scan_of(targets_clean, _mm512_reduce_min_ps(lo), _mm512_reduce_max_ps(hi), _mm512_reduce_add_ps(sum));
}

METRICS_TARGET_AVX2 void add_lanes_avx2(__m256i lanes, int64_t width, int64_t* out) {
  alignas(32) int32_t values[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(values), lanes);
  for (int64_t l = 0; l < width; ++l) out[l] += values[l];
}

METRICS_TARGET_AVX2 float lane_fold(__m256 v, float (*fold)(float, float)) {
  alignas(32) float values[8];
  _mm256_store_ps(values, v);
  float result = values[0];
  for (int l = 1; l < 8; ++l) result = fold(result, values[l]);
  return result;
}

// As count_avx512, over 8 labels. Ignoring, an ignored entry's target is zeroed (for the sums and
// the OR) and its score read as NaN by the compares, which no threshold is below (JudgeKept: as
// 0.5 by the range, inside [0, 1]).
template <bool full, bool both, Ignoring ignoring>
METRICS_TARGET_AVX2 LabelScan count_avx2(const float* preds, const int64_t* target, int64_t rows, int64_t stride,
                                         int64_t width, const float (&thresholds)[2], const LabelSums& sums,
                                         int64_t ignore_index) {
  const __m256i lanes = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(width)),
                                           _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const __m256i low = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(lanes));
  const __m256i high = _mm256_cvtepi32_epi64(_mm256_extracti128_si256(lanes, 1));
  const __m256i ignore = _mm256_set1_epi64x(ignore_index);
  const __m256 probability = _mm256_set1_ps(thresholds[0]), logit = _mm256_set1_ps(thresholds[1]);
  const __m256 inside = _mm256_set1_ps(0.5f);
  __m256i positives = _mm256_setzero_si256(), bits = positives, ignored = positives;
  __m256i predicted0 = positives, both0 = positives, predicted1 = positives, both1 = positives;
  __m256 lo = _mm256_set1_ps(kInf), hi = _mm256_set1_ps(-kInf), sum = _mm256_setzero_ps();
#pragma GCC unroll 2
  for (int64_t r = 0; r < rows; ++r) {
    const float* p = preds + r * stride;
    const auto* t = reinterpret_cast<const long long*>(target + r * stride);
    const __m256 x = full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, lanes);
    __m256i t0 = full ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t)) : _mm256_maskload_epi64(t, low);
    __m256i t1 =
        full ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t + 4)) : _mm256_maskload_epi64(t + 4, high);
    __m256 scored = x, ranged = x;
    if constexpr (ignoring != Ignoring::None) {
      const __m256i skip0 = _mm256_cmpeq_epi64(t0, ignore), skip1 = _mm256_cmpeq_epi64(t1, ignore);
      const __m256i skip = low_halves(skip0, skip1);
      t0 = _mm256_andnot_si256(skip0, t0), t1 = _mm256_andnot_si256(skip1, t1);
      ignored = _mm256_sub_epi32(ignored, skip);
      scored = _mm256_or_ps(x, _mm256_castsi256_ps(skip));
      if constexpr (ignoring == Ignoring::JudgeKept) ranged = _mm256_blendv_ps(x, inside, _mm256_castsi256_ps(skip));
    }
    const __m256i t32 = low_halves(t0, t1);
    bits = _mm256_or_si256(bits, _mm256_or_si256(t0, t1));
    positives = _mm256_add_epi32(positives, t32);
    // A predicted lane is all ones: -1. (Lanes past the width count zeros, which no sum takes.)
    const __m256i yes0 = _mm256_castps_si256(_mm256_cmp_ps(scored, probability, _CMP_GT_OQ));
    predicted0 = _mm256_sub_epi32(predicted0, yes0);
    both0 = _mm256_add_epi32(both0, _mm256_and_si256(yes0, t32));
    if constexpr (both) {
      const __m256i yes1 = _mm256_castps_si256(_mm256_cmp_ps(scored, logit, _CMP_GT_OQ));
      predicted1 = _mm256_sub_epi32(predicted1, yes1);
      both1 = _mm256_add_epi32(both1, _mm256_and_si256(yes1, t32));
    }
    lo = _mm256_min_ps(lo, ranged), hi = _mm256_max_ps(hi, ranged), sum = _mm256_add_ps(sum, ranged);
  }
  add_lanes_avx2(positives, width, sums.positives);
  if constexpr (ignoring != Ignoring::None) add_lanes_avx2(ignored, width, sums.ignored);
  add_lanes_avx2(predicted0, width, sums.predicted[0]);
  add_lanes_avx2(both0, width, sums.both[0]);
  if constexpr (both) {
    add_lanes_avx2(predicted1, width, sums.predicted[1]);
    add_lanes_avx2(both1, width, sums.both[1]);
  }
  const bool targets_clean = _mm256_testz_si256(bits, _mm256_set1_epi64x(~int64_t{1}));
  return scan_of(targets_clean, lane_fold(lo, [](float a, float b) { return std::min(a, b); }),
                 lane_fold(hi, [](float a, float b) { return std::max(a, b); }),
                 lane_fold(sum, [](float a, float b) { return a + b; }));
}

#endif  // METRICS_HAS_X86

template <bool both, Ignoring ignoring>
LabelScan count_chunk(const float* preds, const int64_t* target, int64_t rows, int64_t stride, int64_t width,
                      const float (&thresholds)[2], Isa isa, const LabelSums& sums, int64_t ignore_index) {
#ifdef METRICS_HAS_X86
  if (isa == Isa::Avx512) {
    const auto kernel = width == 16 ? count_avx512<true, both, ignoring> : count_avx512<false, both, ignoring>;
    return kernel(preds, target, rows, stride, width, thresholds, sums, ignore_index);
  }
  if (isa == Isa::Avx2) {
    const auto kernel = width == 8 ? count_avx2<true, both, ignoring> : count_avx2<false, both, ignoring>;
    return kernel(preds, target, rows, stride, width, thresholds, sums, ignore_index);
  }
#endif
  TORCH_INTERNAL_ASSERT(false, "count_labels: no vector kernel for this instruction set");
}

// count_chunk for the thresholds counted and the ignoring.
template <Ignoring ignoring>
auto chunk_counter(Thresholds counted) {
  return counted == Thresholds::Both ? count_chunk<true, ignoring> : count_chunk<false, ignoring>;
}

}  // namespace

int64_t label_lanes(Isa isa) { return isa == Isa::Avx512 ? 16 : 8; }

LabelScan count_labels(const float* preds, const int64_t* target, int64_t rows, int64_t stride, int64_t width,
                       const float (&thresholds)[2], Isa isa, const LabelSums& sums,
                       const std::optional<Ignore>& ignore, Thresholds counted) {
  TORCH_INTERNAL_ASSERT(width >= 0 && width <= label_lanes(isa));
  TORCH_INTERNAL_ASSERT(!ignore || (ignore->index != 0 && ignore->index != 1));
  LabelScan scan;
  if (width == 0) return scan;  // nothing to read (an empty tensor's data pointer may be null)
  const Ignoring ignoring = ignoring_of(ignore);
  const auto chunk = ignoring == Ignoring::None         ? chunk_counter<Ignoring::None>(counted)
                     : ignoring == Ignoring::JudgeEvery ? chunk_counter<Ignoring::JudgeEvery>(counted)
                                                        : chunk_counter<Ignoring::JudgeKept>(counted);
  const int64_t ignore_index = ignore ? ignore->index : 0;
  for (int64_t start = 0; start < rows; start += kRowChunk) {
    const int64_t offset = start * stride;
    const auto part = chunk(preds + offset, target + offset, std::min(kRowChunk, rows - start), stride, width,
                            thresholds, isa, sums, ignore_index);
    scan = {scan.clean && part.clean, scan.logits || part.logits};
  }
  return scan;
}

}  // namespace metrics::detail::cpu
