#pragma once

// Vector kernels of the aggregators' CPU path (AVX2 and AVX-512): a block of a weighted sum, and an
// extremum, over float32 values (and float64 for the sum). The policy around them (which
// positions are bad, what the weight sum is) stays in aggregation_cpu.cpp.

#include <cstdint>

#include "../cpu_isa.h"
#include "../two_sum.h"

namespace metrics::detail::cpu {

/// What a sum does with a NaN value: adds it (no check), drops it, or adds the replacement with
/// weight 1 in its place.
enum class NanMode { Keep, Drop, Replace };

/// The most values one sum_block call takes: lanes sum a block, blocks are added with TwoSum.
constexpr int64_t kSumBlock = 256;

/// Σ x[i]·w over x[0, n), n <= kSumBlock, for a finite host weight `w`, NaN values per `mode`;
/// `nans` counts them (0 under Keep). `isa` is Avx2 or Avx512 and must be available.
struct BlockSum {
  CompensatedSum sum;
  int64_t nans = 0;
};
BlockSum sum_block(const float* x, int64_t n, double w, NanMode mode, double replacement, Isa isa);
BlockSum sum_block(const double* x, int64_t n, double w, NanMode mode, double replacement, Isa isa);

/// The largest (or smallest) value of x[0, n) that is not NaN (-inf or +inf when there is none),
/// and how many are NaN. `isa` is Avx2 or Avx512 and must be available.
struct SpanExtremum {
  float value = 0.0f;
  int64_t nans = 0;
};
SpanExtremum extremum_values(const float* x, int64_t n, bool is_max, Isa isa);

}  // namespace metrics::detail::cpu
