#include "argmax_cpu.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace metrics::detail::cpu {
namespace {

// Without a branch on the data: a running maximum's branch mispredicts about twice a row of 10.
template <typename T>
int64_t first_argmax_scalar(const T* x, int64_t n) {
  if (n <= 0) return -1;
  int64_t best = 0;
  T value = x[0];
  bool nan = false;
  for (int64_t i = 0; i < n; ++i) {
    nan |= std::isnan(x[i]);
    const bool greater = x[i] > value;
    best = greater ? i : best;
    value = greater ? x[i] : value;
  }
  return nan ? -1 : best;
}

#ifdef METRICS_HAS_X86
// Among the lanes that hold the overall maximum `value`, the first index equal to it: a lane's
// candidates are its elements in the four vectors of `lanes` floats of the first block where it
// reached the maximum, the block that starts at starts[lane]. (The candidates are compared without a
// branch.)
int64_t first_holder_index(const float* x, const int32_t* starts, unsigned holders, int lanes, float value) {
  int64_t index = std::numeric_limits<int64_t>::max();
  for (; holders != 0; holders &= holders - 1) {
    const int lane = __builtin_ctz(holders);
    const int64_t first = int64_t{starts[lane]} + lane;
    unsigned hits = 0;
    for (int j = 0; j < 4; ++j) hits |= static_cast<unsigned>(x[first + lanes * j] == value) << j;
    index = std::min<int64_t>(index, first + lanes * __builtin_ctz(hits));
  }
  return index;
}

// The maximum of m's lanes, in every lane.
METRICS_TARGET_AVX2 __m256 max_of_lanes(__m256 m) {
  const __m256 halves = _mm256_max_ps(m, _mm256_permute2f128_ps(m, m, 1));
  const __m256 pairs = _mm256_max_ps(halves, _mm256_permute_ps(halves, 0b01001110));
  return _mm256_max_ps(pairs, _mm256_permute_ps(pairs, 0b10110001));
}

// Keeps a block's four vectors in registers: GCC otherwise folds their loads into the max and the
// NaN compare that use them, reading each one twice, and the loads were the bound (32 rows of 4096
// scores in L2 on a Zen 4: AVX-512 3.6 µs with, 2.6 µs without the second reads; AVX2 5.7, 3.9).
// (One per vector width: clang checks an asm operand's size against its own function's target.)
METRICS_TARGET_AVX2 __attribute__((always_inline)) inline void keep_in_registers(__m256& a0, __m256& a1, __m256& a2,
                                                                              __m256& a3) {
  asm("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3));
}
METRICS_TARGET_AVX512 __attribute__((always_inline)) inline void keep_in_registers(__m512& a0, __m512& a1, __m512& a2,
                                                                                 __m512& a3) {
  asm("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3));
}

// 8 <= n < 32: four vectors at 0, 8, 16 and n - 8, each moved back to end by n (overlaps repeat
// elements, which changes nothing), and the first element equal to the maximum from their masks.
// (No array of vectors: GCC keeps one indexed by n on the stack and copies it.)
METRICS_TARGET_AVX2 int64_t first_argmax_short_avx2(const float* x, int64_t n) {
  const int64_t o1 = std::min<int64_t>(8, n - 8), o2 = std::min<int64_t>(16, n - 8), o3 = n - 8;
  const __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + o1);
  const __m256 v2 = _mm256_loadu_ps(x + o2), v3 = _mm256_loadu_ps(x + o3);
  const __m256 nan = _mm256_or_ps(_mm256_cmp_ps(v0, v1, _CMP_UNORD_Q), _mm256_cmp_ps(v2, v3, _CMP_UNORD_Q));
  if (_mm256_movemask_ps(nan) != 0) return -1;
  const __m256 best = max_of_lanes(_mm256_max_ps(_mm256_max_ps(v0, v1), _mm256_max_ps(v2, v3)));
  const auto hits_of = [&](__m256 a) METRICS_TARGET_AVX2 {
    return static_cast<uint64_t>(_mm256_movemask_ps(_mm256_cmp_ps(a, best, _CMP_EQ_OQ)));
  };
  return __builtin_ctzll(hits_of(v0) | hits_of(v1) << o1 | hits_of(v2) << o2 | hits_of(v3) << o3);
}

// One pass over blocks of 32, the last one moved back to end at n (an overlap repeats elements,
// which changes nothing): as the AVX-512 version below, each lane keeps its maximum and the start
// of the first block where it reached it, and the holders of the overall maximum look up their
// four candidates. (The earlier two-pass version, a max then a scan for the first equal element,
// spent a third of its time in the scan: 128 rows of 1000 scores took 16 µs against 11.6 µs for
// this one, on a Zen 3.)
METRICS_TARGET_AVX2 int64_t first_argmax_avx2(const float* x, int64_t n) {
  constexpr int64_t kBlock = 32;
  if (n < 8) return first_argmax_scalar(x, n);
  if (n < kBlock) return first_argmax_short_avx2(x, n);
  __m256 m = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256i at = _mm256_setzero_si256(), start = _mm256_setzero_si256();
  const __m256i step = _mm256_set1_epi32(kBlock);
  __m256 nan = _mm256_setzero_ps();
  const auto take_block = [&](const float* p) METRICS_TARGET_AVX2 {
    __m256 a0 = _mm256_loadu_ps(p), a1 = _mm256_loadu_ps(p + 8), a2 = _mm256_loadu_ps(p + 16), a3 = _mm256_loadu_ps(p + 24);
    keep_in_registers(a0, a1, a2, a3);
    const __m256 top = _mm256_max_ps(_mm256_max_ps(a0, a1), _mm256_max_ps(a2, a3));
    const __m256 greater = _mm256_cmp_ps(top, m, _CMP_GT_OQ);
    m = _mm256_max_ps(m, top);
    at = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(at), _mm256_castsi256_ps(start), greater));
    start = _mm256_add_epi32(start, step);
    nan = _mm256_or_ps(nan, _mm256_or_ps(_mm256_cmp_ps(a0, a1, _CMP_UNORD_Q), _mm256_cmp_ps(a2, a3, _CMP_UNORD_Q)));
  };
  const int64_t full_blocks = n / kBlock;
  for (int64_t b = 0; b < full_blocks; ++b) take_block(x + b * kBlock);
  if (n % kBlock != 0) {
    start = _mm256_set1_epi32(static_cast<int32_t>(n - kBlock));
    take_block(x + n - kBlock);
  }
  if (_mm256_movemask_ps(nan) != 0) return -1;
  const __m256 best = max_of_lanes(m);
  alignas(32) int32_t starts[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(starts), at);
  const unsigned holders = _mm256_movemask_ps(_mm256_cmp_ps(m, best, _CMP_EQ_OQ));
  return first_holder_index(x, starts, holders, 8, _mm256_cvtss_f32(best));
}

constexpr int64_t kAvx512Block = 64;

// One pass over blocks of 64, the last one moved back as above. The four vectors of a block are
// reduced with vmaxps; each lane keeps its running maximum and the start of the first block where
// it was reached (a strict >, so ties keep the earliest block), which costs one compare per block
// rather than one per vector. At the end, among the lanes that hold the overall maximum, the four
// candidates of the recorded block are looked up in order: the smallest such index is torch's
// first-index-wins answer. NaNs are caught by an unordered-compare mask on the side. n is at least
// a block: first_argmax_with sends shorter rows to the AVX2 kernel.
METRICS_TARGET_AVX512 int64_t first_argmax_avx512(const float* x, int64_t n) {
  constexpr int64_t kBlock = kAvx512Block;
  __m512 m = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512i at = _mm512_setzero_si512(), start = _mm512_setzero_si512();
  const __m512i step = _mm512_set1_epi32(kBlock);
  __mmask16 nan = 0;
  const auto take_block = [&](const float* p) METRICS_TARGET_AVX512 {
    __m512 a0 = _mm512_loadu_ps(p), a1 = _mm512_loadu_ps(p + 16), a2 = _mm512_loadu_ps(p + 32), a3 = _mm512_loadu_ps(p + 48);
    keep_in_registers(a0, a1, a2, a3);
    const __m512 top = _mm512_max_ps(_mm512_max_ps(a0, a1), _mm512_max_ps(a2, a3));
    at = _mm512_mask_mov_epi32(at, _mm512_cmp_ps_mask(top, m, _CMP_GT_OQ), start);
    m = _mm512_max_ps(m, top);
    start = _mm512_add_epi32(start, step);
    nan |= _mm512_cmp_ps_mask(a0, a1, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(a2, a3, _CMP_UNORD_Q);
  };
  const int64_t full_blocks = n / kBlock;
  for (int64_t b = 0; b < full_blocks; ++b) take_block(x + b * kBlock);
  if (n % kBlock != 0) {
    start = _mm512_set1_epi32(static_cast<int32_t>(n - kBlock));
    take_block(x + n - kBlock);
  }
  if (nan != 0) return -1;
  const float best = _mm512_reduce_max_ps(m);
  alignas(64) int32_t starts[16];
  _mm512_store_si512(starts, at);
  const unsigned holders = _mm512_cmp_ps_mask(m, _mm512_set1_ps(best), _CMP_EQ_OQ);
  return first_holder_index(x, starts, holders, 16, best);
}
#endif

}  // namespace

int64_t first_argmax(const float* x, int64_t n) {
  static const Isa isa = best_isa();  // once: this runs per row
  return first_argmax_with(x, n, isa);
}

int64_t first_argmax_with(const float* x, int64_t n, Isa isa) {
  if (n > std::numeric_limits<int32_t>::max()) isa = Isa::Scalar;  // the vector kernels' lanes hold int32 starts
  switch (isa) {
#ifdef METRICS_HAS_X86
    case Isa::Avx512:
      if (n >= kAvx512Block) return first_argmax_avx512(x, n);
      [[fallthrough]];  // shorter rows go to the AVX2 kernel directly: one call less per row
    case Isa::Avx2:
      return first_argmax_avx2(x, n);
#endif
    default:
      return first_argmax_scalar(x, n);
  }
}

int64_t first_argmax(const double* x, int64_t n) { return first_argmax_scalar(x, n); }

}  // namespace metrics::detail::cpu
