#pragma once

#include <cstdint>

#include "../cpu_isa.h"

namespace metrics::detail::cpu {

/// Index of the first maximum of x[0, n) (torch.argmax's choice among ties), or -1 when any
/// element is NaN. Uses AVX-512 or AVX2 when the CPU has it.
int64_t first_argmax(const float* x, int64_t n);
int64_t first_argmax(const double* x, int64_t n);

/// The same with a chosen instruction set, for tests (it must be available).
int64_t first_argmax_with(const float* x, int64_t n, Isa isa);

/// Whether x[t] ranks among the k largest of x[0, n), ties broken towards the lower index.
template <typename T>
bool in_top_k(const T* x, int64_t n, int64_t t, int64_t k) {
  const T target = x[t];
  int64_t ahead = 0;
  for (int64_t j = 0; j < n; ++j) ahead += x[j] > target;
  for (int64_t j = 0; j < t; ++j) ahead += x[j] == target;
  return ahead < k;
}

}  // namespace metrics::detail::cpu
