#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <torch/arg.h>

#include <memory>
#include <string>
#include <vector>

#include <metrics/metric.h>
#include <metrics/nan_policy.h>
#include <metrics/update_args.h>

namespace metrics {

/// Options shared by Mean, Sum, Min and Max.
struct AggregationOptions {
  /// What update() does with NaN values and weights, and (Mean, Sum) infinite weights: bad entries,
  /// dropped and counted by kind ("NaN values", "infinite weights"), or replaced. Default: warn
  /// (TorchMetrics' default).
  TORCH_ARG(NanPolicy, nan_policy) = NanPolicy::warn();
  /// The values' dtype: float64 (default) or float32; Min and Max also keep their state in it. Mean
  /// and Sum accumulate in float64 whatever it is (compensated across updates: the mean's relative
  /// error stays ~1e-15 after 1e8 samples) and round their values to it.
  TORCH_ARG(at::ScalarType, dtype) = at::kDouble;
  /// Device of the state; inputs must live there too. Default: CPU.
  TORCH_ARG(at::Device, device) = at::Device(at::kCPU);
};

namespace detail {

/// Where a weighted sum lives in its MetricState: totals [width] (width 1 for Σ w·x, 2 for
/// (Σ w·x, Σ w)) and their compensation, float64 and packed with the update count and tally: the
/// compensation covers the whole row before it (update count, totals, tally) so that one
/// compensated add updates them all; the totals' own part starts at the totals' offset.
struct WeightedSumSlots {
  size_t total;
  size_t compensation;
  int64_t rows = -1;  ///< the update rows behind the state in the count buffer (ATen path)
};

/// Where an extremum lives in its MetricState, and its update rows (as WeightedSumSlots').
struct ExtremumSlots {
  size_t extremum;
  int64_t rows = -1;
};


/// Σ w·x over every value seen (and, for Mean, Σ w), with compensated summation across updates.
class WeightedSumMetric : public Metric {
 public:
  /// Accumulates `value` with per-element weights broadcastable to it (default 1).
  void update(const ValueArg& value, const ValueArg& weight = 1.0);
  /// Accumulates, and returns the value of this batch alone (TorchMetrics' forward).
  at::Tensor forward(const ValueArg& value, const ValueArg& weight = 1.0);
  using Metric::forward;
  using Metric::update;
  const AggregationOptions& options() const { return options_; }

  const std::vector<std::string>& update_parameters() const override;
  UpdateStep prepare_update(const UpdateArgs& args) override;
  SharingKey sharing_key() const override;
  std::string options_text() const override;
  std::string description_in_version(int64_t version) const override;
  void upgrade_state(StateDict& dict, int64_t version) const override;

 protected:
  WeightedSumMetric(std::string name, AggregationOptions options, bool tracks_weight);
  /// Σ w·x, or (Σ w·x, Σ w) when tracking the weight, compensation included (float64).
  at::Tensor totals() const;
  /// `value` (float64) rounded to the options' dtype.
  at::Tensor in_options_dtype(const at::Tensor& value) const;

 private:
  void check_args(const ValueArg& value, const ValueArg& weight) const;
  void accumulate(const ValueArg& value, const ValueArg& weight);
  /// Where the totals and their compensation are in the state.
  WeightedSumSlots slots() const { return {total_, compensation_, rows_}; }

  AggregationOptions options_;
  size_t total_ = 0;         // [width]: Σ w·x (and Σ w)
  size_t compensation_ = 0;  // the low-order parts that the count, totals and tally lost
  int64_t rows_ = -1;
};

/// The smallest or largest value seen.
class ExtremumMetric : public Metric {
 public:
  void update(const ValueArg& value);
  at::Tensor forward(const ValueArg& value);
  using Metric::forward;
  using Metric::update;
  const AggregationOptions& options() const { return options_; }

  at::Tensor value() const override;
  const std::vector<std::string>& update_parameters() const override;
  UpdateStep prepare_update(const UpdateArgs& args) override;
  SharingKey sharing_key() const override;
  std::string options_text() const override;

 protected:
  ExtremumMetric(std::string name, AggregationOptions options, bool is_max);

 private:
  void check_args(const ValueArg& value) const;
  void accumulate(const ValueArg& value);

  AggregationOptions options_;
  bool is_max_;
  size_t extremum_ = 0;  // [1], starts at +inf (min) or -inf (max)
  int64_t rows_ = -1;
};

}  // namespace detail

/// Weighted mean Σ w·x / Σ w (TorchMetrics' MeanMetric). With no data compute() returns NaN (0/0),
/// and with a total weight of 0 what the division gives (NaN or ±inf), as TorchMetrics does.
class Mean : public Cloneable<Mean, detail::WeightedSumMetric> {
 public:
  explicit Mean(AggregationOptions options = {});
  at::Tensor value() const override;
};

/// Σ w·x (TorchMetrics' SumMetric, plus optional weights). 0 with no data.
class Sum : public Cloneable<Sum, detail::WeightedSumMetric> {
 public:
  explicit Sum(AggregationOptions options = {});
  at::Tensor value() const override;
  /// A collection's weight= is for the metrics that take one in TorchMetrics: not SumMetric.
  bool takes(const std::string& name) const override { return name != "weight"; }
};

/// Smallest value seen (TorchMetrics' MinMetric); +inf with no data.
class Min : public Cloneable<Min, detail::ExtremumMetric> {
 public:
  explicit Min(AggregationOptions options = {});
};

/// Largest value seen (TorchMetrics' MaxMetric); -inf with no data.
class Max : public Cloneable<Max, detail::ExtremumMetric> {
 public:
  explicit Max(AggregationOptions options = {});
};

}  // namespace metrics
