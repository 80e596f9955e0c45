#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>

namespace example {

/// A classification task on synthetic data: inputs drawn from N(0, 1), labels given by a fixed
/// random linear teacher, learnt by an MLP with SGD.
struct TrainingConfig {
  int64_t batch_size = 128;
  int64_t features = 64;
  int64_t hidden = 256;
  int64_t classes = 10;
  double learning_rate = 0.05;
  uint64_t seed = 0;
};

/// What a training step does with its metrics.
class StepMetrics {
 public:
  virtual ~StepMetrics() = default;
  virtual void update(const at::Tensor& loss, const at::Tensor& logits, const at::Tensor& target) = 0;
  /// The values so far, e.g. "loss 0.53 | accuracy 0.81"; reads back, so call it at log time only.
  virtual std::string summary() = 0;
  virtual void reset() = 0;
};

/// "none", "nosync" (this library) or "naive" (the sync-heavy patterns, from bench/naive).
std::unique_ptr<StepMetrics> make_step_metrics(const std::string& mode, int64_t classes);

class Trainer {
 public:
  explicit Trainer(const TrainingConfig& config);
  ~Trainer();
  /// Draws a batch, runs forward, loss, backward and an SGD step, then updates `metrics`.
  void step(StepMetrics& metrics);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace example
