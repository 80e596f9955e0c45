#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <thread>

#include <metrics/aggregation.h>
#include <metrics/backend.h>
#include <metrics/classification.h>
#include <metrics/collection.h>
#include <metrics/report_context.h>
#include <metrics/shape_error.h>
#include <metrics/sync_counter.h>
#include <metrics/warning_capture.h>

#include "metric_contract.h"
#include "test_support.h"

namespace metrics {
namespace {

using ::testing::ElementsAre;
using ::testing::StartsWith;
using testing::generator;
using testing::states_equal;
using testing::MetricContract;
using testing::tensors_close;
using Opts = ClassificationOptions;

struct Batch {
  at::Tensor preds, target;
};

Batch batch(int64_t i, int64_t classes = 10) {
  auto gen = generator(500 + i);
  return {at::randn({32, classes}, gen), at::randint(classes, {32}, gen, at::kLong)};
}

CountLayout layout_of(const MetricCollection& collection, const std::string& name) {
  return dynamic_cast<const ClassificationMetric&>(collection.at(name)).layout();
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
  EXPECT_EQ(&collection.at("accuracy").state(), &collection.at("f1").state());
  EXPECT_NE(&collection.at("accuracy").state(), &collection.at("top2").state());
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

// The ATen path adds a ConfusionMatrix state's pieces with one scatter_add_, or with a put_ where
// deterministic algorithms are on (CUDA has no deterministic scatter_add_ into a 2-D tensor):
// switched between updates, it counts what the CPU path counts, the tally too.
TEST(MetricCollection, TheMatrixLayoutCountsAsTheCpuPathWithDeterministicAlgorithmsOnOrOff) {
  const auto o = Opts::multiclass(10).ignore_index(0).weighted(true);
  const auto make = [&] {
    auto collection = four_macro_metrics(o);
    collection.add("confmat", ConfusionMatrix(o));
    return collection;
  };
  auto cpu = make(), aten = make();
  const bool deterministic = at::globalContext().deterministicAlgorithms();
  for (int64_t i = 0; i < 6; ++i) {
    auto b = batch(i);
    if (i == 3) b.preds[1][2] = std::nan("");  // bad input: counted, kept out
    const auto weight = at::rand({32}, generator(600 + i), at::kDouble);
    cpu.update(b.preds, b.target, weight);
    ForceAtenPath force;
    at::globalContext().setDeterministicAlgorithms(i % 2 == 1, false);
    aten.update(b.preds, b.target, weight);
    at::globalContext().setDeterministicAlgorithms(deterministic, false);
  }
  EXPECT_EQ(layout_of(aten, "f1"), CountLayout::Matrix);
  const auto want = cpu.state_dict(), got = aten.state_dict();
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [key, value] : want) EXPECT_TRUE(tensors_close(got.at(key), value)) << key;
  EXPECT_EQ(aten.at("f1").bad_input_report().bad_updates, 1);
}

TEST(MetricCollection, ConfusionMatrixAddedFirstServesTheOthers) {
  const auto o = Opts::multiclass(4).average(Average::None);
  MetricCollection collection;
  collection.add("confmat", ConfusionMatrix(o)).add("recall", Recall(o));
  EXPECT_EQ(collection.groups().size(), 1u);
  EXPECT_EQ(layout_of(collection, "recall"), CountLayout::Matrix);
  collection.update(at::tensor({0, 1, 1, 3}, at::kLong), at::tensor({0, 1, 2, 2}, at::kLong));
  EXPECT_TRUE(tensors_close(collection.compute().at("recall"), at::tensor({1.0, 1.0, 0.0, 0.0}).to(at::kFloat)));
}

TEST(MetricCollection, AMemberSharingAMatrixGivesItAndMergesIntoALoneMetricOfItsOptions) {
  const auto o = Opts::multiclass(4).average(Average::None);
  MetricCollection collection;
  collection.add("confmat", ConfusionMatrix(o)).add("recall", Recall(o));
  const auto preds = at::tensor({0, 1, 1, 3}, at::kLong), target = at::tensor({0, 1, 2, 2}, at::kLong);
  collection.update(preds, target);
  const auto& recall = dynamic_cast<const ClassificationMetric&>(collection.at("recall"));
  EXPECT_TRUE(at::equal(recall.confusion_matrix(), collection.compute().at("confmat")));
  Recall lone(o);
  EXPECT_THROWS_WITH(lone.confusion_matrix(), c10::ValueError, "Recall.confusion_matrix: per-class counts hold no");
  // a copy of the member holds the matrix: a lone Recall takes its counts in its own layout
  const auto copy = collection.at("recall").clone();
  lone.update(preds, target);
  lone.merge(*copy);
  Recall expected(o);
  expected.update(at::cat({preds, preds}), at::cat({target, target}));
  EXPECT_TRUE(tensors_close(lone.compute(), expected.compute()));
  EXPECT_THROWS_WITH(copy->merge(lone), c10::ValueError, "clone_alone() gives a copy in its own layout");
}

TEST(MetricCollection, BinaryAndMultilabelConfusionMatricesShareThePerClassCounts) {
  MetricCollection collection;
  collection.add("confmat", ConfusionMatrix(Opts::multilabel(3))).add("f1", F1Score(Opts::multilabel(3)));
  EXPECT_EQ(collection.groups().size(), 1u);
  EXPECT_EQ(layout_of(collection, "f1"), CountLayout::PerClass);
}

TEST(MetricCollection, ABinaryConfusionMatrixWithIgnoreIndexSharesTheCountsInItsOwnReading) {
  // A score outside [0, 1] at an ignored entry alone: F1 reads the batch as logits (sigmoid of each
  // kept score is above 0.5), the matrix reads probabilities, as TorchMetrics' binary metrics do.
  const auto o = Opts::binary().ignore_index(-1);
  MetricCollection collection;
  collection.add("confmat", ConfusionMatrix(o)).add("f1", F1Score(o));
  EXPECT_EQ(collection.groups().size(), 1u);
  EXPECT_EQ(layout_of(collection, "f1"), CountLayout::PerClassAndKeptMatrix);
  collection.update(at::tensor({0.6, 3.0, 0.2, 0.4}), at::tensor({1, -1, 0, 1}, at::kLong));
  const auto values = collection.compute();
  EXPECT_TRUE(at::equal(values.at("confmat"), at::tensor({1, 0, 1, 1}, at::kLong).view({2, 2})));
  EXPECT_TRUE(tensors_close(values.at("f1"), at::scalar_tensor(0.8f)));
  const auto& f1 = dynamic_cast<const ClassificationMetric&>(collection.at("f1"));
  EXPECT_TRUE(at::equal(f1.confusion_matrix(), at::tensor({0, 1, 0, 2}, at::kLong).view({2, 2})));
  const auto alone = f1.clone_alone();
  EXPECT_EQ(dynamic_cast<const ClassificationMetric&>(*alone).layout(), CountLayout::PerClass);
  EXPECT_TRUE(tensors_close(alone->compute(), at::scalar_tensor(0.8f)));
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

TEST(MetricCollection, MetricsLoadedWithoutUpdatesKeepTheirOwnStateAddedFirstOrLast) {
  // counts with an update count of 0, as a TorchMetrics-style dict (no update count) loads: they
  // were dropped for the group's fresh state when added beside a fresh metric
  const auto o = Opts::multiclass(10);
  const auto first = batch(0), second = batch(1);
  Accuracy reference(o);
  reference.update(first.preds, first.target);
  auto counts = reference.state_dict();
  counts.at("update_count").fill_(0);
  reference.update(second.preds, second.target);
  for (const bool loaded_first : {true, false}) {
    Accuracy loaded(o);
    loaded.load_state_dict(counts);
    MetricCollection collection;
    if (loaded_first) collection.add("loaded", loaded);
    collection.add("precision", Precision(o));
    if (!loaded_first) collection.add("loaded", loaded);
    EXPECT_EQ(collection.groups().size(), 2u);
    collection.update(second.preds, second.target);
    EXPECT_TRUE(at::equal(collection.compute().at("loaded"), reference.compute())) << loaded_first;
  }
}

TEST(MetricCollection, MetricsUpdatedApartKeepTheirOwnStateWhichUpdateAndForwardLeaveAlone) {
  const auto o = Opts::multiclass(10);
  auto collection = four_macro_metrics(o);
  auto apart = std::make_shared<Accuracy>(o);
  collection.add("apart", apart, Updates::Apart);
  collection.add("late", Accuracy(o));  // never joins the apart metric's state
  EXPECT_THAT(collection.groups(), ElementsAre(ElementsAre("accuracy", "precision", "recall", "f1", "late"),
                                               ElementsAre("apart")));
  const auto b = batch(0);
  collection.update(b.preds, b.target);
  collection.forward(b.preds, b.target);
  EXPECT_EQ(apart->update_count(), 0);
  apart->update(b.preds, b.target);  // the caller's own update and compute
  Accuracy reference(o);
  reference.update(b.preds, b.target);
  EXPECT_TRUE(tensors_close(apart->compute(), reference.compute()));
  EXPECT_EQ(collection.compute().count("apart"), 0u);
  EXPECT_EQ(collection.forward(b.preds, b.target).count("apart"), 0u);
  EXPECT_TRUE(states_equal(collection.state_dict(), collection.clone().state_dict()));
  auto copy = collection.clone();
  EXPECT_EQ(copy.groups(), collection.groups());
  copy.update(b.preds, b.target);
  EXPECT_EQ(copy.at("apart").update_count(), 1);
  EXPECT_EQ(copy.at("late").update_count(), 4);
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

TEST(MetricCollection, DetachedMetricCountsOnACopyOfItsGroupState) {
  const auto o = Opts::multiclass(4).average(Average::None);
  const auto confmat = std::make_shared<ConfusionMatrix>(o);
  MetricCollection collection;
  collection.add("confmat", confmat).add("recall", Recall(o)).add("precision", Precision(o));
  collection.update(at::tensor({0, 1, 1, 3}, at::kLong), at::tensor({0, 1, 2, 2}, at::kLong));
  collection.detach("confmat");  // the group's owner: recall and precision keep the matrix state
  collection.detach("precision");
  collection.detach("precision");  // alone already: nothing changes
  EXPECT_EQ(collection.groups(), (std::vector<std::vector<std::string>>{{"recall"}, {"confmat"}, {"precision"}}));
  confmat->reset();  // its own copy: recall and precision keep the first batch
  collection.update(at::tensor({2, 2, 0, 3}, at::kLong), at::tensor({2, 3, 0, 3}, at::kLong));
  const auto values = collection.compute();
  const auto second_batch = at::tensor({1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 1}, at::kLong).view({4, 4});
  EXPECT_TRUE(at::equal(values.at("confmat"), second_batch));
  EXPECT_TRUE(tensors_close(values.at("recall"), at::tensor({1.0, 1.0, 1.0 / 3, 0.5}).to(at::kFloat)));
  EXPECT_TRUE(tensors_close(values.at("precision"), at::tensor({1.0, 0.5, 0.5, 0.5}).to(at::kFloat)));
}

TEST(MetricCollection, AMetricKeptAloneTakesNoGroupMateAndMetricsAddedLaterShareAmongThemselves) {
  const auto o = Opts::multiclass(10);
  MetricCollection collection;
  collection.add("accuracy", Accuracy(o)).add("precision", Precision(o));
  collection.keep_alone("accuracy");  // (another collection updates it too)
  collection.add("recall", Recall(o)).add("f1", F1Score(o)).add("confmat", ConfusionMatrix(o));
  using Groups = std::vector<std::vector<std::string>>;
  const Groups expected{{"precision", "recall", "f1", "confmat"}, {"accuracy"}};
  EXPECT_EQ(collection.groups(), expected);
  EXPECT_THROW(collection.regroup({{"accuracy", "precision", "recall", "f1", "confmat"}}), c10::ValueError);
  EXPECT_EQ(collection.groups(), expected);
  auto clone = collection.clone();  // keeps it alone too
  clone.add("again", Accuracy(o));
  EXPECT_EQ(clone.groups(), (Groups{{"precision", "recall", "f1", "confmat", "again"}, {"accuracy"}}));
}

TEST(MetricCollection, MergesACollectionWhoseGroupsHoldItsGroups) {
  const auto o = Opts::multiclass(10);
  auto whole = four_macro_metrics(o);
  auto finer = four_macro_metrics(o);
  finer.detach("accuracy");
  auto coarser = four_macro_metrics(o);
  for (int64_t i = 0; i < 4; ++i) {
    const auto b = batch(i);
    whole.update(b.preds, b.target);
    (i % 2 ? finer : coarser).update(b.preds, b.target);
  }
  EXPECT_THROW(coarser.merge(finer), c10::ValueError);  // its one state cannot take two
  finer.merge(coarser);
  for (const auto& [name, value] : whole.compute()) EXPECT_TRUE(tensors_close(finer.compute().at(name), value)) << name;

  // the other's group holds a C x C state where this one's metric counts per class
  MetricCollection per_class, matrix;
  per_class.add("accuracy", Accuracy(o)).add("confmat", ConfusionMatrix(o));
  per_class.detach("accuracy");
  matrix.add("accuracy", Accuracy(o)).add("confmat", ConfusionMatrix(o));
  Accuracy accuracy(o);
  ConfusionMatrix confmat(o);
  for (int64_t i = 0; i < 2; ++i) {
    const auto b = batch(i);
    (i ? per_class : matrix).update(b.preds, b.target);
    accuracy.update(b.preds, b.target);
    confmat.update(b.preds, b.target);
  }
  per_class.merge(matrix);
  EXPECT_TRUE(tensors_close(per_class.compute().at("accuracy"), accuracy.compute()));
  EXPECT_TRUE(at::equal(per_class.compute().at("confmat"), confmat.compute()));
}

TEST(MetricCollection, ForwardAfterTakingAStateOfAnotherLayoutCountsIntoIt) {
  const auto o = Opts::multiclass(4).average(Average::None);
  const ConfusionMatrix confmat(o);  // a C x C state
  Precision own(o);                  // tp, fp, tn, fn
  const auto preds = at::tensor({0, 1, 1, 3}, at::kLong), target = at::tensor({0, 1, 2, 2}, at::kLong);
  own.forward(preds, target);  // keeps a batch of its own layout
  own.share_state_of(confmat);  // and takes the matrix state: the kept batch no longer fits
  const auto expected = at::tensor({1.0, 0.5, 0.0, 0.0}).to(at::kFloat);
  EXPECT_TRUE(tensors_close(own.forward(preds, target), expected));
  EXPECT_EQ(own.layout(), CountLayout::Matrix);
  EXPECT_EQ(own.update_count(), 1);
  EXPECT_TRUE(tensors_close(own.compute(), expected));
}

TEST(MetricCollection, RegroupMakesTheGroupsGivenAndRefusesWhatCannotShare) {
  const auto o = Opts::multiclass(4).average(Average::None);
  MetricCollection collection(MetricCollectionOptions().compute_groups(false));
  collection.add("recall", Recall(o)).add("confmat", ConfusionMatrix(o)).add("other", Accuracy(Opts(o).ignore_index(0)));
  using Groups = std::vector<std::vector<std::string>>;
  const Groups alone{{"recall"}, {"confmat"}, {"other"}};
  EXPECT_EQ(collection.groups(), alone);
  for (const auto& wrong : {Groups{{"recall", "other"}, {"confmat"}}, Groups{{"recall"}, {"confmat"}},
                            Groups{{"recall", "recall"}, {"confmat"}, {"other"}}, Groups{{}, {"recall"}}}) {
    EXPECT_THROW(collection.regroup(wrong), c10::ValueError);
    EXPECT_EQ(collection.groups(), alone);  // nothing changed
  }
  collection.regroup({{"other"}, {"recall", "confmat"}});  // the confusion matrix counts more: it serves both
  EXPECT_EQ(collection.groups(), (Groups{{"other"}, {"recall", "confmat"}}));
  EXPECT_EQ(layout_of(collection, "recall"), CountLayout::Matrix);
  collection.update(at::tensor({0, 1, 1, 3}, at::kLong), at::tensor({0, 1, 2, 2}, at::kLong));
  EXPECT_EQ(collection.at("recall").update_count(), 1);
  EXPECT_TRUE(tensors_close(collection.compute().at("recall"), at::tensor({1.0, 1.0, 0.0, 0.0}).to(at::kFloat)));
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
  // which metrics counted it: the group that shares the state
  const auto report = "'accuracy', 'precision', 'recall', 'f1': MulticlassAccuracy: 32 targets outside [0, 10)";
  EXPECT_THROWS_WITH(collection.compute(), c10::ValueError, std::string("MetricCollection.compute: ") + report);
  EXPECT_THROWS_WITH(collection.check(), c10::ValueError, std::string("MetricCollection.check: ") + report);
  EXPECT_THROWS_WITH(collection.add("f1", F1Score(Opts::multiclass(10))), c10::ValueError,
                     "MetricCollection.add: a metric named 'f1' is already in the collection");
  for (const std::string name : {"a.b", ""}) {  // a '.' separates the metric from its state in state_dict() keys
    EXPECT_THROWS_WITH(collection.add(name, Mean()), c10::ValueError,
                       "MetricCollection.add: a metric's name must be non-empty and hold no '.'");
  }
  EXPECT_EQ(collection.names().size(), 4u);
  EXPECT_THROWS_WITH(collection.at("auc"), c10::IndexError, "MetricCollection: no metric named 'auc'");
  const auto before = collection.state_dict();
  EXPECT_THROWS_WITH(collection.update(b.preds, b.target.to(at::kComplexFloat)), c10::TypeError,
                     "MulticlassAccuracy.update: target has dtype ComplexFloat");
  auto bad = before;
  bad["f1.tp"] = at::zeros({3}, at::kLong);
  EXPECT_THROWS_WITH(collection.load_state_dict(bad), c10::ValueError, "MulticlassF1Score.load_state_dict: 'tp' must be");
  EXPECT_TRUE(states_equal(collection.state_dict(), before));
}

// ---------------------------------------------------------------- any family, one collection

// A loss and logits: the mean loss, the largest loss and four classification metrics, fed by
// keyword so that each family takes its own arguments.
MetricCollection mixed(const Opts& o) {
  MetricCollection collection;
  collection.add("loss", Mean()).add("worst", Max()).add("accuracy", Accuracy(o)).add("f1", F1Score(o));
  collection.add("confmat", ConfusionMatrix(o)).add("top2", Accuracy(Opts(o).top_k(2)));
  return collection;
}

UpdateArgs keyword_args(const at::Tensor& loss, const Batch& b) {
  UpdateArgs args;
  args.keywords = {{"value", loss}, {"preds", b.preds}, {"target", b.target}};
  return args;
}

at::Tensor loss_of(int64_t i) { return at::rand({32}, generator(900 + i)).to(at::kDouble); }

// Every report runs: those of the groups after one that raises warn, then the first raised is raised.
TEST(MetricCollection, EveryReportWarnsThenTheFirstThatRaisesIsRaised) {
  const auto o = Opts::multiclass(10);
  auto b = batch(0);
  b.target[3] = 12;
  auto loss = loss_of(0);
  loss[1] = std::nan("");
  for (const bool checks : {false, true}) {
    MetricCollection collection;
    collection.add("accuracy", Accuracy(o)).add("loss", Mean()).add("f1", F1Score(o)).add("worst", Max());
    collection.update(keyword_args(loss, b));
    WarningCapture warnings;
    EXPECT_THROWS_WITH(checks ? collection.check() : (void)collection.compute(), c10::ValueError,
                       "'accuracy', 'f1': MulticlassAccuracy: 1 target outside [0, 10)");
    const auto call = std::string("MetricCollection") + (checks ? ".check: " : ".compute: ");
    const std::string nan = ": 1 NaN value in 1 update, first at update 0 (kept out of the state)";
    EXPECT_THAT(warnings.messages(), ElementsAre(call + "'loss': Mean" + nan, call + "'worst': Max" + nan));
  }
}

// An update's refusal names the collection's metrics it comes from, forward()'s too (naming the call
// made); its type stays.
TEST(MetricCollection, ARefusedUpdateNamesTheMetricsItCameFrom) {
  MetricCollection collection;
  collection.add("a3", Accuracy(Opts::multiclass(3))).add("a5", Accuracy(Opts::multiclass(5)));
  collection.add("p3", Precision(Opts::multiclass(3)));
  const auto preds = at::rand({10, 5}, generator(1)), target = at::zeros({10}, at::kLong);
  const auto before = collection.state_dict();
  const auto says = [](const std::string& call) {
    return "MulticlassAccuracy." + call + ": preds has shape [10, 5] but target has [10]; expected preds (N, 3, ...) " +
           "and target (N, ...) (in MetricCollection: 'a3', 'p3')";
  };
  EXPECT_THROWS_WITH(collection.update(preds, target), ShapeError, says("update"));
  EXPECT_THROWS_WITH(collection.forward(preds, target), ShapeError, says("forward"));
  EXPECT_THROWS_WITH(collection.update(preds, target), ShapeError, says("update"));  // (forward's name is gone)
  EXPECT_TRUE(states_equal(collection.state_dict(), before));
}

// What the others raised follows the first's message, in the groups' order.
TEST(MetricCollection, WhatTheFirstRaisedCarriesWhatTheOthersRaised) {
  auto b = batch(0);
  b.target[3] = 12;
  auto loss = loss_of(0);
  loss[1] = std::nan("");
  MetricCollection collection;
  const auto error = AggregationOptions().nan_policy(NanPolicy::error());
  collection.add("accuracy", Accuracy(Opts::multiclass(10))).add("loss", Mean(error)).add("worst", Max(error));
  collection.update(keyword_args(loss, b));
  const std::string nan = ": 1 NaN value in 1 update, first at update 0 (kept out of the state)";
  try {
    (void)collection.compute();
    ADD_FAILURE() << "compute() raised nothing";
  } catch (const c10::ValueError& e) {
    EXPECT_EQ(std::string(e.what_without_backtrace()),
              "MetricCollection.compute: 'accuracy': MulticlassAccuracy: 1 target outside [0, 10) in 1 update, first "
              "at update 0 (kept out of the state)\n  Also raised: MetricCollection.compute: 'loss': Mean" + nan +
                  "\n  Also raised: MetricCollection.compute: 'worst': Max" + nan);
  }
}

TEST(ReportContext, PrefixesTheReportsOfTheMetricsItsThreadComputesAndNests) {
  Mean mean;
  auto loss = loss_of(0);
  loss[1] = std::nan("");
  mean.update(loss);
  MetricCollection collection;
  collection.add("loss", Mean());
  collection.update(keyword_args(loss, batch(0)));
  const std::string nan = "Mean: 1 NaN value in 1 update, first at update 0 (kept out of the state)";
  WarningCapture warnings;
  std::vector<std::string> on_another_thread;
  {
    const ReportContext outer("outer: ");
    mean.check();
    {
      const ReportContext inner("inner: ");
      (void)mean.compute();
      collection.check();
      (void)collection.compute();
    }
    std::thread([&] {  // none of this thread's contexts there
      WarningCapture there;
      mean.check();
      on_another_thread = there.messages();
    }).join();
    mean.check();
  }
  mean.check();
  EXPECT_THAT(warnings.messages(),
              ElementsAre("outer: " + nan, "outer: inner: " + nan, "outer: inner: MetricCollection.check: 'loss': " + nan,
                          "outer: inner: MetricCollection.compute: 'loss': " + nan, "outer: " + nan, nan));
  EXPECT_THAT(on_another_thread, ElementsAre(nan));
}

TEST(ReportContext, EndsWithItsScopeWhenAReportRaises) {
  Mean mean(AggregationOptions().nan_policy(NanPolicy::error()));
  mean.update(at::full({2}, std::nan("")));
  const auto raised = [&] {
    try {
      mean.check();
    } catch (const c10::Error& e) {
      return std::string(e.what_without_backtrace());
    }
    return std::string("nothing raised");
  };
  {
    const ReportContext named("named: ");
    EXPECT_THAT(raised(), StartsWith("named: Mean: 2 NaN values"));
  }
  EXPECT_THAT(raised(), StartsWith("Mean: 2 NaN values"));
}

TEST(MetricCollection, AMemberThatSharesItsStateRefusesCallsMadeOnItDirectly) {
  const auto o = Opts::multiclass(4).average(Average::None);
  const auto recall = std::make_shared<Recall>(o);
  const auto a = batch(0, 4), b = batch(1, 4);
  Precision precision_alone(o);
  precision_alone.update(a.preds, a.target);
  auto collection = std::make_unique<MetricCollection>();
  collection->add("recall", recall).add("precision", Precision(o));
  collection->update(a.preds, a.target);
  const auto precision_before = collection->compute().at("precision");
  const char* refusal = "Recall.update: the metric shares its state with other metrics of a MetricCollection";
  EXPECT_THROWS_WITH(recall->update(b.preds, b.target), c10::ValueError, refusal);
  EXPECT_THROWS_WITH(recall->reset(), c10::ValueError, "Recall.reset: the metric shares its state");
  EXPECT_THROWS_WITH(recall->forward(b.preds, b.target), c10::ValueError, "Recall.forward: the metric shares");
  EXPECT_THROWS_WITH(recall->load_state_dict(recall->state_dict()), c10::ValueError, "Recall.load_state_dict: ");
  EXPECT_THROWS_WITH(recall->merge(*recall->clone()), c10::ValueError, "Recall.merge: the metric shares");
  EXPECT_THROWS_WITH(recall->to(at::kCPU), c10::ValueError, "Recall.to: the metric shares");
  EXPECT_TRUE(at::equal(collection->compute().at("precision"), precision_before));
  // the collection's own calls still reach it; after detach() it counts alone
  collection->update(b.preds, b.target);
  collection->detach("recall");
  recall->update(b.preds, b.target);
  precision_alone.update(b.preds, b.target);
  EXPECT_TRUE(at::equal(collection->compute().at("precision"), precision_alone.compute()));
  // a clone shares nothing; once the collection is gone, the metric is its own again
  const auto shared = std::make_shared<Precision>(o);
  auto other = std::make_unique<MetricCollection>();
  other->add("precision", shared).add("recall", Recall(o));
  EXPECT_THROW(shared->reset(), c10::ValueError);
  shared->clone()->reset();
  other.reset();
  shared->reset();
  EXPECT_EQ(shared->update_count(), 0);
}

TEST(MetricCollection, MetricsKeptAfterTheCollectionIsGoneCountApartInTheirOwnLayout) {
  const auto o = Opts::multiclass(4).average(Average::None);
  const auto matrix = std::make_shared<ConfusionMatrix>(o);
  const auto precision = std::make_shared<Precision>(o);
  const auto a = batch(0, 4), b = batch(1, 4);
  auto collection = std::make_unique<MetricCollection>();
  collection->add("matrix", matrix).add("precision", precision);
  collection->update(a.preds, a.target);
  collection.reset();
  precision->update(b.preds, b.target);
  EXPECT_EQ(matrix->update_count(), 1);
  EXPECT_EQ(precision->update_count(), 2);
  Precision expected(o);
  expected.update(a.preds, a.target);
  expected.update(b.preds, b.target);
  EXPECT_TRUE(states_equal(precision->state_dict(), expected.state_dict()));  // its own layout: tp, fp, tn, fn
  precision->merge(Precision(o));
  ConfusionMatrix first(o);
  first.update(a.preds, a.target);
  EXPECT_TRUE(at::equal(matrix->compute(), first.compute()));
}

TEST(MetricCollection, ADictWithoutAMetricsKeysNamesTheMetric) {
  const auto o = Opts::multiclass(3);
  MetricCollection collection;
  collection.add("accuracy", Accuracy(o)).add("loss", Mean());
  auto dict = collection.state_dict();
  for (auto it = dict.begin(); it != dict.end();) it = it->first.rfind("loss.", 0) == 0 ? dict.erase(it) : ++it;
  EXPECT_THROWS_WITH(collection.load_state_dict(dict), c10::ValueError,
                     "MetricCollection.load_state_dict: the dict holds no key of metric 'loss' (its keys start with "
                     "'loss.')");
  collection.load_state_dict(dict, AbsentMetric::FollowsItsGroup);
}

TEST(MetricCollection, UpdateArgsHoldTheirTensors) {
  MetricCollection collection;
  collection.add("loss", Mean()).add("accuracy", Accuracy(Opts::binary()));
  UpdateArgs args;  // built from temporaries that are gone when the update runs
  args.keywords = {{"value", at::full({4}, 3.0)},
                   {"weight", at::full({4}, 2.0)},
                   {"preds", at::tensor({0.9, 0.2, 0.8, 0.1})},
                   {"target", at::tensor({1, 0, 0, 0}, at::kLong)}};
  collection.update(args);
  const auto values = collection.compute();
  EXPECT_DOUBLE_EQ(values.at("loss").item<double>(), 3.0);
  EXPECT_DOUBLE_EQ(values.at("accuracy").item<double>(), 0.75);
}

TEST(MetricCollection, WeightGoesToMeanButNotToSumAsInTorchMetrics) {
  MetricCollection collection;
  collection.add("sum", Sum()).add("mean", Mean());
  UpdateArgs args;
  args.keywords = {{"value", at::tensor({1.0, 2.0, 3.0})}, {"weight", at::tensor({0.0, 1.0, 2.0})}};
  collection.update(args);
  const auto values = collection.compute();
  EXPECT_DOUBLE_EQ(values.at("sum").item<double>(), 6.0);  // TorchMetrics' SumMetric.update(value) has no weight
  EXPECT_DOUBLE_EQ(values.at("mean").item<double>(), 8.0 / 3.0);
  Sum sum;  // called directly, Sum still takes one
  sum.update(at::tensor({1.0, 2.0, 3.0}), at::tensor({0.0, 1.0, 2.0}));
  EXPECT_DOUBLE_EQ(sum.compute().item<double>(), 8.0);
}

TEST(MetricCollection, HoldsMetricsOfEveryFamilyAndRoutesKeywords) {
  const auto o = Opts::multiclass(10);
  auto collection = mixed(o);
  EXPECT_THAT(collection.groups(), ElementsAre(ElementsAre("loss"), ElementsAre("worst"),
                                               ElementsAre("accuracy", "f1", "confmat"), ElementsAre("top2")));
  Mean loss;
  Max worst;
  Accuracy accuracy(o);
  Accuracy top2(Opts(o).top_k(2));
  for (int64_t i = 0; i < 4; ++i) {
    const auto b = batch(i);
    const auto l = loss_of(i);
    SyncCounter counter;
    collection.update(keyword_args(l, b));
    EXPECT_EQ(counter.total(), 0) << counter.summary();
    loss.update(l);
    worst.update(l);
    accuracy.update(b.preds, b.target);
    top2.update(b.preds, b.target);
  }
  const auto values = collection.compute();
  EXPECT_TRUE(tensors_close(values.at("loss"), loss.compute()));
  EXPECT_TRUE(tensors_close(values.at("worst"), worst.compute()));
  EXPECT_TRUE(tensors_close(values.at("accuracy"), accuracy.compute()));
  EXPECT_TRUE(tensors_close(values.at("top2"), top2.compute()));
}

TEST(MetricCollection, UnknownClassesShareOnlyWithTheSameOptions) {
  const auto unknown = ClassificationOptions::multiclass(kUnknownClasses).average(Average::Micro);
  MetricCollection collection;
  collection.add("acc", Accuracy(unknown)).add("f1", F1Score(unknown));
  collection.add("acc3", Accuracy(ClassificationOptions::multiclass(3).average(Average::Micro)));
  collection.add("cm3", ConfusionMatrix(ClassificationOptions::multiclass(3)));
  EXPECT_THAT(collection.groups(), ElementsAre(ElementsAre("acc", "f1"), ElementsAre("acc3", "cm3")));
  collection.update(UpdateArgs({at::tensor({0, 2, 1}, at::kLong), at::tensor({0, 1, 1}, at::kLong)}));
  const auto values = collection.compute();
  EXPECT_NEAR(values.at("acc").item<double>(), 2.0 / 3, 1e-6);
  EXPECT_NEAR(values.at("f1").item<double>(), 2.0 / 3, 1e-6);
  EXPECT_NEAR(values.at("acc3").item<double>(), 2.0 / 3, 1e-6);
}

TEST(MetricCollection, IdenticalAggregatorsShareOneState) {
  MetricCollection collection;
  collection.add("a", Mean()).add("b", Mean()).add("c", Mean(AggregationOptions().nan_policy(NanPolicy::ignore())));
  collection.add("d", Sum());
  EXPECT_THAT(collection.groups(), ElementsAre(ElementsAre("a", "b"), ElementsAre("c"), ElementsAre("d")));
  const auto values = at::tensor({1.0, 3.0});
  collection.update(UpdateArgs({values}));
  EXPECT_EQ(collection.compute().at("b").item<double>(), 2.0);
}

TEST(MetricCollection, FailedUpdateChangesNoMember) {
  // Labels suit top_k = 1 but not top_k = 2: the second state refuses them after the first
  // state's checks passed; nothing may be counted.
  MetricCollection collection;
  collection.add("top1", Accuracy(Opts::multiclass(3))).add("top2", Accuracy(Opts::multiclass(3).top_k(2)));
  const auto before = collection.state_dict();
  EXPECT_THROWS_WITH(collection.update(at::tensor({0, 1, 2}, at::kLong), at::tensor({0, 1, 1}, at::kLong)),
                     c10::ValueError, "MulticlassAccuracy.update: top_k = 2 needs scores");
  EXPECT_TRUE(states_equal(collection.state_dict(), before));
  EXPECT_EQ(collection.at("top1").update_count(), 0);
}

TEST(MetricCollection, UnknownKeywordsAreLeftToTheMetricsThatTakeThem) {
  MetricCollection collection;
  collection.add("loss", Mean());
  const auto value = at::tensor({2.0});
  const auto preds = at::tensor({1.0});
  UpdateArgs args;
  args.keywords = {{"value", value}, {"preds", preds}};
  collection.update(args);
  EXPECT_EQ(collection.compute().at("loss").item<double>(), 2.0);
  Mean alone;
  EXPECT_THROWS_WITH(alone.update(args), c10::TypeError, "Mean.update: unexpected argument 'preds'");
  EXPECT_EQ(alone.update_count(), 0);
}

TEST(MetricCollection, UnweightedClassificationMetricsLeaveTheWeightToTheMetricsThatTakeIt) {
  // TorchMetrics' collection hands each metric the keywords its update() has: a weighted loss
  // beside an accuracy
  MetricCollection collection;
  collection.add("loss", Mean()).add("accuracy", Accuracy(Opts::multiclass(3).average(Average::Micro)));
  const auto value = at::tensor({2.0, 4.0}), weight = at::tensor({3.0, 1.0});
  const auto preds = at::tensor({0, 1, 2}, at::kLong), target = at::tensor({0, 1, 1}, at::kLong);
  UpdateArgs args;
  args.keywords = {{"preds", preds}, {"target", target}, {"value", value}, {"weight", weight}};
  collection.update(args);
  const auto values = collection.compute();
  EXPECT_DOUBLE_EQ(values.at("loss").item<double>(), (2.0 * 3 + 4.0 * 1) / 4);
  EXPECT_NEAR(values.at("accuracy").item<double>(), 2.0 / 3, 1e-7);
  Accuracy alone(Opts::multiclass(3));
  EXPECT_THROWS_WITH(alone.update(args), c10::TypeError, "unexpected argument 'value'");
  args.keywords.erase(args.keywords.begin() + 2);
  EXPECT_THROWS_WITH(alone.update(args), c10::TypeError,
                     "a weight was given (the third argument or weight=), but the metric counts without weights");
  EXPECT_EQ(alone.update_count(), 0);
}

// The state dict of a confusion matrix and a precision that shares its C x C state, and of the
// same two apart: each metric's part in its own layout.
struct TwoLayouts {
  MetricCollection grouped, apart{MetricCollectionOptions().compute_groups(false)};
  std::shared_ptr<Precision> precision;
};

TwoLayouts confmat_and_precision() {
  const auto o = Opts::multiclass(3).average(Average::None);
  TwoLayouts c;
  c.precision = std::make_shared<Precision>(o);
  c.grouped.add("confmat", ConfusionMatrix(o)).add("precision", c.precision);
  c.apart.add("confmat", ConfusionMatrix(o)).add("precision", Precision(o));
  return c;
}

const at::Tensor& first_preds() {
  static const auto t = at::tensor({0, 1, 2, 0}, at::kLong);
  return t;
}
const at::Tensor& first_target() {
  static const auto t = at::tensor({0, 1, 1, 0}, at::kLong);
  return t;
}

TEST(MetricCollection, StateDictKeysAreEachMetricsOwnWhateverTheGroups) {
  auto c = confmat_and_precision();
  ASSERT_EQ(c.grouped.groups().size(), 1u);
  c.grouped.update(first_preds(), first_target());
  c.apart.update(first_preds(), first_target());
  const auto grouped = c.grouped.state_dict(), apart = c.apart.state_dict();
  EXPECT_EQ(grouped.count("precision.tp"), 1u);
  EXPECT_EQ(grouped.count("precision.confmat"), 0u);
  EXPECT_TRUE(states_equal(grouped, apart));
  // precision: tp [2, 1, 0], fp [0, 0, 1] (target 1 predicted 2)
  EXPECT_TRUE(at::equal(grouped.at("precision.tp"), at::tensor({2, 1, 0}, at::kLong)));
  EXPECT_TRUE(at::equal(grouped.at("precision.fp"), at::tensor({0, 0, 1}, at::kLong)));
  // either loads into the other, and the grouped collection stays grouped
  auto fresh = confmat_and_precision();
  fresh.grouped.load_state_dict(apart);
  fresh.apart.load_state_dict(grouped);
  EXPECT_EQ(fresh.grouped.groups().size(), 1u);
  EXPECT_TRUE(states_equal(fresh.grouped.state_dict(), apart));
  EXPECT_TRUE(states_equal(fresh.apart.state_dict(), grouped));
  EXPECT_TRUE(tensors_close(fresh.grouped.compute().at("precision"), at::tensor({1.0, 1.0, 0.0}).to(at::kFloat)));
}

TEST(MetricCollection, AMemberResetAloneBeforeTheCheckpointLeavesItsGroupWhenLoaded) {
  auto saved = confmat_and_precision();
  saved.grouped.update(first_preds(), first_target());
  saved.grouped.detach("precision");  // what Python does when a member resets alone
  saved.precision->reset();
  saved.grouped.update(at::tensor({2, 2}, at::kLong), at::tensor({2, 1}, at::kLong));
  const auto dict = saved.grouped.state_dict();
  auto resumed = confmat_and_precision();
  resumed.grouped.load_state_dict(dict);
  EXPECT_EQ(resumed.grouped.groups(), saved.grouped.groups());
  EXPECT_TRUE(states_equal(resumed.grouped.state_dict(), dict));
  const auto values = resumed.grouped.compute();
  EXPECT_TRUE(tensors_close(values.at("precision"), at::tensor({0.0, 0.0, 0.5}).to(at::kFloat)));
  EXPECT_EQ(values.at("confmat")[1][2].item<int64_t>(), 2);  // both batches
}

TEST(MetricCollection, ALoadGroupsTheMetricsWhoseStatesAreEqualAndMergesWithTheSaved) {
  const auto o = Opts::multiclass(3).average(Average::None);
  const auto make = [&](std::shared_ptr<ConfusionMatrix> confmat) {
    MetricCollection c;
    c.add("confmat", std::move(confmat)).add("precision", Precision(o)).add("recall", Recall(o));
    return c;
  };
  const auto confmat = std::make_shared<ConfusionMatrix>(o);
  auto saved = make(confmat);
  saved.update(first_preds(), first_target());
  saved.detach("confmat");  // the confusion matrix counts a batch alone: its group-mates keep theirs
  confmat->update(at::tensor({1, 0}, at::kLong), at::tensor({1, 2}, at::kLong));
  auto fresh = make(std::make_shared<ConfusionMatrix>(o));
  fresh.load_state_dict(saved.state_dict());
  using Groups = std::vector<std::vector<std::string>>;
  EXPECT_EQ(fresh.groups(), (Groups{{"confmat"}, {"precision", "recall"}}));  // precision and recall still share
  EXPECT_TRUE(states_equal(fresh.state_dict(), saved.state_dict()));
  fresh.merge(saved);  // the same groups, in another order
  EXPECT_EQ(fresh.at("confmat").update_count(), 4);
  EXPECT_EQ(fresh.at("recall").update_count(), 2);
}

TEST(MetricCollection, AMetricAbsentFromADictFollowsAGroupMateThatCanServeIt) {
  auto saved = confmat_and_precision();
  saved.grouped.update(first_preds(), first_target());
  auto without = [&](const std::string& name) {
    auto dict = saved.grouped.state_dict();
    for (auto it = dict.begin(); it != dict.end();) it = it->first.rfind(name + ".", 0) == 0 ? dict.erase(it) : ++it;
    return dict;
  };
  auto fresh = confmat_and_precision();
  EXPECT_THROW(fresh.grouped.load_state_dict(without("precision")), c10::ValueError);  // refused by default
  fresh.grouped.load_state_dict(without("precision"), AbsentMetric::FollowsItsGroup);
  EXPECT_EQ(fresh.grouped.groups().size(), 1u);  // it reads the matrix loaded
  EXPECT_TRUE(states_equal(fresh.grouped.state_dict(), saved.grouped.state_dict()));
  auto other = confmat_and_precision();
  other.grouped.load_state_dict(without("confmat"), AbsentMetric::FollowsItsGroup);
  EXPECT_EQ(other.grouped.groups().size(), 2u);  // per-class counts cannot serve a matrix: it keeps its own
  EXPECT_EQ(other.grouped.at("confmat").update_count(), 0);
  EXPECT_EQ(other.grouped.at("precision").update_count(), 1);
}

TEST(MetricCollection, WeightedCountsDerivedFromAMatrixStillShareItWhenLoaded) {
  // tn derived from a weighted matrix can differ in its last bits from tn counted directly
  const auto o = Opts::multiclass(3).average(Average::None).weighted(true);
  MetricCollection apart(MetricCollectionOptions().compute_groups(false)), grouped;
  apart.add("confmat", ConfusionMatrix(o)).add("precision", Precision(o));
  grouped.add("confmat", ConfusionMatrix(o)).add("precision", Precision(o));
  for (int seed = 0; seed < 10; ++seed) {
    SCOPED_TRACE(seed);
    auto gen = generator(seed);
    // skewed classes and weights over six orders of magnitude: a tn that is 0 comes out as rounding noise
    const auto preds = at::randint(3, {64}, gen, at::kLong).clamp_min_(seed % 2);
    const auto target = at::randint(3, {64}, gen, at::kLong).clamp_min_(seed % 2);
    const auto weight = at::rand({64}, gen, at::kDouble).mul_(6).exp_();
    auto apart_copy = apart.clone();
    apart_copy.update(preds, target, weight);
    auto grouped_copy = grouped.clone();
    grouped_copy.load_state_dict(apart_copy.state_dict());
    EXPECT_EQ(grouped_copy.groups().size(), 1u);
    EXPECT_TRUE(tensors_close(grouped_copy.compute().at("precision"), apart_copy.compute().at("precision")));
  }
}

TEST(MetricCollection, WeightedCountsThatReallyDifferNeverShareAState) {
  // one extra sample of class 2, of a weight far below the others' (or a weight of 1 beside 1e13)
  const auto o = Opts::multiclass(3).average(Average::None).weighted(true);
  for (const auto& [others, extra] : {std::pair<double, double>{1.0, 1e-13}, {1e13, 1.0}}) {
    SCOPED_TRACE(others);
    MetricCollection apart(MetricCollectionOptions().compute_groups(false)), grouped;
    const auto precision = std::make_shared<Precision>(o);
    apart.add("confmat", ConfusionMatrix(o)).add("precision", precision);
    grouped.add("confmat", ConfusionMatrix(o)).add("precision", Precision(o));
    apart.update(at::tensor({0, 1}, at::kLong), at::tensor({0, 1}, at::kLong), at::full({2}, others, at::kDouble));
    precision->update(at::tensor({2}, at::kLong), at::tensor({2}, at::kLong), at::full({1}, extra, at::kDouble));
    grouped.load_state_dict(apart.state_dict());
    EXPECT_EQ(grouped.groups().size(), 2u);
    EXPECT_TRUE(tensors_close(grouped.compute().at("precision"), at::tensor({1.0, 1.0, 1.0}).to(at::kFloat)));
  }
}

TEST(MetricCollection, AnOverflowedWeightedCountNeverSharesAFiniteState) {
  const auto o = Opts::multiclass(2).average(Average::None).weighted(true);
  MetricCollection apart(MetricCollectionOptions().compute_groups(false)), grouped;
  apart.add("confmat", ConfusionMatrix(o)).add("recall", Recall(o));
  grouped.add("confmat", ConfusionMatrix(o)).add("recall", Recall(o));
  apart.update(at::tensor({0, 1}, at::kLong), at::tensor({0, 1}, at::kLong), at::ones({2}, at::kDouble));
  auto dict = apart.state_dict();
  dict["recall.tp"] = at::tensor({std::numeric_limits<double>::infinity(), 1.0}, at::kDouble);
  grouped.load_state_dict(dict);
  EXPECT_EQ(grouped.groups().size(), 2u);
  EXPECT_THROWS_WITH(grouped.compute(), c10::Error, "the weighted counts overflowed float64");
}

TEST(MetricCollection, AMetricUnderTwoNamesTakesThePartGivenUnderEither) {
  const auto o = Opts::multiclass(3).average(Average::None);
  for (const std::string given : {"a", "b"}) {
    SCOPED_TRACE(given);
    const auto precision = std::make_shared<Precision>(o);
    MetricCollection twice;
    twice.add("a", precision).add("b", precision).add("confmat", ConfusionMatrix(o));
    MetricCollection source(MetricCollectionOptions().compute_groups(false));
    source.add("a", Precision(o)).add("b", Precision(o)).add("confmat", ConfusionMatrix(o));
    source.update(first_preds(), first_target());
    StateDict part;
    for (const auto& [key, tensor] : source.state_dict()) {
      if (key.rfind(given + ".", 0) == 0) part.emplace(key, tensor);
    }
    twice.load_state_dict(part, AbsentMetric::FollowsItsGroup);
    EXPECT_EQ(precision->update_count(), 1);
    EXPECT_TRUE(tensors_close(twice.compute().at("b"), at::tensor({1.0, 1.0, 0.0}).to(at::kFloat)));
    EXPECT_EQ(twice.at("confmat").update_count(), 0);  // nothing given for it: it keeps its state
  }
}

TEST(MetricCollection, AMetricAddedAgainUnderAnotherNameIsUpdatedOnce) {
  const auto o = Opts::multiclass(3);
  const auto confmat = std::make_shared<ConfusionMatrix>(o);
  MetricCollection collection;
  collection.add("a", confmat);
  collection.update(first_preds(), first_target());
  collection.add("b", confmat);  // after an update: it cannot join a fresh group, but it is one state
  collection.update(first_preds(), first_target());
  EXPECT_EQ(collection.groups(), (std::vector<std::vector<std::string>>{{"a", "b"}}));
  EXPECT_EQ(confmat->update_count(), 2);
}

TEST(MetricCollection, OneMetricUnderTwoNamesStaysOneStateWhenLoaded) {
  const auto o = Opts::multiclass(3);
  const auto confmat = std::make_shared<ConfusionMatrix>(o);
  MetricCollection twice;
  twice.add("a", confmat).add("b", confmat);
  MetricCollection apart(MetricCollectionOptions().compute_groups(false));
  apart.add("a", ConfusionMatrix(o)).add("b", ConfusionMatrix(o));
  apart.update(first_preds(), first_target());
  twice.load_state_dict(apart.state_dict());
  EXPECT_EQ(twice.groups(), (std::vector<std::vector<std::string>>{{"a", "b"}}));
  twice.update(first_preds(), first_target());
  EXPECT_EQ(confmat->update_count(), 2);  // one update counted once
}

TEST(MetricCollection, AnAbsentMetricReadsItsGroupOwnersState) {
  // precision added first, the matrix serving the group: recall, absent, reads the matrix loaded
  // and not precision, which was reset alone before the save
  const auto o = Opts::multiclass(3).average(Average::None);
  const auto make = [&](std::shared_ptr<Precision> precision) {
    MetricCollection c;
    c.add("precision", std::move(precision)).add("confmat", ConfusionMatrix(o)).add("recall", Recall(o));
    return c;
  };
  const auto precision = std::make_shared<Precision>(o);
  auto saved = make(precision);
  saved.update(first_preds(), first_target());
  saved.detach("precision");
  precision->reset();
  auto dict = saved.state_dict();
  for (auto it = dict.begin(); it != dict.end();) it = it->first.rfind("recall.", 0) == 0 ? dict.erase(it) : ++it;
  auto fresh = make(std::make_shared<Precision>(o));
  fresh.load_state_dict(dict, AbsentMetric::FollowsItsGroup);
  EXPECT_EQ(fresh.at("recall").update_count(), 1);
  EXPECT_TRUE(tensors_close(fresh.compute().at("recall"), saved.compute().at("recall")));
}

TEST(MetricCollection, AMembersPartInTheLayoutOfTheStateItSharesStillLoads) {
  // before state dicts took each metric's own layout, a member wrote the state it shares
  auto c = confmat_and_precision();
  c.grouped.update(first_preds(), first_target());
  auto dict = c.grouped.state_dict();
  for (auto it = dict.begin(); it != dict.end();) it = it->first.rfind("precision.", 0) == 0 ? dict.erase(it) : ++it;
  for (const auto& [key, tensor] : c.precision->state().state_dict()) dict.emplace("precision." + key, tensor);
  const auto text = c.precision->description();
  auto bytes = at::empty({static_cast<int64_t>(text.size())}, at::kByte);
  std::copy(text.begin(), text.end(), bytes.data_ptr<uint8_t>());
  dict.emplace("precision._metric", bytes);
  dict.emplace("precision._version", dict.at("confmat._version"));
  ASSERT_EQ(dict.count("precision.confmat"), 1u);
  auto fresh = confmat_and_precision();
  fresh.grouped.load_state_dict(dict);
  EXPECT_EQ(fresh.grouped.groups().size(), 1u);
  EXPECT_TRUE(states_equal(fresh.grouped.state_dict(), c.grouped.state_dict()));
}

TEST(MetricCollection, StateEntriesWalkEachDistinctStateOnceWithItsReduction) {
  auto collection = mixed(Opts::multiclass(4));
  std::vector<std::string> names;
  std::vector<Reduction> reductions;
  for (const auto& entry : collection.state_entries()) {
    names.push_back(entry.name);
    reductions.push_back(entry.reduction);
  }
  EXPECT_THAT(names, ElementsAre("loss.update_count", "loss.total", "loss.bad_input_counts", "loss.first_bad_update",
                                 "loss.compensation", "worst.update_count", "worst.max_value",
                                 "worst.bad_input_counts", "worst.first_bad_update", "accuracy.update_count",
                                 "accuracy.confmat", "accuracy.bad_input_counts", "accuracy.first_bad_update",
                                 "top2.update_count", "top2.tp", "top2.fp", "top2.tn", "top2.fn",
                                 "top2.bad_input_counts", "top2.first_bad_update"));
  using R = Reduction;
  EXPECT_THAT(reductions, ElementsAre(R::Sum, R::Sum, R::Sum, R::Min, R::Sum, R::Sum, R::Max, R::Sum, R::Min, R::Sum,
                                      R::Sum, R::Sum, R::Min, R::Sum, R::Sum, R::Sum, R::Sum, R::Sum, R::Sum, R::Min));
  for (const auto& entry : collection.state_entries()) {
    EXPECT_EQ(entry.tensor.device(), at::Device(at::kCPU)) << entry.name;
  }
}

TEST(MetricCollection, UpdateCountAndTallyLiveOnTheDeviceAsStateEntries) {
  Accuracy accuracy(Opts::multiclass(3));
  accuracy.update(at::tensor({0, 1}, at::kLong), at::tensor({0, 7}, at::kLong));
  const auto dict = accuracy.state_dict();
  EXPECT_EQ(dict.at("update_count").item<int64_t>(), 1);
  EXPECT_TRUE(tensors_close(dict.at("bad_input_counts"), at::tensor({1, 0, 0, 1}, at::kLong)));
  EXPECT_EQ(dict.at("first_bad_update").item<int64_t>(), 0);
}

// The contract every metric keeps, kept by collections too.
testing::ContractCase collection_case(const std::string& name, std::function<MetricCollection()> make) {
  testing::ContractCase c{name, nullptr, nullptr, 6};
  c.make_collection = std::move(make);
  c.update_collection = [](MetricCollection& collection, int64_t i) {
    auto loss = loss_of(i);
    if (i == 3) loss[0] = std::nan("");  // bad input: counted, kept out, reported as a warning
    collection.update(keyword_args(loss, batch(i, 4)));
  };
  return c;
}

std::vector<testing::ContractCase> collection_cases() {
  return {collection_case("Mixed", [] { return mixed(Opts::multiclass(4)); }),
          collection_case("Ungrouped", [] {
            MetricCollection collection(MetricCollectionOptions().compute_groups(false));
            collection.add("loss", Max()).add("recall", Recall(Opts::multiclass(4).ignore_index(1)));
            collection.add("confmat", ConfusionMatrix(Opts::multiclass(4).ignore_index(1)));
            return collection;
          })};
}

INSTANTIATE_TEST_SUITE_P(Collection, MetricContract, ::testing::ValuesIn(collection_cases()),
                         testing::contract_case_name);

TEST(MetricCollection, GroupsThatShareOneStateTakeABatchAMergeAndALoadOnce) {
  // A nested collection's metrics, handed over, share a state in the collection they join while
  // they sit in a group each in theirs: here `joined` shares the objects' state, `nested` (no
  // compute groups) holds them in a group each.
  const auto o = Opts::multiclass(10);
  const auto accuracy = std::make_shared<Accuracy>(o);
  const auto f1 = std::make_shared<F1Score>(o);
  MetricCollection joined, nested(MetricCollectionOptions().compute_groups(false));
  joined.add("accuracy", accuracy).add("f1", f1);
  nested.add("accuracy", accuracy).add("f1", f1);
  ASSERT_EQ(joined.groups().size(), 1u);
  ASSERT_EQ(nested.groups().size(), 2u);
  Accuracy expected(o);
  const auto count = [&](const Batch& b) { expected.update(b.preds, b.target); };
  nested.update(batch(0).preds, batch(0).target);
  count(batch(0));
  EXPECT_EQ(accuracy->update_count(), 1);
  nested.forward(batch(1).preds, batch(1).target);
  count(batch(1));
  EXPECT_EQ(f1->update_count(), 2);
  // a copy shares one state as the original does: merged, its batch counts once
  auto copy = nested.clone();
  copy.reset();
  copy.update(batch(2).preds, batch(2).target);
  count(batch(2));
  nested.merge(copy);
  EXPECT_EQ(accuracy->update_count(), 3);
  EXPECT_TRUE(tensors_close(nested.compute().at("accuracy"), expected.compute()));
  // another whose metrics counted the same in two states merges once; different counts are refused
  MetricCollection separate(MetricCollectionOptions().compute_groups(false));
  separate.add("accuracy", Accuracy(o)).add("f1", F1Score(o));
  separate.update(batch(3).preds, batch(3).target);
  nested.merge(separate);
  count(batch(3));
  EXPECT_EQ(accuracy->update_count(), 4);
  const auto counted = std::make_shared<F1Score>(o);
  counted->update(batch(4).preds, batch(4).target);
  MetricCollection different(MetricCollectionOptions().compute_groups(false));
  different.add("accuracy", Accuracy(o)).add("f1", counted);
  EXPECT_THROWS_WITH(nested.merge(different), c10::ValueError, "but the other holds different counts for them");
  // the same parts load once; different ones are refused, changing nothing
  auto saved = nested.state_dict();
  nested.load_state_dict(saved);
  EXPECT_EQ(accuracy->update_count(), 4);
  saved["f1.update_count"] = at::full({}, 7, at::kLong);
  EXPECT_THROWS_WITH(nested.load_state_dict(saved), c10::ValueError, "but the dict gives them different parts");
  EXPECT_EQ(f1->update_count(), 4);
  EXPECT_TRUE(tensors_close(joined.compute().at("accuracy"), expected.compute()));
}

TEST(MetricCollection, ComputeWithoutReportGivesTheValueAndLeavesTheReport) {
  const auto o = Opts::multiclass(10);
  MetricCollection collection;
  collection.add("accuracy", Accuracy(o));
  auto bad = batch(0);
  bad.target[0] = 10;  // outside [0, 10): left out, reported by compute()
  collection.update(bad.preds, bad.target);
  Accuracy expected(o);
  expected.update(bad.preds.narrow(0, 1, 31), bad.target.narrow(0, 1, 31));
  EXPECT_TRUE(tensors_close(collection.compute_without_report().at("accuracy"), expected.compute()));
  EXPECT_TRUE(tensors_close(collection.at("accuracy").compute_without_report(), expected.compute()));
  EXPECT_THROWS_WITH(collection.compute(), c10::ValueError, "1 target outside [0, 10)");
}

}  // namespace
}  // namespace metrics
