#include "metric_contract.h"

#include <metrics/backend.h>
#include <metrics/sync_counter.h>
#include <metrics/warning_capture.h>

#include "test_support.h"

namespace metrics::testing {
namespace {

// What the contract tests do with a metric or a collection, one interface for both.
class Subject {
 public:
  virtual ~Subject() = default;
  virtual void update(int64_t batch) = 0;
  /// The value, or a collection's values flattened into one float64 tensor.
  virtual at::Tensor compute() const = 0;
  virtual at::Device device() const = 0;
  virtual int64_t update_count() const = 0;
  virtual std::vector<BadInputReport> bad_input() const = 0;
  virtual StateDict state_dict() const = 0;
  virtual void load_state_dict(const StateDict& dict) = 0;
  virtual void merge(const Subject& other) = 0;
  virtual void reset() = 0;
  virtual std::unique_ptr<Subject> clone() const = 0;
};

class MetricSubject : public Subject {
 public:
  MetricSubject(const ContractCase& c, std::unique_ptr<Metric> metric) : case_(c), metric_(std::move(metric)) {}
  void update(int64_t batch) override { case_.update(*metric_, batch); }
  at::Tensor compute() const override { return metric_->compute(); }
  at::Device device() const override { return metric_->device(); }
  int64_t update_count() const override { return metric_->update_count(); }
  std::vector<BadInputReport> bad_input() const override { return {metric_->bad_input_report()}; }
  StateDict state_dict() const override { return metric_->state_dict(); }
  void load_state_dict(const StateDict& dict) override { metric_->load_state_dict(dict); }
  void merge(const Subject& other) override { metric_->merge(*static_cast<const MetricSubject&>(other).metric_); }
  void reset() override { metric_->reset(); }
  std::unique_ptr<Subject> clone() const override { return std::make_unique<MetricSubject>(case_, metric_->clone()); }

 private:
  const ContractCase& case_;
  std::unique_ptr<Metric> metric_;
};

class CollectionSubject : public Subject {
 public:
  CollectionSubject(const ContractCase& c, MetricCollection collection) : case_(c), collection_(std::move(collection)) {}
  void update(int64_t batch) override { case_.update_collection(collection_, batch); }
  at::Tensor compute() const override {
    std::vector<at::Tensor> values;
    for (const auto& [name, value] : collection_.compute()) values.push_back(value.flatten().to(at::kDouble));
    return at::cat(values);
  }
  at::Device device() const override { return collection_.at(collection_.names().front()).device(); }
  int64_t update_count() const override { return collection_.at(collection_.names().front()).update_count(); }
  std::vector<BadInputReport> bad_input() const override {
    std::vector<BadInputReport> reports;
    for (const auto& name : collection_.names()) reports.push_back(collection_.at(name).bad_input_report());
    return reports;
  }
  StateDict state_dict() const override { return collection_.state_dict(); }
  void load_state_dict(const StateDict& dict) override { collection_.load_state_dict(dict); }
  void merge(const Subject& other) override {
    collection_.merge(static_cast<const CollectionSubject&>(other).collection_);
  }
  void reset() override { collection_.reset(); }
  std::unique_ptr<Subject> clone() const override {
    return std::make_unique<CollectionSubject>(case_, collection_.clone());
  }

 private:
  const ContractCase& case_;
  MetricCollection collection_;
};

std::unique_ptr<Subject> make(const ContractCase& c) {
  if (c.make_collection) return std::make_unique<CollectionSubject>(c, c.make_collection());
  return std::make_unique<MetricSubject>(c, c.make());
}

std::unique_ptr<Subject> fed(const ContractCase& c, int64_t from, int64_t to) {
  auto subject = make(c);
  for (int64_t i = from; i < to; ++i) subject->update(i);
  return subject;
}

void expect_same_bad_input(const Subject& a, const Subject& b) {
  const auto ra = a.bad_input();
  const auto rb = b.bad_input();
  ASSERT_EQ(ra.size(), rb.size());
  for (size_t i = 0; i < ra.size(); ++i) {
    EXPECT_EQ(ra[i].counts, rb[i].counts);
    EXPECT_EQ(ra[i].bad_updates, rb[i].bad_updates);
  }
}

TEST_P(MetricContract, SplitStreamMergedEqualsSingleStream) {
  const auto& c = GetParam();
  WarningCapture quiet;
  const auto single = fed(c, 0, c.batches);
  std::vector<std::unique_ptr<Subject>> parts;
  for (int k = 0; k < 3; ++k) parts.push_back(make(c));
  for (int64_t i = 0; i < c.batches; ++i) parts[i % 3]->update(i);
  parts[0]->merge(*parts[1]);
  parts[0]->merge(*parts[2]);
  EXPECT_TRUE(tensors_close(parts[0]->compute(), single->compute(), 1e-9));
  EXPECT_EQ(parts[0]->update_count(), single->update_count());
  expect_same_bad_input(*parts[0], *single);
}

TEST_P(MetricContract, ComputeIsIdempotentAndLeavesStateAlone) {
  const auto& c = GetParam();
  WarningCapture quiet;
  const auto metric = fed(c, 0, c.batches);
  const auto before = metric->state_dict();
  const auto first = metric->compute();
  const auto second = metric->compute();
  EXPECT_TRUE(tensors_close(first, second, 0.0, 0.0));
  EXPECT_EQ(first.device(), metric->device());
  EXPECT_TRUE(states_equal(metric->state_dict(), before));
}

TEST_P(MetricContract, StateDictRoundTripsExactly) {
  const auto& c = GetParam();
  WarningCapture quiet;
  const auto metric = fed(c, 0, c.batches - 1);
  auto restored = make(c);
  restored->load_state_dict(metric->state_dict());
  EXPECT_TRUE(states_equal(restored->state_dict(), metric->state_dict()));
  EXPECT_TRUE(tensors_close(restored->compute(), metric->compute(), 0.0, 0.0));
  metric->update(c.batches - 1);
  restored->update(c.batches - 1);
  EXPECT_TRUE(states_equal(restored->state_dict(), metric->state_dict()));
}

TEST_P(MetricContract, CloneIsIndependent) {
  const auto& c = GetParam();
  WarningCapture quiet;
  const auto metric = fed(c, 0, 2);
  const auto copy = metric->clone();
  const auto before = metric->state_dict();
  for (int64_t i = 2; i < c.batches; ++i) copy->update(i);
  EXPECT_TRUE(states_equal(metric->state_dict(), before));
  EXPECT_TRUE(tensors_close(copy->compute(), fed(c, 0, c.batches)->compute(), 0.0, 0.0));
  metric->update(2);
  EXPECT_TRUE(states_equal(copy->state_dict(), fed(c, 0, c.batches)->state_dict()));
}

TEST_P(MetricContract, MergeLeavesOtherUnchanged) {
  const auto& c = GetParam();
  WarningCapture quiet;
  const auto a = fed(c, 0, 3);
  const auto b = fed(c, 3, c.batches);
  const auto before = b->state_dict();
  a->merge(*b);
  EXPECT_TRUE(states_equal(b->state_dict(), before));
}

TEST_P(MetricContract, ResetRestoresInitialState) {
  const auto& c = GetParam();
  WarningCapture quiet;
  const auto metric = fed(c, 0, c.batches);
  metric->reset();
  EXPECT_TRUE(states_equal(metric->state_dict(), make(c)->state_dict()));
  EXPECT_EQ(metric->update_count(), 0);
}

void expect_sync_free_updates(const ContractCase& c) {
  const auto metric = make(c);
  for (int64_t i = 0; i < c.batches; ++i) {
    SyncCounter counter;
    metric->update(i);
    EXPECT_EQ(counter.total(), 0) << "batch " << i << ": " << counter.summary();
  }
}

TEST_P(MetricContract, UpdateHasNoSyncClassOpsOnCpuFastPath) { expect_sync_free_updates(GetParam()); }

TEST_P(MetricContract, UpdateHasNoSyncClassOpsOnAtenPath) {
  ForceAtenPath aten;
  expect_sync_free_updates(GetParam());
}

TEST_P(MetricContract, StrictCounterLetsEveryUpdateRun) {
  const auto& c = GetParam();
  const auto metric = make(c);
  {
    SyncCounter strict(SyncCounterOptions().strict(true));
    for (int64_t i = 0; i < c.batches; ++i) EXPECT_NO_THROW(metric->update(i));
  }
  WarningCapture quiet;
  EXPECT_TRUE(states_equal(metric->state_dict(), fed(c, 0, c.batches)->state_dict()));
}

TEST_P(MetricContract, AtenPathAgreesWithCpuFastPath) {
  const auto& c = GetParam();
  WarningCapture quiet;
  const auto fast = fed(c, 0, c.batches);
  std::unique_ptr<Subject> aten;
  {
    ForceAtenPath force;
    aten = fed(c, 0, c.batches);
  }
  EXPECT_TRUE(states_equal(aten->state_dict(), fast->state_dict(), 1e-12));
  EXPECT_TRUE(tensors_close(aten->compute(), fast->compute(), 1e-12));
}

}  // namespace
}  // namespace metrics::testing
