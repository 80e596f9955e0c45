// Every metric runs on the meta device: shapes and dtypes only, no values. An update that needed a
// value on the host would fail here, so this proves the device path never reads one back.

#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <metrics/aggregation.h>
#include <metrics/classification.h>
#include <metrics/collection.h>
#include <metrics/sync_counter.h>

#include "test_support.h"

namespace metrics {
namespace {

using Opts = ClassificationOptions;
using testing::states_equal;

// UpdateArgs refer to their tensors: a case makes the tensors, and args() points at them.
struct Inputs {
  std::vector<at::Tensor> tensors;
  c10::optional<double> scalar_weight;
  UpdateArgs args() const {
    UpdateArgs a;
    for (const auto& t : tensors) a.positional.emplace_back(t);
    if (scalar_weight) a.positional.emplace_back(*scalar_weight);
    return a;
  }
};

struct MetaCase {
  std::string name;
  std::function<std::shared_ptr<Metric>(at::Device)> make;
  std::function<Inputs(at::Device)> inputs;
};

at::TensorOptions on(at::Device device, at::ScalarType dtype = at::kFloat) {
  return at::TensorOptions().device(device).dtype(dtype);
}

// A MetaCase's make(): metric M built with options_at(device).
template <class M, class OptionsAt>
std::function<std::shared_ptr<Metric>(at::Device)> maker(OptionsAt options_at) {
  return [options_at](at::Device d) { return std::make_shared<M>(options_at(d)); };
}

// A MetaCase's make() for FBetaScore (beta 0.5), which takes beta before its options.
template <class OptionsAt>
std::function<std::shared_ptr<Metric>(at::Device)> fbeta(OptionsAt options_at) {
  return [options_at](at::Device d) { return std::make_shared<FBetaScore>(0.5, options_at(d)); };
}

std::vector<MetaCase> cases() {
  std::vector<MetaCase> all;
  const std::vector<std::pair<std::string, NanPolicy>> policies{{"warn", NanPolicy::warn()},
                                                                {"error", NanPolicy::error()},
                                                                {"ignore", NanPolicy::ignore()},
                                                                {"disable", NanPolicy::disable()},
                                                                {"replace", NanPolicy::replace(2.0)}};
  for (const auto& [policy_name, policy] : policies) {
    const auto o = [policy = policy](at::Device d) { return AggregationOptions().nan_policy(policy).device(d); };
    const auto value = [](at::Device d) { return Inputs{{at::empty({64}, on(d))}, {}}; };
    const auto weighted = [](at::Device d) { return Inputs{{at::empty({64}, on(d)), at::empty({64}, on(d))}, {}}; };
    const auto scalar_weight = [](at::Device d) { return Inputs{{at::empty({64}, on(d))}, 0.5}; };
    all.push_back({"Mean/" + policy_name, maker<Mean>(o), value});
    all.push_back({"Mean/weighted/" + policy_name, maker<Mean>(o), weighted});
    all.push_back({"Sum/scalar_weight/" + policy_name, maker<Sum>(o), scalar_weight});
    all.push_back({"Min/" + policy_name, maker<Min>(o), value});
    all.push_back({"Max/" + policy_name, maker<Max>(o), value});
    const auto f32 = [o](at::Device d) { return o(d).dtype(at::kFloat); };
    all.push_back({"Mean/weighted/float32/" + policy_name, maker<Mean>(f32), weighted});
    all.push_back({"Sum/float32/" + policy_name, maker<Sum>(f32), value});
    all.push_back({"Max/float32/" + policy_name, maker<Max>(f32), value});
  }
  // every classification metric made with `o` (a ConfusionMatrix where it takes o: no top_k, and
  // num_classes), each a case updated with `args`
  const auto add_every_metric = [&all](const std::string& name, const Opts& o,
                                       const std::function<Inputs(at::Device)>& args) {
    const auto at_device = [o](at::Device d) { return Opts(o).device(d); };
    all.push_back({"Accuracy/" + name, maker<Accuracy>(at_device), args});
    all.push_back({"Precision/" + name, maker<Precision>(at_device), args});
    all.push_back({"Recall/" + name, maker<Recall>(at_device), args});
    all.push_back({"F1/" + name, maker<F1Score>(at_device), args});
    all.push_back({"FBeta/" + name, fbeta(at_device), args});
    all.push_back({"StatScores/" + name, maker<StatScores>(at_device), args});
    if (o.top_k() == 1 && o.num_classes() != kUnknownClasses) {
      all.push_back({"ConfusionMatrix/" + name, maker<ConfusionMatrix>(at_device), args});
    }
  };
  // multiclass inputs: preds of `preds_shape` (scores, or int64 labels shaped like the target), the
  // target (preds_shape less dimension 1, for scores), a float64 weight per sample where weighted
  const auto multiclass_inputs = [](std::vector<int64_t> preds_shape, bool scores, bool weighted) {
    return [=](at::Device d) {
      auto target_shape = preds_shape;
      if (scores) target_shape.erase(target_shape.begin() + 1);
      Inputs inputs{{at::empty(preds_shape, on(d, scores ? at::kFloat : at::kLong)),
                     at::empty(target_shape, on(d, at::kLong))},
                    {}};
      if (weighted) inputs.tensors.push_back(at::empty({preds_shape[0]}, on(d, at::kDouble)));
      return inputs;
    };
  };
  const std::vector<std::tuple<std::string, Opts, std::vector<int64_t>, bool>> multiclass{
      {"multiclass", Opts::multiclass(5), {32, 5}, true},
      {"multiclass/top2", Opts::multiclass(5).top_k(2), {32, 5}, true},
      {"multiclass/ignore", Opts::multiclass(5).ignore_index(0), {32, 5}, true},
      {"multiclass/top2/ignore", Opts::multiclass(5).top_k(2).ignore_index(0), {32, 5}, true},
      {"multiclass/micro", Opts::multiclass(5).average(Average::Micro), {32, 5}, true},
      {"multiclass/average_weighted", Opts::multiclass(5).average(Average::Weighted), {32, 5}, true},
      {"multiclass/weighted", Opts::multiclass(5).weighted(true), {32, 5}, true},
      {"multiclass/weighted/ignore", Opts::multiclass(5).weighted(true).ignore_index(0), {32, 5}, true},
      {"multiclass/weighted/top2", Opts::multiclass(5).weighted(true).top_k(2), {32, 5}, true},
      {"multiclass/weighted/top2/ignore", Opts::multiclass(5).weighted(true).top_k(2).ignore_index(0), {32, 5}, true},
      {"multiclass/labels", Opts::multiclass(5), {32}, false},
      {"multiclass/labels/weighted/ignore", Opts::multiclass(5).weighted(true).ignore_index(0), {32}, false},
      {"multiclass/extra_dims", Opts::multiclass(5), {8, 5, 3}, true},
      {"multiclass/extra_dims/top2/ignore", Opts::multiclass(5).top_k(2).ignore_index(0), {8, 5, 3}, true},
      {"multiclass/unknown_classes", Opts::multiclass(kUnknownClasses).average(Average::Micro), {32, 5}, true},
      {"multiclass/unknown_classes/labels/weighted",
       Opts::multiclass(kUnknownClasses).average(Average::Micro).weighted(true), {32}, false}};
  for (const auto& [name, opts, preds_shape, scores] : multiclass) {
    add_every_metric(name, opts, multiclass_inputs(preds_shape, scores, opts.weighted()));
  }
  const auto entries = [](std::vector<int64_t> shape, bool weighted) {
    return [shape, weighted](at::Device d) {
      Inputs inputs{{at::empty(shape, on(d)), at::empty(shape, on(d, at::kLong))}, {}};
      if (weighted) inputs.tensors.push_back(at::empty({shape[0]}, on(d, at::kDouble)));
      return inputs;
    };
  };
  const std::vector<std::tuple<std::string, Opts, std::vector<int64_t>>> binary_like{
      {"binary", Opts::binary(), {64}},
      {"binary/weighted", Opts::binary().weighted(true), {64}},
      {"binary/ignore", Opts::binary().ignore_index(-1), {64}},
      {"multilabel", Opts::multilabel(4), {16, 4}},
      {"multilabel/weighted", Opts::multilabel(4).weighted(true), {16, 4}}};
  for (const auto& [name, opts, shape] : binary_like) {
    add_every_metric(name, opts, entries(shape, opts.weighted()));
  }
  return all;
}

TEST(MetaDevice, EveryMetricUpdatesMergesAndComputesOnMeta) {
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.name);
    const auto meta = c.make(at::kMeta);
    const auto cpu = c.make(at::kCPU);
    const auto meta_inputs = c.inputs(at::kMeta);
    try {
      at::Tensor value, batch;
      {
        // strict: a sync-class op, an upload from the host among them, would throw (meta takes them)
        SyncCounter strict(SyncCounterOptions().strict(true));
        meta->update(meta_inputs.args());
        meta->update(meta_inputs.args());
        batch = meta->forward(meta_inputs.args());
        auto other = meta->clone();
        meta->merge(*other);
        value = meta->value();
      }
      EXPECT_TRUE(value.is_meta());
      // The same metric on the CPU (from a zero batch) gives a value of the same shape and dtype.
      auto zeros = c.inputs(at::kCPU);
      for (auto& t : zeros.tensors) t = at::zeros_like(t);
      cpu->update(zeros.args());
      EXPECT_EQ(value.sizes(), cpu->value().sizes());
      EXPECT_EQ(value.scalar_type(), cpu->value().scalar_type());
      EXPECT_EQ(batch.sizes(), value.sizes());
    } catch (const c10::Error& e) {
      ADD_FAILURE() << e.what_without_backtrace();
    }
  }
}

TEST(MetaDevice, EveryMetricLeavesMetaFreshAsModuleToEmptyMaterializesIt) {
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.name);
    const auto meta = c.make(at::kMeta);
    const auto meta_inputs = c.inputs(at::kMeta);
    meta->update(meta_inputs.args());
    meta->forward(meta_inputs.args());
    EXPECT_TRUE(meta->compute().is_meta());  // no count or tally to read back
    meta->to(at::kCPU);  // no values to copy: it holds what a metric made on the CPU holds
    EXPECT_EQ(meta->device(), at::Device(at::kCPU));
    EXPECT_EQ(meta->update_count(), 0);
    const auto cpu = c.make(at::kCPU);
    EXPECT_TRUE(states_equal(meta->state_dict(), cpu->state_dict()));
    auto ones = c.inputs(at::kCPU);
    for (auto& t : ones.tensors) t = at::ones_like(t);
    meta->update(ones.args());
    cpu->update(ones.args());
    EXPECT_TRUE(states_equal(meta->state_dict(), cpu->state_dict()));
  }
}

TEST(MetaDevice, SamplewiseMetricsGrowARowPerSampleOnMeta) {
  const auto samplewise = [](Opts o) { return o.multidim_average(MultidimAverage::Samplewise).device(at::kMeta); };
  const std::vector<std::tuple<std::string, Opts, std::vector<int64_t>, std::vector<int64_t>>> tasks{
      {"multiclass scores", Opts::multiclass(5), {8, 5, 3}, {8, 3}},
      {"multiclass top2", Opts::multiclass(5).top_k(2), {8, 5, 3}, {8, 3}},
      {"binary", Opts::binary(), {8, 3}, {8, 3}},
      {"multilabel", Opts::multilabel(4).average(Average::None), {8, 4, 3}, {8, 4, 3}}};
  for (const auto& [name, opts, preds_shape, target_shape] : tasks) {
    SCOPED_TRACE(name);
    const auto preds = at::empty(preds_shape, on(at::kMeta));
    const auto target = at::empty(target_shape, on(at::kMeta, at::kLong));
    F1Score metric(samplewise(opts));
    metric.update(preds, target);
    metric.update(preds, target);
    EXPECT_EQ(metric.forward(preds, target).size(0), 8);
    metric.merge(*metric.clone());
    const auto value = metric.value();
    EXPECT_TRUE(value.is_meta());
    EXPECT_EQ(value.size(0), 48);
    EXPECT_EQ(value.dim(), opts.average() == Average::None ? 2 : 1);
  }
}

TEST(MetaDevice, ACollectionUpdatesAndComputesOnMeta) {
  const auto o = Opts::multiclass(5).device(at::kMeta);
  MetricCollection collection;
  collection.add("accuracy", std::make_shared<Accuracy>(o)).add("f1", std::make_shared<F1Score>(o));
  collection.add("matrix", std::make_shared<ConfusionMatrix>(o));
  const auto preds = at::empty({32, 5}, on(at::kMeta));
  const auto target = at::empty({32}, on(at::kMeta, at::kLong));
  const UpdateArgs args{{preds, target}};
  collection.update(args);
  collection.update(args);
  for (const auto& [name, metric] : collection.forward(args)) EXPECT_TRUE(metric.is_meta()) << name;
}

}  // namespace
}  // namespace metrics
