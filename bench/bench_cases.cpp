#include "bench_cases.h"

#include <ATen/ATen.h>

#include <memory>

#include <metrics/metrics.h>

#include "naive_metrics.h"

namespace bench {
namespace {

using metrics::Average;
using Opts = metrics::ClassificationOptions;

Inputs loss_input() { return {"loss", at::rand({}), {}, {}}; }
Inputs values_input() { return {"4096", at::randn({4096}), {}, {}}; }

Inputs multiclass_input(int64_t classes) {
  return {"128x" + std::to_string(classes), {}, at::randn({128, classes}), at::randint(classes, {128}, at::kLong)};
}
Inputs binary_input() { return {"4096", {}, at::rand({4096}), at::randint(2, {4096}, at::kLong)}; }
Inputs multilabel_input() { return {"128x100", {}, at::rand({128, 100}), at::randint(2, {128, 100}, at::kLong)}; }

// The floor: one vectorized read of the same input.
Case floor_case(const std::string& group, const Inputs& in) {
  const auto& read = in.values.defined() ? in.values : in.preds;
  return {group, in.shape, "floor", [read] { return UpdateFn([read] { (void)at::sum(read); }); }, read.numel()};
}

template <typename M>
Case aggregator_case(const std::string& metric, naive::Aggregator::Kind kind, const Inputs& in, bool naive_impl) {
  const auto values = in.values;
  if (naive_impl) {
    return {metric, in.shape, "naive",
            [=] {
              auto m = std::make_shared<naive::Aggregator>(kind);
              return UpdateFn([m, values] { m->update(values); });
            },
            values.numel()};
  }
  return {metric, in.shape, "nosync",
          [=] {
            auto m = std::make_shared<M>();
            return UpdateFn([m, values] { m->update(values); });
          },
          values.numel()};
}

// Classification metrics by name: one metric, or the collection of four (macro).
std::vector<std::string> classification_metric_names() {
  return {"accuracy", "precision", "recall", "f1", "confusion_matrix", "collection"};
}

std::unique_ptr<metrics::ClassificationMetric> make_metric(const std::string& name, const Opts& o) {
  if (name == "accuracy") return std::make_unique<metrics::Accuracy>(o);
  if (name == "precision") return std::make_unique<metrics::Precision>(o);
  if (name == "recall") return std::make_unique<metrics::Recall>(o);
  if (name == "f1") return std::make_unique<metrics::F1Score>(o);
  return std::make_unique<metrics::ConfusionMatrix>(o);
}

Case nosync_classification(const std::string& metric, const Opts& o, const Inputs& in, bool aten_path) {
  const auto preds = in.preds, target = in.target;
  const auto weight = in.weight.defined() ? c10::optional<at::Tensor>(in.weight) : c10::nullopt;
  const bool collection = metric.find("collection") != std::string::npos;
  const auto name = metric.substr(metric.find(' ') + 1);
  return {metric, in.shape, aten_path ? "nosync (ATen path)" : "nosync",
          [=]() -> UpdateFn {
            if (!collection) {
              std::shared_ptr<metrics::ClassificationMetric> m = make_metric(name, o);
              return [m, preds, target, weight] { m->update(preds, target, weight); };
            }
            auto four = std::make_shared<metrics::MetricCollection>();
            for (const char* n : {"accuracy", "precision", "recall", "f1"}) four->add(n, make_metric(n, o));
            return [four, preds, target, weight, aten_path] {
              std::unique_ptr<metrics::ForceAtenPath> force;
              if (aten_path) force = std::make_unique<metrics::ForceAtenPath>();
              four->update(preds, target, weight);
            };
          },
          preds.numel()};
}

Case naive_classification(const std::string& metric, const Opts& o, const Inputs& in) {
  const auto preds = in.preds, target = in.target;
  const size_t copies = metric.find("collection") != std::string::npos ? 4 : 1;  // one state per metric: no compute groups
  return {metric, in.shape, "naive",
          [=] {
            auto states = std::make_shared<std::vector<naive::StatScores>>(copies, naive::StatScores(o));
            return UpdateFn([states, preds, target] {
              for (auto& s : *states) s.update(preds, target);
            });
          },
          preds.numel()};
}

void add_classification(std::vector<Case>& cases, const std::string& task, const Opts& o, const Inputs& in) {
  cases.push_back(floor_case(task, in));
  for (const auto& name : classification_metric_names()) {
    const auto group = task + " " + name;
    cases.push_back(naive_classification(group, o, in));
    cases.push_back(nosync_classification(group, o, in, /*aten_path=*/false));
    if (name == "collection") cases.push_back(nosync_classification(group, o, in, /*aten_path=*/true));
  }
}

void add_aggregators(std::vector<Case>& cases, const Inputs& in) {
  cases.push_back(floor_case("aggregation", in));
  using Kind = naive::Aggregator::Kind;
  for (bool naive_impl : {true, false}) {
    cases.push_back(aggregator_case<metrics::Mean>("mean", Kind::Mean, in, naive_impl));
    cases.push_back(aggregator_case<metrics::Sum>("sum", Kind::Sum, in, naive_impl));
    cases.push_back(aggregator_case<metrics::Min>("min", Kind::Min, in, naive_impl));
    cases.push_back(aggregator_case<metrics::Max>("max", Kind::Max, in, naive_impl));
  }
}

// The collections again with per-sample weights (ours alone: TorchMetrics' classification has
// none), against the same floor.
void add_weighted_collections(std::vector<Case>& cases) {
  const auto weighted = [](Inputs in) {
    in.weight = at::rand({in.target.size(0)});
    return in;
  };
  const auto macro = Average::Macro;
  for (const auto& [task, o, in] : {std::tuple{"multiclass", Opts::multiclass(1000).average(macro).weighted(true),
                                               weighted(multiclass_input(1000))},
                                    {"binary", Opts::binary().weighted(true), weighted(binary_input())},
                                    {"multilabel", Opts::multilabel(100).average(macro).weighted(true),
                                     weighted(multilabel_input())}}) {
    cases.push_back(nosync_classification(std::string(task) + " collection weighted", o, in, /*aten_path=*/false));
  }
  // float64 weights drawn in float64 (numpy's default), whose sums round, so the one pass sums the
  // cells; multilabel's float32 weights widened, whose sums are exact, so it derives them (binary
  // weights, one per entry, sum the cells either way); float32 weights beside a twentieth of the
  // targets ignored.
  for (const auto& [task, o, in] :
       {std::tuple{"binary", Opts::binary().weighted(true).ignore_index(-1), weighted(binary_input())},
        {"multilabel", Opts::multilabel(100).average(macro).weighted(true).ignore_index(-1),
         weighted(multilabel_input())}}) {
    auto wide = in;
    wide.weight = at::rand(in.weight.sizes(), at::kDouble);
    cases.push_back(nosync_classification(std::string(task) + " collection weighted float64", o, wide, false));
    if (std::string(task) == "multilabel") {
      wide.weight = in.weight.to(at::kDouble);
      cases.push_back(nosync_classification("multilabel collection weighted float64 float32 values", o, wide, false));
    }
    auto ignoring = in;
    ignoring.target = in.target.masked_fill(at::rand(in.target.sizes()) < 0.05, -1);
    cases.push_back(nosync_classification(std::string(task) + " collection weighted ignore_index", o, ignoring, false));
  }
}

// The binary and multilabel collections again over targets with the ignore_index among them (a
// twentieth of them -1, as padding or a mask's border), against the same floor.
void add_ignoring_collections(std::vector<Case>& cases) {
  const auto ignoring = [](Inputs in) {
    in.target = in.target.masked_fill(at::rand(in.target.sizes()) < 0.05, -1);
    return in;
  };
  const auto macro = Average::Macro;
  for (const auto& [task, o, in] :
       {std::tuple{"binary", Opts::binary().ignore_index(-1), ignoring(binary_input())},
        {"multilabel", Opts::multilabel(100).average(macro).ignore_index(-1), ignoring(multilabel_input())}}) {
    const auto group = std::string(task) + " collection ignore_index";
    cases.push_back(naive_classification(group, o, in));
    cases.push_back(nosync_classification(group, o, in, /*aten_path=*/false));
  }
}

// What a live SyncCounter costs per observed op: 100 small in-place adds.
void add_counter_cost(std::vector<Case>& cases) {
  const auto x = at::zeros({8});
  const auto ops = [x] {
    for (int i = 0; i < 100; ++i) x.add_(1.0);
  };
  cases.push_back({"sync counter", "100 ops", "no counter", [=] { return UpdateFn(ops); }, 100});
  cases.push_back({"sync counter", "100 ops", "counter alive",
                   [=] { return UpdateFn([=] { metrics::SyncCounter counter; ops(); }); }, 100});
  cases.push_back({"sync counter", "100 ops", "strict counter alive",
                   [=] {
                     return UpdateFn([=] {
                       metrics::SyncCounter counter(metrics::SyncCounterOptions().strict(true));
                       ops();
                     });
                   },
                   100});
}

}  // namespace

std::vector<Case> all_cases() {
  at::manual_seed(0);
  std::vector<Case> cases;
  add_aggregators(cases, loss_input());
  add_aggregators(cases, values_input());
  const auto macro = Average::Macro;
  add_classification(cases, "multiclass", Opts::multiclass(10).average(macro), multiclass_input(10));
  add_classification(cases, "multiclass", Opts::multiclass(1000).average(macro), multiclass_input(1000));
  add_classification(cases, "binary", Opts::binary(), binary_input());
  add_classification(cases, "multilabel", Opts::multilabel(100).average(macro), multilabel_input());
  add_weighted_collections(cases);
  add_ignoring_collections(cases);
  add_counter_cost(cases);
  return cases;
}

}  // namespace bench
