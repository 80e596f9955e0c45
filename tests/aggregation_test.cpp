#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include <metrics/aggregation.h>
#include <metrics/backend.h>
#include <metrics/sync_counter.h>
#include <metrics/warning_capture.h>

#include "../src/aggregation/aggregation_cpu.h"
#include "../src/aggregation/aggregation_simd.h"
#include "metric_contract.h"
#include "test_support.h"

namespace metrics {
namespace {

using ::testing::HasSubstr;
using testing::generator;
using testing::MetricContract;
using testing::states_equal;
using testing::tensors_close;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

at::Tensor floats(std::vector<double> values, at::ScalarType dtype = at::kFloat) {
  return at::tensor(values, at::kDouble).to(dtype);
}

double value_of(const at::Tensor& t) { return t.item<double>(); }

// ---------------------------------------------------------------- known answers

TEST(Mean, KnownAnswer) {
  Mean mean;
  mean.update(floats({1, 2, 3, 4}));
  EXPECT_DOUBLE_EQ(value_of(mean.compute()), 2.5);
  EXPECT_EQ(mean.compute().scalar_type(), at::kDouble);
  EXPECT_EQ(mean.compute().dim(), 0);
}

TEST(Mean, HonoursPerElementWeights) {
  Mean mean;
  mean.update(floats({1, 2, 3}), floats({3, 1, 0}));
  EXPECT_DOUBLE_EQ(value_of(mean.compute()), 1.25);
}

TEST(Mean, DisableStillHonoursWeights) {  // TorchMetrics 1.6 returns 2.0 here: it drops the weights
  Mean mean(AggregationOptions().nan_policy(NanPolicy::disable()));
  mean.update(floats({1, 2, 3}), floats({3, 1, 0}));
  EXPECT_DOUBLE_EQ(value_of(mean.compute()), 1.25);
}

TEST(Mean, BroadcastsWeights) {
  Mean mean;
  mean.update(floats({1, 2, 3, 4}).reshape({2, 2}), floats({1, 3}));  // columns weighted 1 and 3
  EXPECT_DOUBLE_EQ(value_of(mean.compute()), (1 + 3 + 2 * 3 + 4 * 3) / 8.0);
}

TEST(Mean, HostScalarsAndScalarWeights) {
  Mean mean;
  mean.update(2.0);
  mean.update(4.0, 3.0);
  mean.update(floats({1, 1}), 0.5);
  EXPECT_DOUBLE_EQ(value_of(mean.compute()), (2.0 + 12.0 + 1.0) / (1.0 + 3.0 + 1.0));
}

TEST(Mean, AcceptsEveryFloatingDtype) {
  for (auto dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
    Mean mean;
    mean.update(floats({0.5, 1.5, 2.5}, dtype), floats({1, 1, 2}, dtype));
    EXPECT_DOUBLE_EQ(value_of(mean.compute()), (0.5 + 1.5 + 5.0) / 4.0) << dtype;
  }
}

TEST(Mean, NoDataGivesNaNAndWarns) {  // TorchMetrics: 0/0 = NaN, with a compute-before-update warning
  Mean mean;
  WarningCapture warnings;
  EXPECT_TRUE(std::isnan(value_of(mean.compute())));
  ASSERT_EQ(warnings.messages().size(), 1u);
  EXPECT_THAT(warnings.messages()[0], HasSubstr("Mean.compute: called before any update"));
}

TEST(Mean, ZeroTotalWeightGivesNaN) {
  Mean mean;
  mean.update(floats({1, 2}), floats({0, 0}));
  EXPECT_TRUE(std::isnan(value_of(mean.compute())));
}

TEST(Mean, KeepsInfinity) {
  Mean mean;
  mean.update(floats({1, kInf}));
  EXPECT_EQ(value_of(mean.compute()), kInf);
}

TEST(Mean, EmptyTensorCountsAsAnUpdateAndAddsNothing) {
  Mean mean;
  mean.update(floats({3}));
  mean.update(at::empty({0}));
  EXPECT_DOUBLE_EQ(value_of(mean.compute()), 3.0);
  EXPECT_EQ(mean.update_count(), 2);
}

TEST(Mean, Float32Accumulator) {
  Mean mean(AggregationOptions().dtype(at::kFloat));
  mean.update(floats({1, 2}));
  EXPECT_EQ(mean.compute().scalar_type(), at::kFloat);
  EXPECT_FLOAT_EQ(mean.compute().item<float>(), 1.5f);
}

TEST(Sum, KnownAnswerWithWeights) {
  Sum sum;
  sum.update(floats({1, 2, 3}), floats({1, 1, 2}));
  sum.update(0.5);
  EXPECT_DOUBLE_EQ(value_of(sum.compute()), 9.5);
}

TEST(Sum, NoDataIsZero) {
  WarningCapture quiet;
  EXPECT_EQ(value_of(Sum().compute()), 0.0);
}

TEST(MinMax, KnownAnswers) {
  Min min;
  Max max;
  for (auto* m : std::vector<detail::ExtremumMetric*>{&min, &max}) {
    m->update(floats({3, -1, 7}));
    m->update(floats({2, 5}).reshape({2, 1}));
    m->update(-4.0);
  }
  EXPECT_EQ(value_of(min.compute()), -4.0);
  EXPECT_EQ(value_of(max.compute()), 7.0);
}

TEST(MinMax, NoDataGivesInfinities) {
  WarningCapture quiet;
  EXPECT_EQ(value_of(Min().compute()), kInf);
  EXPECT_EQ(value_of(Max().compute()), -kInf);
}

// A -0.0 extremum stays -0.0 (as torch.min gives it) on both paths, whatever the policy and dtype:
// the ATen path adds its delta row over the extremum too.
TEST(MinMax, NegativeZeroKeepsItsSignOnBothPaths) {
  WarningCapture quiet;
  const std::vector<NanPolicy> policies{NanPolicy::warn(), NanPolicy::error(), NanPolicy::ignore(),
                                        NanPolicy::disable(), NanPolicy::replace(1.0)};
  for (const bool aten : {false, true}) {
    std::unique_ptr<ForceAtenPath> force;
    if (aten) force = std::make_unique<ForceAtenPath>();
    for (const auto& policy : policies) {
      for (const auto dtype : {at::kDouble, at::kFloat}) {
        const auto zeros = at::full({4, 2}, -0.0, dtype);
        Min min(AggregationOptions().nan_policy(policy).dtype(dtype));
        Max max(AggregationOptions().nan_policy(policy).dtype(dtype));
        for (const auto& x : {zeros.select(1, 0), zeros.flatten()}) {  // strided: the ATen path even on the CPU
          min.update(x);
          max.update(x);
        }
        EXPECT_TRUE(std::signbit(value_of(min.compute()))) << "aten=" << aten << " dtype=" << dtype;
        EXPECT_TRUE(std::signbit(value_of(max.compute()))) << "aten=" << aten << " dtype=" << dtype;
      }
    }
  }
}

// ---------------------------------------------------------------- NaN policies

struct PolicyCase {
  NanPolicy policy;
  double mean;
  bool warns;
  bool raises;
};

TEST(MeanNanPolicy, EachPolicyWithWeights) {
  // Position 1 has a NaN value, position 2 a NaN weight: both count as NaN positions.
  const auto values = floats({1, kNaN, 3, 4});
  const auto weights = floats({2, 1, kNaN, 1});
  const std::vector<PolicyCase> cases = {
      {NanPolicy::error(), (2 + 4) / 3.0, false, true},
      {NanPolicy::warn(), (2 + 4) / 3.0, true, false},
      {NanPolicy::ignore(), (2 + 4) / 3.0, false, false},
      {NanPolicy::disable(), kNaN, false, false},
      {NanPolicy::replace(5.0), (2 + 5 + 5 + 4) / 5.0, false, false},  // value -> 5, weight -> 1
  };
  for (const auto& c : cases) {
    Mean mean(AggregationOptions().nan_policy(c.policy));
    WarningCapture warnings;
    mean.update(values, weights);
    if (c.raises) {
      EXPECT_THROWS_WITH(mean.compute(), c10::Error, "Mean: 2 NaN values in 1 update, first at update 0");
      continue;
    }
    const double got = value_of(mean.compute());
    if (std::isnan(c.mean)) {
      EXPECT_TRUE(std::isnan(got));
    } else {
      EXPECT_DOUBLE_EQ(got, c.mean) << static_cast<int>(c.policy.strategy);
    }
    EXPECT_EQ(warnings.messages().size(), c.warns ? 1u : 0u);
  }
}

TEST(MeanNanPolicy, WithoutWeights) {
  const auto values = floats({1, kNaN, 3});
  for (auto policy : {NanPolicy::warn(), NanPolicy::ignore()}) {
    WarningCapture quiet;
    Mean mean(AggregationOptions().nan_policy(policy));
    mean.update(values);
    EXPECT_DOUBLE_EQ(value_of(mean.compute()), 2.0);
  }
  Mean replaced(AggregationOptions().nan_policy(NanPolicy::replace(-1.0)));
  replaced.update(values);
  EXPECT_DOUBLE_EQ(value_of(replaced.compute()), 1.0);
  Mean disabled(AggregationOptions().nan_policy(NanPolicy::disable()));
  disabled.update(values);
  EXPECT_TRUE(std::isnan(value_of(disabled.compute())));
}

TEST(MeanNanPolicy, ReportsCountsUpdatesAndFirstUpdate) {
  Mean mean;
  mean.update(floats({1, 2}));
  mean.update(floats({kNaN, kNaN, 3}));
  mean.update(4.0);
  mean.update(kNaN);
  WarningCapture warnings;
  EXPECT_DOUBLE_EQ(value_of(mean.compute()), (1 + 2 + 3 + 4) / 4.0);
  ASSERT_EQ(warnings.messages().size(), 1u);
  EXPECT_EQ(warnings.messages()[0], "Mean: 3 NaN values in 2 updates, first at update 1 (kept out of the state)");
  const auto report = mean.bad_input_report();
  EXPECT_EQ(report.bad_updates, 2);
  EXPECT_EQ(report.first_bad_update, 1);
  mean.reset();
  EXPECT_TRUE(mean.bad_input_report().clean());
}

TEST(MeanNanPolicy, CheckRaisesUnderErrorAndDoesNothingWhenClean) {
  Mean mean(AggregationOptions().nan_policy(NanPolicy::error()));
  mean.update(floats({1}));
  EXPECT_NO_THROW(mean.check());
  mean.update(floats({kNaN}));
  EXPECT_THROWS_WITH(mean.check(), c10::Error, "Mean: 1 NaN value in 1 update, first at update 1");
}

TEST(MeanNanPolicy, NeverModifiesTheInput) {
  const auto values = floats({1, kNaN});
  const auto weights = floats({kNaN, 1});
  for (auto policy : {NanPolicy::replace(0.0), NanPolicy::ignore()}) {
    for (bool aten : {false, true}) {
      std::unique_ptr<ForceAtenPath> force;
      if (aten) force = std::make_unique<ForceAtenPath>();
      Mean mean(AggregationOptions().nan_policy(policy));
      mean.update(values, weights);
      EXPECT_TRUE(std::isnan(values[1].item<double>()));
      EXPECT_TRUE(std::isnan(weights[0].item<double>()));
    }
  }
}

TEST(MinMaxNanPolicy, EachPolicy) {
  const auto values = floats({2, kNaN, -3});
  WarningCapture quiet;
  for (auto policy : {NanPolicy::warn(), NanPolicy::ignore()}) {
    Min min(AggregationOptions().nan_policy(policy));
    Max max(AggregationOptions().nan_policy(policy));
    min.update(values);
    max.update(values);
    EXPECT_EQ(value_of(min.compute()), -3.0);
    EXPECT_EQ(value_of(max.compute()), 2.0);
  }
  Max replaced(AggregationOptions().nan_policy(NanPolicy::replace(9.0)));
  replaced.update(values);
  EXPECT_EQ(value_of(replaced.compute()), 9.0);
  Min disabled(AggregationOptions().nan_policy(NanPolicy::disable()));
  disabled.update(values);
  disabled.update(-10.0);  // NaN stays, as with torch.minimum
  EXPECT_TRUE(std::isnan(value_of(disabled.compute())));
  Max errors(AggregationOptions().nan_policy(NanPolicy::error()));
  errors.update(kNaN);
  EXPECT_THROWS_WITH(errors.compute(), c10::Error, "Max: 1 NaN value in 1 update, first at update 0");
}

TEST(NanPolicy, ParsesTorchMetricsNamesAndRejectsOthers) {
  EXPECT_EQ(NanPolicy::parse("error", "Mean").strategy, NanStrategy::Error);
  EXPECT_EQ(NanPolicy::parse("warn", "Mean").strategy, NanStrategy::Warn);
  EXPECT_EQ(NanPolicy::parse("ignore", "Mean").strategy, NanStrategy::Ignore);
  EXPECT_EQ(NanPolicy::parse("disable", "Mean").strategy, NanStrategy::Disable);
  EXPECT_THROWS_WITH(NanPolicy::parse("skip", "Mean"), c10::ValueError,
                     "Mean: Arg `nan_strategy` should either be a float or one of "
                     "['error', 'warn', 'ignore', 'disable'] but got 'skip'.");
}

// ---------------------------------------------------------------- random streams vs long double

struct Recorded {
  long double weighted = 0, weight = 0;
  double min = kInf, max = -kInf;
  void add(double x, double w) {
    weighted += static_cast<long double>(x) * w;
    weight += w;
    min = std::min(min, x);
    max = std::max(max, x);
  }
  void add(const at::Tensor& x, const at::Tensor& w) {
    const auto xd = x.to(at::kDouble).contiguous();
    const auto wd = w.to(at::kDouble).expand_as(x).contiguous();
    for (int64_t i = 0; i < xd.numel(); ++i) add(xd.data_ptr<double>()[i], wd.data_ptr<double>()[i]);
  }
};

// Feeds `metric` batch i of a mixed stream (dtypes, shapes, layouts, host scalars) and records it.
template <typename Feed>
void mixed_batch(int64_t i, Recorded& ref, Feed feed) {
  auto gen = generator(7000 + i);
  const auto dtypes = std::vector<at::ScalarType>{at::kFloat, at::kDouble, at::kHalf, at::kBFloat16};
  const auto dtype = dtypes[i % 4];
  switch (i % 5) {
    case 0: {  // contiguous values with per-element weights
      const auto x = (at::randn({1 + i % 97}, gen) * 10).to(dtype);
      const auto w = at::rand({1 + i % 97}, gen).to(dtype);
      ref.add(x, w);
      return feed(x, w);
    }
    case 1: {  // a 0-dim loss with a host weight
      const auto x = at::rand({}, gen, at::kDouble);
      ref.add(x, at::full({}, 0.25, at::kDouble));
      return feed(x, 0.25);
    }
    case 2: {  // a host double
      const double x = std::fmod(std::sin(static_cast<double>(i) * 12.9898) * 43758.5453, 10.0);
      ref.add(x, 1.0);
      return feed(x, 1.0);
    }
    case 3: {  // broadcast weights (ATen path even on the CPU)
      const auto x = at::randn({4, 6}, gen).to(dtype);
      const auto w = at::rand({6}, gen).to(dtype);
      ref.add(x, w);
      return feed(x, w);
    }
    default: {  // non-contiguous values
      const auto x = at::randn({5, 3}, gen).to(dtype).t();
      ref.add(x, at::ones_like(x));
      return feed(x, 1.0);
    }
  }
}

TEST(AggregationStreams, MatchLongDoubleReferenceOnBothPaths) {
  for (bool aten : {false, true}) {
    std::unique_ptr<ForceAtenPath> force;
    if (aten) force = std::make_unique<ForceAtenPath>();
    Mean mean;
    Sum sum;
    Min min;
    Max max;
    Recorded ref;
    for (int64_t i = 0; i < 400; ++i) {
      mixed_batch(i, ref, [&](const ValueArg& x, const ValueArg& w) {
        mean.update(x, w);
        sum.update(x, w);
        min.update(x);
        max.update(x);
      });
    }
    const auto expected_mean = static_cast<double>(ref.weighted / ref.weight);
    EXPECT_NEAR(value_of(mean.compute()), expected_mean, 1e-13 * std::abs(expected_mean)) << "aten=" << aten;
    EXPECT_NEAR(value_of(sum.compute()), static_cast<double>(ref.weighted), 1e-12) << "aten=" << aten;
    EXPECT_EQ(value_of(min.compute()), ref.min);
    EXPECT_EQ(value_of(max.compute()), ref.max);
  }
}

// 1e8 float32 samples in 1e4 updates: float64 accumulators keep the mean to <= 1e-12, where the
// TorchMetrics pattern (a float32 running total of float32 batch sums) drifts to ~1e-6. A float32
// Mean accumulates in float64 too: its value is the float64 mean, rounded.
TEST(AggregationPrecision, HundredMillionFloat32Samples) {
  constexpr int64_t kUpdates = 10000, kBatch = 10000;
  Mean mean;
  Mean mean32(AggregationOptions().dtype(at::kFloat));
  float naive_float32_total = 0.0f;
  long double exact = 0.0L, exact_compensation = 0.0L;  // Neumaier in long double: the reference
  auto gen = generator(42);
  for (int64_t u = 0; u < kUpdates; ++u) {
    const auto batch = at::rand({kBatch}, gen) + 0.5;  // float32 in [0.5, 1.5)
    mean.update(batch);
    mean32.update(batch);
    naive_float32_total += batch.sum().item<float>();
    const auto* x = batch.data_ptr<float>();
    for (int64_t i = 0; i < kBatch; ++i) {
      const long double v = x[i], t = exact + v;
      exact_compensation += std::abs(exact) >= std::abs(v) ? (exact - t) + v : (v - t) + exact;
      exact = t;
    }
  }
  const long double exact_mean = (exact + exact_compensation) / static_cast<long double>(kUpdates * kBatch);
  const auto relative_error = [&](double v) { return static_cast<double>(std::abs((v - exact_mean) / exact_mean)); };
  const double ours = relative_error(value_of(mean.compute()));
  const double ours32 = relative_error(mean32.compute().item<float>());
  const double naive32 = relative_error(naive_float32_total / static_cast<double>(kUpdates * kBatch));
  RecordProperty("relative_error_float64", std::to_string(ours));
  RecordProperty("relative_error_float32_metric", std::to_string(ours32));
  RecordProperty("relative_error_naive_float32_total", std::to_string(naive32));
  std::cout << "relative error after 1e8 samples: float64 " << ours << ", our float32 metric " << ours32
            << ", naive float32 running total " << naive32 << "\n";
  EXPECT_LE(ours, 1e-12);
  EXPECT_EQ(mean32.compute().item<float>(), static_cast<float>(value_of(mean.compute())));
  EXPECT_GT(naive32, 1e-7);  // the drift the float64 default exists to avoid
}

// Compensation carries across updates: 1e7 host-scalar updates stay exact to ~1e-15.
TEST(AggregationPrecision, TenMillionScalarUpdates) {
  Sum sum;
  long double exact = 0.0L;
  double naive = 0.0;
  for (int64_t i = 0; i < 10000000; ++i) {
    const double v = 1.0 + static_cast<double>(i % 1000) * 1e-3 + 1e-7;
    sum.update(v);
    exact += v;
    naive += v;
  }
  const double ours = std::abs(static_cast<double>((value_of(sum.compute()) - exact) / exact));
  std::cout << "relative error after 1e7 scalar updates: ours " << ours << ", naive float64 "
            << std::abs(static_cast<double>((naive - exact) / exact)) << "\n";
  EXPECT_LE(ours, 1e-15);
}

// The device path compensates across updates too: 0.1 added 1e5 times to 1e8, where each plain
// float64 addition rounds 0.1 to a multiple of 2^-26 (about 6e-12 relative after all of them).
TEST(AggregationPrecision, DevicePathCompensatesAcrossUpdates) {
  ForceAtenPath aten;
  Sum sum;
  Mean mean;
  sum.update(at::tensor(1e8, at::kDouble));
  mean.update(at::tensor(1e8, at::kDouble));
  constexpr int kUpdates = 100000;
  double naive = 1e8;
  const auto tenth = at::tensor(0.1, at::kDouble);
  for (int i = 0; i < kUpdates; ++i) {
    sum.update(tenth);
    mean.update(tenth);
    naive += 0.1;
  }
  const long double exact = 1e8L + kUpdates * static_cast<long double>(0.1);  // the double nearest 0.1
  const auto relative_error = [](long double v, long double want) {
    return static_cast<double>(std::abs((v - want) / want));
  };
  EXPECT_LE(relative_error(value_of(sum.compute()), exact), 1e-15);
  EXPECT_LE(relative_error(value_of(mean.compute()), exact / (kUpdates + 1)), 1e-15);
  EXPECT_GT(relative_error(naive, exact), 1e-12);  // what the compensation is for
}

// Where the batch's sum is larger than the running total, the device path's Fast2Sum can lose
// that addition's rounding error, as plain float64 addition does (README): 1 + 1e16 rounds the 1
// away, and the CPU path's TwoSum alone keeps it.
TEST(AggregationPrecision, DevicePathCompensationIsExactWhileTheTotalIsTheLarger) {
  Sum cpu, aten;
  for (const double v : {1.0, 1e16, -1e16}) {
    cpu.update(at::tensor(v, at::kDouble));
    ForceAtenPath force;
    aten.update(at::tensor(v, at::kDouble));
  }
  EXPECT_EQ(value_of(cpu.compute()), 1.0);
  EXPECT_EQ(value_of(aten.compute()), (1.0 + 1e16) - 1e16);  // 0: as plain addition
  Sum ordered;  // the larger first: each addition's error is kept
  for (const double v : {1e16, 1.0, -1e16}) {
    ForceAtenPath force;
    ordered.update(at::tensor(v, at::kDouble));
  }
  EXPECT_EQ(value_of(ordered.compute()), 1.0);
}

// A merge adds the totals with TwoSum on any device, so a stream split over metrics and merged is
// the one stream (1e16, then 1, then -1e16: 1), on either path, in either merge order, under every
// NaN policy (the state with and without a tally).
TEST(AggregationPrecision, MergesKeepWhatTheyRoundOff) {
  const NanPolicy policies[] = {NanPolicy::error(), NanPolicy::warn(), NanPolicy::ignore(), NanPolicy::disable(),
                                NanPolicy::replace(7.0)};
  for (const auto& policy : policies) {
    for (const bool aten : {false, true}) {
      for (const auto order : {MergeOrder::Parallel, MergeOrder::Appended}) {
        const auto options = AggregationOptions().nan_policy(policy);
        Sum sums[] = {Sum(options), Sum(options), Sum(options)};
        Mean means[] = {Mean(options), Mean(options), Mean(options)};
        const double values[] = {1e16, 1.0, -1e16};
        for (size_t i = 0; i < 3; ++i) {
          std::unique_ptr<ForceAtenPath> force;
          if (aten) force = std::make_unique<ForceAtenPath>();
          sums[i].update(at::tensor({values[i]}, at::kDouble));
          means[i].update(at::tensor({values[i]}, at::kDouble));
        }
        for (size_t i = 1; i < 3; ++i) {
          sums[0].merge(sums[i], order);
          means[0].merge(means[i], order);
        }
        const auto where = ::testing::Message() << "aten=" << aten << " policy=" << static_cast<int>(policy.strategy);
        EXPECT_EQ(value_of(sums[0].compute()), 1.0) << where;
        EXPECT_EQ(value_of(means[0].compute()), 1.0 / 3.0) << where;
      }
    }
  }
}

// The first bad update is never written by a device-path update (BadInput: it follows from the
// updates counted since one) but must come out right whatever comes next: more updates on either
// path, a host value, a report, a state dict and its load, a merge of another stream in either
// order, a forward, a reset; the reports read on either path (the tally settles by ATen ops or on
// the host). A random walk over those, each metric against a host tally.
TEST(AggregationDevicePath, TheFirstBadUpdateSurvivesEveryPathAndEveryRead) {
  struct Tally {
    int64_t updates = 0, bad_updates = 0, first = -1;
    void count(bool bad) {
      if (bad && first < 0) first = updates;
      bad_updates += bad;
      ++updates;
    }
    void merge(const Tally& other, bool appended) {
      if (other.first >= 0) {
        const auto theirs = appended ? other.first + updates : other.first;
        first = first < 0 ? theirs : std::min(first, theirs);
      }
      bad_updates += other.bad_updates;
      updates += other.updates;
    }
  };
  const auto make = [](int which) -> std::unique_ptr<Metric> {
    auto options = AggregationOptions().nan_policy(NanPolicy::warn());
    if (which == 0) return std::make_unique<Mean>(options);
    if (which == 1) return std::make_unique<Sum>(options.dtype(at::kFloat));
    return std::make_unique<Max>(options);
  };
  auto gen = generator(11);
  const auto draw = [&](int n) { return at::randint(n, {}, gen).item<int64_t>(); };
  WarningCapture warnings;  // forward() warns of its batch's NaN
  for (int which = 0; which < 3; ++which) {
    auto metric = make(which);
    auto other = make(which);
    Tally tally, other_tally;
    const auto update = [&](Metric& m, Tally& t) {
      const bool bad = draw(3) == 0, host = draw(4) == 0;
      std::unique_ptr<ForceAtenPath> force;
      if (draw(2)) force = std::make_unique<ForceAtenPath>();
      const double v = bad ? kNaN : 1.5;
      UpdateArgs args{{host ? ValueArg(v) : ValueArg(floats({2.0, v, 0.5}, at::kDouble))}};
      m.update(args);
      t.count(bad);
    };
    for (int step = 0; step < 400; ++step) {
      SCOPED_TRACE("metric " + std::to_string(which) + ", step " + std::to_string(step));
      switch (draw(9)) {
        case 0: {  // a state dict, loaded into a fresh metric that goes on
          auto fresh = make(which);
          fresh->load_state_dict(metric->state_dict());
          metric = std::move(fresh);
          break;
        }
        case 1:
          metric->merge(*other);
          tally.merge(other_tally, false);
          break;
        case 2:
          metric->merge(*other, MergeOrder::Appended);
          tally.merge(other_tally, true);
          break;
        case 3: {
          UpdateArgs args{{ValueArg(floats({draw(2) ? kNaN : 1.0}, at::kDouble))}};
          metric->forward(args);
          tally.count(std::isnan(args.positional[0].tensor().item<double>()));
          break;
        }
        case 4:
          if (draw(8) == 0) {
            metric->reset();
            tally = Tally{};
          }
          break;
        case 5:
          update(*other, other_tally);
          break;
        default:
          update(*metric, tally);
      }
      std::unique_ptr<ForceAtenPath> read_on_aten;  // then the read settles with ATen ops, not on the host
      if (draw(2)) read_on_aten = std::make_unique<ForceAtenPath>();
      const auto report = metric->bad_input_report();
      ASSERT_EQ(metric->update_count(), tally.updates);
      ASSERT_EQ(report.bad_updates, tally.bad_updates);
      ASSERT_EQ(report.first_bad_update, tally.first);
    }
  }
}

// A total that becomes infinite (an infinite value, or finite values whose sum overflows) stays
// infinite on the device path, where the compensated add's rounding error is NaN, and a later
// infinity of the other sign makes it NaN: as on the CPU path, for both accumulator dtypes.
TEST(AggregationDevicePath, InfiniteTotalsMatchTheCpuPath) {
  const double big = 1e308;
  const std::vector<std::vector<double>> batches{{1.0, 2.5}, {big}, {big}, {-1.0}, {kInf}, {3.0}, {-kInf}};
  for (auto dtype : {at::kDouble, at::kFloat}) {
    for (int aten = 0; aten < 2; ++aten) {
      std::unique_ptr<ForceAtenPath> force;
      if (aten) force = std::make_unique<ForceAtenPath>();
      Sum sum(AggregationOptions().dtype(dtype));
      Mean mean(AggregationOptions().dtype(dtype));
      std::vector<double> sums, means;
      for (const auto& batch : batches) {
        const auto x = floats(batch, at::kDouble);
        sum.update(x);
        mean.update(x, floats(std::vector<double>(batch.size(), 0.5), at::kDouble));
        sums.push_back(value_of(sum.compute()));
        means.push_back(value_of(mean.compute()));
      }
      SCOPED_TRACE(std::string(aten ? "ATen path, " : "CPU path, ") + c10::toString(dtype));
      EXPECT_EQ(sums[0], 3.5);
      EXPECT_EQ(sums[1], dtype == at::kFloat ? kInf : big + 3.5);  // 1e308 is beyond float32
      EXPECT_EQ(sums[2], kInf);  // 2e308 overflows float64 too
      EXPECT_EQ(sums[3], kInf);
      EXPECT_EQ(sums[4], kInf);
      EXPECT_EQ(sums[5], kInf);
      EXPECT_TRUE(std::isnan(sums[6]));
      EXPECT_EQ(means[4], kInf);
      EXPECT_TRUE(std::isnan(means[6]));
      EXPECT_EQ(sum.update_count(), 7);
    }
  }
}

// An update on the ATen path copies nothing behind its ops' backs (a copy inside an op is a kernel,
// and an allocation, that the launch count does not show): in any NaN policy, with values and
// weights laid out contiguously or as strided views (a column of a wider tensor).
TEST(AggregationDevicePath, UpdatesCopyNothingInsideTheirOps) {
  auto gen = generator(29);
  const auto wide_values = at::randn({64, 2}, gen), wide_weights = at::rand({64, 2}, gen);
  wide_values[3][1] = kNaN;
  for (const bool strided : {false, true}) {
    const auto values = strided ? wide_values.select(1, 1) : wide_values.select(1, 1).contiguous();
    const auto weights = strided ? wide_weights.select(1, 0) : wide_weights.select(1, 0).contiguous();
    for (const auto& policy : {NanPolicy::warn(), NanPolicy::ignore(), NanPolicy::disable(), NanPolicy::replace(7.0)}) {
      const auto options = AggregationOptions().nan_policy(policy);
      for (auto* metric : {static_cast<Metric*>(new Mean(options)), static_cast<Metric*>(new Sum(options)),
                           static_cast<Metric*>(new Max(options)), static_cast<Metric*>(new Min(options))}) {
        const std::unique_ptr<Metric> owned(metric);
        const bool weighted = dynamic_cast<detail::WeightedSumMetric*>(metric) != nullptr;
        for (const auto& args : {UpdateArgs{{values}}, weighted ? UpdateArgs{{values, weights}} : UpdateArgs{{values}}}) {
          ForceAtenPath force;
          metric->update(args);  // (the first update makes its buffers and constants)
          testing::OpsRun ops;
          metric->update(args);
          EXPECT_THAT(ops.copies(), ::testing::IsEmpty())
              << metric->name() << " " << metric->options_text() << (strided ? ", strided" : "");
        }
      }
    }
  }
}

// The device path's delta row (every policy, both accumulator dtypes, no weight, a host weight and
// weight tensors, NaN and +-inf among values and weights, inf * 0) gives the CPU path's values and
// tallies, update after update.
TEST(AggregationDevicePath, AgreesWithTheCpuPathForEveryPolicyDtypeAndWeight) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const auto values = floats({1.5, kNaN, -2.0, kInf, 0.25, 3.0});
  const auto weights = floats({0.5, 1.0, kNaN, 0.0, kInf, 2.0});
  const auto finite = floats({1.0, 2.0, 0.5, 4.0, -1.0, 0.5});
  const std::vector<NanPolicy> policies{NanPolicy::warn(), NanPolicy::ignore(), NanPolicy::disable(),
                                        NanPolicy::replace(7.0)};
  WarningCapture quiet;
  for (const auto& policy : policies) {
    for (auto dtype : {at::kDouble, at::kFloat}) {
      const auto options = AggregationOptions().nan_policy(policy).dtype(dtype);
      std::vector<std::unique_ptr<Metric>> paths[2];
      for (int aten = 0; aten < 2; ++aten) {
        std::unique_ptr<ForceAtenPath> force;
        if (aten) force = std::make_unique<ForceAtenPath>();
        for (auto* metric : {static_cast<Metric*>(new Mean(options)), static_cast<Metric*>(new Sum(options)),
                             static_cast<Metric*>(new Max(options)), static_cast<Metric*>(new Min(options))}) {
          paths[aten].emplace_back(metric);
          const bool weighted = dynamic_cast<detail::WeightedSumMetric*>(metric) != nullptr;
          metric->update(UpdateArgs{{values}});
          metric->update(UpdateArgs{{finite}});
          metric->update(UpdateArgs{{values.select(0, 3)}});  // a 0-dim inf
          if (!weighted) continue;
          metric->update(UpdateArgs{{values, 0.5}});
          metric->update(UpdateArgs{{values, weights}});
          metric->update(UpdateArgs{{finite, weights}});
        }
      }
      for (size_t m = 0; m < paths[0].size(); ++m) {
        const auto& cpu = *paths[0][m];
        const auto& aten = *paths[1][m];
        SCOPED_TRACE(cpu.name() + " " + cpu.options_text());
        const double want = cpu.value().item<double>(), got = aten.value().item<double>();
        if (std::isnan(want) || std::isinf(want)) {
          EXPECT_TRUE(std::isnan(got) ? std::isnan(want) : got == want) << got << " against " << want;
        } else {
          EXPECT_NEAR(got, want, std::abs(want) * (dtype == at::kFloat ? 1e-6 : 1e-14)) << got << " against " << want;
        }
        EXPECT_EQ(aten.update_count(), cpu.update_count());
        const auto a = aten.bad_input_report(), c = cpu.bad_input_report();
        EXPECT_EQ(a.counts, c.counts);
        EXPECT_EQ(a.bad_updates, c.bad_updates);
        EXPECT_EQ(a.first_bad_update, c.first_bad_update);
      }
    }
  }
}

// Every kind of entry a weighted update can hold, one per update after a clean one (so its total
// is the entry's alone), with a weight tensor and with a host weight: NaN values or weights are
// the NaN kind, an infinite weight with a value that is not NaN the infinite-weight kind, and
// x = +-inf with w = 0 is kept (its product is NaN). The device path gives the CPU path's value
// bit for bit, its counts, bad updates and first bad update, for every policy and both dtypes.
TEST(AggregationDevicePath, EachWeightedEntryKindMatchesTheCpuPath) {
  const std::vector<double> grid{1.5, -2.0, 0.0, -0.0, kInf, -kInf, kNaN};
  const std::vector<NanPolicy> policies{NanPolicy::warn(), NanPolicy::error(), NanPolicy::ignore(),
                                        NanPolicy::disable(), NanPolicy::replace(7.0)};
  WarningCapture quiet;
  for (const auto& policy : policies) {
    for (auto dtype : {at::kDouble, at::kFloat}) {
      for (double x : grid) {
        for (double w : grid) {
          for (bool host_weight : {false, true}) {
            std::vector<std::unique_ptr<detail::WeightedSumMetric>> paths[2];
            for (int aten = 0; aten < 2; ++aten) {
              std::unique_ptr<ForceAtenPath> force;
              if (aten) force = std::make_unique<ForceAtenPath>();
              const auto options = AggregationOptions().nan_policy(policy).dtype(dtype);
              paths[aten].emplace_back(new Mean(options));
              paths[aten].emplace_back(new Sum(options));
              for (auto& metric : paths[aten]) {
                metric->update(floats({1.0, 2.0}), floats({0.5, 0.25}));
                host_weight ? metric->update(floats({x, 0.5}), w) : metric->update(floats({x, 0.5}), floats({w, 2.0}));
              }
            }
            for (size_t m = 0; m < paths[0].size(); ++m) {
              const auto &cpu = *paths[0][m], &aten = *paths[1][m];
              SCOPED_TRACE(cpu.name() + " " + cpu.options_text() + " x=" + std::to_string(x) +
                           " w=" + std::to_string(w) + (host_weight ? " (host weight)" : ""));
              const auto want = cpu.value(), got = aten.value();
              EXPECT_TRUE(at::equal(at::isnan(want), at::isnan(got)) &&
                          at::equal(want.nan_to_num(0, kInf, -kInf), got.nan_to_num(0, kInf, -kInf)))
                  << got << " against " << want;
              const auto a = aten.bad_input_report(), c = cpu.bad_input_report();
              EXPECT_EQ(a.counts, c.counts);
              EXPECT_EQ(a.bad_updates, c.bad_updates);
              EXPECT_EQ(a.first_bad_update, c.first_bad_update);
              EXPECT_EQ(aten.update_count(), 2);
            }
          }
        }
      }
    }
  }
}

// A batch mixing all those kinds (and a weight broadcast along a dimension) counts each kind once
// per entry on the device path, as on the CPU path.
TEST(AggregationDevicePath, MixedWeightedBatchCountsEachKind) {
  ForceAtenPath aten;
  const auto x = floats({1.0, kNaN, 2.0, kInf, 3.0, kNaN, 4.0, -kInf}).view({2, 4});
  const auto w = floats({kInf, 0.5, kNaN, 0.0, 2.0, -kInf, 1.0, 1.0}).view({2, 4});
  WarningCapture quiet;
  Mean mean;
  mean.update(floats({1.0}));
  mean.update(x, w);
  mean.update(x.t(), w.t());  // strided input
  const auto report = mean.bad_input_report();
  // per batch: NaN kind at (x NaN: 2) + (w NaN: 1) = 3, infinite weights with x not NaN: 1 (w = inf at x = 1;
  // w = -inf is at x = NaN, so the NaN kind); x = inf with w = 0 is kept and makes the total NaN
  EXPECT_EQ(report.counts, (std::vector<std::pair<std::string, int64_t>>{{"NaN values", 6}, {"infinite weights", 2}}));
  EXPECT_EQ(report.bad_updates, 2);
  EXPECT_EQ(report.first_bad_update, 1);
  EXPECT_TRUE(std::isnan(value_of(mean.value())));
  Sum sum(AggregationOptions().nan_policy(NanPolicy::warn()));
  sum.update(x.narrow(1, 0, 3), w.narrow(1, 0, 3));  // no inf * 0 left: a finite total
  EXPECT_EQ(value_of(sum.value()), 3.0 * 2.0 + 4.0);
  EXPECT_EQ(sum.bad_input_report().counts[0].second, 3);
  EXPECT_EQ(sum.bad_input_report().counts[1].second, 1);
}

// ---------------------------------------------------------------- integer and bool input

TEST(Aggregation, IntegerAndBoolValuesAndWeightsCountAsFloat64) {
  for (const bool aten : {false, true}) {
    std::unique_ptr<ForceAtenPath> force;
    if (aten) force = std::make_unique<ForceAtenPath>();
    Sum correct;
    correct.update(at::tensor({3, 4}, at::kLong).sum());  // SumMetric().update((pred == y).sum())
    correct.update(at::tensor({1, 0, 1}).to(at::kBool));
    EXPECT_DOUBLE_EQ(correct.value().item<double>(), 9.0);

    Mean mean;  // bool weights select: (2 + 6) / 2
    mean.update(at::tensor({2, 4, 6}, at::kInt), at::tensor({1, 0, 1}).to(at::kBool));
    EXPECT_DOUBLE_EQ(mean.value().item<double>(), 4.0);

    Max max;
    max.update(at::tensor({-5, 7, 1}, at::kShort));
    EXPECT_DOUBLE_EQ(max.value().item<double>(), 7.0);
  }
}

// ---------------------------------------------------------------- bad input

TEST(AggregationBadInput, ClearErrorsAndStateUnchanged) {
  Mean mean;
  mean.update(floats({1, 2}));
  const auto before = mean.state_dict();
  EXPECT_THROWS_WITH(mean.update(floats({1, 2, 3}), floats({1, 2})), c10::ValueError,
                     "Mean.update: weight of shape [2] is not broadcastable to value of shape [3]");
  EXPECT_THROWS_WITH(mean.forward(floats({1, 2, 3}), floats({1, 2})), c10::ValueError,
                     "Mean.forward: weight of shape [2] is not broadcastable to value of shape [3]");
  EXPECT_THROWS_WITH(mean.update(at::ones({3}, at::kComplexFloat)), c10::TypeError,
                     "Mean.update: value has dtype ComplexFloat; expected a real (floating, integer or bool) tensor");
  EXPECT_THROWS_WITH(mean.update(floats({1}), at::ones({1}, at::kComplexDouble)), c10::TypeError,
                     "Mean.update: weight has dtype ComplexDouble");
  EXPECT_THROWS_WITH(mean.update(at::ones({2}, at::TensorOptions().device(at::kMeta))), c10::ValueError,
                     "Mean.update: value is on meta but the metric's state is on cpu");
  EXPECT_THROWS_WITH(mean.update(2.0, floats({1})), c10::ValueError,
                     "Mean.update: weight of shape [1] is not broadcastable to value of shape []");
  EXPECT_THROWS_WITH(mean.update(2.0, at::ones({}, at::TensorOptions().device(at::kMeta))), c10::ValueError,
                     "Mean.update: weight is on meta but the metric's state is on cpu; move the metric with .to(meta)");
  EXPECT_THROWS_WITH(mean.update(at::ones({2}, at::TensorOptions().device(at::kMeta)), floats({1, 1})),
                     c10::ValueError,
                     "Mean.update: value is on meta, weight on cpu; every input must be on the metric's device, cpu");
  EXPECT_THROWS_WITH(mean.update(at::ones({2}, at::TensorOptions().device(at::kMeta)), floats({1, 1, 1})),
                     c10::ValueError, "value is on meta, weight on cpu");  // before the shapes are compared
  EXPECT_TRUE(states_equal(mean.state_dict(), before));
  EXPECT_EQ(mean.update_count(), 1);
}

TEST(AggregationBadInput, ComputeReadsTheCountAndTallyBackInOneCopy) {
  // one HostRead, on the CPU too, where the copy dispatches nothing (on a GPU it waits); no item()
  for (const auto policy : {NanPolicy::warn(), NanPolicy::ignore(), NanPolicy::disable()}) {
    Mean mean(AggregationOptions().nan_policy(policy));
    mean.update(floats({1, 2}));
    SyncCounter counter;
    const auto value = mean.compute();
    EXPECT_EQ(counter.by_op(), (std::map<std::string, int64_t>{{"Tensor.cpu", 1}})) << counter.summary();
    EXPECT_DOUBLE_EQ(value.item<double>(), 1.5);
  }
}

TEST(AggregationBadInput, ReportsSpeakOfOneEntryInTheSingularAndOfNoneClearly) {
  Mean mean(AggregationOptions().nan_policy(NanPolicy::ignore()));
  EXPECT_EQ(mean.bad_input_report().message("Mean"), "Mean: no bad input");
  Mean counting;
  counting.update(floats({kNaN, 1}), floats({1, std::numeric_limits<double>::infinity()}));
  EXPECT_EQ(counting.bad_input_report().message("Mean"),
            "Mean: 1 NaN value, 1 infinite weight in 1 update, first at update 0 (kept out of the state)");
  Mean on_meta(AggregationOptions().device(at::kMeta));
  EXPECT_THROWS_WITH(on_meta.update_count(), c10::ValueError, "Mean.update_count: the state is on meta");
}

TEST(Aggregation, AHostValueTakesAWeightTensorAsTorchMetricsDoes) {
  // TorchMetrics makes the value a 0-dim tensor; the weight must broadcast to it
  for (const bool aten : {false, true}) {
    std::unique_ptr<ForceAtenPath> force;
    if (aten) force = std::make_unique<ForceAtenPath>();
    Mean mean;
    mean.update(1.5, at::full({}, 2.0));
    mean.update(3.0, at::full({}, 1.0));
    SyncCounter counter;
    mean.update(std::numeric_limits<double>::quiet_NaN(), at::full({}, 4.0));
    EXPECT_EQ(counter.total(), 0) << counter.summary();
    EXPECT_EQ(mean.bad_input_report().counts[0].second, 1);
    EXPECT_DOUBLE_EQ(mean.value().item<double>(), 2.0);
  }
}

TEST(AggregationBadInput, OptionsAndStateDicts) {
  EXPECT_THROWS_WITH(Max(AggregationOptions().dtype(at::kHalf)), c10::TypeError,
                     "Max: dtype must be float64 or float32, got Half");
  Mean mean;
  mean.update(1.0);
  const auto before = mean.state_dict();
  auto bad = before;
  bad["total"] = at::zeros({3}, at::kDouble);
  EXPECT_THROWS_WITH(mean.load_state_dict(bad), c10::ValueError, "Mean.load_state_dict: 'total' must be Double[2]");
  bad = before;
  bad.erase("compensation");
  EXPECT_THROWS_WITH(mean.load_state_dict(bad), c10::ValueError, "Mean.load_state_dict: missing key 'compensation'");
  EXPECT_TRUE(states_equal(mean.state_dict(), before));
  Sum sum;
  EXPECT_THROWS_WITH(mean.merge(sum), c10::TypeError, "Mean.merge: cannot merge a Sum into a Mean");
  Mean no_tally(AggregationOptions().nan_policy(NanPolicy::ignore()));
  EXPECT_THROWS_WITH(mean.merge(no_tally), c10::ValueError,
                     "Mean.merge: the other metric has other options or state: 'Mean(nan_strategy=warn, dtype=Double)' "
                     "against 'Mean(nan_strategy=ignore, dtype=Double)' there");
  Mean replace_by_1(AggregationOptions().nan_policy(NanPolicy::replace(1.0)));
  Mean replace_by_2(AggregationOptions().nan_policy(NanPolicy::replace(2.0)));
  EXPECT_THROWS_WITH(replace_by_1.merge(replace_by_2), c10::ValueError, "nan_strategy=2");
}

TEST(Aggregation, ForwardReturnsTheBatchValueAndAccumulates) {
  Mean mean;
  mean.update(floats({10}));
  EXPECT_DOUBLE_EQ(value_of(mean.forward(floats({1, 3}))), 2.0);
  EXPECT_DOUBLE_EQ(value_of(mean.compute()), 14.0 / 3.0);
  EXPECT_EQ(mean.update_count(), 2);
  Max max;
  EXPECT_EQ(value_of(max.forward(-2.0)), -2.0);
  EXPECT_EQ(value_of(max.forward(floats({-5}))), -5.0);
  EXPECT_EQ(value_of(max.compute()), -2.0);
}

TEST(Aggregation, ForwardKeepsUpdateIndicesOfTheWholeStream) {
  Mean mean;
  mean.update(1.0);
  mean.update(2.0);
  WarningCapture quiet;
  mean.forward(floats({kNaN}));
  EXPECT_EQ(mean.bad_input_report().first_bad_update, 2);
}

TEST(Aggregation, MovesBetweenDevicesWithTo) {
  Mean mean;
  mean.update(floats({1, 3}));
  mean.to(at::kCPU);
  EXPECT_EQ(mean.device(), at::Device(at::kCPU));
  EXPECT_DOUBLE_EQ(value_of(mean.compute()), 2.0);
}

// ---------------------------------------------------------------- CPU kernels vs brute force

using detail::cpu::Isa;
using detail::cpu::NanMode;

const std::vector<int64_t> kLengths = {0, 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 255, 256};

std::vector<Isa> vector_isas() {
  std::vector<Isa> isas;
  for (auto isa : {Isa::Avx2, Isa::Avx512}) {
    if (detail::cpu::isa_available(isa)) isas.push_back(isa);
  }
  return isas;
}

// Normal values; trial 1 adds NaNs, trial 2 NaNs and infinities of both signs, trial 3 +inf only.
at::Tensor kernel_input(int64_t n, int trial, at::ScalarType dtype, at::Generator& gen) {
  auto x = at::randn({n}, gen, at::kDouble);
  auto* p = x.data_ptr<double>();
  for (int64_t i = 0; i < n; ++i) {
    if (trial >= 1 && i % 5 == 3) p[i] = kNaN;
    if (trial == 2 && i % 7 == 1) p[i] = i % 2 ? kInf : -kInf;
    if (trial == 3 && i % 9 == 4) p[i] = kInf;
  }
  return x.to(dtype);
}

// What the sum of one block must be: every position in long double, in order; and its NaN count.
struct BruteBlockSum {
  double sum;
  int64_t nans;
};
BruteBlockSum brute_block_sum(const at::Tensor& x, double w, NanMode mode, double replacement) {
  const auto values = x.to(at::kDouble);
  const auto* p = values.data_ptr<double>();
  long double sum = 0.0L;
  int64_t nans = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const bool nan = std::isnan(p[i]) && mode != NanMode::Keep;
    nans += nan;
    if (!nan) sum += static_cast<long double>(p[i]) * w;
    if (nan && mode == NanMode::Replace) sum += replacement;
  }
  return {static_cast<double>(sum), nans};
}

double magnitude(const at::Tensor& x, double w) {
  const auto finite = x.to(at::kDouble).nan_to_num(0.0, 0.0, 0.0);
  return finite.abs().sum().item<double>() * std::abs(w) + 1.0;
}

TEST(AggregationKernels, BlockSumMatchesBruteForceOnEveryLengthModeAndIsa) {
  auto gen = generator(11);
  for (auto isa : vector_isas()) {
    for (auto dtype : {at::kFloat, at::kDouble}) {
      for (int64_t n : kLengths) {
        for (int trial = 0; trial < 4; ++trial) {
          const auto x = kernel_input(n, trial, dtype, gen);
          for (auto mode : {NanMode::Keep, NanMode::Drop, NanMode::Replace}) {
            for (double w : {1.0, 0.25, -3.0, 0.0}) {
              const auto expected = brute_block_sum(x, w, mode, 2.5);
              const auto block = dtype == at::kFloat ? sum_block(x.data_ptr<float>(), n, w, mode, 2.5, isa)
                                                     : sum_block(x.data_ptr<double>(), n, w, mode, 2.5, isa);
              const BruteBlockSum got{block.sum.value(), block.nans};
              const auto where = ::testing::Message() << "isa=" << static_cast<int>(isa) << " dtype=" << dtype
                                                      << " n=" << n << " trial=" << trial << " w=" << w
                                                      << " mode=" << static_cast<int>(mode);
              EXPECT_EQ(got.nans, expected.nans) << where;
              if (std::isfinite(expected.sum)) {
                EXPECT_NEAR(got.sum, expected.sum, 1e-15 * magnitude(x, w)) << where;
              } else {
                EXPECT_TRUE(got.sum == expected.sum || (std::isnan(got.sum) && std::isnan(expected.sum)))
                    << where << ": " << got.sum << " vs " << expected.sum;
              }
            }
          }
        }
      }
    }
  }
}

// The exact sum, correctly rounded but where it falls half-way (Shewchuk's partials, as math.fsum
// without its half-way correction: the partials do not overlap, and are added smallest first).
double exact_sum(const double* x, int64_t n) {
  std::vector<double> partials;
  for (int64_t k = 0; k < n; ++k) {
    double v = x[k];
    size_t kept = 0;
    for (double y : partials) {
      if (std::abs(v) < std::abs(y)) std::swap(v, y);
      const double hi = v + y, lo = y - (hi - v);
      if (lo != 0.0) partials[kept++] = lo;
      v = hi;
    }
    partials.resize(kept);
    partials.push_back(v);
  }
  double sum = 0.0;
  for (const double p : partials) sum += p;
  return sum;
}

// The compensation itself: on values of 17 orders of magnitude, where a plain float64 sum misses
// the exact sum by more than a unit in the last place in most trials, a block's sum is within one.
TEST(AggregationKernels, BlockSumIsExactToTheLastPlace) {
  auto gen = generator(13);
  for (auto isa : vector_isas()) {
    for (int64_t n : {int64_t{33}, int64_t{100}, detail::cpu::kSumBlock}) {
      for (int trial = 0; trial < 20; ++trial) {
        const auto scale = at::pow(10.0, at::randint(-8, 9, {n}, gen, at::kDouble));
        const auto x = at::randn({n}, gen, at::kDouble) * scale;
        const auto* p = x.data_ptr<double>();
        const double exact = exact_sum(p, n);
        const double got = sum_block(p, n, 1.0, NanMode::Drop, 0.0, isa).sum.value();
        const double ulp = std::nextafter(std::abs(exact), INFINITY) - std::abs(exact);
        EXPECT_LE(std::abs(got - exact), ulp) << "isa=" << static_cast<int>(isa) << " n=" << n << " trial=" << trial;
      }
    }
  }
}

TEST(AggregationKernels, ExtremumMatchesBruteForceOnEveryLengthAndIsa) {
  auto gen = generator(12);
  auto lengths = kLengths;
  lengths.insert(lengths.end(), {127, 128, 129, 1000, 4099});
  for (auto isa : vector_isas()) {
    for (int64_t n : lengths) {
      for (int trial = 0; trial < 5; ++trial) {
        auto x = kernel_input(n, std::min(trial, 3), at::kFloat, gen);
        if (trial == 4) x.fill_(kNaN);
        const auto* p = x.data_ptr<float>();
        for (bool is_max : {false, true}) {
          float expected = is_max ? -INFINITY : INFINITY;
          int64_t nans = 0;
          for (int64_t i = 0; i < n; ++i) {
            nans += std::isnan(p[i]);
            if (!std::isnan(p[i])) expected = is_max ? std::max(expected, p[i]) : std::min(expected, p[i]);
          }
          const auto got = detail::cpu::extremum_values(p, n, is_max, isa);
          EXPECT_EQ(got.value, expected) << "isa=" << static_cast<int>(isa) << " n=" << n << " trial=" << trial;
          EXPECT_EQ(got.nans, nans) << "isa=" << static_cast<int>(isa) << " n=" << n << " trial=" << trial;
        }
      }
    }
  }
}

const std::vector<NanPolicy> kPolicies = {NanPolicy::error(), NanPolicy::warn(), NanPolicy::ignore(),
                                          NanPolicy::disable(), NanPolicy::replace(2.5)};

// The rules of one batch, position by position: a NaN value or weight, or an infinite weight, is
// bad; bad positions are counted by kind and dropped, or replaced (value r, weight 1).
detail::cpu::WeightedBatch brute_weighted_sum(const at::Tensor& x, const at::Tensor& w, const NanPolicy& policy) {
  const auto xs = x.to(at::kDouble), ws = w.to(at::kDouble);
  long double sx = 0.0L, sw = 0.0L;
  detail::cpu::WeightedBatch batch;
  for (int64_t i = 0; i < x.numel(); ++i) {
    double v = xs.data_ptr<double>()[i], u = ws.data_ptr<double>()[i];
    const bool nan = std::isnan(v) || std::isnan(u);
    if (policy.checks() && (nan || std::isinf(u))) {
      if (policy.strategy != NanStrategy::Replace) {
        batch.nan_positions += nan;
        batch.infinite_weights += !nan;
        continue;
      }
      v = policy.replacement, u = 1.0;
    }
    sx += static_cast<long double>(v) * u;
    sw += u;
  }
  batch.weighted_sum = {static_cast<double>(sx)};
  batch.weight_sum = {static_cast<double>(sw)};
  return batch;
}

void expect_same_sum(double got, double expected, double scale, const ::testing::Message& where) {
  if (std::isnan(expected)) {
    EXPECT_TRUE(std::isnan(got)) << where << ": " << got;
  } else if (std::isinf(expected)) {
    EXPECT_EQ(got, expected) << where;
  } else {
    EXPECT_NEAR(got, expected, 1e-14 * scale) << where;
  }
}

TEST(AggregationKernels, WeightedSumKeepsEveryPolicyWithHostAndTensorWeights) {
  auto gen = generator(13);
  for (int64_t n : {0, 1, 7, 8, 9, 31, 33, 257, 1000}) {
    for (int trial = 0; trial < 4; ++trial) {
      const auto x = kernel_input(n, trial, at::kFloat, gen);
      auto w = at::rand({n}, gen, at::kDouble) * 4 - 1;  // negative weights are valid
      if (n > 4) w[1] = kNaN, w[2] = kInf, w[3] = -kInf;
      for (const auto& policy : kPolicies) {
        for (double scalar : {1.0, 0.5, kNaN, kInf}) {
          const auto where = ::testing::Message() << "n=" << n << " trial=" << trial << " weight=" << scalar
                                                  << " policy=" << static_cast<int>(policy.strategy);
          const auto got = detail::cpu::weighted_sum(x, nullptr, scalar, policy);
          const auto expected = brute_weighted_sum(x, at::full({n}, scalar, at::kDouble), policy);
          const double scale = std::isfinite(scalar) ? scalar : 1.0;
          expect_same_sum(got.weighted_sum.value(), expected.weighted_sum.sum, magnitude(x, scale), where);
          expect_same_sum(got.weight_sum.value(), expected.weight_sum.sum, n * scale + 1, where);
          EXPECT_EQ(got.nan_positions, expected.nan_positions) << where;
          EXPECT_EQ(got.infinite_weights, expected.infinite_weights) << where;
        }
        const auto got = detail::cpu::weighted_sum(x, &w, 1.0, policy);
        const auto expected = brute_weighted_sum(x, w, policy);
        expect_same_sum(got.weighted_sum.value(), expected.weighted_sum.sum, magnitude(x, 4.0) * n,
                        ::testing::Message() << n);
        EXPECT_EQ(got.nan_positions, expected.nan_positions);
        EXPECT_EQ(got.infinite_weights, expected.infinite_weights);
      }
    }
  }
}

TEST(AggregationKernels, ExtremumKeepsEveryPolicyForFloat32AndFloat64) {
  auto gen = generator(14);
  for (int64_t n : {1, 7, 8, 9, 31, 33, 1000}) {
    for (int trial = 0; trial < 3; ++trial) {
      for (auto dtype : {at::kFloat, at::kDouble}) {
        const auto x = kernel_input(n, trial, dtype, gen);
        const auto xs = x.to(at::kDouble);
        for (const auto& policy : kPolicies) {
          for (bool is_max : {false, true}) {
            double expected = is_max ? -kInf : kInf;
            int64_t nans = 0;
            for (int64_t i = 0; i < n; ++i) {
              double v = xs.data_ptr<double>()[i];
              nans += std::isnan(v);
              if (std::isnan(v) && policy.strategy == NanStrategy::Replace) v = policy.replacement;
              if (!std::isnan(v)) expected = is_max ? std::max(expected, v) : std::min(expected, v);
            }
            const auto got = detail::cpu::extremum(x, is_max, policy);
            const auto where = ::testing::Message() << "n=" << n << " trial=" << trial << " dtype=" << dtype
                                                    << " policy=" << static_cast<int>(policy.strategy);
            EXPECT_EQ(got.value, expected) << where;
            EXPECT_EQ(got.saw_nan, !policy.checks() && nans > 0) << where;
            EXPECT_EQ(got.nan_positions, policy.drops() ? nans : 0) << where;
          }
        }
      }
    }
  }
}

// ---------------------------------------------------------------- contract cases

template <typename M>
testing::ContractCase weighted_case(const std::string& name, NanPolicy policy, bool with_nans) {
  return {name, [policy] { return std::make_unique<M>(AggregationOptions().nan_policy(policy)); },
          [with_nans](Metric& metric, int64_t i) {
            Recorded ignored;
            mixed_batch(i, ignored, [&](const ValueArg& x, const ValueArg& w) {
              auto& m = static_cast<M&>(metric);
              if (with_nans && i == 2) return m.update(kNaN, w);
              if (with_nans && i == 5 && x.is_tensor()) return m.update(x.tensor().clone().fill_(kNaN), w);
              m.update(x, w);
            });
          },
          8};
}

template <typename M>
testing::ContractCase extremum_case(const std::string& name, NanPolicy policy, bool with_nans) {
  return {name, [policy] { return std::make_unique<M>(AggregationOptions().nan_policy(policy)); },
          [with_nans](Metric& metric, int64_t i) {
            Recorded ignored;
            mixed_batch(i, ignored, [&](const ValueArg& x, const ValueArg&) {
              auto& m = static_cast<M&>(metric);
              if (with_nans && i == 2) return m.update(kNaN);
              m.update(x);
            });
          },
          8};
}

std::vector<testing::ContractCase> aggregation_cases() {
  const std::vector<std::pair<std::string, NanPolicy>> policies = {{"Error", NanPolicy::error()},
                                                                   {"Warn", NanPolicy::warn()},
                                                                   {"Ignore", NanPolicy::ignore()},
                                                                   {"Disable", NanPolicy::disable()},
                                                                   {"Replace", NanPolicy::replace(0.5)}};
  std::vector<testing::ContractCase> cases;
  for (const auto& [label, policy] : policies) {
    const bool nans = policy.strategy != NanStrategy::Error;
    cases.push_back(weighted_case<Mean>("Mean" + label, policy, nans));
    cases.push_back(weighted_case<Sum>("Sum" + label, policy, nans));
    cases.push_back(extremum_case<Min>("Min" + label, policy, nans));
    cases.push_back(extremum_case<Max>("Max" + label, policy, nans));
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Aggregation, MetricContract, ::testing::ValuesIn(aggregation_cases()),
                         testing::contract_case_name);

}  // namespace
}  // namespace metrics
