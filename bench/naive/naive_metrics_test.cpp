// The naive update patterns compute what the library computes: only their cost differs.

#include <ATen/ATen.h>

#include <metrics/metrics.h>

#include "naive_metrics.h"
#include "test_support.h"

namespace metrics {
namespace {

using testing::generator;
using testing::tensors_close;
using Opts = ClassificationOptions;

TEST(NaiveMetrics, AggregatorsComputeTheLibrarysValues) {
  using Kind = naive::Aggregator::Kind;
  naive::Aggregator naive_mean(Kind::Mean), naive_sum(Kind::Sum), naive_min(Kind::Min), naive_max(Kind::Max);
  Mean mean;
  Sum sum;
  Min min;
  Max max;
  for (int64_t i = 0; i < 20; ++i) {
    auto gen = generator(i);
    auto x = at::randn({64}, gen);
    if (i % 5 == 0) x[3] = std::nan("");  // both drop NaNs under the default policy
    naive_mean.update(x);
    naive_sum.update(x);
    naive_min.update(x);
    naive_max.update(x);
    mean.update(x);
    sum.update(x);
    min.update(x);
    max.update(x);
  }
  WarningCapture quiet;
  EXPECT_TRUE(tensors_close(naive_mean.compute(), mean.compute(), 1e-5, 1e-6));
  EXPECT_TRUE(tensors_close(naive_sum.compute(), sum.compute(), 1e-5, 1e-4));
  EXPECT_TRUE(tensors_close(naive_min.compute(), min.compute()));
  EXPECT_TRUE(tensors_close(naive_max.compute(), max.compute()));
}

TEST(NaiveMetrics, StatScoresCountWhatTheLibraryCounts) {
  const std::vector<Opts> options = {Opts::multiclass(7), Opts::multiclass(7).ignore_index(2), Opts::binary(),
                                     Opts::binary().ignore_index(-1), Opts::multilabel(5), Opts::multilabel(5, 0.3)};
  for (const auto& o : options) {
    naive::StatScores naive_counts(o);
    StatScores ours(Opts(o).average(Average::None));
    for (int64_t i = 0; i < 8; ++i) {
      auto gen = generator(100 + i);
      at::Tensor preds, target;
      if (o.task() == Task::Multiclass) {
        preds = at::randn({40, 7}, gen);
        target = at::randint(7, {40}, gen, at::kLong);
      } else {
        const auto shape = o.task() == Task::Binary ? std::vector<int64_t>{40} : std::vector<int64_t>{40, 5};
        preds = i % 2 ? at::randn(shape, gen) * 3 : at::rand(shape, gen);  // logits and probabilities
        target = at::randint(2, shape, gen, at::kLong);
        if (o.ignore_index()) target.view({-1})[i] = *o.ignore_index();
      }
      naive_counts.update(preds, target);
      ours.update(preds, target);
    }
    const auto a = naive_counts.counts();
    const auto b = ours.stat_counts();
    EXPECT_TRUE(tensors_close(a.tp, b.tp, 0, 0));
    EXPECT_TRUE(tensors_close(a.fp, b.fp, 0, 0));
    EXPECT_TRUE(tensors_close(a.tn, b.tn, 0, 0));
    EXPECT_TRUE(tensors_close(a.fn, b.fn, 0, 0));
  }
}

TEST(NaiveMetrics, SynchronizeWhereTheLibraryDoesNot) {
  naive::Aggregator naive_mean(naive::Aggregator::Kind::Mean);
  naive::StatScores naive_counts(Opts::multiclass(10).ignore_index(0));
  SyncCounter counter;
  naive_mean.update(at::rand({}));
  naive_counts.update(at::randn({16, 10}), at::randint(10, {16}, at::kLong));
  EXPECT_EQ(counter.by_op().at("aten::scalar_tensor"), 1);  // the host weight
  EXPECT_EQ(counter.by_op().at("aten::item"), 2);           // two host NaN branches
  EXPECT_EQ(counter.by_op().at("aten::_unique2"), 1);       // validation
  EXPECT_EQ(counter.by_op().at("aten::nonzero"), 2);        // ignore_index by boolean indexing
  EXPECT_EQ(counter.by_op().at("aten::bincount"), 1);
}

}  // namespace
}  // namespace metrics
