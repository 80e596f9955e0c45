// Cross-process sync, with each rank in its own thread and a gloo group per rank over loopback.

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/version.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <functional>
#include <thread>

#include <metrics/aggregation.h>
#include <metrics/classification.h>
#include <metrics/collection.h>
#include <metrics/distributed.h>
#include <metrics/warning_capture.h>

#include "test_support.h"

namespace metrics {
namespace {

using testing::generator;
using testing::tensors_close;
using Opts = ClassificationOptions;

// A gloo group of `world` ranks over a FileStore at `path`. PyTorch 2 splits a group into a
// ProcessGroup and its backends; 1.x's ProcessGroupGloo is the group itself.
c10::intrusive_ptr<c10d::ProcessGroup> gloo_group(const std::string& path, int rank, int world) {
  auto store = c10::make_intrusive<c10d::FileStore>(path, world);
  auto options = c10d::ProcessGroupGloo::Options::create();
  options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  auto gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world, options);
#if TORCH_VERSION_MAJOR >= 2
  auto group = c10::make_intrusive<c10d::ProcessGroup>(store, rank, world);
  group->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, gloo);
  group->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
  return group;
#else
  return gloo;
#endif
}

// Runs `body(rank, group)` on `world` threads, one gloo group each; returns each rank's error text
// ("" when it returned normally).
std::vector<std::string> on_ranks(int world, const std::function<void(int, c10d::ProcessGroup&)>& body) {
  static int stores = 0;
  const auto path = ::testing::TempDir() + "metrics_store_" + std::to_string(getpid()) + "_" + std::to_string(stores++);
  std::vector<std::string> errors(world);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      const auto group = gloo_group(path, rank, world);
      try {
        WarningCapture quiet;
        body(rank, *group);
      } catch (const c10::Error& e) {
        errors[rank] = e.what_without_backtrace();
      }
    });
  }
  for (auto& t : threads) t.join();
  std::remove(path.c_str());
  return errors;
}

struct Batch {
  at::Tensor loss, preds, target;
};

Batch batch(int64_t i) {
  auto gen = generator(700 + i);
  const auto n = 5 + 3 * i;
  return {at::randn({n}, gen).to(at::kDouble), at::randn({n, 4}, gen), at::randint(4, {n}, gen, at::kLong)};
}

MetricCollection four(const Opts& o) {
  MetricCollection c;
  c.add("loss", Mean()).add("accuracy", Accuracy(o)).add("f1", F1Score(o)).add("confmat", ConfusionMatrix(o));
  return c;
}

void feed(MetricCollection& c, const Batch& b) {
  UpdateArgs args;
  args.keywords = {{"value", b.loss}, {"preds", b.preds}, {"target", b.target}};
  c.update(args);
}

TEST(Distributed, SyncedCollectionEqualsOneProcessOverTheUnionWithUnevenRanks) {
  const auto o = Opts::multiclass(4);
  auto whole = four(o);
  for (int64_t i = 0; i < 7; ++i) feed(whole, batch(i));
  const auto expected = whole.compute();
  std::vector<std::map<std::string, at::Tensor>> got(3);
  const auto errors = on_ranks(3, [&](int rank, c10d::ProcessGroup& group) {
    auto local = four(o);
    for (int64_t i = 0; i < 7; ++i) {
      if (rank < 2 && i % 2 == rank) feed(local, batch(i));  // rank 2 sees no batch at all
    }
    const auto before = local.state_dict();
    got[rank] = synced(local, group).compute();
    EXPECT_TRUE(testing::states_equal(local.state_dict(), before));  // local accumulation goes on
  });
  for (int rank = 0; rank < 3; ++rank) {
    ASSERT_EQ(errors[rank], "") << rank;
    for (const auto& [name, value] : expected) EXPECT_TRUE(tensors_close(got[rank].at(name), value)) << name;
  }
}

TEST(Distributed, SyncedMetricReducesCountsTallyAndExtremes) {
  std::vector<at::Tensor> maxima(2), means(2);
  std::vector<int64_t> counts(2);
  std::vector<BadInputReport> reports(2);
  const auto errors = on_ranks(2, [&](int rank, c10d::ProcessGroup& group) {
    Max max;
    Mean mean;
    max.update(rank == 0 ? at::tensor({1.0, 7.0}) : at::tensor({3.0}));
    mean.update(rank == 0 ? at::tensor({1.0, std::nan("")}) : at::tensor({4.0}));
    mean.update(2.0);
    maxima[rank] = synced(max, group)->compute();
    const auto global = synced(mean, group);
    means[rank] = global->value();
    counts[rank] = global->update_count();
    reports[rank] = global->bad_input_report();
  });
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_EQ(errors[rank], "");
    EXPECT_EQ(maxima[rank].item<double>(), 7.0);
    EXPECT_DOUBLE_EQ(means[rank].item<double>(), (1.0 + 2.0 + 4.0 + 2.0) / 4.0);
    EXPECT_EQ(counts[rank], 4);
    EXPECT_EQ(reports[rank].bad_updates, 1);
    EXPECT_EQ(reports[rank].first_bad_update, 0);
  }
}

TEST(Distributed, ANanExtremumOfAnyRankReachesEveryRank) {
  // (gloo's MIN and MAX drop a NaN that comes from rank 1 on)
  const auto disabled = AggregationOptions().nan_policy(NanPolicy::disable());
  for (int nan_rank = 0; nan_rank < 3; ++nan_rank) {
    std::vector<double> maxima(3), minima(3);
    const auto errors = on_ranks(3, [&](int rank, c10d::ProcessGroup& group) {
      Max max(disabled);
      Min min(disabled);
      const auto value = at::tensor({rank == nan_rank ? std::nan("") : 1.0 + rank}, at::kDouble);
      max.update(value);
      min.update(value);
      maxima[rank] = synced(max, group)->compute().item<double>();
      minima[rank] = synced(min, group)->compute().item<double>();
    });
    for (int rank = 0; rank < 3; ++rank) {
      ASSERT_EQ(errors[rank], "");
      EXPECT_TRUE(std::isnan(maxima[rank])) << nan_rank << " " << rank;
      EXPECT_TRUE(std::isnan(minima[rank])) << nan_rank << " " << rank;
    }
  }
}

TEST(Distributed, PackedStateCarriesNanInFloatingExtremesOnly) {
  const double nan = std::nan("");
  const std::vector<StateEntry> entries{
      {"max_value", at::tensor({nan, 2.0, -std::numeric_limits<double>::infinity()}, at::kDouble), 0, Reduction::Max},
      {"min_value", at::tensor({nan, 3.0}, at::kFloat), 0, Reduction::Min},
      {"first", at::tensor({int64_t{5}}, at::kLong), 0, Reduction::Min},
      {"total", at::tensor({nan, 1.0}, at::kDouble), 0, Reduction::Sum}};
  PackedState packed(entries);
  // the floating Min and Max buffers carry a flag per value after their values; the others are as they were
  std::vector<int64_t> sizes;
  for (const auto& b : packed.buffers()) sizes.push_back(b.tensor.numel());
  EXPECT_EQ(sizes, (std::vector<int64_t>{6, 4, 1, 2}));
  const auto max_buffer = packed.buffers()[0].tensor;
  EXPECT_TRUE(at::equal(max_buffer.narrow(0, 3, 3), at::tensor({1.0, 0.0, 0.0}, at::kDouble)));
  EXPECT_EQ(max_buffer[0].item<double>(), -std::numeric_limits<double>::infinity());  // max's identity
  EXPECT_EQ(packed.buffers()[1].tensor[2].item<float>(), -1.0f);  // min's flag
  const auto unpacked = packed.unpack();
  for (const auto& entry : entries) {
    EXPECT_TRUE(at::allclose(unpacked.at(entry.name), entry.tensor, 0, 0, /*equal_nan=*/true)) << entry.name;
  }
}

TEST(Distributed, SamplewiseRowsAreGatheredInRankOrder) {
  // rank r holds samples of batch r (rank 2 none): the synced metric has every rank's rows in order
  const auto o = Opts::multiclass(4).multidim_average(MultidimAverage::Samplewise);
  const auto sample_batch = [](int64_t i) {
    auto gen = generator(900 + i);
    return std::pair{at::randn({2 + i, 4, 3}, gen), at::randint(4, {2 + i, 3}, gen, at::kLong)};
  };
  Recall whole(o);
  for (int64_t i = 0; i < 2; ++i) whole.update(sample_batch(i).first, sample_batch(i).second);
  const auto expected = whole.compute();
  std::vector<at::Tensor> got(3);
  const auto errors = on_ranks(3, [&](int rank, c10d::ProcessGroup& group) {
    Recall local(o);
    if (rank < 2) local.update(sample_batch(rank).first, sample_batch(rank).second);
    got[rank] = synced(local, group)->compute();
  });
  ASSERT_EQ(expected.size(0), 5);
  for (int rank = 0; rank < 3; ++rank) {
    ASSERT_EQ(errors[rank], "") << rank;
    EXPECT_TRUE(tensors_close(got[rank], expected)) << rank;
  }
}

TEST(Distributed, RanksWithDifferentMetricsAllRaiseNamingTheFirstDifference) {
  const auto errors = on_ranks(2, [&](int rank, c10d::ProcessGroup& group) {
    Accuracy accuracy(Opts::multiclass(4).average(rank == 0 ? Average::Macro : Average::Micro));
    synced(accuracy, group);
  });
  for (const auto& error : errors) {
    EXPECT_THAT(error, ::testing::HasSubstr("MulticlassAccuracy.sync: every rank must hold the same metrics, but "
                                            "rank 0 has 'MulticlassAccuracy(num_classes=4, top_k=1, average=macro"));
    EXPECT_THAT(error, ::testing::HasSubstr("average=micro"));
    EXPECT_THAT(error, ::testing::HasSubstr("on rank 1"));
  }
}

TEST(Distributed, PackedStateHasOneBufferPerReductionAndDtype) {
  const auto collection = four(Opts::multiclass(4));
  const PackedState packed(collection.state_entries());
  std::vector<std::pair<Reduction, at::ScalarType>> kinds;
  for (const auto& b : packed.buffers()) kinds.emplace_back(b.reduction, b.tensor.scalar_type());
  // the mean counts in float64 (its update count and tally pack with its totals), the rest in int64
  EXPECT_THAT(kinds, ::testing::ElementsAre(std::make_pair(Reduction::Sum, at::kDouble),
                                            std::make_pair(Reduction::Min, at::kDouble),
                                            std::make_pair(Reduction::Sum, at::kLong),
                                            std::make_pair(Reduction::Min, at::kLong)));
  const auto unpacked = packed.unpack();
  for (const auto& entry : collection.state_entries()) {
    EXPECT_TRUE(tensors_close(unpacked.at(entry.name), entry.tensor, 0.0, 0.0)) << entry.name;
  }
}

TEST(Distributed, CollectiveDeviceMovesCpuStateForNcclOnly) {
  EXPECT_EQ(collective_device("nccl", at::Device(at::kCPU)).type(), at::kCUDA);
  EXPECT_EQ(collective_device("nccl", at::Device("cuda:1")), at::Device("cuda:1"));
  EXPECT_EQ(collective_device("gloo", at::Device(at::kCPU)), at::Device(at::kCPU));
  EXPECT_EQ(collective_device("gloo", at::Device("cuda:0")), at::Device("cuda:0"));
}

}  // namespace
}  // namespace metrics
