#include "metric_contract.h"

#include <metrics/backend.h>
#include <metrics/sync_counter.h>
#include <metrics/warning_capture.h>

#include "test_support.h"

namespace metrics::testing {
namespace {

std::unique_ptr<Metric> fed(const ContractCase& c, int64_t from, int64_t to) {
  auto metric = c.make();
  for (int64_t i = from; i < to; ++i) c.update(*metric, i);
  return metric;
}

void expect_same_bad_input(const Metric& a, const Metric& b) {
  const auto ra = a.input_report();
  const auto rb = b.input_report();
  EXPECT_EQ(ra.counts, rb.counts);
  EXPECT_EQ(ra.bad_updates, rb.bad_updates);
}

TEST_P(MetricContract, SplitStreamMergedEqualsSingleStream) {
  const auto& c = GetParam();
  WarningCapture quiet;
  const auto single = fed(c, 0, c.batches);
  std::vector<std::unique_ptr<Metric>> parts;
  for (int k = 0; k < 3; ++k) parts.push_back(c.make());
  for (int64_t i = 0; i < c.batches; ++i) c.update(*parts[i % 3], i);
  parts[0]->merge(*parts[1]);
  parts[0]->merge(*parts[2]);
  EXPECT_TRUE(tensors_close(parts[0]->compute(), single->compute(), 1e-9));
  EXPECT_EQ(parts[0]->update_count(), single->update_count());
  expect_same_bad_input(*parts[0], *single);
}

TEST_P(MetricContract, ComputeIsIdempotentAndLeavesStateAlone) {
  const auto& c = GetParam();
  WarningCapture quiet;
  const auto metric = fed(c, 0, c.batches);
  const auto before = metric->state_dict();
  const auto first = metric->compute();
  const auto second = metric->compute();
  EXPECT_TRUE(tensors_close(first, second, 0.0, 0.0));
  EXPECT_EQ(first.device(), metric->device());
  EXPECT_TRUE(states_equal(metric->state_dict(), before));
}

TEST_P(MetricContract, StateDictRoundTripsExactly) {
  const auto& c = GetParam();
  WarningCapture quiet;
  const auto metric = fed(c, 0, c.batches - 1);
  auto restored = c.make();
  restored->load_state_dict(metric->state_dict());
  EXPECT_TRUE(states_equal(restored->state_dict(), metric->state_dict()));
  EXPECT_TRUE(tensors_close(restored->compute(), metric->compute(), 0.0, 0.0));
  c.update(*metric, c.batches - 1);
  c.update(*restored, c.batches - 1);
  EXPECT_TRUE(states_equal(restored->state_dict(), metric->state_dict()));
}

TEST_P(MetricContract, CloneIsIndependent) {
  const auto& c = GetParam();
  WarningCapture quiet;
  const auto metric = fed(c, 0, 2);
  const auto copy = metric->clone();
  const auto before = metric->state_dict();
  for (int64_t i = 2; i < c.batches; ++i) c.update(*copy, i);
  EXPECT_TRUE(states_equal(metric->state_dict(), before));
  EXPECT_TRUE(tensors_close(copy->compute(), fed(c, 0, c.batches)->compute(), 0.0, 0.0));
  c.update(*metric, 2);
  EXPECT_TRUE(states_equal(copy->state_dict(), fed(c, 0, c.batches)->state_dict()));
}

TEST_P(MetricContract, MergeLeavesOtherUnchanged) {
  const auto& c = GetParam();
  WarningCapture quiet;
  const auto a = fed(c, 0, 3);
  const auto b = fed(c, 3, c.batches);
  const auto before = b->state_dict();
  a->merge(*b);
  EXPECT_TRUE(states_equal(b->state_dict(), before));
}

TEST_P(MetricContract, ResetRestoresInitialState) {
  const auto& c = GetParam();
  WarningCapture quiet;
  const auto metric = fed(c, 0, c.batches);
  metric->reset();
  EXPECT_TRUE(states_equal(metric->state_dict(), c.make()->state_dict()));
  EXPECT_EQ(metric->update_count(), 0);
}

void expect_sync_free_updates(const ContractCase& c) {
  const auto metric = c.make();
  for (int64_t i = 0; i < c.batches; ++i) {
    SyncCounter counter;
    c.update(*metric, i);
    EXPECT_EQ(counter.total(), 0) << "batch " << i << ": " << counter.summary();
  }
}

TEST_P(MetricContract, UpdateHasNoSyncClassOpsOnCpuFastPath) { expect_sync_free_updates(GetParam()); }

TEST_P(MetricContract, UpdateHasNoSyncClassOpsOnAtenPath) {
  ForceAtenPath aten;
  expect_sync_free_updates(GetParam());
}

TEST_P(MetricContract, StrictCounterLetsEveryUpdateRun) {
  const auto& c = GetParam();
  const auto metric = c.make();
  {
    SyncCounter strict(SyncCounterOptions().strict(true));
    for (int64_t i = 0; i < c.batches; ++i) EXPECT_NO_THROW(c.update(*metric, i));
  }
  WarningCapture quiet;
  EXPECT_TRUE(states_equal(metric->state_dict(), fed(c, 0, c.batches)->state_dict()));
}

TEST_P(MetricContract, AtenPathAgreesWithCpuFastPath) {
  const auto& c = GetParam();
  WarningCapture quiet;
  const auto fast = fed(c, 0, c.batches);
  std::unique_ptr<Metric> aten;
  {
    ForceAtenPath force;
    aten = fed(c, 0, c.batches);
  }
  EXPECT_TRUE(states_equal(aten->state_dict(), fast->state_dict(), 1e-12));
  EXPECT_TRUE(tensors_close(aten->compute(), fast->compute(), 1e-12));
}

}  // namespace
}  // namespace metrics::testing
