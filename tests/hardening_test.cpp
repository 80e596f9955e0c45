// Hostile input: every call either throws a clear error naming the metric and leaves the state as
// it was, or counts what it was given correctly (small weights next to huge ones, infinite
// weights, several threads).

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/InferenceMode.h>
#include <torch/version.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include <metrics/aggregation.h>
#include <metrics/backend.h>
#include <metrics/classification.h>
#include <metrics/metric_state.h>
#include <metrics/warning_capture.h>

#include "test_support.h"

namespace metrics {
namespace {

using testing::states_equal;
using testing::tensors_close;
using Opts = ClassificationOptions;

at::Tensor doubles(std::vector<double> values) { return at::tensor(values, at::kDouble); }
at::Tensor longs(std::vector<int64_t> values) { return at::tensor(values, at::kLong); }

// Runs `body` on the CPU fast path, then on the ATen path (what other devices run).
template <class Body>
void on_both_paths(Body body) {
  body();
  ForceAtenPath aten;
  body();
}

Accuracy updated_accuracy() {
  Accuracy accuracy(Opts::multiclass(3));
  accuracy.update(longs({0, 1, 2, 2}), longs({0, 1, 1, 2}));
  return accuracy;
}

TEST(LoadStateDict, RejectsNegativeOrHugeCountsAndChangesNothing) {
  for (const auto* key : {"update_count", "tp", "bad_input_counts", "first_bad_update"}) {
    for (const int64_t bad : {int64_t{-1}, (int64_t{1} << 62) + 1}) {  // 2^62 itself: first_bad_update's none
      auto accuracy = updated_accuracy();
      const auto before = accuracy.state_dict();
      auto dict = accuracy.state_dict();
      dict[key] = at::full_like(dict[key], bad);
      EXPECT_THROWS_WITH(accuracy.load_state_dict(dict), c10::ValueError,
                         std::string("MulticlassAccuracy.load_state_dict: '") + key + "' holds " + std::to_string(bad));
      EXPECT_TRUE(states_equal(accuracy.state_dict(), before)) << key;
    }
  }
}

TEST(LoadStateDict, TakesCountsUpToJustBelowTheLimitExactly) {
  // 2^62 - 1 is below the limit, though as a double it rounds to 2^62
  auto accuracy = updated_accuracy();
  auto dict = accuracy.state_dict();
  dict["tp"] = at::full_like(dict["tp"], (int64_t{1} << 62) - 1);
  accuracy.load_state_dict(dict);
  EXPECT_EQ(accuracy.state_dict().at("tp")[0].item<int64_t>(), (int64_t{1} << 62) - 1);
  dict["tp"] = at::full_like(dict["tp"], int64_t{1} << 62);
  EXPECT_THROWS_WITH(accuracy.load_state_dict(dict), c10::ValueError, "a count must be a whole number in [0, 2^62)");
}

TEST(LoadStateDict, RejectsMetaTensorsAndChangesNothing) {
  for (const auto* key : {"update_count", "fn", "_version", "_metric"}) {
    auto accuracy = updated_accuracy();
    const auto before = accuracy.state_dict();
    auto dict = accuracy.state_dict();
    dict[key] = at::empty_like(dict[key], at::TensorOptions().device(at::kMeta));
    EXPECT_THROWS_WITH(accuracy.load_state_dict(dict), c10::ValueError, "MulticlassAccuracy.load_state_dict: '");
    EXPECT_TRUE(states_equal(accuracy.state_dict(), before)) << key;
  }
}

TEST(Merge, RejectsAMetaStateAndChangesNothing) {
  auto accuracy = updated_accuracy();
  const auto before = accuracy.state_dict();
  Accuracy on_meta(Opts::multiclass(3).device(at::kMeta));
  EXPECT_THROWS_WITH(accuracy.merge(on_meta), c10::ValueError,
                     "MulticlassAccuracy.merge: the other metric's state 'update_count' is on the meta device");
  EXPECT_TRUE(states_equal(accuracy.state_dict(), before));
}

// merge() adds a run of Sum entries with one add_ where they lie back to back alike in both states,
// and entry by entry where they do not (a pending addend between two of them in one state alone):
// the same sums either way, the Min entry between runs its own, the other state as it was.
TEST(Merge, SumsEntriesPackedAlikeOrNot) {
  const auto make = [](bool addend_between, int64_t base) {
    MetricState state(at::kCPU);
    state.add("a", {3}, at::kLong, 0, Reduction::Sum);
    if (addend_between) state.add_pending_addend(1);
    state.add("b", {2}, at::kLong, 0, Reduction::Sum);
    state.add("least", {1}, at::kLong, 100, Reduction::Min);
    state.add("c", {2}, at::kLong, 0, Reduction::Sum);
    state[1].copy_(longs({base, base + 1, base + 2}));
    state[2].copy_(longs({base + 3, base + 4}));
    state[3].fill_(base);
    state[4].copy_(longs({base + 5, base + 6}));
    if (addend_between) state.count_buffer()[state.pending_addend_offset(1)].fill_(1000);  // a's, pending
    return state;
  };
  const auto values = [](const MetricState& state) {
    std::vector<int64_t> all;
    for (size_t slot = 1; slot <= 4; ++slot) {
      const auto entry = state[slot].contiguous();
      all.insert(all.end(), entry.data_ptr<int64_t>(), entry.data_ptr<int64_t>() + entry.numel());
    }
    return all;
  };
  ASSERT_EQ(make(false, 0).offset(2), make(false, 0).offset(1) + 3);   // packed: one run
  ASSERT_EQ(make(true, 0).offset(2), make(false, 0).offset(2) + 1);    // the addend between
  for (const auto& [into_between, from_between] : {std::pair{false, false}, {false, true}, {true, false}}) {
    auto mine = make(into_between, 10);
    const auto theirs = make(from_between, 20);
    const auto theirs_before = values(theirs);
    mine.merge(theirs, "m");
    const int64_t pending = (into_between ? 1000 : 0) + (from_between ? 1000 : 0);
    const std::vector<int64_t> expected = {30 + pending, 32 + pending, 34 + pending, 36, 38, 10, 40, 42};
    EXPECT_EQ(values(mine), expected) << into_between << from_between;
    EXPECT_EQ(values(theirs), theirs_before);
  }
}

TEST(Update, ErrorFromTheAllocatorNamesTheMetricAndCountsNothing) {
  // 2^48 doubles: more than any address space, so the allocation fails wherever this runs.
  const auto huge = at::ones({1}).expand({int64_t{1} << 48});
  Mean mean;
  mean.update(at::ones({3}));
  const auto before = mean.state_dict();
  EXPECT_THROWS_WITH(mean.update(huge), c10::Error, "Mean.update failed: ");
  EXPECT_TRUE(states_equal(mean.state_dict(), before));
  EXPECT_EQ(mean.update_count(), 1);
}

// The CPU allocator, failing every allocation of `bytes` or more while alive (as one out of memory
// does), then put back.
class FailingLargeAllocations final : public c10::Allocator {
 public:
  explicit FailingLargeAllocations(size_t bytes) : bytes_(bytes), kept_(c10::GetCPUAllocator()) {
    c10::SetCPUAllocator(this, kPriority);
  }
  ~FailingLargeAllocations() override { c10::SetCPUAllocator(kept_, kPriority); }
  FailingLargeAllocations(const FailingLargeAllocations&) = delete;
  FailingLargeAllocations& operator=(const FailingLargeAllocations&) = delete;

#if TORCH_VERSION_MAJOR >= 2  // allocate() is no longer const, and copy_data() is the allocator's
  c10::DataPtr allocate(size_t n) override { return allocated(n); }
  void copy_data(void* dest, const void* src, size_t n) const override { kept_->copy_data(dest, src, n); }
#else
  c10::DataPtr allocate(size_t n) const override { return allocated(n); }
#endif
  c10::DeleterFnPtr raw_deleter() const override { return kept_->raw_deleter(); }

 private:
  c10::DataPtr allocated(size_t n) const {
    TORCH_CHECK(n < bytes_, "FailingLargeAllocations: not enough memory for ", n, " bytes");
    return kept_->allocate(n);
  }

  static constexpr uint8_t kPriority = 100;
  size_t bytes_;
  c10::Allocator* kept_;
};

// An update whose cached buffers for a new batch shape could not all be made (out of memory) makes
// them again at the next update of that shape: none made for the earlier shape is used for it.
TEST(Update, BuffersLeftUnmadeByAFailedAllocationAreMadeAgainNextTime) {
  ForceAtenPath aten;
  const auto small = at::randn({64, 2}, at::kDouble), large = at::randn({4096, 2}, at::kDouble);
  const auto small_weights = at::rand({64}, at::kDouble), large_weights = at::rand({4096}, at::kDouble);
  const auto small_target = at::randint(3, {64}, at::kLong), large_target = at::randint(3, {4096}, at::kLong);
  const auto large_scores = at::rand({4096, 3}, at::kDouble);
  const auto small_scores = large_scores.narrow(0, 0, 64);
  const auto small_probs = small.select(1, 1).sigmoid(), large_probs = large.select(1, 1).sigmoid();
  const auto small_labels = small_target.clamp_max(1), large_labels = large_target.clamp_max(1);
  const auto update_all = [&](Mean& mean, Accuracy& multiclass, Accuracy& binary, bool small_batch) {
    const auto& w = small_batch ? small_weights : large_weights;
    mean.update((small_batch ? small : large).select(1, 0), w);  // strided: the ATen path's counted rows
    multiclass.update(small_batch ? small_scores : large_scores, small_batch ? small_target : large_target);
    binary.update(small_batch ? small_probs : large_probs, small_batch ? small_labels : large_labels, w);
  };
  Mean mean, expected_mean;
  Accuracy multiclass(Opts::multiclass(3)), expected_multiclass(Opts::multiclass(3));
  Accuracy binary(Opts::binary().weighted(true)), expected_binary(Opts::binary().weighted(true));
  for (const bool small_batch : {true, false}) {
    update_all(expected_mean, expected_multiclass, expected_binary, small_batch);
  }
  update_all(mean, multiclass, binary, /*small_batch=*/true);
  const auto before = std::vector{mean.state_dict(), multiclass.state_dict(), binary.state_dict()};
  {
    FailingLargeAllocations failing(16 * 1024);  // the large batch's buffers; the small one's were made
    EXPECT_THROW(mean.update(large.select(1, 0), large_weights), c10::Error);
    EXPECT_THROW(multiclass.update(large_scores, large_target), c10::Error);
    EXPECT_THROW(binary.update(large_probs, large_labels, large_weights), c10::Error);
  }
  EXPECT_TRUE(states_equal(mean.state_dict(), before[0]));
  EXPECT_TRUE(states_equal(multiclass.state_dict(), before[1]));
  EXPECT_TRUE(states_equal(binary.state_dict(), before[2]));
  update_all(mean, multiclass, binary, /*small_batch=*/false);
  EXPECT_TRUE(tensors_close(mean.compute(), expected_mean.compute()));
  EXPECT_TRUE(tensors_close(multiclass.compute(), expected_multiclass.compute()));
  EXPECT_TRUE(tensors_close(binary.compute(), expected_binary.compute()));
}

// Under c10::InferenceMode every tensor made is an inference tensor, which cannot be written in place
// outside it: a metric made or updated there keeps normal tensors, so that it goes on outside (both
// paths: the ATen path keeps buffers between updates, samplewise counting grows its rows).
TEST(InferenceMode, AMetricMadeAndUpdatedThereGoesOnOutside) {
  const auto preds = at::randn({4, 3, 5}, testing::generator(3));
  const auto target = at::randint(3, {4, 5}, testing::generator(4), at::kLong);
  for (const bool samplewise : {false, true}) {
    const auto o = Opts::multiclass(3).multidim_average(samplewise ? MultidimAverage::Samplewise : MultidimAverage::Global);
    on_both_paths([&] {
      std::unique_ptr<Accuracy> inside;
      {
        const c10::InferenceMode mode;
        inside = std::make_unique<Accuracy>(o);
        for (int i = 0; i < 3; ++i) inside->update(preds, target);
      }
      Accuracy outside(o);
      for (int i = 0; i < 4; ++i) outside.update(preds, target);
      inside->update(preds, target);
      EXPECT_TRUE(states_equal(inside->state_dict(), outside.state_dict()));
      inside->load_state_dict(outside.state_dict());
      inside->reset();
      EXPECT_EQ(inside->update_count(), 0);
    });
  }
}

TEST(ClassificationState, TooManyClassesIsAClearErrorBeforeAllocating) {
  EXPECT_THROWS_WITH(ConfusionMatrix(Opts::multiclass(int64_t{1} << 32)), c10::ValueError,
                     "MulticlassConfusionMatrix: num_classes = 4294967296 needs more than 2^64 bytes of state");
  EXPECT_THROWS_WITH(ConfusionMatrix(Opts::multiclass(100'000'000)), c10::ValueError,
                     "MulticlassConfusionMatrix: num_classes = 100000000 needs 80000000000000000 bytes of state");
  EXPECT_THROWS_WITH(Accuracy(Opts::multilabel(int64_t{1} << 61)), c10::ValueError,
                     "MultilabelAccuracy: num_labels = 2305843009213693952 needs more than 2^64 bytes");
}

TEST(WeightedCounts, SmallWeightNextToAHugeOneReachesTrueNegatives) {
  // The CPU path sums a batch's total weight exactly (TwoSum); the ATen path takes torch.sum's,
  // which rounds 1e16 + 1 to 1e16 (README: Precision).
  StatScores multiclass(Opts::multiclass(3).average(Average::None).weighted(true));
  multiclass.update(longs({0, 1}), longs({0, 1}), doubles({1e16, 1.0}));
  // Brute force: tn of class c sums the weights of samples that neither predict nor are c.
  EXPECT_TRUE(tensors_close(multiclass.stat_counts().tn, doubles({1.0, 1e16, 1e16 + 1.0}), 0.0, 0.0));
  on_both_paths([] {
    StatScores binary(Opts::binary().weighted(true));
    binary.update(doubles({0.9, 0.1}), longs({1, 0}), doubles({1e16, 1.0}));
    EXPECT_TRUE(tensors_close(binary.value(), doubles({1e16, 0.0, 1.0, 0.0, 1e16}), 0.0, 0.0));
  });
}

TEST(WeightedCounts, InfiniteWeightsAreBadInputKeptOut) {
  on_both_paths([] {
    Accuracy accuracy(Opts::binary().weighted(true));
    accuracy.update(doubles({0.9, 0.1, 0.8}), longs({1, 0, 0}), doubles({INFINITY, 1.0, 1.0}));
    EXPECT_THROWS_WITH(accuracy.check(), c10::ValueError,
                       "BinaryAccuracy: 1 NaN, negative or infinite weight in 1 update, first at update 0");
    EXPECT_TRUE(tensors_close(accuracy.value(), at::scalar_tensor(0.5), 1e-7));
  });
}

TEST(WeightedCounts, ScoresStayFiniteUpToTheFloat64MaximumAndOverflowIsReported) {
  Accuracy near_max(Opts::binary().weighted(true));
  near_max.update(doubles({0.9, 0.1}), longs({1, 0}), doubles({1e308, 1e308}));
  EXPECT_TRUE(tensors_close(near_max.compute(), at::scalar_tensor(1.0)));

  Accuracy overflowed(Opts::binary().weighted(true));
  overflowed.update(doubles({0.9, 0.9}), longs({1, 1}), doubles({1e308, 1e308}));
  EXPECT_THROWS_WITH(overflowed.compute(), c10::ValueError, "BinaryAccuracy: the weighted counts overflowed float64");
}

TEST(Aggregation, InfiniteWeightsAreCountedByKindAndKeptOut) {
  on_both_paths([] {
    Mean mean(AggregationOptions().nan_policy(NanPolicy::error()));
    mean.update(doubles({1.0, 2.0, NAN, 4.0}), doubles({1.0, INFINITY, 1.0, 3.0}));
    mean.update(5.0, -INFINITY);
    EXPECT_TRUE(tensors_close(mean.value(), at::scalar_tensor((1.0 + 12.0) / 4.0, at::kDouble)));
    EXPECT_THROWS_WITH(mean.check(), c10::Error,
                       "Mean: 1 NaN value, 2 infinite weights in 2 updates, first at update 0");
  });
}

// Each of `threads` threads makes `updates` calls of `update`.
template <class Update>
void from_threads(int threads, int updates, Update update) {
  std::vector<std::thread> running;
  for (int t = 0; t < threads; ++t) {
    running.emplace_back([&] {
      for (int i = 0; i < updates; ++i) update();
    });
  }
  for (auto& thread : running) thread.join();
}

TEST(Threads, WithLockedUpdatesEveryUpdateFromSeveralThreadsCounts) {
  // Contiguous input takes the CPU fast path; every other element of a longer one, the ATen path.
  for (const auto& ones : {at::ones({4}), at::ones({8}).slice(0, 0, 8, 2)}) {
    Sum sum;
    sum.lock_updates(true);
    from_threads(4, 5000, [&] { sum.update(ones); });
    EXPECT_TRUE(tensors_close(sum.value(), at::scalar_tensor(80000.0, at::kDouble), 0.0, 0.0));
    EXPECT_EQ(sum.update_count(), 20000);
  }
  for (const auto& preds : {longs({0, 1, 2}), longs({0, 0, 1, 0, 2, 0}).slice(0, 0, 6, 2)}) {
    Accuracy accuracy(Opts::multiclass(3));
    accuracy.lock_updates(true);
    from_threads(4, 2000, [&] { accuracy.update(preds, longs({0, 1, 1})); });
    EXPECT_TRUE(tensors_close(accuracy.stat_counts().tp, longs({8000, 8000, 0}), 0.0, 0.0));
  }
}

std::atomic<bool> gate_entered{false}, gate_released{false};

// A metric whose update waits until the gate is released, to hold one update open.
class Gate : public Cloneable<Gate, Metric> {
 public:
  Gate() : Cloneable("Gate", BadInputAction::Warn, MetricState(at::kCPU)) {}
  const std::vector<std::string>& update_parameters() const override {
    static const std::vector<std::string> names{"value"};
    return names;
  }
  UpdateStep prepare_update(const UpdateArgs&) override {
    return [] {
      gate_entered = true;
      while (!gate_released) std::this_thread::yield();
    };
  }
  at::Tensor value() const override { return at::zeros({}); }
  std::string options_text() const override { return ""; }
};

TEST(Threads, ASecondConcurrentUpdateRaisesInBuildsThatCheck) {
  if (!checks_concurrent_use()) GTEST_SKIP() << "built without METRICS_CHECK_THREADS (the sanitizer build has it)";
  Gate gate;
  const UpdateArgs args{{1.0}};
  std::thread first([&] { gate.update(args); });
  while (!gate_entered) std::this_thread::yield();
  EXPECT_THROWS_WITH(gate.update(args), c10::Error, "Gate.update: called from two threads at once");
  gate_released = true;
  first.join();
  gate.update(args);  // one at a time is fine
}

TEST(Threads, ForwardBesideAMoveFromAnotherThreadCountsEveryBatch) {
  // to() drops the batch forward() keeps; it waits for a forward() that uses it (no use after free,
  // no deadlock: forward takes the batch's lock, then the state's)
  Mean mean;
  mean.lock_updates(true);
  std::atomic<bool> done{false};
  std::thread mover([&] {
    while (!done) mean.to(at::kCPU);
  });
  const auto every_other = at::ones({8}).slice(0, 0, 8, 2);  // the ATen path
  for (int i = 0; i < 2000; ++i) EXPECT_DOUBLE_EQ(mean.forward(every_other).item<double>(), 1.0);
  done = true;
  mover.join();
  EXPECT_EQ(mean.update_count(), 2000);
  EXPECT_DOUBLE_EQ(mean.value().item<double>(), 1.0);
}

TEST(Threads, SeparateMetricsInSeparateThreadsAreEachRight) {
  std::vector<std::unique_ptr<Max>> maxima;
  for (int t = 0; t < 4; ++t) maxima.push_back(std::make_unique<Max>());
  std::vector<std::thread> running;
  for (int t = 0; t < 4; ++t) {
    running.emplace_back([&, t] {
      for (int i = 0; i <= 1000 * (t + 1); ++i) maxima[t]->update(static_cast<double>(i));
    });
  }
  for (auto& thread : running) thread.join();
  for (int t = 0; t < 4; ++t) EXPECT_DOUBLE_EQ(maxima[t]->value().item<double>(), 1000.0 * (t + 1));
}

}  // namespace
}  // namespace metrics

namespace metrics {
namespace {

bool any_state_requires_grad(const Metric& metric) {
  const auto& entries = metric.state().entries();
  return std::any_of(entries.begin(), entries.end(), [](const StateEntry& e) { return e.tensor.requires_grad(); });
}

TEST(Autograd, InputsThatRequireGradNeverJoinTheStateToTheirGraph) {
  on_both_paths([] {
    const auto w = at::randn({16, 8}).requires_grad_();
    Mean mean;
    Max max;
    Accuracy accuracy(Opts::multiclass(4));
    for (int i = 0; i < 3; ++i) {
      mean.update((w * 2).slice(1, 0, 8, 2));
      max.update(w * 2);
      accuracy.update((w * 2).slice(1, 0, 8, 2), longs(std::vector<int64_t>(16, 1)));
    }
    EXPECT_FALSE(any_state_requires_grad(mean));
    EXPECT_FALSE(any_state_requires_grad(max));
    EXPECT_FALSE(any_state_requires_grad(accuracy));

    auto dict = mean.state_dict();
    dict["total"] = dict["total"].clone().requires_grad_();
    mean.load_state_dict(dict);
    Mean other;
    other.merge(mean);
    EXPECT_FALSE(any_state_requires_grad(mean));
    EXPECT_FALSE(any_state_requires_grad(other));
  });
}

}  // namespace
}  // namespace metrics

namespace metrics {
namespace {

// A float32 Mean or Sum accumulates in float64 and rounds its values: host scalars beyond float32's
// range are taken, and a sum that went past it comes back. Min and Max keep float32 states.
TEST(Aggregation, Float32SumsTakeHostScalarsBeyondFloat32AndExtremaRoundThemOnBothPaths) {
  const auto f32 = AggregationOptions().dtype(at::kFloat);
  EXPECT_THROWS_WITH(Min(AggregationOptions(f32).nan_policy(NanPolicy::replace(-1e300))), c10::ValueError,
                     "Min: nan_strategy = -1e+300 is beyond the range of the float32 state");
  on_both_paths([&] {
    Mean mean(f32);
    mean.update(at::full({2, 2}, 3.0f).t(), -1e300);
    mean.update(1e300, 2.0);
    EXPECT_EQ(mean.value().scalar_type(), at::kFloat);
    EXPECT_EQ(mean.value().item<float>(), 2.5f);  // (-12e300 + 2e300) / (-4e300 + 2)
    Sum sum(AggregationOptions(f32).nan_policy(NanPolicy::replace(3e38)));
    sum.update(1e300, 1e-300);
    EXPECT_EQ(sum.value().item<float>(), 1.0f);
    sum.update(at::full({2}, NAN));  // two replacements: 6e38 + 1
    EXPECT_EQ(sum.value().item<float>(), INFINITY);
    sum.update(-3e38);
    EXPECT_EQ(sum.value().item<float>(), 3e38f);
    EXPECT_EQ(sum.state_dict().at("total").scalar_type(), at::kDouble);
    Max high(f32);
    high.update(1e300);
    EXPECT_EQ(high.value().item<float>(), INFINITY);
  });
}

// Weight tensors are judged and multiplied at the widest dtype given, on both paths: a float64
// weight beyond float32's range is a finite weight (the float32 sum overflows to inf), and a
// float64 value beyond it with weight 0 adds nothing.
TEST(Aggregation, Float64InputBeyondAFloat32StateIsJudgedBeforeNarrowingOnBothPaths) {
  const auto f32 = AggregationOptions().dtype(at::kFloat).nan_policy(NanPolicy::error());
  on_both_paths([&] {
    Sum overflowing(f32);
    overflowing.update(at::ones({2, 2}, at::kDouble), at::full({2, 2}, 1e300, at::kDouble));
    EXPECT_EQ(overflowing.value().item<float>(), INFINITY);
    EXPECT_NO_THROW(overflowing.check());
    Mean weighted_out(f32);
    weighted_out.update(doubles({1e300, 2.0}), doubles({0.0, 1.0}));
    EXPECT_EQ(weighted_out.value().item<float>(), 2.0f);
  });
  Sum broadcast(f32);  // a weight of another shape always takes the ATen path
  broadcast.update(at::ones({2, 2}, at::kDouble), at::full({2}, 1e300, at::kDouble));
  EXPECT_EQ(broadcast.value().item<float>(), INFINITY);
  EXPECT_NO_THROW(broadcast.check());
}

}  // namespace
}  // namespace metrics
