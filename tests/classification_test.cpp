// Known answers (most from TorchMetrics 1.6's own documentation examples), bad input and errors.

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include <metrics/backend.h>
#include <metrics/classification.h>
#include <metrics/shape_error.h>
#include <metrics/sync_counter.h>

#include "../src/classification/entry_counts_simd.h"
#include "../src/classification/weighted_entry_counts.h"
#include "test_support.h"

namespace metrics {
namespace {

using testing::states_equal;
using testing::tensors_close;
using Opts = ClassificationOptions;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

at::Tensor longs(std::vector<int64_t> v) { return at::tensor(v, at::kLong); }
at::Tensor floats(std::vector<double> v) { return at::tensor(v, at::kDouble).to(at::kFloat); }
at::Tensor values(std::vector<double> v) { return at::tensor(v, at::kDouble); }

// Runs `check` once on the CPU fast path and once on the ATen path.
template <typename Check>
void on_both_paths(Check check) {
  check();
  ForceAtenPath aten;
  check();
}

template <typename M>
at::Tensor computed(M metric, const at::Tensor& preds, const at::Tensor& target) {
  metric.update(preds, target);
  return metric.compute();
}

// ---------------------------------------------------------------- binary

TEST(Binary, TorchMetricsDocExamples) {
  on_both_paths([] {
    const auto target = longs({0, 1, 0, 1, 0, 1});
    for (const auto& preds : {longs({0, 0, 1, 1, 0, 1}), floats({0.11, 0.22, 0.84, 0.73, 0.33, 0.92})}) {
      EXPECT_TRUE(tensors_close(computed(Accuracy(Opts::binary()), preds, target), floats({2.0 / 3}).reshape({}), 1e-6));
      EXPECT_TRUE(tensors_close(computed(Precision(Opts::binary()), preds, target), floats({2.0 / 3}).reshape({}), 1e-6));
      EXPECT_TRUE(tensors_close(computed(Recall(Opts::binary()), preds, target), floats({2.0 / 3}).reshape({}), 1e-6));
      EXPECT_TRUE(tensors_close(computed(F1Score(Opts::binary()), preds, target), floats({2.0 / 3}).reshape({}), 1e-6));
      EXPECT_TRUE(tensors_close(computed(StatScores(Opts::binary()), preds, target), longs({2, 1, 2, 1, 3})));
      EXPECT_TRUE(tensors_close(computed(ConfusionMatrix(Opts::binary()), preds, target), longs({2, 1, 1, 2}).reshape({2, 2})));
    }
  });
}

TEST(Binary, LogitsAreThresholdedInLogitSpace) {
  on_both_paths([] {
    // Values outside [0, 1] make the batch logits: sigmoid(x) > 0.5 <=> x > 0.
    const auto preds = floats({-1.0, 2.0, 0.3, -0.1});
    const auto target = longs({0, 1, 1, 1});
    EXPECT_TRUE(tensors_close(computed(StatScores(Opts::binary()), preds, target), longs({2, 0, 1, 1, 3})));
    // A threshold of 0.8 on logits is x > log(4).
    EXPECT_TRUE(tensors_close(computed(StatScores(Opts::binary(0.8)), floats({1.3, 1.4, -3}), longs({1, 1, 0})),
                              longs({1, 0, 1, 1, 2})));
  });
}

TEST(Binary, ExtraDimensionsAreFlattened) {
  on_both_paths([] {
    const auto target = longs({0, 1, 1, 0, 0, 1, 1, 1}).reshape({2, 2, 2});
    const auto preds = floats({0.1, 0.9, 0.2, 0.8, 0.3, 0.7, 0.6, 0.4}).reshape({2, 2, 2});
    EXPECT_TRUE(tensors_close(computed(StatScores(Opts::binary()), preds, target), longs({3, 1, 2, 2, 5})));
  });
}

TEST(Binary, IgnoreIndexDropsEntries) {
  on_both_paths([] {
    const auto preds = floats({0.9, 0.9, 0.1, 0.1});
    const auto target = longs({1, -1, -1, 0});
    EXPECT_TRUE(tensors_close(computed(StatScores(Opts::binary().ignore_index(-1)), preds, target),
                              longs({1, 0, 1, 0, 1})));
  });
}

// ---------------------------------------------------------------- multiclass

at::Tensor doc_scores() {
  return floats({0.16, 0.26, 0.58, 0.22, 0.61, 0.17, 0.71, 0.09, 0.20, 0.05, 0.82, 0.13}).reshape({4, 3});
}

TEST(Multiclass, TorchMetricsDocExamples) {
  on_both_paths([] {
    const auto target = longs({2, 1, 0, 0});
    for (const auto& preds : {longs({2, 1, 0, 1}), doc_scores()}) {
      const auto o = Opts::multiclass(3);
      EXPECT_TRUE(tensors_close(computed(Accuracy(o), preds, target), floats({5.0 / 6}).reshape({}), 1e-6));
      EXPECT_TRUE(tensors_close(computed(Accuracy(Opts(o).average(Average::None)), preds, target), floats({0.5, 1, 1})));
      EXPECT_TRUE(tensors_close(computed(Accuracy(Opts(o).average(Average::Micro)), preds, target), floats({0.75}).reshape({})));
      EXPECT_TRUE(tensors_close(computed(Precision(o), preds, target), floats({5.0 / 6}).reshape({}), 1e-6));
      EXPECT_TRUE(tensors_close(computed(Recall(o), preds, target), floats({5.0 / 6}).reshape({}), 1e-6));
      EXPECT_TRUE(tensors_close(computed(F1Score(o), preds, target), floats({7.0 / 9}).reshape({}), 1e-6));
      EXPECT_TRUE(tensors_close(computed(StatScores(Opts(o).average(Average::Micro)), preds, target),
                                longs({3, 1, 7, 1, 4})));
      EXPECT_TRUE(tensors_close(computed(StatScores(Opts(o).average(Average::None)), preds, target),
                                longs({1, 0, 2, 1, 2, 1, 1, 2, 0, 1, 1, 0, 3, 0, 1}).reshape({3, 5})));
      EXPECT_TRUE(tensors_close(computed(ConfusionMatrix(o), preds, target),
                                longs({1, 1, 0, 0, 1, 0, 0, 0, 1}).reshape({3, 3})));
    }
  });
}

TEST(Multiclass, FBetaWeightsRecall) {
  on_both_paths([] {
    // TorchMetrics doc: multiclass_fbeta_score(preds, target, beta=2.0, num_classes=3) = 0.7963
    const auto value = computed(FBetaScore(2.0, Opts::multiclass(3)), longs({2, 1, 0, 1}), longs({2, 1, 0, 0}));
    EXPECT_NEAR(value.item<double>(), (5.0 / 6 + 5.0 / 9 + 1.0) / 3, 1e-6);
  });
}

TEST(Multiclass, MacroSkipsAbsentClassesButKeepsOnlyPredictedOnes) {
  on_both_paths([] {
    // Class 3 never appears: left out of the macro mean. Class 2 is only predicted: counts with 0.
    const auto o = Opts::multiclass(4);
    const auto preds = longs({0, 0, 2, 1});
    const auto target = longs({0, 0, 1, 1});
    EXPECT_NEAR(computed(Precision(o), preds, target).item<double>(), (1 + 1 + 0) / 3.0, 1e-7);
    EXPECT_NEAR(computed(Recall(o), preds, target).item<double>(), (1 + 0.5 + 0) / 3.0, 1e-7);
    EXPECT_TRUE(tensors_close(computed(Recall(Opts(o).average(Average::None)), preds, target), floats({1, 0.5, 0, 0})));
    // Weighted by support: class 0 (2 samples) recall 1, class 1 (2 samples) recall 0.5.
    EXPECT_NEAR(computed(Recall(Opts(o).average(Average::Weighted)), preds, target).item<double>(), 0.75, 1e-7);
  });
}

TEST(Multiclass, TopKFollowsTorchMetrics16) {
  on_both_paths([] {
    // Row 3: target 0 is not in the top 2 {1, 2}: the prediction stays the top-1 class 1.
    const auto o = Opts::multiclass(3).top_k(2).average(Average::None);
    EXPECT_TRUE(tensors_close(computed(Accuracy(o), doc_scores(), longs({2, 1, 0, 0})), floats({0.5, 1, 1})));
    // Target 1 of row 0 is second: with top_k 2 it counts as predicted.
    EXPECT_TRUE(tensors_close(computed(StatScores(Opts(o).average(Average::Micro)), doc_scores(), longs({1, 1, 0, 0})),
                              longs({3, 1, 7, 1, 4})));
  });
}

TEST(Multiclass, TiesGoToTheFirstIndexOnBothPaths) {
  on_both_paths([] {
    const auto scores = floats({1, 3, 3, 0, 5, 5, 5, 5, 2, 2, 1, 2}).reshape({3, 4});
    EXPECT_TRUE(tensors_close(computed(ConfusionMatrix(Opts::multiclass(4)), scores, longs({1, 0, 0})),
                              longs({2, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}).reshape({4, 4})));
    // Wide rows take the vector argmax: ties and the maximum in the tail.
    auto wide = at::zeros({2, 77});
    wide.index_put_({0, 40}, 1.0);
    wide.index_put_({0, 70}, 1.0);
    wide.index_put_({1, 76}, 2.0);
    EXPECT_TRUE(tensors_close(computed(StatScores(Opts::multiclass(77).average(Average::Micro)), wide, longs({40, 76})),
                              longs({2, 0, 152, 0, 2})));
  });
}

TEST(Multiclass, TwoClasses) {
  on_both_paths([] {
    const auto o = Opts::multiclass(2);
    EXPECT_TRUE(tensors_close(computed(ConfusionMatrix(o), longs({0, 1, 1, 1}), longs({0, 0, 1, 1})),
                              longs({1, 1, 0, 2}).reshape({2, 2})));
    EXPECT_NEAR(computed(Accuracy(o), longs({0, 1, 1, 1}), longs({0, 0, 1, 1})).item<double>(), 0.75, 1e-7);
  });
}

TEST(Multiclass, IgnoreIndexInsideAndOutsideTheClassRange) {
  on_both_paths([] {
    const auto preds = longs({0, 1, 2, 2});
    const auto target = longs({0, 1, 1, 255});
    EXPECT_TRUE(tensors_close(computed(ConfusionMatrix(Opts::multiclass(3).ignore_index(255)), preds, target),
                              longs({1, 0, 0, 0, 1, 1, 0, 0, 0}).reshape({3, 3})));
    // ignore_index 0: samples with target 0 are dropped, class 0 stays in the class set.
    const auto o = Opts::multiclass(3).ignore_index(0).average(Average::None);
    EXPECT_TRUE(tensors_close(computed(Recall(o), longs({0, 1, 0}), longs({0, 1, 1})), floats({0, 0.5, 0})));
    EXPECT_TRUE(tensors_close(computed(Precision(o), longs({0, 1, 0}), longs({0, 1, 1})), floats({0, 1, 0})));
  });
}

TEST(Multiclass, AllIgnoredBatchCountsNothing) {
  on_both_paths([] {
    Accuracy accuracy(Opts::multiclass(3).ignore_index(-1));
    accuracy.update(doc_scores(), longs({-1, -1, -1, -1}));
    EXPECT_EQ(accuracy.compute().item<double>(), 0.0);  // no class seen: 0, as TorchMetrics
    EXPECT_EQ(accuracy.stat_counts().tn.sum().item<int64_t>(), 0);
  });
}

TEST(Multiclass, SegmentationShapedInput) {
  on_both_paths([] {
    // (N, C, H, W) scores against (N, H, W) targets: every pixel is a sample.
    auto scores = at::zeros({1, 3, 2, 2});
    scores.index_put_({0, 0, 0, 0}, 1.0);  // pixel (0, 0) -> class 0
    scores.index_put_({0, 2, 0, 1}, 1.0);  // pixel (0, 1) -> class 2
    scores.index_put_({0, 1, 1, 0}, 1.0);  // pixel (1, 0) -> class 1
    scores.index_put_({0, 1, 1, 1}, 1.0);  // pixel (1, 1) -> class 1
    const auto target = longs({0, 1, 1, 2}).reshape({1, 2, 2});
    EXPECT_TRUE(tensors_close(computed(ConfusionMatrix(Opts::multiclass(3)), scores, target),
                              longs({1, 0, 0, 0, 1, 1, 0, 1, 0}).reshape({3, 3})));
  });
}

TEST(Multiclass, ZeroDivisionOption) {
  const auto preds = longs({0, 0});
  const auto target = longs({0, 0});
  const auto o = Opts::multiclass(3).average(Average::None);
  EXPECT_TRUE(tensors_close(computed(Precision(o), preds, target), floats({1, 0, 0})));
  EXPECT_TRUE(tensors_close(computed(Precision(Opts(o).zero_division(1)), preds, target), floats({1, 1, 1})));
}

TEST(Multiclass, ConfusionMatrixNormalization) {
  const auto preds = longs({2, 1, 0, 1});
  const auto target = longs({2, 1, 0, 0});
  const auto o = Opts::multiclass(3);
  EXPECT_TRUE(tensors_close(computed(ConfusionMatrix(o, Normalize::True), preds, target),
                            floats({0.5, 0.5, 0, 0, 1, 0, 0, 0, 1}).reshape({3, 3})));
  EXPECT_TRUE(tensors_close(computed(ConfusionMatrix(o, Normalize::Pred), preds, target),
                            floats({1, 0.5, 0, 0, 0.5, 0, 0, 0, 1}).reshape({3, 3})));
  EXPECT_TRUE(tensors_close(computed(ConfusionMatrix(o, Normalize::All), preds, target),
                            floats({0.25, 0.25, 0, 0, 0.25, 0, 0, 0, 0.25}).reshape({3, 3})));
  // 0/0 in an empty row becomes 0
  EXPECT_TRUE(tensors_close(computed(ConfusionMatrix(Opts::multiclass(3), Normalize::True), longs({0}), longs({0})),
                            floats({1, 0, 0, 0, 0, 0, 0, 0, 0}).reshape({3, 3})));
}

// ---------------------------------------------------------------- multiclass, num_classes unknown

// TorchMetrics 1.6.2+'s num_classes=None (micro only): one class, tn = 1 * n - (tp + fp + fn) = -wrong.
Opts unknown_classes() { return Opts::multiclass(kUnknownClasses).average(Average::Micro); }

TEST(UnknownClasses, CountsIntoOneClassAsTorchMetrics) {
  on_both_paths([] {
    // labels of any value count: 3 right (0, 5, -3), 2 wrong (7 for 1, 2 for 9)
    const auto preds = longs({0, 5, -3, 7, 2}), target = longs({0, 5, -3, 1, 9});
    EXPECT_TRUE(tensors_close(computed(StatScores(unknown_classes()), preds, target), longs({3, 2, -2, 2, 5})));
    for (const auto& value : {computed(Accuracy(unknown_classes()), preds, target),
                              computed(Precision(unknown_classes()), preds, target),
                              computed(Recall(unknown_classes()), preds, target),
                              computed(F1Score(unknown_classes()), preds, target),
                              computed(FBetaScore(0.5, unknown_classes()), preds, target)}) {
      EXPECT_TRUE(tensors_close(value, floats({0.6}).reshape({}), 1e-6));
    }
    // scores of any width: the argmax is the prediction (doc_scores: 2, 1, 0, 1); target 7 is just wrong
    EXPECT_TRUE(tensors_close(computed(StatScores(unknown_classes()), doc_scores(), longs({2, 1, 0, 7})),
                              longs({3, 1, -1, 1, 4})));
    EXPECT_TRUE(tensors_close(computed(StatScores(unknown_classes()), floats({0.3, -2}).reshape({2, 1}), longs({0, 1})),
                              longs({1, 1, -1, 1, 2})));
  });
}

TEST(UnknownClasses, IgnoreIndexWeightsAndExtraDimensions) {
  on_both_paths([] {
    StatScores ignoring(Opts(unknown_classes()).ignore_index(-1));
    ignoring.update(longs({0, 4, 1, 2}), longs({0, -1, 2, 2}));
    EXPECT_TRUE(tensors_close(ignoring.compute(), longs({2, 1, -1, 1, 3})));
    StatScores weighted(Opts(unknown_classes()).weighted(true));
    weighted.update(longs({0, 4, 1}), longs({0, 4, 2}), values({0.5, 2.0, 0.25}));
    EXPECT_TRUE(tensors_close(weighted.compute(), values({2.5, 0.25, -0.25, 0.25, 2.75})));
    // (N, C, d) scores against (N, d) targets, and a per-pixel weight
    StatScores pixels(Opts(unknown_classes()).weighted(true));
    const auto scores = floats({0.9, 0.1, 0.2, 0.8}).reshape({1, 2, 2});  // pixel 0: class 0, pixel 1: class 1
    pixels.update(scores, longs({0, 0}).reshape({1, 2}), values({3.0, 1.5}).reshape({1, 2}));
    EXPECT_TRUE(tensors_close(pixels.compute(), values({3, 1.5, -1.5, 1.5, 4.5})));
  });
}

TEST(UnknownClasses, NaNScoresAreBadInputAndTargetsNeverAre) {
  on_both_paths([] {
    Accuracy accuracy(unknown_classes());
    auto scores = doc_scores();
    scores.index_put_({1, 2}, kNaN);
    accuracy.update(scores, longs({2, 1, -40, 1000}));
    EXPECT_THROWS_WITH(accuracy.compute(), c10::ValueError,
                       "MulticlassAccuracy: 1 NaN prediction in 1 update, first at update 0 (kept out of the state)");
    const auto counts = accuracy.stat_counts();
    EXPECT_EQ(counts.tp.item<int64_t>(), 1);
    EXPECT_EQ(counts.fn.item<int64_t>(), 2);
    EXPECT_EQ(counts.tn.item<int64_t>(), -2);
  });
}

TEST(UnknownClasses, OnlyWithMicroAndTopOne) {
  for (auto average : {Average::Macro, Average::Weighted, Average::None}) {
    EXPECT_THROWS_WITH(Precision(Opts(unknown_classes()).average(average)), c10::ValueError,
                       "MulticlassPrecision: num_classes can only be None (unknown) for average='micro', got average=");
  }
  EXPECT_THROWS_WITH(Accuracy{Opts(unknown_classes()).top_k(2)}, c10::ValueError,
                     "MulticlassAccuracy: top_k = 2 needs num_classes, got None");
  EXPECT_THROWS_WITH(ConfusionMatrix{unknown_classes()}, c10::ValueError,
                     "MulticlassConfusionMatrix: num_classes is required, got None");
  EXPECT_THROWS_WITH(Recall(Opts::multilabel(kUnknownClasses)), c10::ValueError, "num_labels must be at least 2");
  EXPECT_THROWS_WITH(Accuracy(unknown_classes()).update(at::zeros({2, 0}), longs({0, 1})), c10::ValueError,
                     "MulticlassAccuracy.update: preds has shape [2, 0] but target has [2]; expected preds (N, C, ...) "
                     "with C >= 1");
  EXPECT_EQ(Accuracy(unknown_classes()).options_text().rfind("num_classes=None, top_k=1, average=micro", 0), 0u);
}

TEST(UnknownClasses, MergesAndSharesOnlyWithTheSameOptions) {
  Accuracy unknown(unknown_classes()), known(Opts::multiclass(3).average(Average::Micro));
  EXPECT_THROWS_WITH(unknown.merge(known), c10::ValueError, "num_classes=3");
  EXPECT_NE(unknown.sharing_key().counts, known.sharing_key().counts);
  EXPECT_EQ(unknown.sharing_key().counts, Precision(unknown_classes()).sharing_key().counts);
  Accuracy other(unknown_classes());
  unknown.update(longs({0, 1}), longs({0, 2}));
  other.update(longs({5}), longs({5}));
  unknown.merge(other);
  EXPECT_TRUE(tensors_close(unknown.compute(), floats({2.0 / 3}).reshape({}), 1e-6));
  Accuracy loaded(unknown_classes());
  loaded.load_state_dict(unknown.state_dict());
  EXPECT_TRUE(states_equal(loaded.state_dict(), unknown.state_dict()));
}

// ---------------------------------------------------------------- multilabel

TEST(Multilabel, TorchMetricsDocExamples) {
  on_both_paths([] {
    const auto target = longs({0, 1, 0, 1, 0, 1}).reshape({2, 3});
    for (const auto& preds : {longs({0, 0, 1, 1, 0, 1}).reshape({2, 3}),
                              floats({0.11, 0.22, 0.84, 0.73, 0.33, 0.92}).reshape({2, 3})}) {
      const auto o = Opts::multilabel(3);
      EXPECT_NEAR(computed(Accuracy(o), preds, target).item<double>(), 2.0 / 3, 1e-6);
      EXPECT_TRUE(tensors_close(computed(Accuracy(Opts(o).average(Average::None)), preds, target), floats({1, 0.5, 0.5})));
      EXPECT_NEAR(computed(Accuracy(Opts(o).average(Average::Micro)), preds, target).item<double>(), 2.0 / 3, 1e-6);
      EXPECT_NEAR(computed(Precision(o), preds, target).item<double>(), 0.5, 1e-6);
      EXPECT_NEAR(computed(Recall(o), preds, target).item<double>(), 2.0 / 3, 1e-6);
      EXPECT_NEAR(computed(F1Score(o), preds, target).item<double>(), 5.0 / 9, 1e-6);
      EXPECT_TRUE(tensors_close(computed(ConfusionMatrix(o), preds, target),
                                longs({1, 0, 0, 1, 1, 0, 1, 0, 0, 1, 0, 1}).reshape({3, 2, 2})));
    }
  });
}

TEST(Multilabel, MacroKeepsEveryLabel) {  // no exclusion of unseen labels, as TorchMetrics
  const auto preds = longs({1, 0, 1, 0}).reshape({2, 2});
  const auto target = longs({1, 0, 1, 0}).reshape({2, 2});
  EXPECT_NEAR(computed(Precision(Opts::multilabel(2)), preds, target).item<double>(), 0.5, 1e-7);
}

// ---------------------------------------------------------------- weights

TEST(Weights, CountsBecomeWeightedSums) {
  on_both_paths([] {
    const auto o = Opts::multiclass(3).weighted(true);
    ConfusionMatrix confmat(o);
    confmat.update(longs({0, 1, 2, 2}), longs({0, 1, 1, 2}), values({0.5, 2.0, 1.0, 0.25}));
    EXPECT_EQ(confmat.compute().scalar_type(), at::kDouble);
    EXPECT_TRUE(tensors_close(confmat.compute(), values({0.5, 0, 0, 0, 2, 1, 0, 0, 0.25}).reshape({3, 3})));
    Accuracy accuracy(Opts(o).average(Average::Micro));
    accuracy.update(longs({0, 1, 2, 2}), longs({0, 1, 1, 2}), values({0.5, 2.0, 1.0, 0.25}));
    EXPECT_NEAR(accuracy.compute().item<double>(), 2.75 / 3.75, 1e-7);
  });
}

TEST(Weights, PerSampleWeightsSpreadOverLabelsAndPixels) {
  on_both_paths([] {
    StatScores scores(Opts::multilabel(2).weighted(true).average(Average::None));
    scores.update(longs({1, 0, 1, 1}).reshape({2, 2}), longs({1, 1, 0, 1}).reshape({2, 2}), values({3.0, 0.5}));
    // label 0: tp 3 (row 0), fp 0.5 (row 1); label 1: fn 3 (row 0), tp 0.5 (row 1)
    EXPECT_TRUE(tensors_close(scores.compute(), values({3, 0.5, 0, 0, 3, 0.5, 0, 0, 3, 3.5}).reshape({2, 5})));
    StatScores pixels(Opts::binary().weighted(true));
    pixels.update(longs({1, 1, 0, 0}).reshape({2, 2}), longs({1, 0, 0, 1}).reshape({2, 2}), values({2.0, 1.0}));
    EXPECT_TRUE(tensors_close(pixels.compute(), values({2, 2, 1, 1, 3})));
  });
}

// ---------------------------------------------------------------- bad input, counted on the device

TEST(BadInput, CountedKeptOutAndRaisedByCompute) {
  on_both_paths([] {
    Accuracy accuracy(Opts::multiclass(3).average(Average::Micro));
    auto scores = doc_scores();
    scores.index_put_({1, 2}, kNaN);
    accuracy.update(doc_scores(), longs({2, 1, 0, 1}));  // clean: 4 right
    accuracy.update(scores, longs({2, 1, 7, -3}));       // 1 NaN row, 2 targets out of range
    EXPECT_THROWS_WITH(accuracy.compute(), c10::ValueError,
                       "MulticlassAccuracy: 2 targets outside [0, 3), 1 NaN or out-of-range prediction in 1 update, "
                       "first at update 1 (kept out of the state)");
    const auto counts = accuracy.stat_counts();
    EXPECT_EQ((counts.tp + counts.fn).sum().item<int64_t>(), 5);  // 4 clean + row 0 of the second batch
  });
}

TEST(BadInput, BinaryTargetsPredictionsAndWeights) {
  on_both_paths([] {
    Recall recall(Opts::binary().weighted(true));
    recall.update(floats({0.9, kNaN, 0.2, 0.7}), longs({1, 1, 2, 1}), values({1, 1, 1, kNaN}));
    const auto report = recall.bad_input_report();
    EXPECT_EQ(report.counts[0].second, 1);  // target 2
    EXPECT_EQ(report.counts[1].second, 1);  // NaN prediction
    EXPECT_EQ(report.counts[2].second, 1);  // NaN weight
    EXPECT_THROWS_WITH(recall.check(), c10::ValueError, "BinaryRecall: 1 target not 0 or 1");
    EXPECT_TRUE(tensors_close(recall.stat_counts().tp, values({1})));
  });
}

// Multiclass preds shaped like the target are labels in any dtype, as TorchMetrics takes them
// (logits.argmax(1).float()): whole numbers count as the integers they equal, others (1.5, NaN) as
// bad predictions, as a float target that is no whole number is a bad target.
TEST(BadInput, MulticlassFloatLabelsCountAsTheirWholeNumbers) {
  on_both_paths([] {
    for (const auto dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
      ConfusionMatrix from_floats(Opts::multiclass(3)), from_longs(Opts::multiclass(3));
      from_floats.update(floats({0, 2, 1, 2, 1.5, kNaN}).to(dtype), longs({0, 1, 1, 2, 0, 2}));
      from_longs.update(longs({0, 2, 1, 2}), longs({0, 1, 1, 2}));
      EXPECT_TRUE(at::equal(from_floats.value(), from_longs.value())) << dtype;
      EXPECT_THROWS_WITH(from_floats.compute(), c10::ValueError,
                         "MulticlassConfusionMatrix: 2 NaN or out-of-range predictions in 1 update");
    }
    Accuracy top2(Opts::multiclass(3).top_k(2));
    EXPECT_THROWS_WITH(top2.update(floats({0, 1}), longs({0, 1})), c10::ValueError,
                       "top_k = 2 needs scores (N, 3, ...), but preds are labels");
    // without num_classes labels are compared as they are: a pred that is no whole number matches
    // no target, not even one that is no whole number either
    Accuracy unknown(Opts::multiclass(kUnknownClasses).average(Average::Micro));
    unknown.update(floats({0.5, kNaN, 2, 1}), floats({1.5, kNaN, 2, 1.5}));
    EXPECT_EQ(unknown.compute().item<double>(), 0.25);
  });
}

TEST(BadInput, ValidateArgsFalseStillKeepsItOutButReportsNothing) {
  on_both_paths([] {
    Accuracy accuracy(Opts::multiclass(3).validate_args(false).average(Average::Micro));
    accuracy.update(longs({0, 5, 1}), longs({0, 1, 9}));
    EXPECT_NO_THROW(accuracy.compute());
    EXPECT_EQ(accuracy.compute().item<double>(), 1.0);
    EXPECT_TRUE(accuracy.bad_input_report().clean());
  });
}

TEST(BadInput, NoSyncWhileCounting) {
  on_both_paths([] {
    F1Score f1(Opts::multiclass(3).ignore_index(-1));
    auto scores = doc_scores();
    scores.index_put_({0, 0}, kNaN);
    SyncCounter counter;
    f1.update(scores, longs({2, 9, -1, 0}));
    EXPECT_EQ(counter.total(), 0) << counter.summary();
  });
}

// ---------------------------------------------------------------- errors that leave the state alone

TEST(Errors, ClearMessagesAndStateUnchanged) {
  Precision precision(Opts::multiclass(3));
  precision.update(longs({0, 1}), longs({0, 2}));
  const auto before = precision.state_dict();
  EXPECT_THROWS_WITH(precision.update(doc_scores(), longs({0, 1, 2})), ShapeError,
                     "MulticlassPrecision.update: preds has shape [4, 3] but target has [3]");
  EXPECT_THROWS_WITH(precision.update(longs({0, 1}), floats({0, 1}).to(at::kComplexFloat)), c10::TypeError,
                     "MulticlassPrecision.update: target has dtype ComplexFloat; expected class labels");
  EXPECT_THROWS_WITH(precision.update(longs({0, 1, 0, 1, 0, 0}).view({2, 3}), longs({1, 0})), c10::ValueError,
                     "MulticlassPrecision.update: preds of shape [2, 3] must hold floating-point scores, got Long");
  EXPECT_THROWS_WITH(precision.update(longs({0, 1}), longs({0, 1}), values({1, 1})), c10::TypeError,
                     "a weight was given (the third argument or weight=), but the metric counts without weights; "
                     "build it with weighted=True (C++: .weighted(true))");
  EXPECT_THROWS_WITH(precision.update(longs({0}).to(at::kMeta), longs({0}).to(at::kMeta)), c10::ValueError,
                     "preds and target are on meta but the metric's state is on cpu; move the metric with .to(meta)");
  EXPECT_THROWS_WITH(precision.update(longs({0}), longs({0}).to(at::kMeta)), c10::ValueError,
                     "preds is on cpu, target on meta; every input must be on the metric's device, cpu");
  EXPECT_THROWS_WITH(Precision(Opts::multiclass(3).weighted(true))
                         .update(longs({0}).to(at::kMeta), longs({0}).to(at::kMeta), values({1})),
                     c10::ValueError,
                     "preds is on meta, target on meta, weight on cpu; every input must be on the metric's device, cpu");
  // a weight shaped like preds does not hide that the target is the odd one out
  EXPECT_THROWS_WITH(
      Accuracy(Opts::binary().weighted(true)).update(floats({0.1, 0.7, 0.9}), longs({0, 1}), values({1, 1, 1})),
      ShapeError, "preds has shape [3] but target has [2]");
  EXPECT_THROWS_WITH(Precision(Opts::multiclass(3).top_k(2)).update(longs({0}), longs({0})), c10::ValueError,
                     "top_k = 2 needs scores (N, 3, ...), but preds are labels");
  EXPECT_TRUE(states_equal(precision.state_dict(), before));
  EXPECT_EQ(precision.update_count(), 1);
}

TEST(Errors, WeightShapes) {
  Accuracy accuracy(Opts::multiclass(3).weighted(true));
  EXPECT_THROWS_WITH(accuracy.update(longs({0, 1}), longs({0, 1}), values({1, 1, 1})), c10::ValueError,
                     "MulticlassAccuracy.update: weight has shape [3]; expected (N,) = [2]");
  EXPECT_THROWS_WITH(accuracy.update(longs({0, 1}), longs({0, 1}), longs({1, 1})), c10::TypeError,
                     "weight has dtype Long; expected a floating-point tensor");
}

TEST(Errors, InvalidOptions) {
  EXPECT_THROWS_WITH(Accuracy(Opts::multiclass(1)), c10::ValueError, "MulticlassAccuracy: num_classes must be at least 2");
  EXPECT_THROWS_WITH(Recall(Opts::multilabel(1)), c10::ValueError, "MultilabelRecall: num_labels must be at least 2");
  EXPECT_THROWS_WITH(F1Score(Opts::multiclass(3).top_k(4)), c10::ValueError,
                     "MulticlassF1Score: top_k = 4 is larger than num_classes = 3");
  EXPECT_THROWS_WITH(Precision(Opts::binary(1.5)), c10::ValueError, "BinaryPrecision: threshold must be in [0, 1]");
  EXPECT_THROWS_WITH(Precision(Opts::binary().top_k(2)), c10::ValueError, "top_k applies to multiclass tasks only");
  EXPECT_THROWS_WITH(Precision(Opts::binary().zero_division(0.5)), c10::ValueError, "zero_division must be 0 or 1");
  EXPECT_THROWS_WITH(FBetaScore(0.0, Opts::binary()), c10::ValueError,
                     "BinaryFBetaScore: beta must be a finite number larger than 0, got 0");
  EXPECT_THROWS_WITH(FBetaScore(std::numeric_limits<double>::infinity(), Opts::binary()), c10::ValueError,
                     "BinaryFBetaScore: beta must be a finite number larger than 0, got inf");
}

TEST(Errors, ShapesPerTask) {
  EXPECT_THROWS_WITH(Accuracy(Opts::binary()).update(floats({0.1, 0.2}), longs({0})), c10::ValueError,
                     "BinaryAccuracy.update: preds has shape [2] but target has [1]");
  EXPECT_THROWS_WITH(Accuracy(Opts::multilabel(3)).update(longs({0, 1}).reshape({1, 2}), longs({0, 1}).reshape({1, 2})),
                     c10::ValueError, "MultilabelAccuracy.update: preds has shape [1, 2] and target [1, 2]; expected both (N, 3, ...)");
  EXPECT_THROWS_WITH(Accuracy(Opts::multiclass(4)).update(doc_scores(), longs({0, 1, 2, 0})), c10::ValueError,
                     "expected preds (N, 4, ...) and target (N, ...)");
}

TEST(Classification, ForwardReturnsTheBatchValue) {
  Accuracy accuracy(Opts::multiclass(3).average(Average::Micro));
  accuracy.update(longs({0, 0}), longs({0, 0}));
  EXPECT_NEAR(accuracy.forward(longs({1, 0}), longs({2, 0})).item<double>(), 0.5, 1e-7);
  EXPECT_NEAR(accuracy.compute().item<double>(), 0.75, 1e-7);
  EXPECT_EQ(accuracy.update_count(), 2);
}

TEST(Classification, NamesFollowTorchMetrics) {
  EXPECT_EQ(Accuracy(Opts::binary()).name(), "BinaryAccuracy");
  EXPECT_EQ(F1Score(Opts::multiclass(3)).name(), "MulticlassF1Score");
  EXPECT_EQ(ConfusionMatrix(Opts::multilabel(3)).name(), "MultilabelConfusionMatrix");
  EXPECT_EQ(FBetaScore(0.5, Opts::multilabel(3)).name(), "MultilabelFBetaScore");
}

}  // namespace
}  // namespace metrics

namespace metrics {
namespace {

// Options that change what a metric means refuse to merge, even where the state has the same
// shape (issue: merge used to accept them silently).
TEST(ClassificationMerge, RefusesEveryOptionThatChangesMeaning) {
  using Opts = ClassificationOptions;
  const auto o = Opts::multiclass(4);
  const std::vector<std::pair<Opts, std::string>> others = {
      {Opts(o).top_k(2), "top_k=2"},
      {Opts(o).ignore_index(1), "ignore_index=1"},
      {Opts(o).average(Average::Micro), "average=micro"},
      {Opts(o).zero_division(1.0), "zero_division=1"},
  };
  for (const auto& [other, difference] : others) {
    Accuracy mine(o), theirs(other);
    EXPECT_THROWS_WITH(mine.merge(theirs), c10::ValueError, difference);
  }
  Accuracy half(Opts::binary(0.5)), high(Opts::binary(0.9));
  EXPECT_THROWS_WITH(half.merge(high), c10::ValueError, "against 'BinaryAccuracy(threshold=0.9, ignore_index=None");
  FBetaScore beta_half(0.5, o), beta_two(2.0, o);
  EXPECT_THROWS_WITH(beta_half.merge(beta_two), c10::ValueError, "beta=2");
}

// ---------------------------------------------------------------- CPU kernels vs brute force

using detail::cpu::Isa;
using detail::cpu::Thresholds;

std::vector<Isa> vector_isas() {
  std::vector<Isa> isas;
  for (auto isa : {Isa::Avx2, Isa::Avx512}) {
    if (detail::cpu::isa_available(isa)) isas.push_back(isa);
  }
  return isas;
}

// Scores in [0, 1) (a row of them exactly 1.0 and one +0.0, both probabilities) or logits; 0/1
// targets. Kinds 2.. spoil one entry of the counted block, in the middle row or (`last_row`) the
// last: a target of 2, -1 or 2^32 (whose low half is 0), a NaN or an infinite score; kind 7 scores
// it -0.0, a probability whose sign bit is set.
std::pair<at::Tensor, at::Tensor> kernel_batch(int64_t rows, int64_t stride, int64_t width, int kind, bool last_row,
                                               at::Generator& gen) {
  auto preds = kind == 1 ? at::randn({rows, stride}, gen) : at::rand({rows, stride}, gen);
  auto target = at::randint(2, {rows, stride}, gen, at::kLong);
  if (kind != 1 && rows > 0) preds[rows / 3].fill_(1.0f), preds[0][0] = 0.0f;
  if (kind >= 2 && rows > 0 && width > 0) {
    const int64_t r = last_row ? rows - 1 : rows / 2, c = width - 1;
    const int64_t bad_targets[] = {2, -1, int64_t{1} << 32};
    const float odd_scores[] = {NAN, INFINITY, -0.0f};
    if (kind <= 4) target[r][c] = bad_targets[kind - 2];
    if (kind >= 5) preds[r][c] = odd_scores[kind - 5];
  }
  return {preds, target};
}

// An empty batch (whose data pointers may be null) counts an update and nothing else, on both
// paths and in every task, and the vector kernels read nothing from it.
TEST(Classification, AnEmptyBatchCountsAnUpdateAndNothingElse) {
  const auto scores = at::empty({0}, at::kFloat);
  const auto labels = at::empty({0}, at::kLong);
  for (const bool aten : {false, true}) {
    std::unique_ptr<ForceAtenPath> force;
    if (aten) force = std::make_unique<ForceAtenPath>();
    StatScores binary(Opts::binary());
    binary.update(scores, labels);
    StatScores multilabel(Opts::multilabel(3).average(Average::Micro));
    multilabel.update(at::empty({0, 3}, at::kFloat), at::empty({0, 3}, at::kLong));
    StatScores multiclass(Opts::multiclass(3).average(Average::Micro));
    multiclass.update(at::empty({0, 3}, at::kFloat), labels);
    for (const auto* metric : {&binary, &multilabel, &multiclass}) {
      EXPECT_EQ(metric->update_count(), 1) << metric->name();
      EXPECT_EQ(metric->value().sum().item<int64_t>(), 0) << metric->name();
      EXPECT_TRUE(metric->bad_input_report().clean()) << metric->name();
    }
  }
}

TEST(ClassificationKernels, CountLabelsMatchesBruteForceOnEveryWidthAndIsa) {
  auto gen = testing::generator(21);
  // (odd trials: a negative logit cutoff, which the zeros past the width are above)
  const float cutoffs[2][2] = {{0.5f, 0.3f}, {0.3f, -0.85f}};
  using detail::cpu::Ignore;
  // an ignore_index past 32 bits (AVX2 compares the targets' low halves with the index's and checks
  // the high ones)
  const std::optional<Ignore> ignores[] = {std::nullopt, Ignore{-1, true}, Ignore{-1, false}, Ignore{255, true},
                                           Ignore{(int64_t{1} << 32) + 255, false}};
  // the batch's kind (kernel_batch), and the thresholds counted: both, or thresholds[0] alone (the
  // sums' [1] stay 0) with the scores checked against one reading
  const Thresholds readings[] = {Thresholds::Both, Thresholds::Probabilities, Thresholds::Logits};
  for (auto isa : vector_isas()) {
    const int64_t lanes = detail::cpu::label_lanes(isa);
    for (int64_t rows : {0, 1, 7, 8, 9, 10, 31, 33, 100}) {
      // (stride 6: the rows of 5 or 6 labels side by side, two to a vector of 16 lanes, each a
      // masked load from before its row's start)
      for (int64_t stride : {lanes, int64_t{3}, int64_t{6}, int64_t{17}, int64_t{100}}) {
        // (up to 4, 8 labels: rows side by side in a vector, 4 or 2 of them)
        std::set<int64_t> widths{0, 1, 2, 4, 5, 8, 9, std::min(stride, lanes) - 1, std::min(stride, lanes)};
        for (int64_t width : widths) {
          if (width > std::min(stride, lanes)) continue;
          for (int trial = 0; trial < 24; ++trial) {
            const int kind = trial / 3;
            const auto counted = readings[trial % 3];
            const auto& thresholds = cutoffs[trial % 2];
            for (const auto& ignore : ignores) {
              auto [preds, target] = kernel_batch(rows, stride, width, kind, trial % 4 >= 2, gen);
              if (ignore && rows > 0) {
                // a fifth of the targets ignored, and (for some trials) the scores of a few of them
                // out of [0, 1] or NaN, which the range judges only where it judges every score
                target.masked_fill_(at::rand({rows, stride}, gen) < 0.2, ignore->index);
                // (some trials: a target that is the ignore_index but for a high bit, a bad one)
                if (trial % 8 == 5 && width > 0) target[rows - 1][width - 1] = ignore->index ^ (int64_t{1} << 40);
                const auto ignored = target.eq(ignore->index);
                const float odd_scores[] = {5.0f, NAN, -0.5f};
                if (kind == 0 || kind >= 4) {  // (kind 0: an otherwise clean batch of probabilities)
                  const auto some = ignored & (at::rand({rows, stride}, gen) < 0.3);
                  preds.masked_fill_(some, odd_scores[(kind + trial) % 3]);
                }
              }
              std::vector<int64_t> sums(6 * lanes, 0), expected(6 * lanes, 0);
              const auto at = [&](std::vector<int64_t>& v) {
                int64_t* p = v.data();
                return detail::cpu::LabelSums{
                    p, p + lanes, {p + 2 * lanes, p + 3 * lanes}, {p + 4 * lanes, p + 5 * lanes}};
              };
              const auto scan = detail::cpu::count_labels(preds.data_ptr<float>(), target.data_ptr<int64_t>(), rows,
                                                          stride, width, thresholds, isa, at(sums), ignore, counted);
              bool clean = true, logits = false;
              // a score judged as the reading counted needs it (counting under both: finite)
              const auto as_read = [counted](float x) {
                return counted == Thresholds::Probabilities ? !std::signbit(x) && x <= 1 : std::isfinite(x);
              };
              const auto e = at(expected);
              const auto scores = preds.accessor<float, 2>();
              const auto targets = target.accessor<int64_t, 2>();
              for (int64_t r = 0; r < rows; ++r) {
                for (int64_t l = 0; l < width; ++l) {
                  const float x = scores[r][l];
                  const int64_t t = targets[r][l];
                  if (ignore && t == ignore->index) {
                    e.ignored[l] += 1;
                    if (!ignore->judges_every_score) continue;
                    clean = clean && as_read(x);
                    logits = logits || x < 0 || x > 1;
                    continue;
                  }
                  clean = clean && (t == 0 || t == 1) && as_read(x);
                  logits = logits || x < 0 || x > 1;
                  e.positives[l] += t;
                  for (int k = 0; k < (counted == Thresholds::Both ? 2 : 1); ++k) {
                    e.predicted[k][l] += x > thresholds[k];
                    e.both[k][l] += (x > thresholds[k]) * t;
                  }
                }
              }
              const auto where = ::testing::Message()
                                 << "isa=" << static_cast<int>(isa) << " rows=" << rows << " stride=" << stride
                                 << " width=" << width << " trial=" << trial << " counted=" << static_cast<int>(counted)
                                 << " ignore=" << (ignore ? ignore->index : 0) << "/"
                                 << (ignore && ignore->judges_every_score);
              EXPECT_EQ(scan.clean, clean) << where;
              if (!clean) continue;
              EXPECT_EQ(scan.logits, counted == Thresholds::Both && logits) << where;
              EXPECT_EQ(sums, expected) << where;
            }
          }
        }
      }
    }
  }
}

// A weighted kernel batch: rows of `labels` scores (probabilities, or logits for odd trials), 0/1
// targets, float32 weights (one per row, or one per entry where `per_entry`), multiples of 2^-10
// (any sum of them is exact in float64), but where the trial says otherwise. The clean trials put
// scores on the cutoff (`cutoffs`: the probabilities', the logits') and at both zeros where they can.
struct WeightedKernelBatch {
  at::Tensor preds, target, weight;
  bool exact = true;  // every sum of the weights is exact in float64
};

WeightedKernelBatch weighted_kernel_batch(int64_t rows, int64_t labels, bool per_entry, int trial,
                                          const float (&cutoffs)[2], at::Generator& gen) {
  const std::vector<int64_t> weights = per_entry ? std::vector<int64_t>{rows, labels} : std::vector<int64_t>{rows};
  const bool logits = (trial % 2 && trial < 13) || trial >= 17;
  WeightedKernelBatch b{logits ? at::randn({rows, labels}, gen) * 3 : at::rand({rows, labels}, gen),
                        at::randint(2, {rows, labels}, gen, at::kLong),
                        at::randint(1024, weights, gen, at::kFloat).div_(1024)};
  auto w = b.weight.view({-1});
  const int64_t last = w.numel() - 1;
  auto scores = b.preds.view({-1});
  const auto put = [&](int64_t i, float score) {
    if (i < scores.numel() && std::abs(score) <= 5) scores[i] = score;
  };
  switch (trial) {
    case 0:
    case 2:  // (not -0.0: the one-pass kernels leave a batch with one to the general kernel)
      put(1, std::signbit(cutoffs[0]) ? 0.0f : cutoffs[0]), put(2, 0.0f), put(3, 1.0f);
      break;
    case 1:  // logits, the first a clear one (the guess right, however few scores it reads)
      scores[0] = 5;
      put(1, cutoffs[1]), put(2, -0.0f), put(3, 0.0f), put(4, -cutoffs[1]);
      break;
    case 3:  // logits, the first scores inside [0, 1] (the one-pass kernels guess wrong)
      b.preds.view({-1}).narrow(0, 0, std::min<int64_t>(rows * labels, 16)).uniform_(0, 1, gen);
      break;
    case 4:  // a weight of 2^45 (sums round below its 2^-8), and a subnormal one
      w[last] = 1e-40f, w[0] = std::ldexp(1.0f, 45), b.exact = false;
      break;
    case 5:  // weights drawn uniformly: sums may round
      b.weight.uniform_(0, 1, gen), b.exact = false;
      break;
    case 6:  // weights 2^23 apart: the last entry's false positive, alone among true positives, is
             // lost in the predicted weight's sum, so subtracting the true positives' would not give
             // it back (last: a check that reads too few weights misses it)
      b.preds.fill_(0.75), b.target.fill_(1), b.target.view({-1})[-1] = 0;
      w.fill_(1.75f), w[last] = std::ldexp(1.0f + std::ldexp(1.0f, -23), -23), b.exact = false;
      break;
    case 7:  // float64 weights
      b.weight = b.weight.to(at::kDouble);
      break;
    case 8:  // a target of 2, a NaN score, a -0.0 weight in the last entry: not counted here
      b.target.view({-1})[-1] = 2;
      break;
    case 9:
      b.preds.view({-1})[-1] = NAN;
      break;
    case 10:
      w[last] = -0.0f;
      break;
    case 11:  // a target of -1 in the first entry: the first block rejects the batch
      b.target.view({-1})[0] = -1;
      break;
    case 12:  // a NaN past the first scores of probabilities (the last entry)
      scores[-1] = NAN;
      break;
    case 13:  // a fifth of the targets the ignore_index (-1; the first), its score 5: logits where
              // every score is judged (13), not where the kept ones are (14, with a NaN in the last)
    case 14:
      b.target.masked_fill_(at::rand({rows, labels}, gen) < 0.2, -1);
      b.target.view({-1})[0] = -1, scores[0] = 5.0f;
      if (trial == 14) b.target.view({-1})[-1] = -1, scores[-1] = NAN;
      break;
    case 15:  // an ignore_index past 32 bits, among float64 weights
      b.target.masked_fill_(at::rand({rows, labels}, gen) < 0.2, (int64_t{1} << 32) + 255);
      b.weight = b.weight.to(at::kDouble);
      break;
    case 16:  // ignored entries (the first scored 5, not judged) among float32 weights 2^40 apart,
    case 17:  // and among logits and float64 weights, a NaN score in the last (not judged), and
              // its weight NaN where it is its own (an ignored entry's weight reads as 0: still
              // counted in one pass; the general kernel's scan would turn the batch down, and the
              // scalar loop neither counts nor flags that weight)
      b.target.masked_fill_(at::rand({rows, labels}, gen) < 0.2, -1);
      b.target.view({-1})[0] = -1, scores[0] = 5.0f;
      if (trial == 16) w[last] = std::ldexp(1.0f, -40), b.exact = false;
      if (trial == 17) {  // (the second kept, scored -3: logits as the guess reads them)
        b.weight = b.weight.to(at::kDouble), b.target.view({-1})[-1] = -1, scores[-1] = NAN;
        if (per_entry || labels == 1) b.weight.view({-1})[last] = NAN;
        if (scores.numel() > 2) b.target.view({-1})[1] = 1, scores[1] = -3.0f;
      }
      break;
    case 18:  // logits after 16 ignored entries, whose scores are not judged: the guess wrong
      b.target.view({-1}).narrow(0, 0, std::min<int64_t>(rows * labels, 16)).fill_(-1);
      break;
    case 19:  // float64 weights in [1, 2) of as many significant bits as sums of `rows` of them
    case 20:  // keep exact (53 - ceil(log2(rows))), one of them halved (20), or one bit more (21:
    case 21:  // sums may round; where rows is 1 there is no bit more, and any sum of one is exact)
    {
      scores[0] = 5;
      const int64_t digits = std::min<int64_t>(53, 53 - static_cast<int64_t>(std::ceil(std::log2(rows))) +
                                                       (trial == 21 ? 1 : 0));
      const double unit = std::ldexp(1.0, static_cast<int>(1 - digits));
      b.weight = at::randint(int64_t{1} << (digits - 1), weights, gen, at::kLong).to(at::kDouble).mul_(unit).add_(1);
      auto wide = b.weight.view({-1});
      wide[0] = 1 + unit;  // (its last bit set)
      if (trial == 20) wide[last] = wide[last].item<double>() / 2;
      b.exact = trial == 19 || rows == 1;
      break;
    }
    case 22:  // float64 weights, the last -0.0, +inf, NaN, -inf or -1.5 (by the rows): not counted here
    {
      const double bad[] = {-0.0, HUGE_VAL, NAN, -HUGE_VAL, -1.5};
      b.weight = b.weight.to(at::kDouble);
      b.weight.view({-1})[last] = bad[rows % 5];
      break;
    }
    case 23:  // float64 weights of 2^1023, whose sums reach infinity: the cells summed (derived,
              // inf - inf would make NaN)
      scores[0] = 5;
      b.weight = at::full(weights, std::ldexp(1.0, 1023), at::kDouble), b.exact = false;
      break;
  }
  return b;
}

// count_weighted_entries (multilabel with a weight per row or per entry, binary) against the four
// cells summed in long double (exact here): equal bit for bit where the weights sum exactly (the
// kernels derive three cells by subtraction there, exact too), within a direct sum's rounding
// elsewhere; batches the kernels do not count (a bad target, score or weight) leave the cells as
// they were; targets of the ignore_index count nowhere. Widths below, at and
// above a block (AVX-512: 16 labels; AVX2: 8, and within its second half of 64-bit lanes: 5 to 7),
// last blocks of half the lanes (AVX2: 4, 12, 17, 100 labels; AVX-512: 8, 17, 24, 37, 100) and
// binary entries that end in one (4100; 1032); cutoffs of either sign, -0.0 and infinite ones
// (AVX2 compares the scores' bits where the cutoff's sign is clear, the floats elsewhere).
TEST(ClassificationKernels, WeightedCountsMatchExactSumsOnEveryWidthAndIsa) {
  auto gen = testing::generator(23);
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const float cutoff_pairs[][2] = {{0.5f, 0.0f}, {0.25f, -1.0986123f}, {0.75f, 1.0986123f}, {0.0f, -kInf},
                                   {1.0f, kInf},  {-0.0f, -0.0f}};
  const std::vector<std::tuple<int64_t, int64_t, bool>> shapes = {  // rows, labels (1: binary), per entry
      {1, 2, false},  {7, 15, false}, {33, 16, false}, {128, 17, false}, {128, 37, true}, {33, 100, false},
      {128, 100, false}, {7, 2, true}, {33, 16, true},  {1, 1, true},    {15, 1, true},   {1024, 1, true},
      {4096, 1, true},   {4099, 1, true}, {9, 5, false},  {9, 6, true},  {130, 100, false}, {5, 4, true},
      {3, 12, false},    {4100, 1, true}, {1032, 1, true}, {9, 24, true},   {9, 12, true}, {9, 8, false},
      {9, 7, true}};
  for (auto isa : vector_isas()) {
    for (const auto& thresholds : cutoff_pairs) {
      for (const auto& [rows, labels, per_entry] : shapes) {
        for (int trial = 0; trial < 24; ++trial) {
          const auto b = weighted_kernel_batch(rows, labels, per_entry, trial, thresholds, gen);
          const std::optional<detail::cpu::Ignore> ignore =
              trial < 13 || trial > 18 ? std::nullopt
              : trial < 15             ? std::optional(detail::cpu::Ignore{-1, trial == 13})
              : trial == 15            ? std::optional(detail::cpu::Ignore{(int64_t{1} << 32) + 255, true})
                                       : std::optional(detail::cpu::Ignore{-1, false});
          const auto kept = ignore ? b.target != ignore->index : at::ones_like(b.target, at::kBool);
          const auto judged = ignore && !ignore->judges_every_score ? b.preds.masked_select(kept) : b.preds;
          const auto where = ::testing::Message() << "isa=" << static_cast<int>(isa) << " cutoffs=" << thresholds[0]
                                                  << "," << thresholds[1] << " rows=" << rows
                                                  << " labels=" << labels << " per_entry=" << per_entry
                                                  << " trial=" << trial;
          const auto w = b.weight.to(at::kDouble);
          const auto w_entries = (per_entry ? w : w.expand({labels, rows}).t()).contiguous();
          const auto preds = b.preds.accessor<float, 2>();
          const auto target = b.target.accessor<int64_t, 2>();
          const auto weight = w_entries.accessor<double, 2>();
          const bool logits = ((judged < 0) | (judged > 1)).any().item<bool>();
          std::vector<long double> expected(4 * labels, 0.5L);  // tp, fp, tn, fn
          for (int64_t r = 0; r < rows; ++r) {
            for (int64_t l = 0; l < labels; ++l) {
              if (ignore && target[r][l] == ignore->index) continue;
              const bool positive = target[r][l] == 1, predicted = preds[r][l] > thresholds[logits ? 1 : 0];
              expected[(positive ? (predicted ? 0 : 3) : (predicted ? 1 : 2)) * labels + l] += weight[r][l];
            }
          }
          std::vector<double> got(4 * labels, 0.5);
          double* cells = got.data();
          const detail::cpu::WeightedEntries entries{
              b.preds.data_ptr<float>(), b.target.data_ptr<int64_t>(), b.weight.data_ptr(),
              b.weight.scalar_type() == at::kFloat, rows, labels, per_entry, ignore};
          using detail::cpu::Counted;
          const auto counted = detail::cpu::count_weighted_entries(
              entries, thresholds, isa, {cells, cells + labels, cells + 2 * labels, cells + 3 * labels});
          // the one pass deriving the cells where the weights' sums are exact and the guess right
          // (trial 3's or 18's scores judged, all among the first, are no logits; 13, 14, 15 and 17
          // ignore entries; 7, 15, 17 and 19 to 23 take float64 weights, whose sums are tested where
          // they are per row); the general kernel for a wrong guess; the one pass summing the cells
          // for other float64 weights; any for float32 weights whose sums may round (4 to 6 and 16:
          // the test of exactness reads their exponents, which some of these pass, as one weight
          // does; 5's logits may all lie past the first scores)
          const bool float64_weights = trial == 7 || trial == 15 || trial == 17 || trial > 18;
          const bool float64_derived = !(per_entry || labels == 1) && (trial < 20 || (trial < 22 && rows == 1));
          if ((trial >= 8 && trial < 13) || trial == 22) {
            ASSERT_EQ(counted, Counted::None) << where;
          } else if (float64_weights) {
            ASSERT_EQ(counted, float64_derived ? Counted::Derived : Counted::Cells) << where;
          } else if (trial < 3 || ((trial == 3 || trial == 18) && !logits) || trial == 13 || trial == 14) {
            ASSERT_EQ(counted, Counted::Derived) << where;
          } else if (trial == 3 || trial == 18) {
            ASSERT_EQ(counted, Counted::General) << where;
          } else {
            ASSERT_NE(counted, Counted::None) << where;
          }
          if (counted == Counted::None) {
            EXPECT_EQ(got, std::vector<double>(4 * labels, 0.5)) << where;
            continue;
          }
          for (int64_t i = 0; i < 4 * labels; ++i) {
            const auto want = static_cast<double>(expected[i]);
            // a direct sum's rounding (and the add to the cell's 0.5): far less than a difference of
            // sums of every cell has
            constexpr double kEpsilon = std::numeric_limits<double>::epsilon();
            const double rounding = b.exact ? 0 : (rows + 2) * kEpsilon * (want - 0.5) + kEpsilon * want;
            if (std::isinf(want)) {  // (NEAR takes inf - inf for NaN)
              ASSERT_EQ(got[i], want) << where << " cell " << i / labels << " label " << i % labels;
            } else {
              ASSERT_NEAR(got[i], want, rounding) << where << " cell " << i / labels << " label " << i % labels;
            }
          }
        }
      }
    }
  }
}

// Random streams with every kind of bad input: the CPU path (vector kernels for clean float32
// batches, the scalar loop for the rest) and the ATen path keep the same state.
TEST(ClassificationKernels, CpuAndAtenPathsAgreeOnBinaryAndMultilabelStreams) {
  auto gen = testing::generator(22);
  for (const auto& base : {Opts::binary(), Opts::binary(0.3), Opts::multilabel(5), Opts::multilabel(37, 0.7)}) {
    for (auto ignore : {c10::optional<int64_t>(), c10::optional<int64_t>(-1), c10::optional<int64_t>(1)}) {
      for (bool weighted : {false, true}) {
        const auto o = Opts(base).ignore_index(ignore).weighted(weighted);
        ConfusionMatrix cpu(o), aten(o);
        for (int64_t n : {0, 1, 7, 8, 9, 31, 33, 1000}) {
          for (int trial = 0; trial < 13; ++trial) {
            const auto shape = o.task() == Task::Binary ? std::vector<int64_t>{n} : std::vector<int64_t>{n, o.num_classes()};
            auto preds = trial % 2 && trial < 8 ? at::randn(shape, gen) * 3 : at::rand(shape, gen);
            if (trial == 6 || trial == 7) preds = at::randint(2, shape, gen, at::kLong);  // labels
            // logits in the last label alone (with 37 labels, past the kernels' first block), or in
            // the first alone
            if (trial == 8 && n > 0) preds.select(-1, preds.size(-1) - 1).mul_(5);
            if (trial == 9 && n > 0) preds.select(-1, 0).sub_(1);
            if (trial == 7 && n > 3) preds.view({-1})[1] = 2, preds.view({-1})[2] = -1;
            auto target = at::randint(2, shape, gen, at::kLong);
            auto flat_p = preds.view({-1});
            auto flat_t = target.view({-1});
            if (trial == 2 && n > 3) flat_t[1] = 2, flat_t[2] = -1, flat_t[3] = int64_t{1} << 32;
            if (trial == 3 && n > 3) flat_p[1] = NAN, flat_p[2] = INFINITY, flat_p[3] = -INFINITY;
            // a bad entry in the last entry alone (with 37 labels, past the kernels' first block)
            if (trial == 10 && n > 0) flat_t[-1] = 2;
            if (trial == 11 && n > 0) flat_p[-1] = NAN;
            // a probability whose sign bit is set (the kernels' later blocks leave the batch to the
            // scalar loop)
            if (trial == 12 && n > 0) flat_p[-1] = -0.0f;
            // a fifth of the targets the ignore_index, their scores (trials 0, 1) out of [0, 1] or
            // NaN: which every reading judges but the kept matrix's (the vector kernels' masks)
            if (ignore && *ignore != 1) {
              const auto ignored = at::rand(shape, gen) < 0.2;
              target.masked_fill_(ignored, *ignore);
              if (trial < 2 && preds.is_floating_point()) preds.masked_fill_(ignored, trial == 0 ? 5.0 : kNaN);
            }
            if (trial == 4) preds = preds.to(at::kDouble);
            // weights clean (the weighted vector kernels) in the later trials, float32 in the odd ones
            c10::optional<at::Tensor> weight;
            if (weighted) weight = at::rand({n}, gen, trial % 2 ? at::kFloat : at::kDouble);
            if (weighted && n > 2 && trial < 6) (*weight)[1] = kNaN, (*weight)[2] = -1.0;
            cpu.update(preds, target, weight);
            {
              ForceAtenPath force;
              aten.update(preds, target, weight);
            }
            ASSERT_TRUE(states_equal(cpu.state_dict(), aten.state_dict(), weighted ? 1e-12 : 0.0))
                << cpu.options_text() << " n=" << n << " trial=" << trial;
          }
        }
      }
    }
  }
}

// A batch's shapes with extra dimensions: preds (N, X...) binary, (N, L, X...) multilabel,
// (N, C, X...) multiclass scores; the target as preds, without the classes.
std::pair<std::vector<int64_t>, std::vector<int64_t>> extra_dimension_shapes(const Opts& o, int64_t classes, int64_t n,
                                                                             const std::vector<int64_t>& extra) {
  std::vector<int64_t> target{n};
  if (o.task() == Task::Multilabel) target.push_back(classes);
  target.insert(target.end(), extra.begin(), extra.end());
  auto preds = target;
  if (o.task() == Task::Multiclass) preds.insert(preds.begin() + 1, classes);
  return {preds, target};
}

// The same tensor laid out with dimension 1 (labels or classes) last in memory, as channels_last.
at::Tensor labels_last(const at::Tensor& t) { return t.movedim(1, -1).contiguous().movedim(-1, 1); }

// Those entries as rows: labels or classes (dimension 1) last, every other dimension flattened.
at::Tensor as_rows(const at::Tensor& t, bool with_classes) {
  return with_classes ? t.movedim(1, -1).reshape({-1, t.size(1)}) : t.reshape({-1});
}

// Inputs with extra dimensions are counted where they lie on the ATen path (binary (N, X...) and
// multilabel (N, L, X...) entries, multiclass (N, C, X...) scores; a weight per sample (N,) is
// spread over the sample's entries there, not copied): both paths keep the state of a metric fed
// the same entries as rows, (N * X, L or C), with a weight per sample repeated over its rows;
// samplewise (ATen path alone), each sample counts as a metric fed its rows alone. Contiguous and
// transposed extra dimensions, and labels or classes last in memory (channels_last: every input so,
// or the scores alone); bad targets, scores and weights among them (their tally too).
TEST(ClassificationKernels, ExtraDimensionsCountAsTheirRows) {
  auto gen = testing::generator(31);
  for (const auto& base : {Opts::binary(), Opts::multilabel(5, 0.6), Opts::multiclass(5), Opts::multiclass(5).top_k(2)}) {
    const bool multiclass = base.task() == Task::Multiclass, binary = base.task() == Task::Binary;
    const auto shapes = [&](int64_t n, const std::vector<int64_t>& extra) {
      return extra_dimension_shapes(base, 5, n, extra);
    };
    const auto draw = [&](const std::vector<int64_t>& p, const std::vector<int64_t>& t, bool logits) {
      auto preds = logits ? at::randn(p, gen) * 3 : at::rand(p, gen);
      return std::pair{preds, at::randint(-1, binary || !multiclass ? 2 : 5, t, gen, at::kLong)};
    };
    for (const char* weights : {"none", "sample", "entry"}) {
      const auto o = Opts(base).ignore_index(-1).weighted(std::string(weights) != "none").average(Average::None);
      // StatScores, and a ConfusionMatrix (binary: its matrix kept beside the cells, with the
      // ignore_index): each on the CPU path, the ATen path, and fed the rows
      std::vector<std::unique_ptr<ClassificationMetric>> metrics;
      for (int copy = 0; copy < 3; ++copy) metrics.push_back(std::make_unique<StatScores>(o));
      for (int copy = 0; copy < (o.top_k() == 1 ? 3 : 0); ++copy) metrics.push_back(std::make_unique<ConfusionMatrix>(o));
      // shapes alternate within a metric, each size twice in a row ((N, L) and (N, L, 1) in turn)
      const std::vector<int64_t> extras[][2] = {{{3, 4}, {3, 4}}, {{6}, {6}}, {{}, {1}}, {{3, 4}, {3, 4}}};
      for (const auto& extra_pair : extras) {
        for (int trial = 0; trial < 6; ++trial) {
          const int64_t n = 1 + trial / 2;
          const auto& extra = extra_pair[trial % 2];
          const auto [preds_shape, target_shape] = shapes(n, extra);
          auto [preds, target] = draw(preds_shape, target_shape, trial % 2);
          if (trial == 2) target.view({-1})[0] = multiclass ? 7 : 2, preds.view({-1})[1] = NAN;
          if (trial == 3 && extra.size() == 2) preds = preds.transpose(-1, -2).contiguous().transpose(-1, -2);
          if (trial >= 4 && extra.size() < 2) preds = preds.transpose(0, -1).contiguous().transpose(0, -1);
          if (trial >= 4 && extra.size() == 2) preds = labels_last(preds);
          if (trial == 4 && extra.size() == 2) target = labels_last(target);
          c10::optional<at::Tensor> weight;
          const auto dtype = trial % 2 ? at::kFloat : at::kDouble;
          if (std::string(weights) == "sample") weight = at::rand({n}, gen, dtype);
          if (std::string(weights) == "entry") weight = at::rand(target_shape, gen, dtype);
          if (weight && trial == 4) weight->view({-1})[0] = -1.0;
          // (trial 5: the scores and a weight per entry so, the target copied into their order)
          if (trial >= 4 && extra.size() == 2 && std::string(weights) == "entry") weight = labels_last(*weight);
          const int64_t per_sample = target.numel() / n / (multiclass || binary ? 1 : 5);
          c10::optional<at::Tensor> row_weight;
          if (std::string(weights) == "sample") row_weight = weight->repeat_interleave(per_sample);
          if (std::string(weights) == "entry") row_weight = as_rows(*weight, !multiclass && !binary);
          for (size_t m = 0; m < metrics.size(); m += 3) {
            metrics[m]->update(preds, target, weight);
            {
              ForceAtenPath force;
              metrics[m + 1]->update(preds, target, weight);
            }
            metrics[m + 2]->update(as_rows(preds, !binary), as_rows(target, !multiclass && !binary), row_weight);
            const auto where = ::testing::Message() << metrics[m]->options_text() << " metric=" << m / 3
                                                    << " extra=" << extra.size() << " weights=" << weights
                                                    << " trial=" << trial;
            ASSERT_TRUE(states_equal(metrics[m]->state_dict(), metrics[m + 2]->state_dict(), 1e-12)) << where;
            ASSERT_TRUE(states_equal(metrics[m + 1]->state_dict(), metrics[m + 2]->state_dict(), 1e-12)) << where;
          }
        }
      }
    }
    // samplewise: sample i's counts, those of a metric fed its rows alone
    const auto o = Opts(base).ignore_index(-1).average(Average::None).multidim_average(MultidimAverage::Samplewise);
    StatScores samplewise(o), laid_out_labels_last(o);
    const auto [preds_shape, target_shape] = shapes(4, {3, 4});
    const auto [preds, target] = draw(preds_shape, target_shape, true);
    samplewise.update(preds, target);
    laid_out_labels_last.update(labels_last(preds), labels_last(target));
    const auto each = samplewise.compute();
    ASSERT_TRUE(states_equal(laid_out_labels_last.state_dict(), samplewise.state_dict())) << samplewise.options_text();
    for (int64_t i = 0; i < 4; ++i) {
      StatScores one(Opts(base).ignore_index(-1).average(Average::None));
      const auto p = preds[i].unsqueeze(0), t = target[i].unsqueeze(0);
      one.update(as_rows(p, !binary), as_rows(t, !multiclass && !binary));
      ASSERT_TRUE(tensors_close(each[i], one.compute())) << samplewise.options_text() << " sample " << i;
    }
  }
}

// Empty batches with extra dimensions (no samples, or an extra dimension of size 0) count nothing on
// either path, as their empty rows do (the fuzzer's (0, 4, 2, 4) multilabel batch once failed the
// reshape that flattens the extra dimensions).
TEST(ClassificationKernels, EmptyBatchesWithExtraDimensionsCountNothing) {
  for (const auto& base : {Opts::binary(), Opts::multilabel(4), Opts::multiclass(4)}) {
    const bool multiclass = base.task() == Task::Multiclass, binary = base.task() == Task::Binary;
    for (const auto& extra : {std::vector<int64_t>{0, 2, 4}, std::vector<int64_t>{2, 0, 4}}) {
      for (const char* weights : {"none", "sample", "entry"}) {
        const auto o = Opts(base).weighted(std::string(weights) != "none");
        const auto [preds_shape, target_shape] =
            extra_dimension_shapes(base, 4, extra[0], std::vector<int64_t>(extra.begin() + 1, extra.end()));
        const auto preds = at::rand(preds_shape), target = at::zeros(target_shape, at::kLong);
        c10::optional<at::Tensor> weight;
        if (std::string(weights) == "sample") weight = at::rand({extra[0]});
        if (std::string(weights) == "entry") weight = at::rand(target_shape);
        StatScores cpu(o), aten(o), rows(o);
        cpu.update(preds, target, weight);
        {
          ForceAtenPath force;
          aten.update(preds, target, weight);
        }
        c10::optional<at::Tensor> row_weight;
        if (weight) row_weight = weight->reshape({-1}).narrow(0, 0, 0);
        rows.update(as_rows(preds, !binary), as_rows(target, !multiclass && !binary), row_weight);
        const auto where = ::testing::Message() << cpu.options_text() << " extra=" << extra << " weights=" << weights;
        ASSERT_TRUE(states_equal(cpu.state_dict(), rows.state_dict())) << where;
        ASSERT_TRUE(states_equal(aten.state_dict(), rows.state_dict())) << where;
      }
    }
  }
}

// A device-path update never writes first_bad_update (BadInput): mixing the paths in one metric,
// with reads (on either path: the tally settles by ATen ops or on the host), state dicts and
// merges between updates, the report keeps to a host tally, and the counts to a metric updated on
// the CPU path alone.
TEST(ClassificationKernels, MixedPathsKeepTheTallyAndTheCounts) {
  auto gen = testing::generator(23);
  const auto draw = [&](int64_t n) { return at::randint(n, {}, gen).item<int64_t>(); };
  for (const auto& o : {Opts::binary(), Opts::multilabel(4), Opts::multiclass(5), Opts::multiclass(5).top_k(2),
                        Opts::multiclass(kUnknownClasses).average(Average::Micro)}) {
    for (int matrix = 0; matrix < (o.task() == Task::Multiclass && o.num_classes() > 0 ? 2 : 1); ++matrix) {
      auto make = [&]() -> std::unique_ptr<ClassificationMetric> {
        if (matrix) return std::make_unique<ConfusionMatrix>(o);
        return std::make_unique<StatScores>(o);
      };
      auto mixed = make(), reference = make();
      int64_t updates = 0, bad_updates = 0, first = -1;
      for (int step = 0; step < 60; ++step) {
        const int64_t n = 1 + draw(6);
        const bool bad = draw(3) == 0;
        const auto classes = o.task() == Task::Multiclass ? std::max<int64_t>(o.num_classes(), 3) : 2;
        at::Tensor preds, target;
        if (o.task() == Task::Multilabel) {
          preds = at::rand({n, o.num_classes()}, gen);
          target = at::randint(2, {n, o.num_classes()}, gen, at::kLong);
        } else if (o.task() == Task::Binary) {
          preds = at::rand({n}, gen);
          target = at::randint(2, {n}, gen, at::kLong);
        } else {
          preds = at::randn({n, classes}, gen);
          target = at::randint(classes, {n}, gen, at::kLong);
        }
        if (bad) preds.view({-1})[0] = kNaN;  // a NaN score is bad in every task
        {
          std::unique_ptr<ForceAtenPath> force;
          if (draw(2)) force = std::make_unique<ForceAtenPath>();
          mixed->update(preds, target);
        }
        reference->update(preds, target);
        if (bad && first < 0) first = updates;
        bad_updates += bad;
        ++updates;
        switch (draw(6)) {
          case 0: {  // into a fresh metric, by its state dict
            auto fresh = make();
            fresh->load_state_dict(mixed->state_dict());
            mixed = std::move(fresh);
            break;
          }
          case 1: {  // a copy merged into a fresh one
            auto fresh = make();
            fresh->merge(*mixed);
            mixed = std::move(fresh);
            break;
          }
          default:
            break;
        }
        std::unique_ptr<ForceAtenPath> read_on_aten;  // then the read settles with ATen ops, not on the host
        if (draw(2)) read_on_aten = std::make_unique<ForceAtenPath>();
        const auto report = mixed->bad_input_report();
        ASSERT_EQ(report.bad_updates, bad_updates) << mixed->options_text() << " step " << step;
        ASSERT_EQ(report.first_bad_update, first) << mixed->options_text() << " step " << step;
        ASSERT_TRUE(states_equal(mixed->state_dict(), reference->state_dict())) << mixed->options_text();
      }
    }
  }
}

// What a review of the device path found, each against a metric updated on the CPU path: a weighted
// metric's update without a weight after one with a bad weight; ignore_index at the ends of int64;
// top_k with infinite scores tied with the target's; readers that settle a state from two threads.
TEST(ClassificationKernels, DevicePathEdgesMatchTheCpuPath) {
  const auto both = [](const Opts& o, const std::vector<std::pair<at::Tensor, at::Tensor>>& batches,
                       c10::optional<at::Tensor> first_weight = {}) {
    StatScores cpu(o), aten(o);
    for (size_t i = 0; i < batches.size(); ++i) {
      const auto weight = i == 0 ? first_weight : c10::optional<at::Tensor>();
      cpu.update(batches[i].first, batches[i].second, weight);
      ForceAtenPath force;
      aten.update(batches[i].first, batches[i].second, weight);
    }
    EXPECT_TRUE(states_equal(aten.state_dict(), cpu.state_dict())) << cpu.name() << "(" << cpu.options_text() << ")";
  };
  const auto labels = longs({0, 1, 2});
  for (auto o : {Opts::multiclass(3), Opts::multiclass(kUnknownClasses).average(Average::Micro)}) {
    both(o.weighted(true), {{labels, longs({0, 1, 1})}, {labels, longs({0, 1, 1})}}, values({1, kNaN, 1}));
  }
  both(Opts::multiclass(3).weighted(true).average(Average::None), {{floats({.1, .7, .2, .8, .1, .1}).view({2, 3}),
                                                                    longs({1, 0})}, {floats({.1, .7, .2, .8, .1, .1}).view({2, 3}), longs({1, 0})}},
       values({kNaN, 2}));
  // (the vector kernels take no ignore_index whose low half is 0 or 1, as the first and the last)
  for (const int64_t ignore : {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                               (int64_t{1} << 53) + 1}) {
    const auto target = longs({0, 1, -1, 5, (int64_t{1} << 53) + 3, ignore});
    both(Opts::binary().ignore_index(ignore), {{floats({.9, .1, .4, .6, .7, .2}), target}});
    const auto clean = longs({0, 1, ignore, 1, 1, 0, ignore, 0, 1, 1, 0, 0, 1, ignore, 0, 1}).repeat({3}).view({6, 8});
    const auto spoilt = target.repeat({8}).view({6, 8});
    both(Opts::multilabel(8).average(Average::None).ignore_index(ignore),
         {{at::rand({6, 8}, testing::generator(5)), clean}, {at::rand({6, 8}, testing::generator(6)), spoilt}});
  }
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const auto scores = floats({kInf, kInf, kInf, kInf, kInf, 0, -kInf, -kInf, -kInf, 1, kInf, kInf, -kInf, -kInf, 5})
                          .view({5, 3});
  both(Opts::multiclass(3).top_k(2).average(Average::None), {{scores, longs({2, 1, 2, 2, 1})}});
  // labels and scores lay the class rows out differently (the labels' range check is a level of the
  // class ne): one metric fed both in turns, labels out of range and ignored rows among them
  const auto three = floats({.1, .7, .2, .8, .1, .1, .3, .3, .4}).view({3, 3});
  const std::vector<std::pair<at::Tensor, at::Tensor>> turns{{three, longs({1, 0, 2})},
                                                             {longs({2, 5, 1}), longs({2, 0, 0})},
                                                             {three, longs({0, 7, 2})},
                                                             {longs({0, -1, 2}), longs({1, 2, 2})}};
  for (const auto& o : {Opts::multiclass(3).ignore_index(1).average(Average::None),
                        Opts::multiclass(3).ignore_index(1).average(Average::None).weighted(true)}) {
    both(o, turns, o.weighted() ? c10::optional<at::Tensor>(values({1, 2, kNaN})) : c10::nullopt);
    ConfusionMatrix cpu(o), aten(o);  // the Matrix layout
    for (const auto& [preds, target] : turns) {
      cpu.update(preds, target);
      ForceAtenPath force;
      aten.update(preds, target);
    }
    EXPECT_TRUE(states_equal(aten.state_dict(), cpu.state_dict())) << "ConfusionMatrix(" << cpu.options_text() << ")";
  }
}

// An update on the ATen path copies nothing inside its ops (a kernel and an allocation that the
// launch count does not show), with contiguous inputs and with strided views (a column of a wider
// tensor, a transpose), which bucketize would copy itself, with a warning; and counts as the CPU
// path does.
TEST(ClassificationKernels, UpdatesCopyNothingInsideTheirOpsWithContiguousOrStridedInputs) {
  auto gen = testing::generator(28);
  const int64_t n = 40, classes = 5, labels = 4;
  const auto column = [](const at::Tensor& wide) { return wide.select(-1, 1); };  // stride 2
  const auto weight = column(at::rand({n, 2}, gen, at::kDouble));
  const auto binary_target = column(at::randint(2, {n, 2}, gen, at::kLong));
  const std::vector<std::pair<Opts, std::pair<at::Tensor, at::Tensor>>> cases{
      {Opts::binary(), {column(at::rand({n, 2}, gen)), binary_target}},
      {Opts::binary().ignore_index(0), {column(at::randint(2, {n, 2}, gen, at::kLong)), binary_target}},
      {Opts::multilabel(labels), {at::rand({labels, n}, gen).t(), at::randint(2, {labels, n}, gen, at::kLong).t()}},
      {Opts::multiclass(classes), {at::randn({n, 2 * classes}, gen).narrow(1, classes, classes),
                                   column(at::randint(classes, {n, 2}, gen, at::kLong))}},
      {Opts::multiclass(classes).top_k(2).ignore_index(0),
       {at::randn({classes, n}, gen).t(), column(at::randint(classes, {n, 2}, gen, at::kLong))}},
      {Opts::multiclass(classes), {column(at::randint(classes, {n, 2}, gen, at::kLong)),
                                   column(at::randint(classes, {n, 2}, gen, at::kLong))}},
  };
  for (const auto& [base, strided_batch] : cases) {
    for (const int variant : {0, 1, 2, 3}) {  // weighted or not, strided or not
      const bool weighted = variant % 2, strided = variant / 2;
      const auto o = Opts(base).weighted(weighted);
      const auto laid_out = [&](const at::Tensor& t) { return strided ? t : t.contiguous(); };
      const std::pair<at::Tensor, at::Tensor> batch{laid_out(strided_batch.first), laid_out(strided_batch.second)};
      const auto w = weighted ? c10::optional<at::Tensor>(laid_out(weight)) : c10::nullopt;
      for (const bool matrix : {false, true}) {  // (a multiclass ConfusionMatrix counts in its own layout)
        const auto make = [&]() -> std::unique_ptr<ClassificationMetric> {
          if (matrix) return std::make_unique<ConfusionMatrix>(o);
          return std::make_unique<StatScores>(o);
        };
        const auto cpu = make(), aten = make();
        for (int step = 0; step < 2; ++step) cpu->update(batch.first, batch.second, w);
        testing::OpsRun ops;
        for (int step = 0; step < 2; ++step) {
          ForceAtenPath force;
          if (step == 1) ops.clear();  // the first update makes its buffers and constants
          aten->update(batch.first, batch.second, w);
        }
        EXPECT_THAT(ops.copies(), ::testing::IsEmpty())
            << cpu->name() << "(" << cpu->options_text() << ")" << (strided ? ", strided" : "");
        EXPECT_TRUE(states_equal(aten->state_dict(), cpu->state_dict(), weighted ? 1e-15 : 0.0))
            << cpu->name() << "(" << cpu->options_text() << ")";
      }
    }
  }
}

// A strided weight's copy follows the weight's dtype: float32 weights then float64 ones of the same
// shape, beyond float32's range and below its smallest negative, count as on the CPU path (a copy
// kept in float32 would round 1e300 to inf and -1e-300 to -0.0).
TEST(ClassificationKernels, StridedWeightsOfAnotherDtypeCountAsTheyAre) {
  const auto column = [](const at::Tensor& wide) { return wide.select(-1, 1); };
  const auto preds = column(at::tensor({.1, .9, .8, .2, .3, .7}, at::kFloat).view({3, 2}));
  const auto target = column(at::tensor(std::vector<int64_t>{0, 1, 0, 1, 1, 0}).view({3, 2}));
  const auto narrow_weight = column(at::tensor({0.0, 0.5, 0.0, 2.0, 0.0, 1.5}, at::kFloat).view({3, 2}));
  const auto wide_weight = column(at::tensor({0.0, 1e300, 0.0, -1e-300, 0.0, 0.5}, at::kDouble).view({3, 2}));
  const auto o = Opts::binary().weighted(true);
  StatScores cpu(o), aten(o);
  for (const auto& weight : {narrow_weight, wide_weight}) {
    cpu.update(preds, target, weight);
    ForceAtenPath force;
    aten.update(preds, target, weight);
  }
  EXPECT_TRUE(states_equal(aten.state_dict(), cpu.state_dict()));
  EXPECT_EQ(aten.bad_input_report().counts, cpu.bad_input_report().counts);
  EXPECT_EQ(cpu.state_dict().at("tp").item<double>(), 1e300);                  // (the first 0.5 is lost in it)
  EXPECT_EQ(cpu.bad_input_report().counts.back().second, 1) << "-1e-300 is a negative weight";
}

// Weighted (float64) counts with top_k > 1 add each row's weight once on the device path, as the
// CPU path does: no cancellation leaves a residue (every row right: fp and fn exactly 0), non-dyadic
// weights give the CPU path's tp, fp and fn to the last bit, and a weight above DBL_MAX / k does not
// overflow.
TEST(ClassificationKernels, WeightedTopKAddsEachWeightOnceOnBothPaths) {
  auto gen = testing::generator(26);
  const int64_t classes = 4, m = 50;
  const auto both = [&](int64_t k, const at::Tensor& scores, const at::Tensor& target, const at::Tensor& weight) {
    const auto o = Opts::multiclass(classes).top_k(k).average(Average::None).weighted(true);
    StatScores cpu(o), aten(o);
    cpu.update(scores, target, weight);
    {
      ForceAtenPath force;
      aten.update(scores, target, weight);
    }
    const auto want = cpu.state_dict(), got = aten.state_dict();
    for (const char* name : {"tp", "fp", "fn"}) {
      EXPECT_TRUE(tensors_close(got.at(name), want.at(name), 0.0, 0.0)) << name << " top_k=" << k;
    }
    // (tn is the batch total less what each class is involved in: within a few ulps of the total)
    const double total_ulps = 4 * std::numeric_limits<double>::epsilon() * weight.sum().item<double>();
    EXPECT_TRUE(tensors_close(got.at("tn"), want.at("tn"), 0.0, total_ulps)) << "tn top_k=" << k;
    return got;
  };
  const auto scores = at::randn({m, classes}, gen);
  const auto target = at::randint(classes, {m}, gen, at::kLong);
  const auto tenths = at::randint(1, 10, {m}, gen, at::kDouble) / 10;
  for (const int64_t k : {int64_t{2}, int64_t{3}, classes}) {
    both(k, scores, target, tenths);
  }
  const auto all_right = both(classes, scores, target, tenths);  // the target is always among all classes
  EXPECT_EQ(all_right.at("fp").abs().sum().item<double>(), 0.0);
  EXPECT_EQ(all_right.at("fn").abs().sum().item<double>(), 0.0);
  // rows ranked 0 1 2 3 and 0 2 3 1: targets 0 and 2 are among the two best, the first weighing 1e308
  const auto ranked = floats({4, 3, 2, 1, 4, 1, 3, 2}).view({2, classes});
  const auto counts = both(2, ranked, longs({0, 2}), values({1e308, 0.5}));
  EXPECT_EQ(counts.at("tp")[0].item<double>(), 1e308);
  EXPECT_EQ(counts.at("tp")[2].item<double>(), 0.5);
}

// An unweighted update adds k + 1 copies of its pieces (top_k = k) while they stay within
// kMaxCopiedPieces (2^22 pieces: 9 per row and copy), and one copy with the dropped rows masked
// beyond: one metric fed small, large and small batches (NaN scores, bad and ignored targets among
// them) counts as the CPU path does, top_k 1 and 2.
TEST(ClassificationKernels, TopKCountsAlikeWithAndWithoutCopies) {
  auto gen = testing::generator(27);
  const int64_t classes = 3;
  for (const int64_t k : {1, 2}) {
    const auto o = Opts::multiclass(classes).top_k(k).ignore_index(0).average(Average::None);
    StatScores cpu(o), aten(o);
    for (const int64_t m : {int64_t{100}, int64_t{240000}, int64_t{100}}) {  // 9 * 2 * 240000 > 2^22
      auto scores = at::randn({m, classes}, gen);
      scores.index_put_({at::arange(0, m, 97), 1}, kNaN);
      const auto target = at::randint(-1, classes + 1, {m}, gen);
      cpu.update(scores, target);
      ForceAtenPath force;
      aten.update(scores, target);
    }
    EXPECT_TRUE(states_equal(aten.state_dict(), cpu.state_dict())) << "top_k " << k;
    EXPECT_EQ(aten.bad_input_report().bad_updates, 3) << "top_k " << k;
  }
}

// top_k > 1 sorts into an index buffer whose columns hold the class rows: 2k + 2 of them, 3k + 4
// with an ignore_index; narrower scores are sorted from a padded copy. Around both widths (C one
// less, as many, one more) and top_k 2 and 5, weighted or not, a metric fed batches with NaN rows,
// targets out of range, ignored rows and bad weights counts as the CPU path does, and reports the
// same bad input.
TEST(ClassificationKernels, TopKCountsAlikeAroundTheClassRowsWidth) {
  auto gen = testing::generator(29);
  const int64_t m = 60;
  for (const int64_t k : {2, 5}) {
    for (const bool ignores : {false, true}) {
      const int64_t rows = ignores ? 3 * k + 4 : 2 * k + 2;
      for (const int64_t classes : {rows - 1, rows, rows + 1}) {
        for (const bool weighted : {false, true}) {
          auto o = Opts::multiclass(classes).top_k(k).average(Average::None).weighted(weighted);
          if (ignores) o.ignore_index(1);
          StatScores cpu(o), aten(o);
          for (int update = 0; update < 3; ++update) {
            auto scores = at::randn({m, classes}, gen);
            scores.index_put_({at::arange(update, m, 11), update % classes}, kNaN);
            const auto target = at::randint(-1, classes + 1, {m}, gen);
            auto weight = at::rand({m}, gen, at::kDouble);
            weight.index_put_({at::arange(update + 3, m, 13)}, update == 1 ? -1.0 : kNaN);
            const auto w = weighted ? c10::optional<at::Tensor>(weight) : c10::nullopt;
            cpu.update(scores, target, w);
            ForceAtenPath force;
            aten.update(scores, target, w);
          }
          const auto context = ::testing::Message() << "top_k " << k << ", C " << classes << (ignores ? ", ignored" : "")
                                                    << (weighted ? ", weighted" : "");
          EXPECT_TRUE(states_equal(aten.state_dict(), cpu.state_dict(), weighted ? 1e-15 : 0.0)) << context;
          EXPECT_EQ(aten.bad_input_report().counts, cpu.bad_input_report().counts) << context;
          EXPECT_EQ(aten.bad_input_report().bad_updates, 3) << context;
        }
      }
    }
  }
}

// A multiclass batch in the dtypes under test, and its preds and target widened (float32, int64).
struct NarrowBatch {
  at::Tensor preds, target, wide_preds, wide_target;
  c10::optional<at::Tensor> weight;
};

// Metrics `make` makes, fed the narrow batches on the CPU path and on the device path, count and
// report bad input as one fed them widened; returns that one.
std::unique_ptr<ClassificationMetric> expect_narrow_counts_as_wide(
    const std::function<std::unique_ptr<ClassificationMetric>()>& make, const std::vector<NarrowBatch>& batches) {
  auto want = make();
  const auto cpu = make(), aten = make();
  for (const auto& b : batches) {
    want->update(b.wide_preds, b.wide_target, b.weight);
    cpu->update(b.preds, b.target, b.weight);
    ForceAtenPath force;
    aten->update(b.preds, b.target, b.weight);
  }
  const auto& first = batches.front();
  const auto context = ::testing::Message() << at::toString(first.preds.scalar_type()) << " preds, "
                                            << at::toString(first.target.scalar_type()) << " target, " << want->name()
                                            << "(" << want->options_text() << ")";
  EXPECT_TRUE(states_equal(cpu->state_dict(), want->state_dict())) << context;
  EXPECT_TRUE(states_equal(aten->state_dict(), want->state_dict(), first.weight ? 1e-15 : 0.0)) << context;
  EXPECT_EQ(aten->bad_input_report().counts, want->bad_input_report().counts) << context;
  EXPECT_EQ(cpu->bad_input_report().counts, want->bad_input_report().counts) << context;
  return want;
}

// Multiclass labels and targets of another integer dtype are read as they are (the device path's
// clamps widen them; the CPU path casts them): on each path, with labels and targets out of range
// and ignored ones among them, a metric counts as one fed the same labels and targets as int64, and
// reports the same bad input.
TEST(ClassificationKernels, MulticlassLabelsOfOtherIntegerDtypesCountAsInt64Ones) {
  auto gen = testing::generator(30);
  const int64_t classes = 5, m = 40;
  const std::vector<Opts> options{Opts::multiclass(classes).average(Average::None),
                                  Opts::multiclass(classes).ignore_index(1).weighted(true),
                                  Opts::multiclass(classes).top_k(2).ignore_index(4)};
  for (const auto dtype : {at::kInt, at::kShort, at::kChar, at::kByte, at::kBool}) {
    for (const auto& o : options) {
      for (const bool matrix : {false, true}) {
        for (const bool labels : {false, true}) {
          if ((matrix || labels) && o.top_k() > 1) continue;  // (a ConfusionMatrix, labels: no top_k)
          const int64_t low = dtype == at::kByte || dtype == at::kBool ? 0 : -2;
          const int64_t high = dtype == at::kBool ? 2 : classes + 2;  // some out of range
          std::vector<NarrowBatch> batches;
          for (int update = 0; update < 2; ++update) {
            const auto scores = at::randn({m, classes}, gen);
            const auto wide_labels = at::randint(low, high, {m}, gen, at::kLong);
            const auto wide = at::randint(low, high, {m}, gen, at::kLong);
            const auto weight = o.weighted() ? c10::optional<at::Tensor>(at::rand({m}, gen, at::kDouble)) : c10::nullopt;
            batches.push_back({labels ? wide_labels.to(dtype) : scores, wide.to(dtype), labels ? wide_labels : scores,
                               wide, weight});
          }
          const auto want = expect_narrow_counts_as_wide([&]() -> std::unique_ptr<ClassificationMetric> {
            if (matrix) return std::make_unique<ConfusionMatrix>(o);
            return std::make_unique<StatScores>(o);
          }, batches);
          if (dtype != at::kBool) {
            EXPECT_GT(want->bad_input_report().bad_updates, 0) << at::toString(dtype) << ", " << want->options_text();
          }
        }
      }
    }
  }
}

// Binary and multilabel labels and targets of another integer dtype are read as they are (the
// device path bucketizes them in their dtype, bool as uint8; the CPU path casts them): on each path,
// with labels and targets out of {0, 1} (the dtype's extremes too) and ignore_index values inside
// the dtype, at its extremes and just outside them, a metric counts as one fed them as int64, and
// reports the same bad input. Each state reads the dtypes in turn: one update's targets are int64
// (past the dtype's extremes), another's predictions int64 labels or float16 scores; the first two
// updates' targets are strided (copied first, in their dtype). Without the targets' dtype in the
// table's key or the buffers' key, it fails.
TEST(ClassificationKernels, BinaryAndMultilabelLabelsOfOtherIntegerDtypesCountAsInt64Ones) {
  auto gen = testing::generator(32);
  const int64_t n = 24, labels = 3;
  for (const auto dtype : {at::kInt, at::kShort, at::kChar, at::kByte, at::kBool}) {
    const auto range = AT_DISPATCH_INTEGRAL_TYPES(dtype == at::kBool ? at::kByte : dtype, "range", [] {
      return std::pair<int64_t, int64_t>{std::numeric_limits<scalar_t>::lowest(), std::numeric_limits<scalar_t>::max()};
    });
    const int64_t lowest = range.first, high = dtype == at::kBool ? 1 : range.second;
    for (const auto& base : {Opts::binary(), Opts::multilabel(labels)}) {
      for (const auto& o : {Opts(base).average(Average::None), Opts(base).ignore_index(1).weighted(true),
                            Opts(base).ignore_index(-1), Opts(base).ignore_index(high),
                            Opts(base).ignore_index(high + 1).weighted(true), Opts(base).ignore_index(lowest),
                            Opts(base).ignore_index(lowest - 1),
                            Opts(base).ignore_index(0).multidim_average(MultidimAverage::Samplewise)}) {
        for (const bool scores : {false, true}) {
          std::vector<NarrowBatch> batches;
          for (int update = 0; update < 3; ++update) {
            // (with an extra dimension, which samplewise needs)
            const auto shape = base.task() == Task::Binary ? std::vector<int64_t>{n, 2} : std::vector<int64_t>{n, labels, 2};
            // int64 labels go past the dtype's extremes, to its ignore_index too
            const auto draw = [&](bool int64) {
              auto wide = at::randint(std::max<int64_t>(lowest, -1), std::min<int64_t>(high, 2) + 1, shape, gen, at::kLong);
              auto flat = wide.view({-1});
              flat[0] = high, flat[1] = lowest;
              if (int64) flat[2] = high + 1, flat[3] = lowest - 1, flat[4] = o.ignore_index().value_or(0);
              return wide.to(int64 ? at::kLong : dtype);
            };
            // update 1 switches the targets' dtype alone, update 2 the predictions'
            const auto preds = scores ? at::rand(shape, gen).to(update == 2 ? at::kHalf : at::kFloat) : draw(update == 2);
            auto target = draw(update == 1);
            if (update < 2) target = target.transpose(0, -1).contiguous().transpose(0, -1);  // strided, copied
            const auto weight = o.weighted() ? c10::optional<at::Tensor>(at::rand({n}, gen, at::kDouble)) : c10::nullopt;
            batches.push_back({preds, target, scores ? preds : preds.to(at::kLong), target.to(at::kLong), weight});
          }
          expect_narrow_counts_as_wide([&] { return std::make_unique<StatScores>(o); }, batches);
        }
      }
    }
  }
}

// Multiclass scores in float16 or bfloat16 are read as they are (max and sort order them as their
// float32 widening; the CPU path casts them): on each path, with ties (coarse values), NaN rows,
// targets out of range and ignored ones, a metric counts as one fed the widened scores.
TEST(ClassificationKernels, MulticlassHalfPrecisionScoresCountAsTheirFloat32Widening) {
  auto gen = testing::generator(31);
  const int64_t classes = 6, m = 40;
  const std::vector<Opts> options{Opts::multiclass(classes).average(Average::None),
                                  Opts::multiclass(classes).ignore_index(1).weighted(true),
                                  Opts::multiclass(classes).top_k(2).ignore_index(4),
                                  Opts::multiclass(classes).top_k(3).weighted(true)};
  for (const auto dtype : {at::kHalf, at::kBFloat16}) {
    for (const auto& o : options) {
      std::vector<NarrowBatch> batches;
      for (int update = 0; update < 2; ++update) {
        auto scores = (at::randint(-3, 4, {m, classes}, gen, at::kFloat) / 4).to(dtype);  // many ties
        scores.index_put_({at::arange(update, m, 7), update + 1}, kNaN);
        const auto target = at::randint(-1, classes + 1, {m}, gen, at::kLong);
        const auto weight = o.weighted() ? c10::optional<at::Tensor>(at::rand({m}, gen, at::kDouble)) : c10::nullopt;
        batches.push_back({scores, target, scores.to(at::kFloat), target, weight});
      }
      expect_narrow_counts_as_wide([&] { return std::make_unique<StatScores>(o); }, batches);
    }
  }
}

// Weights of `shape` with the `hostile` values among them, shuffled, in `dtype`.
at::Tensor with_hostile_weights(at::Generator& gen, at::IntArrayRef shape, const at::Tensor& hostile,
                                at::ScalarType dtype) {
  auto weight = at::rand(shape, gen, at::kDouble);
  weight.view({-1}).narrow(0, 0, hostile.numel()).copy_(hostile);
  return weight.view({-1}).index({at::randperm(weight.numel(), gen)}).view(weight.sizes()).to(dtype);
}

// Each path's metrics ([0] the CPU path's, [1] the ATen path's) updated with `weight` (narrow) and
// with its float64 widening (wide).
template <class Metric>
void update_narrow_and_wide(std::unique_ptr<Metric> (&narrow)[2], std::unique_ptr<Metric> (&wide)[2],
                            const at::Tensor& preds, const at::Tensor& target, const at::Tensor& weight) {
  for (const bool aten : {false, true}) {
    std::unique_ptr<ForceAtenPath> force;
    if (aten) force = std::make_unique<ForceAtenPath>();
    narrow[aten]->update(preds, target, weight);
    wide[aten]->update(preds, target, weight.to(at::kDouble));
  }
}

// A floating dtype's smallest positive and largest finite values.
std::pair<double, double> extremes(at::ScalarType dtype) {
  switch (dtype) {
    case at::kHalf:
      return {std::numeric_limits<c10::Half>::denorm_min(), std::numeric_limits<c10::Half>::max()};
    case at::kBFloat16:
      return {std::numeric_limits<c10::BFloat16>::denorm_min(), std::numeric_limits<c10::BFloat16>::max()};
    default:
      return {std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max()};
  }
}

// float32, float16 and bfloat16 weights reach the device path as they are (its float64 arithmetic
// widens them exactly; binary and multilabel ones are bucketized in their dtype): on each path, every
// task counts them, bad ones (NaN, negative, the dtype's negative nearest 0, +inf) and the dtype's
// extremes (its largest, its smallest, -0.0) included, exactly as their float64 widening, beside
// scores of each dtype.
TEST(ClassificationKernels, NarrowWeightsCountAsTheirFloat64WideningOnEachPath) {
  auto gen = testing::generator(25);
  const int64_t n = 40;
  for (const auto weight_dtype : {at::kFloat, at::kHalf, at::kBFloat16}) {
    const auto [smallest, largest] = extremes(weight_dtype);
    const auto hostile = at::tensor(std::vector<double>{kNaN, -1.0, -smallest, INFINITY, largest, smallest, -0.0, 0.0});
    // multiclass scores of a dtype that holds the weights check them beside their NaN check on the
    // ATen path, others a float64 weight apart
    for (const auto& base : {Opts::binary(), Opts::multilabel(4), Opts::multiclass(5), Opts::multiclass(5).top_k(2),
                             Opts::multiclass(5).top_k(2).ignore_index(1),
                             Opts::multiclass(kUnknownClasses).average(Average::Micro)}) {
      const auto o = Opts(base).weighted(true);
      const bool multiclass = o.task() == Task::Multiclass;
      for (const auto score_dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
        for (int matrix = 0; matrix < (multiclass && o.num_classes() > 0 ? 2 : 1); ++matrix) {
          auto make = [&]() -> std::unique_ptr<ClassificationMetric> {
            if (matrix) return std::make_unique<ConfusionMatrix>(o);
            return std::make_unique<StatScores>(o);
          };
          std::unique_ptr<ClassificationMetric> narrow[2] = {make(), make()}, wide[2] = {make(), make()};  // [aten]
          for (int step = 0; step < 4; ++step) {
            at::Tensor preds, target;
            if (multiclass) {  // with a NaN score and targets out of range
              preds = at::randn({n, 5}, gen).to(score_dtype);
              preds[step][step % 5] = kNaN;
              target = at::randint(-1, 6, {n}, gen, at::kLong);
            } else {
              const auto shape = o.task() == Task::Binary ? std::vector<int64_t>{n} : std::vector<int64_t>{n, 4};
              preds = at::rand(shape, gen).to(score_dtype);
              target = at::randint(2, shape, gen, at::kLong);
            }
            const bool per_entry = o.task() == Task::Multilabel && step % 2;
            const auto weight = with_hostile_weights(gen, per_entry ? at::IntArrayRef{n, 4} : at::IntArrayRef{n},
                                                     hostile, weight_dtype);
            update_narrow_and_wide(narrow, wide, preds, target, weight);
          }
          for (const bool aten : {false, true}) {
            const auto where = ::testing::Message() << narrow[aten]->options_text() << " scores " << score_dtype
                                                    << " weights " << weight_dtype << (aten ? " on the ATen path" : "");
            EXPECT_TRUE(states_equal(narrow[aten]->state_dict(), wide[aten]->state_dict())) << where;
            // across the paths tn aside: the ATen path's takes the kept weights' total less each row's
            // classes, which loses the small weights beside float32's largest
            const auto counts = narrow[aten]->stat_counts(), cpu_counts = narrow[false]->stat_counts();
            EXPECT_TRUE(at::equal(counts.tp, cpu_counts.tp) && at::equal(counts.fp, cpu_counts.fp) &&
                        at::equal(counts.fn, cpu_counts.fn))
                << where;
            EXPECT_EQ(narrow[aten]->bad_input_report().bad_updates, 4) << where;
            EXPECT_EQ(narrow[aten]->bad_input_report().counts, wide[aten]->bad_input_report().counts) << where;
            EXPECT_EQ(narrow[aten]->bad_input_report().counts, narrow[false]->bad_input_report().counts) << where;
            if (o.task() == Task::Binary || (multiclass && !o.ignore_index())) {  // 4 bad weights in each of 4 updates
              EXPECT_EQ(narrow[aten]->bad_input_report().counts.back().second, 16) << where;
            }
          }
        }
      }
    }
  }
}

// top_k > 1 on both paths against a brute-force count: tied scores (-0.0 with 0.0, and at
// infinity), NaN rows (of either sign, anywhere in the row), targets out of range and ignored, bad
// weights (NaN, negative, infinite), strided scores, and num_classes below, near and above the width
// the device path sorts into.
TEST(ClassificationKernels, TopKWithTiesMatchesABruteForceCountOnBothPaths) {
  auto gen = testing::generator(24);
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const std::vector<double> levels{-kInf, -1, -0.0, 0.0, 1, 2, kInf};
  for (const int64_t classes : {3, 9, 40}) {
    for (const int64_t k : {int64_t{2}, std::min<int64_t>(5, classes), classes}) {
      const int64_t m = 64;
      auto scores = at::tensor(levels, at::kDouble)
                        .index({at::randint(static_cast<int64_t>(levels.size()), {m, classes}, gen)});
      scores.index_put_({at::arange(0, m, 7), 0}, kNaN);
      scores.index_put_({at::arange(3, m, 11), classes - 1}, -kNaN);
      auto target = at::randint(-1, classes + 1, {m}, gen);
      target.index_put_({at::arange(0, m, 5)}, 1);  // ignored
      const auto weight = values({1, 0.5, 2, kNaN, 1, -1, kInf, 3}).repeat({m / 8});
      const auto o = Opts::multiclass(classes).top_k(k).ignore_index(1).weighted(true).average(Average::None);
      // the brute force: a row is right where fewer than k classes score above its target, or as
      // high at a lower index; else its prediction is the first maximum
      std::vector<double> tp(classes), fp(classes), tn(classes), fn(classes);
      const auto s = scores.accessor<double, 2>();
      for (int64_t i = 0; i < m; ++i) {
        const int64_t t = target[i].item<int64_t>();
        const double w = weight[i].item<double>();
        bool nan = false;
        for (int64_t c = 0; c < classes; ++c) nan = nan || std::isnan(s[i][c]);
        if (nan || t < 0 || t >= classes || t == 1 || !(w >= 0 && w < kInf)) continue;
        int64_t ahead = 0, first_max = 0;
        for (int64_t c = 0; c < classes; ++c) {
          ahead += s[i][c] > s[i][t] || (s[i][c] == s[i][t] && c < t);
          if (s[i][c] > s[i][first_max]) first_max = c;
        }
        const int64_t p = ahead < k ? t : first_max;
        for (int64_t c = 0; c < classes; ++c) {
          (c == t && c == p ? tp : c == p ? fp : c == t ? fn : tn)[c] += w;
        }
      }
      for (const auto& preds : {scores.to(at::kFloat), scores.t().contiguous().t()}) {
        StatScores cpu(o), aten(o);
        ConfusionMatrix matrix_cpu(o), matrix_aten(o);
        cpu.update(preds, target, weight);
        matrix_cpu.update(preds, target, weight);
        {
          ForceAtenPath force;
          aten.update(preds, target, weight);
          matrix_aten.update(preds, target, weight);
        }
        const auto what = "C=" + std::to_string(classes) + " k=" + std::to_string(k) + " " + c10::toString(preds.scalar_type());
        EXPECT_TRUE(states_equal(aten.state_dict(), cpu.state_dict())) << what;
        EXPECT_TRUE(states_equal(matrix_aten.state_dict(), matrix_cpu.state_dict())) << what;
        const auto counts = aten.state_dict();
        EXPECT_TRUE(tensors_close(counts.at("tp"), values(tp))) << what;
        EXPECT_TRUE(tensors_close(counts.at("fp"), values(fp))) << what;
        EXPECT_TRUE(tensors_close(counts.at("tn"), values(tn))) << what;
        EXPECT_TRUE(tensors_close(counts.at("fn"), values(fn))) << what;
        // the matrix's rows are targets: its diagonal is tp, its column sums less it fp
        const auto confmat = matrix_aten.state_dict().at("confmat");
        EXPECT_TRUE(tensors_close(confmat.diagonal(), values(tp))) << what;
        EXPECT_TRUE(tensors_close(confmat.sum(0) - confmat.diagonal(), values(fp))) << what;
      }
    }
  }
}

// Weighted multiclass where the device path tallies each kind of bad input (and counts the pieces)
// in one where and one mm: with an ignore_index (for the rows it does not ignore alone, no zeroing
// op), and with top_k > 1 (each end of the sort checked for NaN, a row NaN at both counted once):
// ignore_index none, outside and inside the classes; top_k 1 and 3, over 5 classes (the sort pads
// the scores) and 20 (it sorts them as they are: an all-NaN row is NaN at both ends); float32
// scores beside float32 weights (checked with the scores) and float64 weights, float64 scores,
// labels, and a weighted metric updated without weights. Bad weights, NaN scores (a row all NaN
// too), labels and targets out of range sit on ignored rows in every update, on kept rows in the
// second alone: the first bad update is 1, and the counts match a brute force over the kept rows.
TEST(ClassificationKernels, WeightedTalliesCountTheRowsTheyKeepOnBothPaths) {
  auto gen = testing::generator(25);
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const int64_t m = 48;
  for (const auto ignore : {c10::optional<int64_t>(), c10::optional<int64_t>(-1), c10::optional<int64_t>(2)}) {
    for (const int64_t k : {int64_t{1}, int64_t{3}}) {
      for (const int input : {0, 1, 2, 3, 4}) {  // f32 + f32, f32 + f64, f64 + f64, labels + f64, f32 alone
        const bool labels = input == 3, weighted = input != 4;
        if (labels && k > 1) continue;
        for (const int64_t classes : {5, 20}) {
          const auto o = Opts::multiclass(classes).top_k(k).ignore_index(ignore).weighted(true).average(Average::None);
          StatScores cpu(o), aten(o);
          const auto where = ::testing::Message() << cpu.options_text() << " input " << input;
          std::vector<double> tp(classes), fp(classes), tn(classes), fn(classes);
          std::array<int64_t, 3> bad{};  // targets, predictions, weights: BadInputCounts' order
          for (int64_t step = 0; step < 3; ++step) {
            auto scores = at::randn({m, classes}, gen, input == 2 ? at::kDouble : at::kFloat);
            auto preds = labels ? at::randint(classes, {m}, gen) : scores;
            auto target = at::randint(classes, {m}, gen);
            auto weight = at::rand({m}, gen, input == 0 ? at::kFloat : at::kDouble);
            const std::vector<double> bad_weights{kNaN, -1.0, kInf, -kInf};
            if (ignore) {  // rows 0-7 ignored, each with a kind of bad input
              target.narrow(0, 0, 8).fill_(*ignore);
              for (int64_t r = 0; r < 4; ++r) weight[r] = bad_weights[r];
              if (labels) {
                preds[4] = classes, preds[5] = -1;
              } else {
                preds[4][1] = kNaN, preds[5][classes - 1] = -kNaN, preds[6].fill_(kNaN);
              }
            }
            if (step == 1) {  // rows 8-15 kept, as bad
              for (int64_t r = 8; r < 12; ++r) weight[r] = bad_weights[r - 8];
              if (labels) {
                preds[12] = classes + 2;
              } else {
                preds[12][0] = kNaN, preds[11].fill_(-kNaN), preds[10][classes - 1] = -kNaN;
              }
              target[13] = ignore == -1 ? -2 : classes, target[14] = classes + 7;
              target[15] = ignore == -1 ? classes : -1, weight[15] = kNaN;  // two kinds in one row
            }
            const auto row_weight = [&](int64_t r) { return weighted ? weight[r].item<double>() : 1.0; };
            for (int64_t r = 0; r < m; ++r) {
              const int64_t t = target[r].item<int64_t>();
              if (ignore && t == *ignore) continue;
              const double w = row_weight(r);
              const bool bad_target = t < 0 || t >= classes;
              bool bad_prediction = false;
              int64_t p = 0;
              if (labels) {
                p = preds[r].item<int64_t>();
                bad_prediction = p < 0 || p >= classes;
              } else {
                const auto s = scores[r].to(at::kDouble);
                const auto x = s.accessor<double, 1>();
                int64_t ahead = 0;
                for (int64_t c = 0; c < classes; ++c) {
                  bad_prediction = bad_prediction || std::isnan(x[c]);
                  if (x[c] > x[p]) p = c;
                }
                if (!bad_target) {
                  for (int64_t c = 0; c < classes; ++c) ahead += x[c] > x[t] || (x[c] == x[t] && c < t);
                  if (ahead < k) p = t;
                }
              }
              const bool bad_weight = !(w >= 0 && w < kInf);
              bad[0] += bad_target, bad[1] += bad_prediction, bad[2] += bad_weight;
              if (bad_target || bad_prediction || bad_weight) continue;
              for (int64_t c = 0; c < classes; ++c) {
                (c == t && c == p ? tp : c == p ? fp : c == t ? fn : tn)[c] += w;
              }
            }
            const auto w = weighted ? c10::optional<at::Tensor>(weight) : c10::nullopt;
            cpu.update(preds, target, w);
            ForceAtenPath force;
            aten.update(preds, target, w);
          }
          // (tn within rounding: the device path takes it from the kept weights' total)
          EXPECT_TRUE(states_equal(aten.state_dict(), cpu.state_dict(), 1e-12)) << where;
          const auto report = aten.bad_input_report();
          ASSERT_EQ(report.counts.size(), 3u) << where;
          for (size_t kind = 0; kind < 3; ++kind) EXPECT_EQ(report.counts[kind].second, bad[kind]) << where << kind;
          EXPECT_EQ(report.bad_updates, 1) << where;
          EXPECT_EQ(report.first_bad_update, 1) << where;
          const auto counts = aten.stat_counts();
          EXPECT_TRUE(tensors_close(counts.tp, values(tp))) << where;
          EXPECT_TRUE(tensors_close(counts.fp, values(fp))) << where;
          EXPECT_TRUE(tensors_close(counts.tn, values(tn))) << where;
          EXPECT_TRUE(tensors_close(counts.fn, values(fn))) << where;
        }
      }
    }
  }
}

// Batches too large for the tally layouts' where (ValuesLayout::tally_of: 16 rows of m a slot within
// kMaxCopiedPieces) zero the ignored rows and take the larger of the sort's ends instead: the same
// state and report as the CPU path either side of the bound (50,000 rows: tallied at top_k 1 and 3;
// 140,000: not), with bad weights, NaN scores and targets out of range on ignored and kept rows,
// ignore_index none, outside and inside the classes. (test_device_path.py counts the ops either side.)
TEST(ClassificationKernels, WeightedTalliesAndTheirLargeBatchFallbackAgreeWithTheCpuPath) {
  auto gen = testing::generator(26);
  for (const int64_t m : {50000, 140000}) {
    for (const int64_t k : {int64_t{1}, int64_t{3}}) {
      for (const auto ignore : {c10::optional<int64_t>(), c10::optional<int64_t>(-1), c10::optional<int64_t>(2)}) {
        const auto o = Opts::multiclass(5).top_k(k).ignore_index(ignore).weighted(true).average(Average::None);
        auto scores = at::randn({m, 5}, gen);
        auto target = at::randint(5, {m}, gen);
        // float32 weights are checked with the scores, float64 ones apart
        auto weight = at::rand({m}, gen, ignore == 2 ? at::kDouble : at::kFloat);
        scores.index_put_({at::arange(0, m, 11), 1}, kNaN);
        target.index_put_({at::arange(3, m, 13)}, 9);
        weight.index_put_({at::arange(5, m, 17)}, kNaN);
        weight.index_put_({at::arange(6, m, 19)}, -1.0);
        if (ignore) target.index_put_({at::arange(0, m, 7)}, *ignore);
        StatScores cpu(o), aten(o);
        cpu.update(scores, target, weight);
        {
          ForceAtenPath force;
          aten.update(scores, target, weight);
        }
        const auto where = ::testing::Message() << cpu.options_text() << " m=" << m;
        EXPECT_TRUE(states_equal(aten.state_dict(), cpu.state_dict(), 1e-12)) << where;
        EXPECT_EQ(aten.bad_input_report().counts, cpu.bad_input_report().counts) << where;
        EXPECT_EQ(aten.bad_input_report().bad_updates, 1) << where;
      }
    }
  }
}

TEST(ClassificationKernels, ReadersOnTwoThreadsFoldPendingWorkOnce) {
  const auto o = Opts::multiclass(4);
  StatScores cpu(o), aten(o);
  const auto preds = longs({0, 1, 2, 3, 3, 1}), target = longs({0, 1, 1, 3, 0, 2});
  cpu.update(preds, target);
  {
    ForceAtenPath force;
    aten.update(preds, target);  // tn's kept rows wait in its pending addend
  }
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; ++t) {
    readers.emplace_back([&] {
      for (int i = 0; i < 50; ++i) (void)aten.state_dict();
    });
  }
  for (auto& r : readers) r.join();
  EXPECT_TRUE(states_equal(aten.state_dict(), cpu.state_dict()));
}

// multidim_average=samplewise: a row of counts per sample, in a state that grows (Cat entries).

Opts samplewise(Opts o) { return o.multidim_average(MultidimAverage::Samplewise); }

// Every finite float16 and bfloat16 value, as (bits) in order.
at::Tensor every_value(at::ScalarType dtype) {
  const int64_t inf_bits = dtype == at::kHalf ? 0x7C00 : 0x7F80;
  const auto k = at::arange(-inf_bits + 1, inf_bits, at::kInt);
  const auto bits = at::where(k.lt(0), k.neg().bitwise_or(0x8000), k).to(at::kShort);
  return bits.view(dtype);
}

TEST(Classification, HalfPrecisionScoresArePredictedAsTorchMetricsPredictsThemInTheirDtype) {
  // TorchMetrics thresholds float16/bfloat16 probabilities in their dtype (0.7 rounds to
  // 0.7001953125 in float16: a score of exactly that is not above it) and logits after a sigmoid
  // in float32 rounded to the dtype (float16 logits below about 2e-3 give exactly 0.5)
  for (const auto dtype : {at::kHalf, at::kBFloat16}) {
    const auto x = every_value(dtype);
    const auto probabilities = x.masked_select(x.ge(0).bitwise_and(x.le(1)));
    for (const double th : {0.5, 0.7, 0.3, 0.999, 0.0, 1.0}) {
      for (const bool logits : {false, true}) {
        const auto scores = logits ? x : probabilities;
        const auto expected = logits ? scores.to(at::kFloat).sigmoid().to(dtype).gt(th) : scores.gt(th);
        const auto labels = scores.numel();
        for (const bool weighted : {false, true}) {  // the vector kernels, and the scalar loop
          on_both_paths([&] {
            const auto o = Opts::multilabel(labels, th).average(Average::None).weighted(weighted);
            StatScores metric(o);
            const auto ones = at::ones({1, labels}, at::kLong);
            weighted ? metric.update(scores.view({1, labels}), ones, at::ones({1}, at::kDouble))
                     : metric.update(scores.view({1, labels}), ones);
            const auto tp = metric.compute().select(1, 0).to(at::kBool);
            EXPECT_EQ(tp.ne(expected).sum().item<int64_t>(), 0)
                << dtype << " threshold " << th << (logits ? " logits" : " probabilities")
                << (weighted ? " weighted" : "") << (cpu_fast_path_enabled() ? "" : " on the ATen path");
          });
        }
      }
    }
  }
  // float32 logits whose float32 sigmoid rounds to the threshold are not above it either
  on_both_paths([] {
    EXPECT_EQ(computed(StatScores(Opts::binary()), floats({1e-8, 2.0}), longs({1, 1}))[0].item<int64_t>(), 1);
  });
}

TEST(Samplewise, CountsEachSampleOverItsPositionsByBruteForce) {
  auto gen = testing::generator(41);
  const auto preds = at::randint(3, {4, 6}, gen, at::kLong);
  const auto target = at::randint(3, {4, 6}, gen, at::kLong);
  StatScores metric(samplewise(Opts::multiclass(3).average(Average::None)));
  metric.update(preds, target);
  const auto table = metric.compute();  // [4, 3, 5]
  ASSERT_EQ(table.sizes(), (std::vector<int64_t>{4, 3, 5}));
  for (int64_t n = 0; n < 4; ++n) {
    for (int64_t c = 0; c < 3; ++c) {
      int64_t tp = 0, fp = 0, tn = 0, fn = 0;
      for (int64_t j = 0; j < 6; ++j) {
        const bool p = preds[n][j].item<int64_t>() == c, t = target[n][j].item<int64_t>() == c;
        tp += p && t, fp += p && !t, fn += !p && t, tn += !p && !t;
      }
      const std::vector<int64_t> expected{tp, fp, tn, fn, tp + fn};
      for (int64_t k = 0; k < 5; ++k) EXPECT_EQ(table[n][c][k].item<int64_t>(), expected[k]) << n << " " << c;
    }
  }
}

// Each sample's [C, 5] stat scores (tp, fp, tn, fn, support) of labels [n, positions], by loops.
at::Tensor per_sample_by_loops(const at::Tensor& preds, const at::Tensor& target, int64_t classes) {
  auto table = at::zeros({preds.size(0), classes, 5}, at::kLong);
  for (int64_t n = 0; n < preds.size(0); ++n) {
    for (int64_t j = 0; j < preds.size(1); ++j) {
      const auto p = preds[n][j].item<int64_t>(), t = target[n][j].item<int64_t>();
      for (int64_t c = 0; c < classes; ++c) {
        const int64_t stat = p == c ? (t == c ? 0 : 1) : (t == c ? 3 : 2);
        table[n][c][stat] += 1;
        if (t == c) table[n][c][4] += 1;
      }
    }
  }
  return table;
}

TEST(Samplewise, RowsWrittenInPlaceSurviveGrowthCopiesLoadsMergesResetsAndMoves) {
  // the state's rows buffer doubles as updates of 1 to 7 samples fill it; copies and loads take
  // its rows, not its room; a reset leaves zeros where the next rows go
  auto gen = testing::generator(43);
  const auto o = samplewise(Opts::multiclass(3).average(Average::None));
  StatScores metric(o);
  std::vector<at::Tensor> expected;
  const auto update = [&](StatScores& m, int64_t n) {
    const auto preds = at::randint(3, {n, 4}, gen, at::kLong), target = at::randint(3, {n, 4}, gen, at::kLong);
    m.update(preds, target);
    return per_sample_by_loops(preds, target, 3);
  };
  const auto check = [&](StatScores& m, const std::vector<at::Tensor>& tables, const char* when) {
    EXPECT_TRUE(at::equal(m.compute(), at::cat(tables))) << when;
  };
  for (const int64_t n : {1, 3, 2, 7, 1, 5}) {
    expected.push_back(update(metric, n));
    check(metric, expected, "grown, read after each update");  // each read folds the newer rows' tn
  }
  const auto copy = metric.clone();
  expected.push_back(update(metric, 4));  // the copy's rows stay its own
  auto& copied = *static_cast<StatScores*>(copy.get());
  check(copied, {expected.begin(), expected.end() - 1}, "copy");
  update(copied, 4);  // where the original's last rows lie, in a buffer of its own
  check(metric, expected, "the original, after the copy's update");
  StatScores loaded(o);
  update(loaded, 1);
  loaded.load_state_dict(metric.state_dict());  // more rows than it had room for
  std::vector<at::Tensor> both = expected;
  const auto next = update(loaded, 2);
  both.push_back(next);
  check(loaded, both, "loaded, then updated");
  StatScores other(o);
  std::vector<at::Tensor> theirs{update(other, 6), update(other, 3)};
  metric.merge(other);
  expected.insert(expected.end(), theirs.begin(), theirs.end());
  check(metric, expected, "merged");
  metric.reset();
  const std::vector<at::Tensor> after_reset{update(metric, 2), update(metric, 9)};
  check(metric, after_reset, "reset");
  StatScores on_meta(Opts(o).device(at::kMeta));
  on_meta.update(at::zeros({3, 4}, at::TensorOptions(at::kLong).device(at::kMeta)),
                 at::zeros({3, 4}, at::TensorOptions(at::kLong).device(at::kMeta)));
  on_meta.to(at::kCPU);  // arrives reset, its room zeros
  check(on_meta, {update(on_meta, 5)}, "moved from meta");
}

TEST(Samplewise, RowsGrowMergeEndToEndAndResetEmpties) {
  const auto labels = [](std::vector<int64_t> values, int64_t rows) { return at::tensor(values).view({rows, -1}); };
  Accuracy metric(samplewise(Opts::binary()));
  metric.update(labels({1, 1, 0, 1}, 2), labels({1, 0, 0, 1}, 2));
  Accuracy other(samplewise(Opts::binary()));
  other.update(labels({1, 1, 1}, 1), labels({1, 1, 0}, 1));
  metric.merge(other);
  EXPECT_TRUE(tensors_close(metric.compute(), at::tensor({0.5f, 1.0f, 2.0f / 3})));
  EXPECT_EQ(other.value().size(0), 1);  // the other metric is unchanged
  EXPECT_NE(metric.description().find("tp Long[*, 1] cat"), std::string::npos) << metric.description();
  metric.reset();
  EXPECT_EQ(metric.value().size(0), 0);
}

TEST(Samplewise, StateDictsOfAnyRowCountLoadAndABadOneChangesNothing) {
  Recall metric(samplewise(Opts::multilabel(3)));
  auto gen = testing::generator(42);
  metric.update(at::rand({5, 3, 2}, gen), at::randint(2, {5, 3, 2}, gen, at::kLong));
  const auto saved = metric.state_dict();
  Recall restored(samplewise(Opts::multilabel(3)));
  restored.update(at::rand({1, 3, 2}, gen), at::randint(2, {1, 3, 2}, gen, at::kLong));
  restored.load_state_dict(saved);
  EXPECT_TRUE(tensors_close(restored.compute(), metric.compute()));
  auto bad = saved;
  bad["tp"] = at::zeros({5, 4}, at::kLong);
  const auto before = restored.state_dict();
  EXPECT_THROW(restored.load_state_dict(bad), c10::ValueError);
  EXPECT_TRUE(states_equal(restored.state_dict(), before));
}

// Samplewise counting (the ATen path on every device) copies nothing inside its ops either, and a
// strided batch counts as its contiguous copy: a column of a wider binary batch, multiclass scores
// whose classes move last, and one multilabel sample, whose labels moved last stay a view (the
// batch whose bucketize copied it and warned).
TEST(Samplewise, UpdatesCopyNothingInsideTheirOps) {
  auto gen = testing::generator(30);
  const std::vector<std::pair<Opts, std::pair<at::Tensor, at::Tensor>>> cases{
      {Opts::binary(), {at::rand({6, 8, 2}, gen).select(2, 1), at::randint(2, {6, 8, 2}, gen, at::kLong).select(2, 0)}},
      {Opts::multiclass(3), {at::randn({6, 3, 5}, gen), at::randint(3, {6, 5}, gen, at::kLong)}},
      {Opts::multilabel(3), {at::rand({1, 3, 2}, gen), at::randint(2, {1, 3, 2}, gen, at::kLong)}},
  };
  for (const auto& [o, batch] : cases) {
    StatScores strided(samplewise(o)), laid_out(samplewise(o));
    testing::OpsRun ops;
    for (int step = 0; step < 2; ++step) {
      if (step == 1) ops.clear();  // the first update makes its buffers and constants
      strided.update(batch.first, batch.second);
    }
    EXPECT_THAT(ops.copies(), ::testing::IsEmpty())
        << strided.options_text();
    for (int step = 0; step < 2; ++step) laid_out.update(batch.first.contiguous(), batch.second.contiguous());
    EXPECT_TRUE(states_equal(strided.state_dict(), laid_out.state_dict())) << strided.options_text();
  }
}

TEST(Samplewise, RefusedWithWeightsAndForConfusionMatrices) {
  EXPECT_THROW(Accuracy(samplewise(Opts::binary()).weighted(true)), c10::ValueError);
  EXPECT_THROW(ConfusionMatrix(samplewise(Opts::multiclass(3))), c10::ValueError);
  Accuracy metric(samplewise(Opts::multiclass(3)));
  EXPECT_THROW(metric.update(at::randn({4, 3}), at::randint(3, {4}, at::kLong)), c10::ValueError);
}

// The scores from counts that lie as rows of one buffer (as a state packs them: one op casts them
// all) equal those from the same counts apart, and the per-class ratios averaged by brute force;
// counts that only look packed (one of them out of step, or in reverse order) are read apart, as
// are rows of every other column. Integer and float64 counts; class 4 is never seen (macro leaves
// it out).
TEST(Classification, FunctionalScoresReadCountsPackedOrApart) {
  const int64_t classes = 5;
  const std::vector<std::vector<double>> rows = {
      {3, 0, 7, 1, 0}, {1, 2, 0, 0, 0}, {10, 12, 9, 13, 14}, {2, 1, 0, 3, 0}};  // tp, fp, tn, fn
  const double beta2 = 0.25;
  // over the classes seen (a tp, fp or fn), the mean of a * tp / (a * tp + b * fp + c * fn), 0 where 0 / 0
  const auto macro = [&](double a, double b, double c) {
    double sum = 0;
    int seen = 0;
    for (int64_t k = 0; k < classes; ++k) {
      const double tp = rows[0][k], fp = rows[1][k], fn = rows[3][k], den = a * tp + b * fp + c * fn;
      if (tp + fp + fn == 0) continue;
      sum += den == 0 ? 0.0 : a * tp / den, ++seen;
    }
    return sum / seen;
  };
  const double expected[] = {macro(1, 0, 1), macro(1, 1, 0), macro(1, 0, 1), macro(1 + beta2, 1, beta2)};
  for (const auto dtype : {at::kLong, at::kDouble}) {
    const auto opts = Opts::multiclass(classes).average(Average::Macro).weighted(dtype == at::kDouble);
    const auto scores = [&](const StatCounts& c) {
      return std::vector<at::Tensor>{functional::accuracy(c, opts), functional::precision(c, opts),
                                     functional::recall(c, opts), functional::fbeta_score(c, 0.5, opts)};
    };
    // `order`: the buffer row of tp, fp, tn and fn; the other rows hold 99s; `wide`: every other column
    const auto laid_out = [&](std::vector<int64_t> order, bool wide) {
      auto buffer = at::full({6, wide ? 2 * classes : classes}, 99, dtype);
      auto columns = wide ? buffer.slice(1, 0, 2 * classes, 2) : buffer;
      std::vector<at::Tensor> counts;
      for (size_t i = 0; i < 4; ++i) {
        columns[order[i]].copy_(at::tensor(rows[i], at::kDouble));
        counts.push_back(columns[order[i]]);
      }
      return StatCounts{counts[0], counts[1], counts[2], counts[3]};
    };
    const auto packed = scores(laid_out({0, 1, 2, 3}, false));
    for (const auto& [order, wide] : std::vector<std::pair<std::vector<int64_t>, bool>>{
             {{0, 1, 2, 3}, true}, {{1, 2, 3, 5}, false}, {{3, 2, 1, 0}, false}, {{0, 2, 4, 5}, true}}) {
      const auto got = scores(laid_out(order, wide));
      for (size_t m = 0; m < got.size(); ++m) EXPECT_TRUE(at::equal(got[m], packed[m])) << dtype << " metric " << m;
    }
    const auto c = laid_out({0, 1, 2, 3}, false);
    const auto apart = scores({c.tp.clone(), c.fp.clone(), c.tn.clone(), c.fn.clone()});
    for (size_t m = 0; m < packed.size(); ++m) {
      EXPECT_TRUE(at::equal(apart[m], packed[m])) << dtype << " metric " << m;
      EXPECT_TRUE(tensors_close(packed[m], at::scalar_tensor(expected[m], packed[m].scalar_type()), 1e-6))
          << dtype << " metric " << m;
    }
  }
}

TEST(Classification, FunctionalScoresOfInt32CountsSumInInt64) {
  // 2^30 of each: tp + tn, tp + fp and the total overflow int32 (2^31 and 2^32); every score is 0.5
  // (float32 rounds none of these counts), as for the same counts in int64
  const auto counts = [](at::ScalarType dtype) {
    const auto c = at::full({}, int64_t{1} << 30, at::TensorOptions().dtype(dtype));
    return StatCounts{c, c, c, c};
  };
  const auto opts = Opts::binary();
  for (const auto dtype : {at::kInt, at::kLong}) {
    const auto c = counts(dtype);
    for (const auto& score : {functional::accuracy(c, opts), functional::precision(c, opts),
                              functional::recall(c, opts), functional::fbeta_score(c, 1.0, opts)}) {
      EXPECT_TRUE(at::equal(score, at::full({}, 0.5f))) << dtype << ": " << score;
    }
  }
}

TEST(Classification, FunctionalRefusesCountsAndOptionsItCannotReadByName) {
  const auto counts = [](const at::Tensor& t) { return StatCounts{t, t.clone(), t.clone(), t.clone()}; };
  const auto c = counts(at::ones({3}, at::kLong));
  const auto o = Opts::multiclass(3);
  auto shapes = c;
  shapes.fp = at::ones({2}, at::kLong);
  EXPECT_THROWS_WITH(functional::precision(shapes, o), c10::ValueError,
                     "functional::precision: counts.fp is [2] on cpu but counts.tp is [3] on cpu");
  auto undefined = c;
  undefined.fn = at::Tensor();
  EXPECT_THROWS_WITH(functional::recall(undefined, o), c10::ValueError,
                     "functional::recall: counts.fn is an undefined tensor");
  auto devices = c;
  devices.tn = at::ones({3}, at::TensorOptions().dtype(at::kLong).device(at::kMeta));
  EXPECT_THROWS_WITH(functional::stat_scores(devices, o), c10::ValueError, "counts.tn is [3] on meta");
  auto grad = counts(at::ones({3}, at::kDouble));
  grad.tp = at::ones({3}, at::kDouble).requires_grad_();
  EXPECT_THROWS_WITH(functional::accuracy(grad, o), c10::ValueError, "counts.tp requires grad");
  EXPECT_THROWS_WITH(functional::accuracy(c, Opts::binary()), c10::ValueError,
                     "functional::accuracy: a binary task's counts hold one value each, got [3]");
  EXPECT_THROWS_WITH(functional::accuracy(c, Opts(o).zero_division(0.5)), c10::ValueError,
                     "functional::accuracy: zero_division must be 0 or 1");
  for (const double beta : {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    EXPECT_THROWS_WITH(functional::fbeta_score(c, beta, o), c10::ValueError,
                       "functional::fbeta_score: beta must be a finite number larger than 0");
  }
  EXPECT_THROWS_WITH(functional::accuracy(counts(at::ones({4}, at::kLong)), o), c10::ValueError,
                     "functional::accuracy: expected counts of shape [3] (num_classes = 3), got [4]");
  EXPECT_THROWS_WITH(functional::recall(c, Opts::multilabel(3).multidim_average(MultidimAverage::Samplewise)),
                     c10::ValueError,
                     "functional::recall: expected counts of shape [samples, 3] (num_labels = 3), got [3]");
  const auto binary_rows = Opts::binary().multidim_average(MultidimAverage::Samplewise);
  EXPECT_THROWS_WITH(functional::stat_scores(counts(at::ones({4, 3}, at::kLong)), binary_rows), c10::ValueError,
                     "functional::stat_scores: a binary task's samplewise counts are [samples] or [samples, 1], got "
                     "[4, 3]");
  const auto unknown = Opts::multiclass(kUnknownClasses).average(Average::Micro);  // (counts of any width)
  EXPECT_TRUE(at::equal(functional::accuracy(counts(at::ones({7}, at::kLong)), unknown), at::full({}, 0.5f)));
  EXPECT_THROWS_WITH(functional::accuracy(counts(at::ones({2, 7}, at::kLong)), unknown), c10::ValueError,
                     "functional::accuracy: expected counts of shape [classes] (num_classes = None), got [2, 7]");
  EXPECT_THROWS_WITH(functional::normalize_confusion_matrix(at::ones({3}), Normalize::True), c10::ValueError,
                     "expected a matrix (or a stack of them), got a tensor of shape [3]");
  // empty counts (a samplewise state before its first row) give empty scores, weighted ones too
  for (const auto dtype : {at::kLong, at::kDouble}) {
    const auto none = Opts(o).average(Average::None).multidim_average(MultidimAverage::Samplewise);
    EXPECT_EQ(functional::precision(counts(at::ones({0, 3}, dtype)), none).numel(), 0);
  }
}

TEST(Classification, FunctionalCountsWithOneFloatingAmongIntegersAreAllFloating) {
  // fp's halves were cut off (the rows stacked as floats, then read as integers, as tp is)
  const StatCounts c{at::tensor({2, 3}), at::tensor({0.5, 1.5}, at::kDouble), at::tensor({0, 0}),
                     at::tensor({1, 1})};
  const auto o = Opts::multiclass(2).average(Average::None);
  EXPECT_TRUE(at::equal(functional::precision(c, o), at::tensor({2 / 2.5, 3 / 4.5}, at::kDouble).to(at::kFloat)));
  EXPECT_TRUE(at::equal(functional::recall(c, o), at::tensor({2 / 3.0, 3 / 4.0}, at::kDouble).to(at::kFloat)));
  EXPECT_TRUE(at::equal(functional::stat_scores(c, o).select(-1, 1), at::tensor({0.5, 1.5}, at::kDouble)));
}

TEST(Classification, FunctionalStatScoresOfInt32CountsSumInInt64) {
  // 2^30 of each in two classes: the support (tp + fn) is 2^31, past int32; the table comes in int64
  const int64_t g = int64_t{1} << 30;
  const auto row = at::tensor({g, g, g, g, 2 * g});
  const auto multiclass = Opts::multiclass(2);
  const auto expect = [](const at::Tensor& got, const at::Tensor& want, at::ScalarType dtype) {
    EXPECT_EQ(got.scalar_type(), dtype);  // (at::equal compares values alone)
    EXPECT_TRUE(at::equal(got, want)) << got;
  };
  for (const auto dtype : {at::kInt, at::kLong}) {
    const auto c = at::full({2}, g, at::TensorOptions().dtype(dtype));
    const StatCounts counts{c, c, c, c};
    expect(functional::stat_scores(StatCounts{c[0], c[0], c[0], c[0]}, Opts::binary()), row, at::kLong);
    expect(functional::stat_scores(counts, Opts(multiclass).average(Average::None)), at::stack({row, row}), at::kLong);
    expect(functional::stat_scores(counts, Opts(multiclass).average(Average::Micro)), 2 * row, at::kLong);
    for (const auto average : {Average::Macro, Average::Weighted}) {
      expect(functional::stat_scores(counts, Opts(multiclass).average(average)), row.to(at::kFloat), at::kFloat);
    }
  }
}

}  // namespace
}  // namespace metrics
