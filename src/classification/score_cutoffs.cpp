#include "score_cutoffs.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Exception.h>
#include <c10/util/Half.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace metrics::detail {
namespace {

template <class Bits, class Float>
double from_bits(int64_t bits) {
  const auto b = static_cast<Bits>(bits);
  Float value;
  std::memcpy(&value, &b, sizeof value);
  return static_cast<double>(static_cast<float>(value));
}

template <>
double from_bits<uint64_t, double>(int64_t bits) {
  const auto b = static_cast<uint64_t>(bits);
  double value;
  std::memcpy(&value, &b, sizeof value);
  return value;
}

template <class Float>
double rounded_to(double x) {
  return static_cast<double>(static_cast<float>(Float(static_cast<float>(x))));
}

// A floating dtype's values in order, as the integers k in [-inf_bits, inf_bits]: k >= 0 is the
// value with bits k, k < 0 minus the value with bits -k.
struct Format {
  int64_t inf_bits;
  double (*value)(int64_t bits);
  double (*round)(double x);  // to the nearest value of the dtype, as a tensor of it stores x
};

Format format_of(at::ScalarType dtype) {
  switch (dtype) {
    case at::kHalf:
      return {0x7C00, from_bits<uint16_t, c10::Half>, rounded_to<c10::Half>};
    case at::kBFloat16:
      return {0x7F80, from_bits<uint16_t, c10::BFloat16>, rounded_to<c10::BFloat16>};
    case at::kFloat:
      return {0x7F800000, from_bits<uint32_t, float>, rounded_to<float>};
    case at::kDouble:
      return {0x7FF0000000000000, from_bits<uint64_t, double>, [](double x) { return x; }};
    default:
      TORCH_INTERNAL_ASSERT(false, "scores of dtype ", dtype);
  }
}

double value_at(const Format& f, int64_t k) { return k >= 0 ? f.value(k) : -f.value(-k); }

// sigmoid(x) as a tensor of the dtype holds it: float64 in float64, the others in float32, rounded.
double sigmoid_in(const Format& f, at::ScalarType dtype, double x) {
  if (dtype == at::kDouble) return 1.0 / (1.0 + std::exp(-x));
  const float xf = static_cast<float>(x);
  return f.round(1.0f / (1.0f + std::exp(-xf)));
}

// The largest value of the dtype that `positive` (monotone) calls false: the strict cutoff. The
// search runs over k + inf_bits, unsigned: float64's span does not fit an int64.
template <class Positive>
double cutoff(const Format& f, Positive positive) {
  const auto at = [&](uint64_t i) { return value_at(f, static_cast<int64_t>(i - static_cast<uint64_t>(f.inf_bits))); };
  uint64_t lo = 0, hi = 2 * static_cast<uint64_t>(f.inf_bits);
  if (!positive(at(hi))) return std::numeric_limits<double>::infinity();
  if (positive(at(lo))) return -std::numeric_limits<double>::infinity();
  while (hi - lo > 1) {  // positive(at(lo)) is false, positive(at(hi)) true
    const uint64_t mid = lo + (hi - lo) / 2;
    (positive(at(mid)) ? hi : lo) = mid;
  }
  return at(lo);
}

ScoreCutoffs work_out(double threshold, at::ScalarType dtype) {
  const auto f = format_of(dtype);
  const double rounded = f.round(threshold);
  return {rounded, cutoff(f, [&](double x) { return sigmoid_in(f, dtype, x) > rounded; })};
}

}  // namespace

ScoreCutoffs score_cutoffs(double threshold, at::ScalarType dtype) {
  thread_local double last_threshold = std::numeric_limits<double>::quiet_NaN();
  thread_local at::ScalarType last_dtype = at::ScalarType::Undefined;
  thread_local ScoreCutoffs last{};
  if (threshold != last_threshold || dtype != last_dtype) {
    last = work_out(threshold, dtype);
    last_threshold = threshold;
    last_dtype = dtype;
  }
  return last;
}

}  // namespace metrics::detail
