// A LibTorch training loop that tracks its metrics with nosync-metrics and counts the sync points
// of every step with metrics::SyncCounter.
//
//   train_mlp [--metrics none|nosync|naive] [--steps N] [--log-every N] [--classes N]

#include <torch/torch.h>

#include <metrics/metrics.h>

#include <cstdio>
#include <iostream>
#include <string>

#include "training_loop.h"

namespace {

struct Args {
  std::string metrics = "nosync";
  int64_t steps = 300;
  int64_t log_every = 50;
  example::TrainingConfig config;
};

Args parse(int argc, char** argv) {
  Args args;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--metrics") {
      args.metrics = value;
    } else if (flag == "--steps") {
      args.steps = std::stoll(value);
    } else if (flag == "--log-every") {
      args.log_every = std::stoll(value);
    } else if (flag == "--classes") {
      args.config.classes = std::stoll(value);
    } else {
      throw std::invalid_argument("unknown flag " + flag);
    }
  }
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  const auto args = parse(argc, argv);
  torch::set_num_threads(1);
  example::Trainer trainer(args.config);
  auto metrics = example::make_step_metrics(args.metrics, args.config.classes);
  std::cout << "training an MLP on synthetic data (" << args.config.classes << " classes, batch "
            << args.config.batch_size << "), metrics: " << args.metrics << "\n";

  metrics::SyncCounter all_steps;  // every sync-class op of every step, for the final line
  int64_t interval_syncs = 0;
  for (int64_t step = 1; step <= args.steps; ++step) {
    {
      metrics::SyncCounter this_step;
      trainer.step(*metrics);
      interval_syncs += this_step.total();
    }
    if (step % args.log_every == 0) {
      std::printf("step %4lld | %s | sync points per step: %.2f\n", static_cast<long long>(step),
                  metrics->summary().c_str(), static_cast<double>(interval_syncs) / args.log_every);
      std::fflush(stdout);
      metrics->reset();
      interval_syncs = 0;
    }
  }
  std::cout << "all " << args.steps << " steps and logging: " << all_steps.summary() << "\n";
  return 0;
}
