#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <string>
#include <vector>

namespace bench {

/// The inputs of one update: a loss or values (aggregators), or preds and target.
struct Inputs {
  std::string shape;  // e.g. "128x1000"
  at::Tensor values, preds, target;
  at::Tensor weight = {};  // per sample, where the options are weighted
};

/// One update call of one implementation, ready to repeat: calls update() on state it owns.
using UpdateFn = std::function<void()>;

/// A benchmarked update: the group (metric and input), the implementation (nosync, naive,
/// floor), and a factory of the call.
struct Case {
  std::string metric;
  std::string shape;
  std::string implementation;
  std::function<UpdateFn()> make;
  int64_t items;  // elements read per update
};

/// Every case of the suite: aggregators on a 0-dim loss and on (4096,), classification on
/// (128, 10) and (128, 1000) multiclass logits, (4096,) binary and (128, 100) multilabel, each
/// as nosync, naive, and the floor (one vectorized read of the same input).
std::vector<Case> all_cases();

}  // namespace bench
