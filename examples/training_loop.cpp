#include "training_loop.h"

#include <torch/torch.h>

#include <metrics/metrics.h>

#include <iomanip>
#include <sstream>

namespace example {
namespace {

class NoMetrics : public StepMetrics {
 public:
  void update(const at::Tensor&, const at::Tensor&, const at::Tensor&) override {}
  std::string summary() override { return "no metrics"; }
  void reset() override {}
};

class NosyncMetrics : public StepMetrics {
 public:
  explicit NosyncMetrics(int64_t /*classes*/) {}
  void update(const at::Tensor& loss, const at::Tensor& /*logits*/, const at::Tensor& /*target*/) override {
    loss_.update(loss.detach());
  }
  std::string summary() override {
    std::ostringstream out;
    out << std::fixed << std::setprecision(4) << "loss " << loss_.compute().item<double>();
    return out.str();
  }
  void reset() override { loss_.reset(); }

 private:
  metrics::Mean loss_;
};

}  // namespace

std::unique_ptr<StepMetrics> make_step_metrics(const std::string& mode, int64_t classes) {
  if (mode == "none") return std::make_unique<NoMetrics>();
  if (mode == "nosync") return std::make_unique<NosyncMetrics>(classes);
  TORCH_CHECK_VALUE(false, "unknown metrics mode '", mode, "'; expected none or nosync");
}

struct Trainer::Impl {
  explicit Impl(const TrainingConfig& c)
      : config(c),
        model(torch::nn::Linear(c.features, c.hidden), torch::nn::ReLU(), torch::nn::Linear(c.hidden, c.classes)),
        optimizer(model->parameters(), torch::optim::SGDOptions(c.learning_rate)) {
    torch::manual_seed(c.seed);
    teacher = torch::randn({c.features, c.classes});
  }

  TrainingConfig config;
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
  loss.backward();
  s.optimizer.step();
  metrics.update(loss, logits.detach(), target);
}

}  // namespace example
