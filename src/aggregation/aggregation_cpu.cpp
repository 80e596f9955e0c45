#include "aggregation_cpu.h"

#include "aggregation_simd.h"
#include "../two_sum.h"

#include <ATen/Dispatch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

namespace metrics::detail::cpu {
namespace {

NanMode mode_of(const NanPolicy& policy) {
  if (!policy.checks()) return NanMode::Keep;
  return policy.strategy == NanStrategy::Replace ? NanMode::Replace : NanMode::Drop;
}

struct ScalarWeight {
  double value;
  double operator()(int64_t /*i*/) const { return value; }
};

template <typename W>
struct SpanWeight {
  const W* data;
  double operator()(int64_t i) const { return static_cast<double>(data[i]); }
};

// One lane's compensated sums (two_sum.h) and its bad entries.
struct Lane {
  double sx = 0.0, ex = 0.0, sw = 0.0, ew = 0.0;
  int64_t nans = 0, infinite_weights = 0;
};

// A NaN value or weight, or an infinite weight, is bad: dropped and counted by kind, or replaced.
template <NanMode mode>
inline void accumulate_one(double x, double w, double replacement, Lane& lane) {
  if constexpr (mode != NanMode::Keep) {
    const bool nan = std::isnan(x) || std::isnan(w);
    const bool infinite = std::isinf(w);
    const bool bad = nan || infinite;
    if constexpr (mode == NanMode::Replace) {
      x = bad ? replacement : x;
      w = bad ? 1.0 : w;
    } else {
      x = bad ? 0.0 : x;
      w = bad ? 0.0 : w;
      lane.nans += nan;
      lane.infinite_weights += infinite && !nan;
    }
  }
  two_sum(lane.sx, lane.ex, x * w);
  two_sum(lane.sw, lane.ew, w);
}

// One block's sums, each with what its additions rounded off, and its bad entries.
struct BlockSums {
  CompensatedSum weighted, weights;
  int64_t nan_positions = 0;
  int64_t infinite_weights = 0;
};

// Blocks of kSumBlock entries: lanes sum within a block, and the blocks' sums and errors are added
// apart (CompensatedSum), so the error does not grow with the batch (torch.sum's pairwise sum
// grows as its log; a plain running sum, linearly). `sum_block(start, end)` gives one block's.
template <typename SumBlock>
WeightedBatch sum_blocks(int64_t n, SumBlock sum_block) {
  BlockSums total;
  for (int64_t start = 0; start < n; start += kSumBlock) {
    const BlockSums block = sum_block(start, std::min(n, start + kSumBlock));
    total.weighted.add(block.weighted);
    total.weights.add(block.weights);
    total.nan_positions += block.nan_positions;
    total.infinite_weights += block.infinite_weights;
  }
  return {total.weighted, total.weights, total.nan_positions, total.infinite_weights};
}

// Any weights, any floating dtype: four independent lanes keep the additions from waiting on
// each other; each is compensated, as the vector kernel's are, so that a block's sum is as exact
// as float64 (products of float32 values and weights are exact; of float64 ones, rounded once).
// It costs 3x a plain sum here, where nothing else keeps a weighted sum from torch.sum's error.
template <NanMode mode, typename T, typename Weight>
BlockSums scalar_block(const T* x, Weight weight, int64_t start, int64_t end, double replacement) {
  constexpr int kLanes = 4;
  Lane lanes[kLanes];
  int64_t i = start;
  for (; i + kLanes <= end; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      accumulate_one<mode>(static_cast<double>(x[i + l]), weight(i + l), replacement, lanes[l]);
    }
  }
  for (; i < end; ++i) accumulate_one<mode>(static_cast<double>(x[i]), weight(i), replacement, lanes[0]);
  BlockSums block;
  for (const auto& lane : lanes) {
    block.weighted.add(CompensatedSum{lane.sx, lane.ex});
    block.weights.add(CompensatedSum{lane.sw, lane.ew});
    block.nan_positions += lane.nans;
    block.infinite_weights += lane.infinite_weights;
  }
  return block;
}

template <NanMode mode, typename T, typename Weight>
WeightedBatch sum_span(const T* x, Weight weight, int64_t n, double replacement) {
  return sum_blocks(n, [&](int64_t start, int64_t end) {
    return scalar_block<mode>(x, weight, start, end, replacement);
  });
}

template <typename T, typename Weight>
WeightedBatch sum_span(const T* x, Weight weight, int64_t n, const NanPolicy& policy) {
  switch (mode_of(policy)) {
    case NanMode::Keep:
      return sum_span<NanMode::Keep>(x, weight, n, policy.replacement);
    case NanMode::Replace:
      return sum_span<NanMode::Replace>(x, weight, n, policy.replacement);
    case NanMode::Drop:
      break;
  }
  return sum_span<NanMode::Drop>(x, weight, n, policy.replacement);
}

// float32 or float64 values and one finite host weight `w`, with the vector kernel: every entry
// not dropped weighs w, but a replaced NaN weighs 1.
template <typename T>
WeightedBatch vector_sum(const T* x, double w, int64_t n, const NanPolicy& policy, Isa isa) {
  const NanMode mode = mode_of(policy);
  return sum_blocks(n, [&](int64_t start, int64_t end) {
    const auto block = sum_block(x + start, end - start, w, mode, policy.replacement, isa);
    const auto kept = static_cast<double>(end - start - block.nans);
    if (mode == NanMode::Replace) return BlockSums{block.sum, {kept * w + static_cast<double>(block.nans)}, 0, 0};
    return BlockSums{block.sum, {kept * w}, block.nans, 0};
  });
}

template <bool is_max, NanMode mode, typename T>
ExtremumBatch extremum_span(const T* x, int64_t n, double replacement) {
  ExtremumBatch batch{is_max ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity()};
  for (int64_t i = 0; i < n; ++i) {
    double v = static_cast<double>(x[i]);
    if (std::isnan(v)) {
      if constexpr (mode == NanMode::Keep) {
        batch.saw_nan = true;
        continue;
      } else if constexpr (mode == NanMode::Replace) {
        v = replacement;
      } else {
        ++batch.nan_positions;
        continue;
      }
    }
    batch.value = is_max ? std::max(batch.value, v) : std::min(batch.value, v);
  }
  return batch;
}

template <bool is_max, typename T>
ExtremumBatch extremum_span(const T* x, int64_t n, const NanPolicy& policy) {
  switch (mode_of(policy)) {
    case NanMode::Keep:
      return extremum_span<is_max, NanMode::Keep>(x, n, policy.replacement);
    case NanMode::Replace:
      return extremum_span<is_max, NanMode::Replace>(x, n, policy.replacement);
    case NanMode::Drop:
      break;
  }
  return extremum_span<is_max, NanMode::Drop>(x, n, policy.replacement);
}

template <typename T>
ExtremumBatch extremum_span(const T* x, int64_t n, bool is_max, const NanPolicy& policy) {
  return is_max ? extremum_span<true>(x, n, policy) : extremum_span<false>(x, n, policy);
}

// The vector kernel's extremum of the non-NaN values, and its NaN count, read under `policy`.
ExtremumBatch vector_extremum(const float* x, int64_t n, bool is_max, const NanPolicy& policy, Isa isa) {
  const auto span = extremum_values(x, n, is_max, isa);
  ExtremumBatch batch{static_cast<double>(span.value)};
  switch (mode_of(policy)) {
    case NanMode::Keep:
      batch.saw_nan = span.nans > 0;
      break;
    case NanMode::Drop:
      batch.nan_positions = span.nans;
      break;
    case NanMode::Replace:
      if (span.nans > 0) batch.value = is_max ? std::max(batch.value, policy.replacement)
                                              : std::min(batch.value, policy.replacement);
      break;
  }
  return batch;
}

// A NaN replacement leaves a NaN value NaN: the extremum is NaN, as where NaN is kept (the ATen
// path's and TorchMetrics' value), not the extremum of the other values.
NanPolicy extremum_policy(const NanPolicy& policy) {
  return policy.strategy == NanStrategy::Replace && std::isnan(policy.replacement) ? NanPolicy::disable() : policy;
}

}  // namespace

WeightedBatch weighted_sum(const at::Tensor& value, const at::Tensor* weight, double weight_scalar,
                           const NanPolicy& policy) {
  const auto n = value.numel();
  return AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, value.scalar_type(), "weighted_sum", [&] {
    const auto* x = value.data_ptr<scalar_t>();
    constexpr bool vector_dtype = std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, double>;
    if constexpr (vector_dtype) {
      const auto isa = best_isa();
      if (weight == nullptr && std::isfinite(weight_scalar) && isa != Isa::Scalar) {
        return vector_sum(x, weight_scalar, n, policy, isa);
      }
    }
    if (weight == nullptr) return sum_span(x, ScalarWeight{weight_scalar}, n, policy);
    return AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, weight->scalar_type(), "weighted_sum", [&] {
      return sum_span(x, SpanWeight<scalar_t>{weight->data_ptr<scalar_t>()}, n, policy);
    });
  });
}

ExtremumBatch extremum(const at::Tensor& value, bool is_max, const NanPolicy& given) {
  const auto policy = extremum_policy(given);
  const auto isa = best_isa();
  if (value.scalar_type() == at::kFloat && isa != Isa::Scalar) {
    return vector_extremum(value.data_ptr<float>(), value.numel(), is_max, policy, isa);
  }
  return AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, value.scalar_type(), "extremum", [&] {
    return extremum_span(value.data_ptr<scalar_t>(), value.numel(), is_max, policy);
  });
}

ExtremumBatch extremum(double value, bool is_max, const NanPolicy& policy) {
  return extremum_span(&value, 1, is_max, extremum_policy(policy));
}

void add_compensated(at::Tensor& total, at::Tensor& compensation, int64_t compensation_offset,
                     const CompensatedSum* batch, int64_t width) {
  auto* sum = total.data_ptr<double>();
  auto* comp = compensation.data_ptr<double>() + compensation_offset;
  for (int64_t k = 0; k < width; ++k) {
    add_to_state(sum[k], comp[k], batch[k].sum);
    if (std::isfinite(sum[k])) comp[k] += batch[k].error;
  }
}

void fold_extremum(at::Tensor& state, const ExtremumBatch& batch, bool is_max) {
  AT_DISPATCH_FLOATING_TYPES(state.scalar_type(), "fold_extremum", [&] {
    auto& current = *state.data_ptr<scalar_t>();
    if (std::isnan(static_cast<double>(current))) return;
    if (batch.saw_nan) {
      current = std::numeric_limits<scalar_t>::quiet_NaN();
      return;
    }
    const auto v = static_cast<scalar_t>(batch.value);
    current = is_max ? std::max(current, v) : std::min(current, v);
  });
}

}  // namespace metrics::detail::cpu
