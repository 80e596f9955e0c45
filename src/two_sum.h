#pragma once

// Compensated summation, as the CPU kernels sum: TwoSum (Knuth) gives what an addition rounds
// off, exactly, at any magnitudes, so that a sum and its accumulated error together hold far more
// than a float64 alone.

#include <cmath>

namespace metrics::detail {

/// sum += x, and what that rounded off added to `error`; nothing where the sum is not finite (an
/// infinite x, or NaN), so that the error stays finite.
template <typename T>
inline void two_sum(T& sum, T& error, T x) {
  const T total = sum + x;
  if (std::isfinite(total)) {
    const T from_x = total - sum;
    error += (sum - (total - from_x)) + (x - from_x);
  }
  sum = total;
}

/// sum += x, kept in a state: two_sum(), and where the sum is not finite, the error the device path's
/// Fast2Sum leaves (NaN or +-inf: compensated() leaves it out), so that the paths' states are equal.
inline void add_to_state(double& sum, double& error, double x) {
  const double before = sum;
  two_sum(sum, error, x);
  if (!std::isfinite(sum)) error += x - (sum - before);
}

/// A compensated sum's value: the sum plus its error, the error left out where the sum is not finite.
inline double compensated(double sum, double error) { return std::isfinite(sum) ? sum + error : sum; }

/// A sum and what its additions rounded off: joined with another, nothing is rounded off but the
/// errors' own sum, so a sum of blocks is as exact as one long compensated sum.
struct CompensatedSum {
  double sum = 0.0;
  double error = 0.0;

  void add(double x) { two_sum(sum, error, x); }
  void add(const CompensatedSum& other) {
    two_sum(sum, error, other.sum);
    error += other.error;
  }
  double value() const { return compensated(sum, error); }
};

/// Lanes' compensated sums (sums[l] with errors[l]) joined into one.
inline CompensatedSum compensated_lanes(const double* sums, const double* errors, int lanes) {
  CompensatedSum joined;
  for (int l = 0; l < lanes; ++l) joined.add(CompensatedSum{sums[l], errors[l]});
  return joined;
}

}  // namespace metrics::detail
