#include "aggregation_simd.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace metrics::detail::cpu {
namespace {

#ifdef METRICS_HAS_X86

// ------------------------------------------------------------------ AVX-512: 8 doubles a vector

METRICS_TARGET_AVX512 inline __m512d load8(const float* p) { return _mm512_cvtps_pd(_mm256_loadu_ps(p)); }
METRICS_TARGET_AVX512 inline __m512d load8(const double* p) { return _mm512_loadu_pd(p); }

// The first `left` (< 8) values, zeros after them.
METRICS_TARGET_AVX512 inline __m512d load8_head(const float* p, int64_t left) {
  const auto lanes = static_cast<__mmask16>((1u << left) - 1);
  return _mm512_cvtps_pd(_mm512_castps512_ps256(_mm512_maskz_loadu_ps(lanes, p)));
}
METRICS_TARGET_AVX512 inline __m512d load8_head(const double* p, int64_t left) {
  return _mm512_maskz_loadu_pd(static_cast<__mmask8>((1u << left) - 1), p);
}

// s += p, lane by lane; returns what the sum rounded off (TwoSum, exact). One subtraction is an
// FMA by 1 (as exact): the loops are bound by additions, which two of a Zen's four vector pipes
// run, and FMAs go to the other two. (The empty asm keeps GCC from folding the 1 away.)
METRICS_TARGET_AVX512 inline __m512d two_sum_avx512(__m512d& s, __m512d p) {
  __m512d one = _mm512_set1_pd(1.0);
  asm("" : "+v"(one));
  const __m512d t = _mm512_add_pd(s, p);
  const __m512d from_p = _mm512_fnmadd_pd(s, one, t);
  const __m512d error = _mm512_add_pd(_mm512_sub_pd(s, _mm512_sub_pd(t, from_p)), _mm512_sub_pd(p, from_p));
  s = t;
  return error;
}

// acc += v·w, with NaN lanes of v counted in `nans` and dropped or replaced per `mode`; returns
// what the sum rounded off.
template <NanMode mode>
METRICS_TARGET_AVX512 inline __m512d add_avx512(__m512d& acc, __m512d v, __m512d w, __m512d replacement,
                                                __m512i& nans) {
  if constexpr (mode == NanMode::Keep) return two_sum_avx512(acc, _mm512_mul_pd(v, w));
  const __mmask8 nan = _mm512_cmp_pd_mask(v, v, _CMP_UNORD_Q);
  nans = _mm512_mask_sub_epi64(nans, nan, nans, _mm512_set1_epi64(-1));
  if constexpr (mode == NanMode::Drop) {
    return two_sum_avx512(acc, _mm512_mul_pd(_mm512_mask_mov_pd(v, nan, _mm512_setzero_pd()), w));
  }
  return two_sum_avx512(
      acc, _mm512_mul_pd(_mm512_mask_mov_pd(v, nan, replacement), _mm512_mask_mov_pd(w, nan, _mm512_set1_pd(1.0))));
}

// Four accumulators, so that the additions do not wait on each other's latency; a pair's errors
// are added together before they join its compensation (an addition less per two vectors). The
// lanes are joined with TwoSum too (compensated_lanes), so a block's sum is as exact as float64.
template <NanMode mode, typename T>
METRICS_TARGET_AVX512 BlockSum sum_avx512(const T* x, int64_t n, double weight, double replacement) {
  const __m512d w = _mm512_set1_pd(weight), r = _mm512_set1_pd(replacement);
  __m512d a0 = _mm512_setzero_pd(), a1 = a0, a2 = a0, a3 = a0, c0 = a0, c1 = a0;
  __m512i nans = _mm512_setzero_si512();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512d e0 = add_avx512<mode>(a0, load8(x + i), w, r, nans);
    const __m512d e1 = add_avx512<mode>(a1, load8(x + i + 8), w, r, nans);
    const __m512d e2 = add_avx512<mode>(a2, load8(x + i + 16), w, r, nans);
    const __m512d e3 = add_avx512<mode>(a3, load8(x + i + 24), w, r, nans);
    c0 = _mm512_add_pd(c0, _mm512_add_pd(e0, e1));
    c1 = _mm512_add_pd(c1, _mm512_add_pd(e2, e3));
  }
  for (; i + 8 <= n; i += 8) c0 = _mm512_add_pd(c0, add_avx512<mode>(a0, load8(x + i), w, r, nans));
  if (i < n) c1 = _mm512_add_pd(c1, add_avx512<mode>(a1, load8_head(x + i, n - i), w, r, nans));
  c0 = _mm512_add_pd(c0, two_sum_avx512(a0, a1));
  c1 = _mm512_add_pd(c1, two_sum_avx512(a2, a3));
  c0 = _mm512_add_pd(c0, two_sum_avx512(a0, a2));
  alignas(64) double sums[8], errors[8];
  _mm512_store_pd(sums, a0);
  _mm512_store_pd(errors, _mm512_add_pd(c0, c1));
  return {compensated_lanes(sums, errors, 8), _mm512_reduce_add_epi64(nans)};
}

template <bool is_max>
METRICS_TARGET_AVX512 inline __m512 fold_avx512(__m512 m, __m512 v, __m512i& nans) {
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  nans = _mm512_mask_sub_epi32(nans, nan, nans, _mm512_set1_epi32(-1));
  return is_max ? _mm512_max_ps(v, m) : _mm512_min_ps(v, m);  // a NaN in v returns m
}

// At most 2^31 - 1 values, so that the int32 NaN lanes cannot overflow.
template <bool is_max>
METRICS_TARGET_AVX512 SpanExtremum extremum_avx512(const float* x, int64_t n) {
  const __m512 identity = _mm512_set1_ps(is_max ? -std::numeric_limits<float>::infinity()
                                                : std::numeric_limits<float>::infinity());
  __m512 m0 = identity, m1 = identity, m2 = identity, m3 = identity;
  __m512i nans = _mm512_setzero_si512();
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    m0 = fold_avx512<is_max>(m0, _mm512_loadu_ps(x + i), nans);
    m1 = fold_avx512<is_max>(m1, _mm512_loadu_ps(x + i + 16), nans);
    m2 = fold_avx512<is_max>(m2, _mm512_loadu_ps(x + i + 32), nans);
    m3 = fold_avx512<is_max>(m3, _mm512_loadu_ps(x + i + 48), nans);
  }
  for (; i < n; i += 16) {
    const int64_t left = n - i;
    const auto lanes = static_cast<__mmask16>(left >= 16 ? 0xFFFFu : (1u << left) - 1);
    m0 = fold_avx512<is_max>(m0, _mm512_mask_loadu_ps(identity, lanes, x + i), nans);
  }
  const __m512 m = is_max ? _mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3))
                          : _mm512_min_ps(_mm512_min_ps(m0, m1), _mm512_min_ps(m2, m3));
  return {is_max ? _mm512_reduce_max_ps(m) : _mm512_reduce_min_ps(m), _mm512_reduce_add_epi32(nans)};
}

// ------------------------------------------------------------------ AVX2: 4 doubles a vector

METRICS_TARGET_AVX2 inline __m256d load4(const float* p) { return _mm256_cvtps_pd(_mm_loadu_ps(p)); }
METRICS_TARGET_AVX2 inline __m256d load4(const double* p) { return _mm256_loadu_pd(p); }

METRICS_TARGET_AVX2 inline __m256d load4_head(const float* p, int64_t left) {
  return _mm256_cvtps_pd(_mm_maskload_ps(p, _mm_cmpgt_epi32(_mm_set1_epi32(static_cast<int>(left)),
                                                            _mm_setr_epi32(0, 1, 2, 3))));
}
METRICS_TARGET_AVX2 inline __m256d load4_head(const double* p, int64_t left) {
  return _mm256_maskload_pd(p, _mm256_cmpgt_epi64(_mm256_set1_epi64x(left), _mm256_setr_epi64x(0, 1, 2, 3)));
}

// As two_sum_avx512.
METRICS_TARGET_AVX2 inline __m256d two_sum_avx2(__m256d& s, __m256d p) {
  __m256d one = _mm256_set1_pd(1.0);
  asm("" : "+x"(one));
  const __m256d t = _mm256_add_pd(s, p);
  const __m256d from_p = _mm256_fnmadd_pd(s, one, t);
  const __m256d error = _mm256_add_pd(_mm256_sub_pd(s, _mm256_sub_pd(t, from_p)), _mm256_sub_pd(p, from_p));
  s = t;
  return error;
}

template <NanMode mode>
METRICS_TARGET_AVX2 inline __m256d add_avx2(__m256d& acc, __m256d v, __m256d w, __m256d replacement, __m256i& nans) {
  if constexpr (mode == NanMode::Keep) return two_sum_avx2(acc, _mm256_mul_pd(v, w));
  const __m256d nan = _mm256_cmp_pd(v, v, _CMP_UNORD_Q);
  nans = _mm256_sub_epi64(nans, _mm256_castpd_si256(nan));  // a NaN lane is all ones: -1
  if constexpr (mode == NanMode::Drop) return two_sum_avx2(acc, _mm256_mul_pd(_mm256_andnot_pd(nan, v), w));
  return two_sum_avx2(acc, _mm256_mul_pd(_mm256_blendv_pd(v, replacement, nan),
                                         _mm256_blendv_pd(w, _mm256_set1_pd(1.0), nan)));
}

METRICS_TARGET_AVX2 inline int64_t lane_sum(__m256i v) {
  alignas(32) int64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), v);
  return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
}

template <NanMode mode, typename T>
METRICS_TARGET_AVX2 BlockSum sum_avx2(const T* x, int64_t n, double weight, double replacement) {
  const __m256d w = _mm256_set1_pd(weight), r = _mm256_set1_pd(replacement);
  __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0, c0 = a0, c1 = a0;
  __m256i nans = _mm256_setzero_si256();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256d e0 = add_avx2<mode>(a0, load4(x + i), w, r, nans);
    const __m256d e1 = add_avx2<mode>(a1, load4(x + i + 4), w, r, nans);
    const __m256d e2 = add_avx2<mode>(a2, load4(x + i + 8), w, r, nans);
    const __m256d e3 = add_avx2<mode>(a3, load4(x + i + 12), w, r, nans);
    c0 = _mm256_add_pd(c0, _mm256_add_pd(e0, e1));
    c1 = _mm256_add_pd(c1, _mm256_add_pd(e2, e3));
  }
  for (; i + 4 <= n; i += 4) c0 = _mm256_add_pd(c0, add_avx2<mode>(a0, load4(x + i), w, r, nans));
  if (i < n) c1 = _mm256_add_pd(c1, add_avx2<mode>(a1, load4_head(x + i, n - i), w, r, nans));
  c0 = _mm256_add_pd(c0, two_sum_avx2(a0, a1));
  c1 = _mm256_add_pd(c1, two_sum_avx2(a2, a3));
  c0 = _mm256_add_pd(c0, two_sum_avx2(a0, a2));
  alignas(32) double sums[4], errors[4];
  _mm256_store_pd(sums, a0);
  _mm256_store_pd(errors, _mm256_add_pd(c0, c1));
  return {compensated_lanes(sums, errors, 4), lane_sum(nans)};
}

template <bool is_max>
METRICS_TARGET_AVX2 inline __m256 fold_avx2(__m256 m, __m256 v, __m256i& nans) {
  nans = _mm256_sub_epi32(nans, _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
  return is_max ? _mm256_max_ps(v, m) : _mm256_min_ps(v, m);  // a NaN in v returns m
}

template <bool is_max>
METRICS_TARGET_AVX2 SpanExtremum extremum_avx2(const float* x, int64_t n) {
  const float identity = is_max ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  __m256 m0 = _mm256_set1_ps(identity), m1 = m0, m2 = m0, m3 = m0;
  __m256i nans = _mm256_setzero_si256();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    m0 = fold_avx2<is_max>(m0, _mm256_loadu_ps(x + i), nans);
    m1 = fold_avx2<is_max>(m1, _mm256_loadu_ps(x + i + 8), nans);
    m2 = fold_avx2<is_max>(m2, _mm256_loadu_ps(x + i + 16), nans);
    m3 = fold_avx2<is_max>(m3, _mm256_loadu_ps(x + i + 24), nans);
  }
  for (; i + 8 <= n; i += 8) m0 = fold_avx2<is_max>(m0, _mm256_loadu_ps(x + i), nans);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, is_max ? _mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3))
                                : _mm256_min_ps(_mm256_min_ps(m0, m1), _mm256_min_ps(m2, m3)));
  alignas(32) int32_t counts[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(counts), nans);
  SpanExtremum result{identity, 0};
  for (int l = 0; l < 8; ++l) {
    result.value = is_max ? std::max(result.value, lanes[l]) : std::min(result.value, lanes[l]);
    result.nans += counts[l];
  }
  for (; i < n; ++i) {
    if (x[i] != x[i]) {
      ++result.nans;
    } else {
      result.value = is_max ? std::max(result.value, x[i]) : std::min(result.value, x[i]);
    }
  }
  return result;
}

#endif  // METRICS_HAS_X86

template <NanMode mode, typename T>
BlockSum sum_block_for(const T* x, int64_t n, double w, double replacement, Isa isa) {
  TORCH_INTERNAL_ASSERT(n <= kSumBlock);
#ifdef METRICS_HAS_X86
  if (isa == Isa::Avx512) return sum_avx512<mode>(x, n, w, replacement);
  if (isa == Isa::Avx2) return sum_avx2<mode>(x, n, w, replacement);
#endif
  TORCH_INTERNAL_ASSERT(false, "sum_block: no vector kernel for this instruction set");
}

template <typename T>
BlockSum sum_block_any(const T* x, int64_t n, double w, NanMode mode, double replacement, Isa isa) {
  switch (mode) {
    case NanMode::Keep:
      return sum_block_for<NanMode::Keep>(x, n, w, replacement, isa);
    case NanMode::Drop:
      return sum_block_for<NanMode::Drop>(x, n, w, replacement, isa);
    case NanMode::Replace:
      break;
  }
  return sum_block_for<NanMode::Replace>(x, n, w, replacement, isa);
}

template <bool is_max>
SpanExtremum extremum_chunk(const float* x, int64_t n, Isa isa) {
#ifdef METRICS_HAS_X86
  if (isa == Isa::Avx512) return extremum_avx512<is_max>(x, n);
  if (isa == Isa::Avx2) return extremum_avx2<is_max>(x, n);
#endif
  TORCH_INTERNAL_ASSERT(false, "extremum_values: no vector kernel for this instruction set");
}

}  // namespace

BlockSum sum_block(const float* x, int64_t n, double w, NanMode mode, double replacement, Isa isa) {
  return sum_block_any(x, n, w, mode, replacement, isa);
}

BlockSum sum_block(const double* x, int64_t n, double w, NanMode mode, double replacement, Isa isa) {
  return sum_block_any(x, n, w, mode, replacement, isa);
}

SpanExtremum extremum_values(const float* x, int64_t n, bool is_max, Isa isa) {
  constexpr int64_t kChunk = int64_t{1} << 30;  // keeps each int32 NaN lane far from overflow
  SpanExtremum result{is_max ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity(), 0};
  for (int64_t start = 0; start < n; start += kChunk) {
    const int64_t len = std::min(kChunk, n - start);
    const auto part = is_max ? extremum_chunk<true>(x + start, len, isa) : extremum_chunk<false>(x + start, len, isa);
    result.value = is_max ? std::max(result.value, part.value) : std::min(result.value, part.value);
    result.nans += part.nans;
  }
  return result;
}

}  // namespace metrics::detail::cpu
