#pragma once

#include <string>

namespace metrics {

/// What an aggregator's update() does with a NaN value or a NaN weight, with TorchMetrics'
/// `nan_strategy` names. None of them synchronizes: under Error and Warn the NaNs are counted on
/// the device and compute()/check() raise or warn; under Error, Warn and Ignore they never enter
/// the state.
enum class NanStrategy {
  Error,    ///< drop the position; compute() raises RuntimeError with the counts
  Warn,     ///< drop the position; compute() warns with the counts
  Ignore,   ///< drop the position silently
  Disable,  ///< no check: NaN reaches the state (weights are still honoured)
  Replace,  ///< the value becomes the replacement and the position's weight becomes 1
};

struct NanPolicy {
  NanStrategy strategy = NanStrategy::Warn;
  /// The value NaNs become under Replace.
  double replacement = 0.0;

  static NanPolicy error() { return {NanStrategy::Error, 0.0}; }
  static NanPolicy warn() { return {NanStrategy::Warn, 0.0}; }
  static NanPolicy ignore() { return {NanStrategy::Ignore, 0.0}; }
  static NanPolicy disable() { return {NanStrategy::Disable, 0.0}; }
  static NanPolicy replace(double value) { return {NanStrategy::Replace, value}; }

  /// Parses TorchMetrics' strings "error", "warn", "ignore", "disable"; throws c10::ValueError
  /// naming `metric` and the argument otherwise (a float is passed as replace(value)).
  static NanPolicy parse(const std::string& text, const std::string& metric);

  /// Whether update() looks for NaNs at all.
  bool checks() const { return strategy != NanStrategy::Disable; }
  /// Whether the NaNs found are counted for a report.
  bool counts() const { return strategy == NanStrategy::Error || strategy == NanStrategy::Warn; }
  /// Whether NaN positions are dropped from the state.
  bool drops() const { return checks() && strategy != NanStrategy::Replace; }
};

}  // namespace metrics
