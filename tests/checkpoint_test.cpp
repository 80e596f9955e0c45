#include <ATen/ATen.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>

#include <unistd.h>

#include <metrics/aggregation.h>
#include <metrics/checkpoint.h>
#include <metrics/classification.h>
#include <metrics/collection.h>

#include "test_support.h"

namespace metrics {
namespace {

using testing::generator;
using testing::states_equal;
using Opts = ClassificationOptions;

// A file in gtest's temporary directory, removed when the test ends. The process id is in its
// name: ctest runs this binary in parallel with itself (once per METRICS_CPU_ISA), and the runs
// must not write each other's files.
struct TempFile {
  explicit TempFile(const std::string& name)
      : path(::testing::TempDir() + "checkpoint_" + std::to_string(getpid()) + "_" + name) {}
  ~TempFile() { std::remove(path.c_str()); }
  const std::string path;
};

void feed(Metric& metric, int64_t from, int64_t to) {
  for (int64_t i = from; i < to; ++i) {
    auto gen = generator(300 + i);
    static_cast<ClassificationMetric&>(metric).update(at::randn({16, 5}, gen), at::randint(5, {16}, gen, at::kLong));
  }
}

void rewrite(const std::string& path, const std::function<void(std::vector<char>&)>& change) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  change(bytes);
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

TEST(Checkpoint, ResumingEqualsAnUninterruptedRun) {
  const TempFile file("resume");
  const auto& path = file.path;
  Accuracy uninterrupted(Opts::multiclass(5));
  feed(uninterrupted, 0, 6);
  Accuracy before(Opts::multiclass(5));
  feed(before, 0, 3);
  save_checkpoint(before, path);
  Accuracy resumed(Opts::multiclass(5));
  load_checkpoint(resumed, path);
  feed(resumed, 3, 6);
  EXPECT_TRUE(states_equal(resumed.state_dict(), uninterrupted.state_dict()));
  EXPECT_EQ(resumed.update_count(), 6);
}

TEST(Checkpoint, CollectionsResumeToo) {
  const TempFile file("collection");
  const auto& path = file.path;
  const auto make = [] {
    MetricCollection c;
    c.add("accuracy", Accuracy(Opts::multiclass(5))).add("confmat", ConfusionMatrix(Opts::multiclass(5)));
    c.add("loss", Mean());
    return c;
  };
  auto saved = make();
  const auto preds = at::tensor({0, 1, 4}, at::kLong), target = at::tensor({0, 2, 4}, at::kLong);
  const auto loss = at::tensor({0.5, 0.25});
  UpdateArgs args;
  args.keywords = {{"value", loss}, {"preds", preds}, {"target", target}};
  saved.update(args);
  save_checkpoint(saved, path);
  auto resumed = make();
  load_checkpoint(resumed, path);
  EXPECT_TRUE(states_equal(resumed.state_dict(), saved.state_dict()));
}

TEST(Checkpoint, AnotherMetricsStateIsRefusedAndChangesNothing) {
  const TempFile file("other");
  const auto& path = file.path;
  Accuracy accuracy(Opts::multiclass(5));
  feed(accuracy, 0, 2);
  save_checkpoint(accuracy, path);
  Precision precision(Opts::multiclass(5));
  feed(precision, 0, 1);
  const auto before = precision.state_dict();
  EXPECT_THROWS_WITH(load_checkpoint(precision, path), c10::ValueError,
                     "MulticlassPrecision.load_checkpoint: '" + path + "' holds a state this one refuses: "
                     "MulticlassPrecision.load_state_dict: the state is of another metric: it has "
                     "'MulticlassAccuracy(num_classes=5");
  EXPECT_TRUE(states_equal(precision.state_dict(), before));
  Accuracy micro(Opts::multiclass(5).average(Average::Micro));
  EXPECT_THROWS_WITH(load_checkpoint(micro, path), c10::ValueError, "average=micro");
  Accuracy six(Opts::multiclass(6));
  EXPECT_THROWS_WITH(load_checkpoint(six, path), c10::ValueError, "num_classes=6");
  EXPECT_EQ(six.update_count(), 0);
}

TEST(Checkpoint, TruncatedCorruptedOrMissingFilesAreRefusedAndChangeNothing) {
  const TempFile file("damaged");
  const auto& path = file.path;
  Accuracy accuracy(Opts::multiclass(5));
  feed(accuracy, 0, 2);
  const auto before = accuracy.state_dict();
  save_checkpoint(accuracy, path);
  rewrite(path, [](std::vector<char>& bytes) { bytes.resize(bytes.size() / 2); });
  EXPECT_THROWS_WITH(load_checkpoint(accuracy, path), c10::ValueError, "is not a readable checkpoint");
  save_checkpoint(accuracy, path);
  rewrite(path, [](std::vector<char>& bytes) {
    for (size_t i = bytes.size() / 4; i < bytes.size() / 2; ++i) bytes[i] = static_cast<char>(~bytes[i]);
  });
  EXPECT_THROWS_WITH(load_checkpoint(accuracy, path), c10::ValueError, "MulticlassAccuracy.load_checkpoint");
  EXPECT_THROWS_WITH(load_checkpoint(accuracy, TempFile("missing").path), c10::ValueError, "cannot open");
  // a directory opens, and its first read fails (a std::ios_base::failure, named so)
  EXPECT_THROWS_WITH(load_checkpoint(accuracy, ::testing::TempDir()), c10::ValueError,
                     "MulticlassAccuracy.load_checkpoint: cannot read '" + ::testing::TempDir() + "'");
  EXPECT_TRUE(states_equal(accuracy.state_dict(), before));
}

TEST(Checkpoint, ACollectionNamesTheFileAndTheMetricWhosePartItRefuses) {
  const TempFile one("one"), both("both");
  MetricCollection collection;
  collection.add("loss", Mean()).add("aux", Mean());
  UpdateArgs args;
  args.keywords = {{"value", at::ones({3}, at::kDouble)}};
  collection.update(args);
  const auto before = collection.state_dict();
  auto state = before;
  state["aux.update_count"] = state["aux.update_count"] * 0 - 2;
  EXPECT_THROWS_WITH(collection.load_state_dict(state), c10::ValueError,
                     "MetricCollection.load_state_dict: the part of 'aux' (its keys 'aux.*'): Mean.load_state_dict: "
                     "'update_count' holds -2");
  state = before;
  state.erase("aux.total");
  EXPECT_THROWS_WITH(collection.load_state_dict(state), c10::ValueError,
                     "the part of 'aux' (its keys 'aux.*'): Mean.load_state_dict: missing key 'total'");
  StateDict entries;  // two Means share one state: the walk names it after the first
  for (const auto& entry : collection.state_entries()) entries.emplace(entry.name, entry.tensor.clone());
  entries.at("loss.update_count").fill_(-2);
  EXPECT_THROWS_WITH(collection.load_state_entries(entries), c10::ValueError,
                     "MetricCollection.load_state_entries: the part of 'loss' (its keys 'loss.*'): Mean.load_state_dict: "
                     "'update_count' holds -2");
  Mean single;
  save_checkpoint(single, one.path);
  EXPECT_THROWS_WITH(load_checkpoint(collection, one.path), c10::ValueError,
                     "MetricCollection.load_checkpoint: '" + one.path + "' holds a state this one refuses: "
                     "MetricCollection.load_state_dict: unexpected key '");
  EXPECT_THROWS_WITH(load_checkpoint(collection, one.path), c10::ValueError,
                     "(is this one metric's state_dict()?)");
  auto stray = Mean().state_dict();  // keys of no metric here, one of them with a '.': the hint still
  stray.emplace("x.y", at::zeros({1}));
  EXPECT_THROWS_WITH(collection.load_state_dict(stray), c10::ValueError, "(is this one metric's state_dict()?)");
  state = before;
  state.emplace("foo", at::zeros({1}));  // a collection's dict and one key more: no such hint
  try {
    collection.load_state_dict(state);
    ADD_FAILURE() << "a stray key loaded";
  } catch (const c10::ValueError& e) {
    EXPECT_EQ(std::string(e.what_without_backtrace()), "MetricCollection.load_state_dict: unexpected key 'foo'");
  }
  MetricCollection other;
  other.add("loss", Mean()).add("aux", Sum());
  save_checkpoint(other, both.path);
  EXPECT_THROWS_WITH(load_checkpoint(collection, both.path), c10::ValueError, "the part of 'aux'");
  EXPECT_TRUE(states_equal(collection.state_dict(), before));
}

TEST(Checkpoint, StateDictsCarryTheFormatVersionAndTheMetric) {
  Accuracy accuracy(Opts::multiclass(5));
  auto dict = accuracy.state_dict();
  EXPECT_EQ(dict.at("_version").item<int64_t>(), 5);
  EXPECT_EQ(dict.at("_metric").scalar_type(), at::kByte);
  dict["_version"] = at::full({}, 6, at::kLong);
  EXPECT_THROWS_WITH(accuracy.load_state_dict(dict), c10::ValueError,
                     "the state is of format version 6, this build reads versions 1 to 5");
}

TEST(Checkpoint, AVersionFourBinaryConfusionMatrixWithIgnoreIndexTakesItsCellsAsItsMatrix) {
  // version 4 held tp, fp, tn, fn alone, counted as the matrix reads them (by the kept scores)
  const auto o = Opts::binary().ignore_index(-1);
  ConfusionMatrix matrix(o);
  matrix.update(at::tensor({0.6, 3.0, 0.2, 0.4}), at::tensor({1, -1, 0, 1}, at::kLong));
  auto dict = matrix.state_dict();
  const auto kept = dict.at("confmat").view({-1});  // [tn, fp, fn, tp]
  auto text = std::string(static_cast<const char*>(dict.at("_metric").data_ptr()), dict.at("_metric").numel());
  const auto start = text.find("\nconfmat ") + 1;
  text.erase(start, text.find('\n', start) + 1 - start);
  auto old = dict;
  old.erase("confmat");
  old["_version"] = at::full({}, 4, at::kLong);
  old["_metric"] = at::from_blob(text.data(), {static_cast<int64_t>(text.size())}, at::kByte).clone();
  const char* cells[] = {"tn", "fp", "fn", "tp"};
  for (int64_t cell = 0; cell < 4; ++cell) old[cells[cell]] = kept.narrow(0, cell, 1);
  ConfusionMatrix resumed(o);
  resumed.load_state_dict(old);
  EXPECT_TRUE(at::equal(resumed.compute(), matrix.compute()));
  old.erase("tp");  // what it cannot read is refused
  EXPECT_THROWS_WITH(ConfusionMatrix(o).load_state_dict(old), c10::ValueError, "tp");
}

TEST(Checkpoint, AVersionTwoWeightedMeanReadsItsKindsAsTheyWere) {
  // version 2 held each kind's own count; version 3 holds NaN values, then NaN values or infinite weights
  Mean mean;
  mean.update(at::tensor({1.0, NAN, 3.0, 4.0}), at::tensor({1.0, 1.0, INFINITY, 2.0}));
  auto dict = mean.state_dict();
  EXPECT_TRUE(at::equal(dict.at("bad_input_counts"), at::tensor({1.0, 2.0, 1.0}, at::kDouble)));
  dict["_version"] = at::full({}, 2, at::kLong);
  dict["bad_input_counts"] = at::tensor({1.0, 1.0, 1.0}, at::kDouble);
  Mean resumed;
  resumed.load_state_dict(dict);
  EXPECT_TRUE(states_equal(resumed.state_dict(), mean.state_dict()));
  const auto report = resumed.bad_input_report();
  EXPECT_EQ(report.counts.at(0).second, 1);
  EXPECT_EQ(report.counts.at(1).second, 1);
}

// A float32 Mean of format version 3, as that version wrote it: its totals and their compensation
// (2^24 + 1 and 3: more than the float32 total holds) in float32.
StateDict version_three_float32_mean() {
  const std::string text =
      "Mean(nan_strategy=warn, dtype=Float)\nupdate_count Double[] sum\ntotal Float[2] sum\n"
      "bad_input_counts Double[3] sum\nfirst_bad_update Double[1] min\ncompensation Float[2] sum\n";
  return {{"_version", at::full({}, 3, at::kLong)},
          {"_metric", at::tensor(std::vector<uint8_t>(text.begin(), text.end()))},
          {"update_count", at::full({}, 2.0, at::kDouble)},
          {"total", at::tensor({16777216.0f, 3.0f})},
          {"compensation", at::tensor({1.0f, 0.0f})},
          {"bad_input_counts", at::tensor({1.0, 1.0, 1.0}, at::kDouble)},
          {"first_bad_update", at::full({1}, 1.0, at::kDouble)}};
}

TEST(Checkpoint, AVersionThreeFloat32MeanResumesWithItsTotalsInFloat64) {
  Mean mean(AggregationOptions().dtype(at::kFloat));
  mean.load_state_dict(version_three_float32_mean());
  const auto dict = mean.state_dict();
  EXPECT_TRUE(at::equal(dict.at("total"), at::tensor({16777217.0, 3.0}, at::kDouble)));
  EXPECT_TRUE(at::equal(dict.at("compensation"), at::zeros({dict.at("compensation").numel()}, at::kDouble)));
  EXPECT_TRUE(at::equal(dict.at("bad_input_counts"), at::tensor({1.0, 1.0, 1.0}, at::kDouble)));
  mean.update(at::tensor({2.0f, 5.0f}));
  EXPECT_EQ(mean.update_count(), 3);
  EXPECT_EQ(mean.value().item<float>(), static_cast<float>(16777224.0 / 5.0));
}

// The old ATen path left a NaN (or -inf) compensation beside a total that overflowed; the value
// was the total.
TEST(Checkpoint, AnOverflowedVersionThreeFloat32SumStaysInfinite) {
  auto dict = version_three_float32_mean();
  dict["total"] = at::tensor({INFINITY, -INFINITY});
  dict["compensation"] = at::tensor({NAN, -INFINITY});
  Mean mean(AggregationOptions().dtype(at::kFloat));
  mean.load_state_dict(dict);
  EXPECT_TRUE(at::equal(mean.state_dict().at("total"), at::tensor({INFINITY, -INFINITY}, at::kDouble)));
  EXPECT_TRUE(std::isnan(mean.value().item<float>()));  // inf / -inf, as before
  dict["total"] = at::tensor({INFINITY, 2.0f});
  dict["compensation"] = at::tensor({NAN, 0.0f});
  mean.load_state_dict(dict);
  EXPECT_EQ(mean.value().item<float>(), INFINITY);
}

TEST(Checkpoint, AnOldStateOfAnotherMetricSaysWhichAndABadDescriptionIsNamed) {
  auto dict = version_three_float32_mean();
  Sum sum(AggregationOptions().dtype(at::kFloat));
  EXPECT_THROWS_WITH(sum.load_state_dict(dict), c10::ValueError,
                     "Sum.load_state_dict: the state is of another metric: it has 'Mean(nan_strategy=warn, dtype=Float)' "
                     "against 'Sum(nan_strategy=warn, dtype=Float)' here");
  Accuracy accuracy(Opts::binary());
  auto binary = accuracy.state_dict();
  binary["_version"] = at::full({}, 3, at::kLong);
  F1Score f1(Opts::binary());
  EXPECT_THROWS_WITH(f1.load_state_dict(binary), c10::ValueError, "the state is of another metric: it has 'Binary");
  dict["_metric"] = dict["_metric"].to(at::kFloat);
  Mean mean(AggregationOptions().dtype(at::kFloat));
  EXPECT_THROWS_WITH(mean.load_state_dict(dict), c10::ValueError,
                     "Mean.load_state_dict: '_metric' must be a 1-D uint8 tensor with values");
}

TEST(Checkpoint, AVersionThreeFloat32StateOfAnotherShapeIsRefusedAndChangesNothing) {
  Mean mean(AggregationOptions().dtype(at::kFloat));
  mean.update(at::tensor({1.0f, 2.0f}));
  const auto before = mean.state_dict();
  auto wide = version_three_float32_mean();
  wide["total"] = at::zeros({3});
  EXPECT_THROWS_WITH(mean.load_state_dict(wide), c10::ValueError, "Mean.load_state_dict");
  Mean float64_mean;
  EXPECT_THROWS_WITH(float64_mean.load_state_dict(version_three_float32_mean()), c10::ValueError,
                     "the state is of another metric: it has 'Mean(nan_strategy=warn, dtype=Float)'");
  auto half = version_three_float32_mean();
  half["compensation"] = at::zeros({2}, at::kHalf);
  EXPECT_THROWS_WITH(mean.load_state_dict(half), c10::ValueError, "Mean.load_state_dict: 'total'");
  EXPECT_TRUE(states_equal(mean.state_dict(), before));
}

TEST(Checkpoint, ATallyWithBadUpdatesButNoFirstIsRefusedAndChangesNothing) {
  Accuracy accuracy(Opts::multiclass(3));
  accuracy.update(at::tensor({0, 1, 2}, at::kLong), at::tensor({0, 2, 7}, at::kLong));
  const auto before = accuracy.state_dict();
  auto dict = before;
  dict["first_bad_update"] = at::full({1}, BadInput::kNone, at::kLong);
  EXPECT_THROWS_WITH(accuracy.load_state_dict(dict), c10::ValueError,
                     "'bad_input_counts' counts updates with bad input, but 'first_bad_update' names none");
  EXPECT_TRUE(states_equal(accuracy.state_dict(), before));
}

TEST(Checkpoint, AVersionOneStateLoadsWhereItsLayoutIsUnchanged) {
  Accuracy accuracy(Opts::multiclass(3));
  accuracy.update(at::tensor({0, 1, 2}, at::kLong), at::tensor({0, 2, 2}, at::kLong));
  auto dict = accuracy.state_dict();
  dict["_version"] = at::full({}, 1, at::kLong);
  dict["first_bad_update"] = at::full({1}, std::numeric_limits<int64_t>::max(), at::kLong);  // version 1's none
  Accuracy resumed(Opts::multiclass(3));
  resumed.load_state_dict(dict);
  EXPECT_TRUE(states_equal(resumed.state_dict(), accuracy.state_dict()));
  EXPECT_EQ(resumed.bad_input_report().first_bad_update, -1);
}

TEST(Checkpoint, AWeightedStateWithAnInt64CountAndTallyLoadsExactly) {
  Accuracy accuracy(Opts::multiclass(3).weighted(true));
  accuracy.update(at::tensor({0, 1, 7}, at::kLong), at::tensor({0, 2, 2}, at::kLong), at::tensor({0.5, 1.0, 2.0}));
  // saved before the update count and the tally moved into the counts' float64
  auto dict = accuracy.state_dict();
  for (const char* name : {"update_count", "bad_input_counts", "first_bad_update"}) {
    EXPECT_EQ(dict.at(name).scalar_type(), at::kDouble);
    dict[name] = dict.at(name).to(at::kLong);
  }
  Accuracy resumed(Opts::multiclass(3).weighted(true));
  resumed.load_state_dict(dict);
  EXPECT_TRUE(states_equal(resumed.state_dict(), accuracy.state_dict()));
}

TEST(Checkpoint, AVersionOneAggregatorStateIsRefusedAndChangesNothing) {
  Mean mean;
  mean.update(at::tensor({1.0, 2.0}));
  const auto before = mean.state_dict();
  // a version-1 Mean: int64 count and tally, compensation as wide as the totals
  auto dict = before;
  dict["_version"] = at::full({}, 1, at::kLong);
  auto text = mean.description();
  text.replace(text.find("update_count Double"), 19, "update_count Long");
  dict["_metric"] = at::tensor(std::vector<uint8_t>(text.begin(), text.end()));
  EXPECT_THROWS_WITH(mean.load_state_dict(dict), c10::ValueError,
                     "Mean.load_state_dict: the state is of format version 1, whose layout this metric no longer has");
  EXPECT_TRUE(states_equal(mean.state_dict(), before));
}

}  // namespace
}  // namespace metrics
