#pragma once

// The floating dtypes an update reads as values, scores or weights: float16, bfloat16, float32 and
// float64 (not float8 types, which at::isFloatingType takes in PyTorch 2.x, nor complex ones).

#include <c10/core/ScalarType.h>

namespace metrics::detail {

inline bool is_half_precision(at::ScalarType type) { return type == at::kHalf || type == at::kBFloat16; }

inline bool is_input_floating(at::ScalarType type) {
  return type == at::kFloat || type == at::kDouble || is_half_precision(type);
}

}  // namespace metrics::detail
