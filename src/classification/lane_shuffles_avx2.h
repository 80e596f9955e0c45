#pragma once

// Lane shuffles the AVX2 kernels share.

#include "../cpu_isa.h"

#ifdef METRICS_HAS_X86
namespace metrics::detail::cpu {

// The lanes of a vector in the order a shuffle of two vectors of 64-bit lanes leaves their halves in,
// 0 1 4 5 2 3 6 7, or back (a swap of the middle 64-bit pairs).
METRICS_TARGET_AVX2 inline __m256i shuffled_order(__m256i v) {
  return _mm256_permute4x64_epi64(v, _MM_SHUFFLE(3, 1, 2, 0));
}

// The low (kHalf 0) or high (1) halves of two vectors of four 64-bit lanes, in shuffled order.
template <int kHalf>
METRICS_TARGET_AVX2 inline __m256i shuffled_halves(__m256i a, __m256i b) {
  constexpr int kPick = kHalf ? _MM_SHUFFLE(3, 1, 3, 1) : _MM_SHUFFLE(2, 0, 2, 0);
  return _mm256_castps_si256(_mm256_shuffle_ps(_mm256_castsi256_ps(a), _mm256_castsi256_ps(b), kPick));
}

// The low halves of two vectors of four 64-bit lanes, as eight 32-bit lanes in their order.
METRICS_TARGET_AVX2 inline __m256i low_halves(__m256i a, __m256i b) {
  return shuffled_order(shuffled_halves<0>(a, b));
}

}  // namespace metrics::detail::cpu
#endif
