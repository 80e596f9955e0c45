#pragma once

// What the fuzz target does to a metric: its options, and one update's arguments with the call
// that passes them (typed, positional or keyword UpdateArgs, or a deliberately wrong binding),
// whether the documented checks must reject them, and what they do to the reference.

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <string>

#include <metrics/metric.h>

#include "fuzz_input.h"
#include "reference.h"

namespace fuzz {

/// Options drawn from the input; now and then invalid ones, which the constructor must reject.
Config draw_config(Source& in);
/// Another metric that must not merge with or load the state of one of `config`.
Config foreign_config(Source& in, const Config& config);
/// The metric's documented name, e.g. "Mean", "MulticlassFBetaScore".
std::string metric_name(const Config& config);
/// Whether the constructor's documented checks accept these options.
bool options_valid(const Config& config);
std::unique_ptr<metrics::Metric> make_metric(const Config& config);
/// Whether compute() and check() raise (rather than warn) on counted bad input.
bool raises_on_bad_input(const Config& config);

/// One update's arguments and how to pass them.
struct Call {
  std::string text;
  /// The documented metadata checks reject the arguments (values never make an error).
  bool rejected = false;
  /// Runs update (forward = false) or forward; returns forward's batch value.
  std::function<at::Tensor(metrics::Metric& metric, bool forward)> run;
  std::function<void(AggReference&)> apply_agg;
  std::function<void(ClsReference&)> apply_cls;
};

Call draw_call(Source& in, const Config& config);

}  // namespace fuzz
