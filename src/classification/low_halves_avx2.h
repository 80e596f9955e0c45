#pragma once

// A lane shuffle of the weighted AVX2 kernels.

#include "../cpu_isa.h"

#ifdef METRICS_HAS_X86
namespace metrics::detail::cpu {

// The low halves of two vectors of four 64-bit lanes, as eight 32-bit lanes in their order: a
// shuffle leaves them in the order 0 1 4 5 2 3 6 7, a permute of 64-bit pairs restores it.
METRICS_TARGET_AVX2 inline __m256i low_halves(__m256i a, __m256i b) {
  const __m256 pairs = _mm256_shuffle_ps(_mm256_castsi256_ps(a), _mm256_castsi256_ps(b), _MM_SHUFFLE(2, 0, 2, 0));
  return _mm256_permute4x64_epi64(_mm256_castps_si256(pairs), _MM_SHUFFLE(3, 1, 2, 0));
}

}  // namespace metrics::detail::cpu
#endif
