#include "argmax.h"

#include <cmath>
#include <limits>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define METRICS_HAS_X86 1
#endif

namespace metrics::detail::cpu {
namespace {

template <typename T>
int64_t first_argmax_scalar(const T* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) return -1;
    if (x[i] > x[best]) best = i;
  }
  return n > 0 ? best : -1;
}

#ifdef METRICS_HAS_X86
// Two passes over a row that stays in L1: a max with four independent accumulators (so no add
// waits on the previous one) plus a NaN mask, then a vector scan for the first element equal to
// the max.
__attribute__((target("avx2"))) int64_t first_argmax_avx2(const float* x, int64_t n) {
  constexpr int64_t kStep = 32;
  if (n < kStep) return first_argmax_scalar(x, n);
  const __m256 lowest = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 m0 = lowest, m1 = lowest, m2 = lowest, m3 = lowest;
  __m256 nan = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + kStep <= n; i += kStep) {
    const __m256 a0 = _mm256_loadu_ps(x + i), a1 = _mm256_loadu_ps(x + i + 8);
    const __m256 a2 = _mm256_loadu_ps(x + i + 16), a3 = _mm256_loadu_ps(x + i + 24);
    m0 = _mm256_max_ps(m0, a0);
    m1 = _mm256_max_ps(m1, a1);
    m2 = _mm256_max_ps(m2, a2);
    m3 = _mm256_max_ps(m3, a3);
    nan = _mm256_or_ps(nan, _mm256_or_ps(_mm256_cmp_ps(a0, a1, _CMP_UNORD_Q), _mm256_cmp_ps(a2, a3, _CMP_UNORD_Q)));
  }
  if (_mm256_movemask_ps(nan) != 0) return -1;
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3)));
  float best = lanes[0];
  for (float v : lanes) best = v > best ? v : best;
  for (int64_t j = i; j < n; ++j) {
    if (std::isnan(x[j])) return -1;
    best = x[j] > best ? x[j] : best;
  }
  const __m256 target = _mm256_set1_ps(best);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const int mask = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + j), target, _CMP_EQ_OQ));
    if (mask != 0) return j + __builtin_ctz(static_cast<unsigned>(mask));
  }
  for (; j < n; ++j) {
    if (x[j] == best) return j;
  }
  return -1;
}

bool cpu_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}
#endif

}  // namespace

int64_t first_argmax(const float* x, int64_t n) {
#ifdef METRICS_HAS_X86
  if (cpu_has_avx2()) return first_argmax_avx2(x, n);
#endif
  return first_argmax_scalar(x, n);
}

int64_t first_argmax(const double* x, int64_t n) { return first_argmax_scalar(x, n); }

}  // namespace metrics::detail::cpu
