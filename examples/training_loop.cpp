#include "training_loop.h"

#include <torch/torch.h>

#include <metrics/metrics.h>

#include <iomanip>
#include <sstream>
#include <utility>
#include <vector>

#include "naive_metrics.h"

namespace example {
namespace {

class NoMetrics : public StepMetrics {
 public:
  void update(const at::Tensor&, const at::Tensor&, const at::Tensor&) override {}
  std::string summary() override { return "no metrics"; }
  void reset() override {}
};

std::string format(double loss, const std::vector<std::pair<std::string, double>>& scores) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(4) << "loss " << loss;
  for (const auto& [name, value] : scores) out << " | " << name << " " << value;
  return out.str();
}

const std::vector<std::string> kScoreNames = {"accuracy", "precision", "recall", "f1"};

// Mean loss, and accuracy, precision, recall and F1 (macro) sharing one state.
class NosyncMetrics : public StepMetrics {
 public:
  explicit NosyncMetrics(int64_t classes) {
    const auto o = metrics::ClassificationOptions::multiclass(classes);
    scores_.add("accuracy", metrics::Accuracy(o))
        .add("precision", metrics::Precision(o))
        .add("recall", metrics::Recall(o))
        .add("f1", metrics::F1Score(o));
  }
  void update(const at::Tensor& loss, const at::Tensor& logits, const at::Tensor& target) override {
    loss_.update(loss.detach());
    scores_.update(logits, target);
  }
  std::string summary() override {
    const auto values = scores_.compute();
    std::vector<std::pair<std::string, double>> scores;
    for (const auto& name : kScoreNames) scores.emplace_back(name, values.at(name).item<double>());
    return format(loss_.compute().item<double>(), scores);
  }
  void reset() override {
    loss_.reset();
    scores_.reset();
  }

 private:
  metrics::Mean loss_;
  metrics::MetricCollection scores_;
};

// The same values through the patterns the library avoids, one state per metric.
class NaiveMetrics : public StepMetrics {
 public:
  explicit NaiveMetrics(int64_t classes)
      : options_(metrics::ClassificationOptions::multiclass(classes)),
        counts_(kScoreNames.size(), naive::StatScores(options_)) {}
  void update(const at::Tensor& loss, const at::Tensor& logits, const at::Tensor& target) override {
    loss_.update(loss.detach());
    for (auto& counts : counts_) counts.update(logits, target);
  }
  std::string summary() override {
    namespace f = metrics::functional;
    const std::vector<std::pair<std::string, double>> scores = {
        {"accuracy", f::accuracy(counts_[0].counts(), options_).item<double>()},
        {"precision", f::precision(counts_[1].counts(), options_).item<double>()},
        {"recall", f::recall(counts_[2].counts(), options_).item<double>()},
        {"f1", f::fbeta_score(counts_[3].counts(), 1.0, options_).item<double>()}};
    return format(loss_.compute().item<double>(), scores);
  }
  void reset() override {
    loss_ = naive::Aggregator(naive::Aggregator::Kind::Mean);
    counts_.assign(kScoreNames.size(), naive::StatScores(options_));
  }

 private:
  metrics::ClassificationOptions options_;
  naive::Aggregator loss_{naive::Aggregator::Kind::Mean};
  std::vector<naive::StatScores> counts_;
};

}  // namespace

std::unique_ptr<StepMetrics> make_step_metrics(const std::string& mode, int64_t classes) {
  if (mode == "none") return std::make_unique<NoMetrics>();
  if (mode == "nosync") return std::make_unique<NosyncMetrics>(classes);
  if (mode == "naive") return std::make_unique<NaiveMetrics>(classes);
  TORCH_CHECK_VALUE(false, "unknown metrics mode '", mode, "'; expected none, nosync or naive");
}

struct Trainer::Impl {
  explicit Impl(const TrainingConfig& c)
      : config(c),
        seeded((torch::manual_seed(c.seed), true)),  // before the model draws its initial weights
        model(torch::nn::Linear(c.features, c.hidden), torch::nn::ReLU(), torch::nn::Linear(c.hidden, c.classes)),
        optimizer(model->parameters(), torch::optim::SGDOptions(c.learning_rate)),
        teacher(torch::randn({c.features, c.classes})) {}

  TrainingConfig config;
  bool seeded;
  torch::nn::Sequential model;
  torch::optim::SGD optimizer;
  torch::Tensor teacher;
};

Trainer::Trainer(const TrainingConfig& config) : impl_(std::make_unique<Impl>(config)) {}

Trainer::~Trainer() = default;

void Trainer::step(StepMetrics& metrics) {
  auto& s = *impl_;
  const auto inputs = torch::randn({s.config.batch_size, s.config.features});
  const auto target = inputs.matmul(s.teacher).argmax(1);
  s.optimizer.zero_grad();
  const auto logits = s.model->forward(inputs);
  const auto loss = torch::nn::functional::cross_entropy(logits, target);
  // Metrics first, while the logits are still in cache: after backward and the optimizer step
  // they have been evicted, and reading them back costs several times the update itself.
  metrics.update(loss, logits.detach(), target);
  loss.backward();
  s.optimizer.step();
}

}  // namespace example
