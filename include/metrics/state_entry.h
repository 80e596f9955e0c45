#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>

#include <map>
#include <string>

namespace metrics {

/// How a state tensor combines with another metric's (merge) or another process's (all-reduce).
enum class Reduction {
  Sum,
  Min,
  Max,
  Cat,  ///< rows, one or more per update, that grow along dim 0: joined end to end (all-gather)
};

/// "sum", "min", "max" or "cat".
const char* reduction_name(Reduction reduction);

/// Whether an entry holds counts, which load_state_dict checks as such: an int64 sum always holds
/// whole numbers in [0, 2^62); counts in float64 (a weighted metric's, sums of weights) are never
/// below 0 (NaN and +inf are what an overflow leaves). Signed counts (TorchMetrics' tn without
/// num_classes, -1 per wrong prediction; a weighted multiclass tn) may go below 0: whole numbers in
/// [-2^62, 2^62), or in float64 any value.
enum class Counts { kNo, kUnsigned, kSigned };

/// One tensor of a metric's state: allocated once on the metric's device, updated in place,
/// restored to `fill` by reset(), combined with others by `reduction`. A Cat entry instead grows by
/// the rows each update appends, and reset() empties it (TorchMetrics' list states, as one tensor).
struct StateEntry {
  std::string name;
  at::Tensor tensor;
  c10::Scalar fill;
  Reduction reduction;
  Counts counts = Counts::kNo;
};

/// Whether `other` has the shape `entry` takes: its own, or for a Cat entry any number of rows.
bool same_shape(const StateEntry& entry, const at::Tensor& other);
/// The shape as description() and messages show it: "[3, 4]", or "[*, 4]" for a Cat entry.
std::string shape_text(const StateEntry& entry);

/// State tensors by name, as state_dict() returns them.
using StateDict = std::map<std::string, at::Tensor>;

}  // namespace metrics
