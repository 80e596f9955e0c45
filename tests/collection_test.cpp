#include <ATen/ATen.h>

#include <metrics/backend.h>
#include <metrics/collection.h>
#include <metrics/sync_counter.h>

#include "test_support.h"

namespace metrics {
namespace {

using ::testing::ElementsAre;
using testing::generator;
using testing::states_equal;
using testing::tensors_close;
using Opts = ClassificationOptions;

struct Batch {
  at::Tensor preds, target;
};

Batch batch(int64_t i, int64_t classes = 10) {
  auto gen = generator(500 + i);
  return {at::randn({32, classes}, gen), at::randint(classes, {32}, gen, at::kLong)};
}

MetricCollection four_macro_metrics(const Opts& o) {
  MetricCollection collection;
  collection.add("accuracy", Accuracy(o)).add("precision", Precision(o)).add("recall", Recall(o)).add("f1", F1Score(o));
  return collection;
}

TEST(MetricCollection, WorksOutSharedStatesFromOptions) {
  const auto o = Opts::multiclass(10);
  auto collection = four_macro_metrics(o);
  collection.add("top2", Accuracy(Opts(o).top_k(2)));
  collection.add("micro_f1", F1Score(Opts(o).average(Average::Micro)));  // average does not change the counts
  collection.add("weighted", Recall(Opts(o).weighted(true)));
  EXPECT_THAT(collection.groups(),
              ElementsAre(ElementsAre("accuracy", "precision", "recall", "f1", "micro_f1"), ElementsAre("top2"),
                          ElementsAre("weighted")));
  EXPECT_EQ(&collection.at("accuracy").counts(), &collection.at("f1").counts());
  EXPECT_NE(&collection.at("accuracy").counts(), &collection.at("top2").counts());
}

TEST(MetricCollection, ValuesEqualSeparateMetricsOnBothPaths) {
  for (bool aten : {false, true}) {
    std::unique_ptr<ForceAtenPath> force;
    if (aten) force = std::make_unique<ForceAtenPath>();
    const auto o = Opts::multiclass(10);
    auto collection = four_macro_metrics(o);
    collection.add("confmat", ConfusionMatrix(o));
    Accuracy accuracy(o);
    Precision precision(o);
    Recall recall(o);
    F1Score f1(o);
    ConfusionMatrix confmat(o);
    for (int64_t i = 0; i < 6; ++i) {
      const auto b = batch(i);
      collection.update(b.preds, b.target);
      for (ClassificationMetric* m :
           std::initializer_list<ClassificationMetric*>{&accuracy, &precision, &recall, &f1, &confmat}) {
        m->update(b.preds, b.target);
      }
    }
    EXPECT_EQ(collection.groups().size(), 1u);  // the confusion matrix's C x C state serves all five
    const auto values = collection.compute();
    EXPECT_TRUE(tensors_close(values.at("accuracy"), accuracy.compute()));
    EXPECT_TRUE(tensors_close(values.at("precision"), precision.compute()));
    EXPECT_TRUE(tensors_close(values.at("recall"), recall.compute()));
    EXPECT_TRUE(tensors_close(values.at("f1"), f1.compute()));
    EXPECT_TRUE(tensors_close(values.at("confmat"), confmat.compute()));
    EXPECT_EQ(collection.at("f1").update_count(), 6);
  }
}

TEST(MetricCollection, ConfusionMatrixAddedFirstServesTheOthers) {
  const auto o = Opts::multiclass(4).average(Average::None);
  MetricCollection collection;
  collection.add("confmat", ConfusionMatrix(o)).add("recall", Recall(o));
  EXPECT_EQ(collection.groups().size(), 1u);
  EXPECT_EQ(collection.at("recall").counts().layout(), ClassificationState::Layout::Matrix);
  collection.update(at::tensor({0, 1, 1, 3}, at::kLong), at::tensor({0, 1, 2, 2}, at::kLong));
  EXPECT_TRUE(tensors_close(collection.compute().at("recall"), at::tensor({1.0, 1.0, 0.0, 0.0}).to(at::kFloat)));
}

TEST(MetricCollection, BinaryAndMultilabelConfusionMatricesShareThePerClassCounts) {
  MetricCollection collection;
  collection.add("confmat", ConfusionMatrix(Opts::multilabel(3))).add("f1", F1Score(Opts::multilabel(3)));
  EXPECT_EQ(collection.groups().size(), 1u);
  EXPECT_EQ(collection.at("f1").counts().layout(), ClassificationState::Layout::PerClass);
}

TEST(MetricCollection, MetricsWithUpdatesKeepTheirOwnState) {
  const auto o = Opts::multiclass(10);
  Accuracy trained(o);
  const auto first = batch(0);
  trained.update(first.preds, first.target);
  auto collection = four_macro_metrics(o);
  collection.add("trained", trained);
  EXPECT_EQ(collection.groups().size(), 2u);
  EXPECT_EQ(collection.at("trained").update_count(), 1);
  EXPECT_TRUE(tensors_close(collection.compute().at("trained"), trained.compute()));
}

TEST(MetricCollection, UpdatesWithoutSyncOnBothPaths) {
  for (bool aten : {false, true}) {
    std::unique_ptr<ForceAtenPath> force;
    if (aten) force = std::make_unique<ForceAtenPath>();
    auto collection = four_macro_metrics(Opts::multiclass(10).ignore_index(3));
    collection.add("confmat", ConfusionMatrix(Opts::multiclass(10).ignore_index(3)));
    const auto b = batch(1);
    SyncCounter counter;
    collection.update(b.preds, b.target);
    EXPECT_EQ(counter.total(), 0) << counter.summary();
  }
}

TEST(MetricCollection, MergeCloneStateDictAndReset) {
  const auto o = Opts::multiclass(10);
  auto whole = four_macro_metrics(o);
  auto left = four_macro_metrics(o);
  auto right = four_macro_metrics(o);
  for (int64_t i = 0; i < 6; ++i) {
    const auto b = batch(i);
    whole.update(b.preds, b.target);
    (i % 2 ? left : right).update(b.preds, b.target);
  }
  const auto right_before = right.state_dict();
  left.merge(right);
  EXPECT_TRUE(states_equal(right.state_dict(), right_before));
  for (const auto& [name, value] : whole.compute()) EXPECT_TRUE(tensors_close(left.compute().at(name), value));

  auto copy = whole.clone();
  EXPECT_EQ(copy.groups(), whole.groups());
  const auto b = batch(7);
  copy.update(b.preds, b.target);
  EXPECT_EQ(whole.at("accuracy").update_count(), 6);
  EXPECT_EQ(copy.at("f1").update_count(), 7);

  auto restored = four_macro_metrics(o);
  restored.load_state_dict(whole.state_dict());
  EXPECT_TRUE(states_equal(restored.state_dict(), whole.state_dict()));
  whole.reset();
  EXPECT_TRUE(states_equal(whole.state_dict(), four_macro_metrics(o).state_dict()));
}

TEST(MetricCollection, ForwardReturnsBatchValues) {
  const auto o = Opts::multiclass(3).average(Average::Micro);
  MetricCollection collection;
  collection.add("accuracy", Accuracy(o));
  collection.update(at::tensor({0, 1}, at::kLong), at::tensor({0, 1}, at::kLong));
  const auto batch_values = collection.forward(at::tensor({0, 0}, at::kLong), at::tensor({1, 0}, at::kLong));
  EXPECT_NEAR(batch_values.at("accuracy").item<double>(), 0.5, 1e-7);
  EXPECT_NEAR(collection.compute().at("accuracy").item<double>(), 0.75, 1e-7);
}

TEST(MetricCollection, ReportsBadInputAndRejectsBadUse) {
  auto collection = four_macro_metrics(Opts::multiclass(10));
  const auto b = batch(2);
  collection.update(b.preds, b.target.clone().fill_(12));
  EXPECT_THROWS_WITH(collection.compute(), c10::ValueError, "MulticlassAccuracy: 32 targets outside [0, 10)");
  EXPECT_THROWS_WITH(collection.add("f1", F1Score(Opts::multiclass(10))), c10::ValueError,
                     "MetricCollection.add: a metric named 'f1' is already in the collection");
  EXPECT_THROWS_WITH(collection.at("auc"), c10::IndexError, "MetricCollection: no metric named 'auc'");
  const auto before = collection.state_dict();
  EXPECT_THROWS_WITH(collection.update(b.preds, b.target.to(at::kFloat)), c10::TypeError,
                     "MetricCollection.update: target has dtype Float");
  auto bad = before;
  bad["f1.tp"] = at::zeros({3}, at::kLong);
  EXPECT_THROWS_WITH(collection.load_state_dict(bad), c10::ValueError, "MulticlassF1Score.load_state_dict: 'tp' must be");
  EXPECT_TRUE(states_equal(collection.state_dict(), before));
}

}  // namespace
}  // namespace metrics
