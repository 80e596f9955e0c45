#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <torch/version.h>

#include <thread>

#include <metrics/aggregation.h>
#include <metrics/sync_counter.h>

#include "test_support.h"

namespace metrics {
namespace {

using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

// Zero means something only if the counter sees the patterns it exists to catch.

TEST(SyncCounter, CountsItem) {
  const auto x = at::arange(4.0);
  SyncCounter counter;
  (void)x.sum().item<double>();
  EXPECT_EQ(counter.total(), 1);  // item() and the _local_scalar_dense inside it: one call
  EXPECT_THAT(counter.by_op(), UnorderedElementsAre(Pair("aten::item", 1)));
}

TEST(SyncCounter, CountsBooleanIndexing) {
  const auto x = at::arange(-2.0, 2.0);
  SyncCounter counter;
  const auto positive = x.index({x > 0});
  EXPECT_EQ(positive.numel(), 1);
  EXPECT_THAT(counter.by_op(), UnorderedElementsAre(Pair("aten::nonzero", 1)));
}

TEST(SyncCounter, CountsBincountOnce) {
  const auto labels = at::arange(6) % 3;
  SyncCounter counter;
  (void)at::bincount(labels);
  EXPECT_THAT(counter.by_op(), UnorderedElementsAre(Pair("aten::bincount", 1)));
}

TEST(SyncCounter, CountsUnique) {
  const auto x = at::arange(6) % 3;
  SyncCounter counter;
  (void)at::_unique2(x);
  EXPECT_THAT(counter.by_op(), UnorderedElementsAre(Pair("aten::_unique2", 1)));
}

TEST(SyncCounter, CountsATensorMadeFromADouble) {
  SyncCounter counter;
  (void)at::scalar_tensor(1.5);
  EXPECT_THAT(counter.by_op(), UnorderedElementsAre(Pair("aten::scalar_tensor", 1)));
}

TEST(SyncCounter, CountsWhereWithAScalarArgument) {  // a host scalar becomes a tensor inside where()
  const auto x = at::arange(3.0);
  SyncCounter counter;
  (void)at::where(x > 1, at::Scalar(0.0), x);
  EXPECT_THAT(counter.by_op(), UnorderedElementsAre(Pair("aten::scalar_tensor", 1)));
}

TEST(SyncCounter, CountsBranchingOnATensor) {
  const auto flag = at::ones({});
  SyncCounter counter;
  EXPECT_TRUE(flag.is_nonzero());
  EXPECT_THAT(counter.by_op(), UnorderedElementsAre(Pair("aten::is_nonzero", 1)));
}

TEST(SyncCounter, CountsEqualAndAllclose) {
  const auto x = at::arange(3.0);
  SyncCounter counter;
  EXPECT_TRUE(at::equal(x, x));
  EXPECT_TRUE(at::allclose(x, x));
  EXPECT_THAT(counter.by_op(), UnorderedElementsAre(Pair("aten::equal", 1), Pair("aten::allclose", 1)));
}

TEST(SyncCounter, CountsRepeatInterleaveOnlyWithoutOutputSize) {
  const auto repeats = at::arange(1, 3);
  SyncCounter counter;
  (void)at::repeat_interleave(repeats);
  EXPECT_EQ(counter.total(), 1);
  (void)at::repeat_interleave(repeats, /*output_size=*/c10::optional<int64_t>(3));
  EXPECT_EQ(counter.total(), 1);
  (void)at::repeat_interleave(repeats, int64_t{2});
#if TORCH_VERSION_MAJOR >= 2
  EXPECT_EQ(counter.total(), 1);  // PyTorch 2 sizes the int-repeats overload without a read-back
#else
  EXPECT_EQ(counter.total(), 2);  // torch 1.13 sizes it by item()
#endif
}

TEST(SyncCounter, CountsHistcOnlyWithEqualBounds) {
  const auto x = at::arange(4.0);
  SyncCounter counter;
  (void)at::histc(x, 4, 0, 0);
  EXPECT_EQ(counter.total(), 1);
  (void)at::histc(x, 4, 0, 4);
  EXPECT_EQ(counter.total(), 1);
}

TEST(SyncCounter, CountsCopiesBetweenDevicesOnly) {
  const auto x = at::arange(3.0);
  SyncCounter counter;
  (void)x.to(at::kDouble);           // same device: not a sync
  (void)x.clone();
  EXPECT_EQ(counter.total(), 0);
  (void)x.to(at::Device(at::kMeta));  // CPU -> another device
  EXPECT_THAT(counter.by_op(), UnorderedElementsAre(Pair("aten::copy_", 1)));
}

TEST(SyncCounter, IgnoresOpsThatStayOnTheDevice) {
  const auto x = at::randn({16});
  SyncCounter counter;
  auto y = at::where(x > 0, x, at::zeros_like(x));
  y = y.masked_fill(at::isnan(y), 0.0).add(1.5).mul(2.0);
  (void)y.sum();
  (void)at::index_add(at::zeros({4}), 0, at::arange(16) % 4, x);
  EXPECT_EQ(counter.total(), 0) << counter.summary();
}

TEST(SyncCounter, CountsOnlyWhileAliveAndNests) {
  const auto x = at::arange(3.0);
  (void)x.sum().item<double>();
  SyncCounter outer;
  {
    SyncCounter inner;
    (void)x.sum().item<double>();
    EXPECT_EQ(inner.total(), 1);
  }
  (void)at::bincount(at::arange(3));
  EXPECT_EQ(outer.total(), 2);
  EXPECT_EQ(outer.summary(), "2 sync-class ops: aten::bincount x1, aten::item x1");
}

TEST(SyncCounter, OurUpdatesCountZero) {
  Mean mean;
  SyncCounter counter;
  mean.update(at::randn({8}), at::rand({8}));
  mean.update(2.5, 0.5);
  EXPECT_EQ(counter.total(), 0) << counter.summary();
}

TEST(SyncCounter, ListsAndExplainsItsOps) {
  std::vector<std::string> names;
  for (const auto& op : sync_class_ops()) {
    names.emplace_back(op.name);
    EXPECT_GT(std::string(op.why).size(), 10u) << op.name;
  }
  for (const char* expected : {"aten::_local_scalar_dense", "aten::item", "aten::is_nonzero", "aten::nonzero",
                               "aten::_unique2", "aten::bincount", "aten::histc", "aten::equal", "aten::allclose",
                               "aten::repeat_interleave", "aten::lift_fresh", "aten::scalar_tensor", "aten::copy_"}) {
    EXPECT_THAT(names, ::testing::Contains(std::string(expected)));
  }
}

TEST(SyncCounterStrict, ThrowsAtTheOpNamingItAndTheMetricCall) {
  const auto x = at::arange(3.0);
  SyncCounter strict(SyncCounterOptions().strict(true));
  EXPECT_THROWS_WITH((void)x.sum().item<double>(), c10::Error,
                     "SyncCounter (strict): aten::item is a sync-class op, outside any metric call");
  {
    RECORD_USER_SCOPE("metrics::Example::update");
    EXPECT_THROWS_WITH((void)x.index({x > 0}), c10::Error,
                       "aten::nonzero is a sync-class op, inside metrics::Example::update");
  }
  EXPECT_EQ(strict.total(), 2);
}

TEST(SyncCounterStrict, LetsOtherOpsRunAndEndsWithItsScope) {
  const auto x = at::arange(4.0);
  {
    SyncCounter strict(SyncCounterOptions().strict(true));
    const auto y = (x * 2).add_(1).sum();
    EXPECT_EQ(strict.total(), 0);
    (void)y;
  }
  EXPECT_DOUBLE_EQ(x.sum().item<double>(), 6.0);  // no longer strict
}

TEST(SyncCounter, AllThreadsCountsTheOpsOfOtherThreads) {
  SyncCounter here;
  {
    SyncCounter everywhere(SyncCounterOptions().all_threads(true));
    std::thread([] { (void)at::ones({}).item<double>(); }).join();
    (void)at::bincount(at::arange(3));
    EXPECT_THAT(everywhere.by_op(), UnorderedElementsAre(Pair("aten::item", 1), Pair("aten::bincount", 1)));
  }
  std::thread([] { (void)at::ones({}).item<double>(); }).join();
  EXPECT_THAT(here.by_op(), UnorderedElementsAre(Pair("aten::bincount", 1)));
}

TEST(SyncCounter, AllThreadsRefusesStrict) {
  EXPECT_THROWS_WITH(SyncCounter(SyncCounterOptions().strict(true).all_threads(true)), c10::ValueError,
                     "strict and all_threads cannot be combined");
}

TEST(HostRead, CountsOnceAndHidesTheOpsItRuns) {
  SyncCounter here;
  SyncCounter everywhere(SyncCounterOptions().all_threads(true));
  {
    HostRead read("Tensor.tolist");
    (void)at::ones({}).item<double>();
  }
  EXPECT_THAT(here.by_op(), UnorderedElementsAre(Pair("Tensor.tolist", 1)));
  EXPECT_THAT(everywhere.by_op(), UnorderedElementsAre(Pair("Tensor.tolist", 1)));
}

TEST(HostRead, ThrowsInStrictModeNamingTheRead) {
  SyncCounter strict(SyncCounterOptions().strict(true));
  EXPECT_THROWS_WITH(HostRead("Tensor.numpy"), c10::Error,
                     "SyncCounter (strict): Tensor.numpy reads tensor data on the host, a sync on an accelerator");
  EXPECT_EQ(strict.total(), 1);
}

TEST(SyncCounter, CudaSyncDebugCountsNothingWithoutCuda) {
  SyncCounter counter(SyncCounterOptions().cuda_sync_debug(true));
  (void)at::arange(3.0).sum().item<double>();
  EXPECT_EQ(counter.cuda_syncs(), 0);
  EXPECT_EQ(counter.total(), 1);
}

}  // namespace
}  // namespace metrics
