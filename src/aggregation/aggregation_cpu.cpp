#include "aggregation_cpu.h"

#include <ATen/Dispatch.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace metrics::detail::cpu {
namespace {

enum class Mode { Disable, Drop, Replace };

Mode mode_of(const NanPolicy& policy) {
  if (!policy.checks()) return Mode::Disable;
  return policy.strategy == NanStrategy::Replace ? Mode::Replace : Mode::Drop;
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

// Knuth's TwoSum: sum + x exactly equals the new sum plus the returned error, at any magnitudes.
template <typename T>
inline void two_sum(T& sum, T& compensation, T x) {
  const T total = sum + x;
  if (std::isfinite(total)) {
    const T from_x = total - sum;
    compensation += (sum - (total - from_x)) + (x - from_x);
  }
  sum = total;
}

// A NaN value or weight, or an infinite weight, is bad: dropped and counted by kind, or replaced.
template <Mode mode>
inline void accumulate_one(double x, double w, double replacement, double& sx, double& sw, int64_t& nans,
                           int64_t& infinite_weights) {
  if constexpr (mode != Mode::Disable) {
    const bool nan = std::isnan(x) || std::isnan(w);
    const bool infinite = std::isinf(w);
    const bool bad = nan || infinite;
    if constexpr (mode == Mode::Replace) {
      x = bad ? replacement : x;
      w = bad ? 1.0 : w;
    } else {
      x = bad ? 0.0 : x;
      w = bad ? 0.0 : w;
      nans += nan;
      infinite_weights += infinite && !nan;
    }
  }
  sx += x * w;
  sw += w;
}

// Four independent lanes keep the additions from waiting on each other. Lanes sum blocks of
// kBlock entries; block sums are added with TwoSum, so the error does not grow with the batch
// (torch.sum's pairwise sum grows as its log; a plain running sum, linearly).
template <Mode mode, typename T, typename Weight>
WeightedBatch sum_span(const T* x, Weight weight, int64_t n, double replacement) {
  constexpr int64_t kLanes = 4;
  constexpr int64_t kBlock = 256;
  double total_x = 0.0, error_x = 0.0, total_w = 0.0, error_w = 0.0;
  int64_t nans[kLanes] = {}, infinite[kLanes] = {};
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t end = std::min(n, start + kBlock);
    double sx[kLanes] = {}, sw[kLanes] = {};
    int64_t i = start;
    for (; i + kLanes <= end; i += kLanes) {
      for (int64_t l = 0; l < kLanes; ++l) {
        accumulate_one<mode>(static_cast<double>(x[i + l]), weight(i + l), replacement, sx[l], sw[l], nans[l],
                             infinite[l]);
      }
    }
    for (; i < end; ++i) {
      accumulate_one<mode>(static_cast<double>(x[i]), weight(i), replacement, sx[0], sw[0], nans[0], infinite[0]);
    }
    two_sum(total_x, error_x, (sx[0] + sx[1]) + (sx[2] + sx[3]));
    two_sum(total_w, error_w, (sw[0] + sw[1]) + (sw[2] + sw[3]));
  }
  return {total_x + error_x, total_w + error_w, nans[0] + nans[1] + nans[2] + nans[3],
          infinite[0] + infinite[1] + infinite[2] + infinite[3]};
}

template <typename T, typename Weight>
WeightedBatch sum_span(const T* x, Weight weight, int64_t n, const NanPolicy& policy) {
  switch (mode_of(policy)) {
    case Mode::Disable:
      return sum_span<Mode::Disable>(x, weight, n, policy.replacement);
    case Mode::Replace:
      return sum_span<Mode::Replace>(x, weight, n, policy.replacement);
    case Mode::Drop:
      break;
  }
  return sum_span<Mode::Drop>(x, weight, n, policy.replacement);
}

template <bool is_max, Mode mode, typename T>
ExtremumBatch extremum_span(const T* x, int64_t n, double replacement) {
  ExtremumBatch batch{is_max ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity()};
  for (int64_t i = 0; i < n; ++i) {
    double v = static_cast<double>(x[i]);
    if (std::isnan(v)) {
      if constexpr (mode == Mode::Disable) {
        batch.saw_nan = true;
        continue;
      } else if constexpr (mode == Mode::Replace) {
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
    case Mode::Disable:
      return extremum_span<is_max, Mode::Disable>(x, n, policy.replacement);
    case Mode::Replace:
      return extremum_span<is_max, Mode::Replace>(x, n, policy.replacement);
    case Mode::Drop:
      break;
  }
  return extremum_span<is_max, Mode::Drop>(x, n, policy.replacement);
}

template <typename T>
ExtremumBatch extremum_span(const T* x, int64_t n, bool is_max, const NanPolicy& policy) {
  return is_max ? extremum_span<true>(x, n, policy) : extremum_span<false>(x, n, policy);
}

}  // namespace

WeightedBatch weighted_sum(const at::Tensor& value, const at::Tensor* weight, double weight_scalar,
                           const NanPolicy& policy) {
  const auto n = value.numel();
  return AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, value.scalar_type(), "weighted_sum", [&] {
    const auto* x = value.data_ptr<scalar_t>();
    if (weight == nullptr) return sum_span(x, ScalarWeight{weight_scalar}, n, policy);
    return AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, weight->scalar_type(), "weighted_sum", [&] {
      return sum_span(x, SpanWeight<scalar_t>{weight->data_ptr<scalar_t>()}, n, policy);
    });
  });
}

ExtremumBatch extremum(const at::Tensor& value, bool is_max, const NanPolicy& policy) {
  return AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, value.scalar_type(), "extremum", [&] {
    return extremum_span(value.data_ptr<scalar_t>(), value.numel(), is_max, policy);
  });
}

ExtremumBatch extremum(double value, bool is_max, const NanPolicy& policy) {
  return extremum_span(&value, 1, is_max, policy);
}

void add_compensated(at::Tensor& total, at::Tensor& compensation, const double* batch, int64_t width) {
  AT_DISPATCH_FLOATING_TYPES(total.scalar_type(), "add_compensated", [&] {
    auto* sum = total.data_ptr<scalar_t>();
    auto* comp = compensation.data_ptr<scalar_t>();
    for (int64_t k = 0; k < width; ++k) two_sum(sum[k], comp[k], static_cast<scalar_t>(batch[k]));
  });
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
