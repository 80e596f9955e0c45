// What a training step pays for its metrics: the example's training loop with metrics none,
// naive and nosync, in one process, on one trainer (metrics do not change the training, so only
// the metrics object differs between modes), interleaved round by round in a shuffled order, so
// that drift in clock speed, and what the previous mode left in the caches (naive's bincount
// buffers evict everything), hit every mode alike. A second metric-free mode
// ("control") shows how far two identical modes drift apart: the noise of the ratios. The ratio of a mode to
// none is paired by round (the median of, over rounds, its median step / none's median step in
// that round), so that drift between rounds cancels. Prints and writes the median step time of
// each mode and its ratio to none.
//
//   training_step_bench [--rounds R] [--steps S] [--classes C] [--hidden H] [--threads T] [--json FILE]

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <metrics/sync_counter.h>

#include "training_loop.h"

namespace {

struct Args {
  int64_t rounds = 12;
  int64_t steps = 10;  // timed steps per mode and round
  int threads = 1;
  std::string json;
  example::TrainingConfig config;
};

Args parse(int argc, char** argv) {
  Args a;
  a.config.features = 256;
  a.config.hidden = 1024;
  a.config.classes = 1000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--rounds") a.rounds = std::stoll(value);
    else if (flag == "--steps") a.steps = std::stoll(value);
    else if (flag == "--classes") a.config.classes = std::stoll(value);
    else if (flag == "--hidden") a.config.hidden = std::stoll(value);
    else if (flag == "--threads") a.threads = std::stoi(value);
    else if (flag == "--json") a.json = value;
    else throw std::invalid_argument("unknown flag " + flag);
  }
  return a;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const auto args = parse(argc, argv);
  torch::set_num_threads(args.threads);
  const std::vector<std::string> modes = {"none", "naive", "nosync", "control"};
  example::Trainer trainer(args.config);
  std::map<std::string, std::unique_ptr<example::StepMetrics>> step_metrics;
  std::map<std::string, std::vector<double>> step_ms;
  std::map<std::string, std::vector<double>> round_ratio;  // per round: median step / none's
  std::map<std::string, double> syncs_per_step;
  for (const auto& mode : modes) {
    step_metrics[mode] = example::make_step_metrics(mode == "control" ? "none" : mode, args.config.classes);
    metrics::SyncCounter counter;
    trainer.step(*step_metrics[mode]);  // warm-up step, counted
    syncs_per_step[mode] = static_cast<double>(counter.total());
  }
  std::mt19937 shuffle_seed(0);
  auto order = modes;
  for (int64_t round = 0; round < args.rounds; ++round) {
    std::map<std::string, std::vector<double>> this_round;
    std::shuffle(order.begin(), order.end(), shuffle_seed);
    for (const auto& mode : order) {
      for (int64_t s = 0; s < args.steps; ++s) {
        const auto start = std::chrono::steady_clock::now();
        trainer.step(*step_metrics[mode]);
        this_round[mode].push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
      }
    }
    if (round == 0) continue;  // round 0 warms every mode up
    for (const auto& mode : modes) {
      step_ms[mode].insert(step_ms[mode].end(), this_round[mode].begin(), this_round[mode].end());
      round_ratio[mode].push_back(median(this_round[mode]) / median(this_round["none"]));
    }
  }
  std::printf("training step: MLP %lld-%lld-%lld, batch %lld, %d thread(s), %lld x %lld steps per mode\n",
              static_cast<long long>(args.config.features), static_cast<long long>(args.config.hidden),
              static_cast<long long>(args.config.classes), static_cast<long long>(args.config.batch_size),
              args.threads, static_cast<long long>(args.rounds - 1), static_cast<long long>(args.steps));
  std::ofstream json;
  if (!args.json.empty()) {
    json.open(args.json);
    json << "{\"features\": " << args.config.features << ", \"hidden\": " << args.config.hidden
         << ", \"classes\": " << args.config.classes << ", \"batch\": " << args.config.batch_size
         << ", \"threads\": " << args.threads << ", \"modes\": {";
  }
  for (size_t k = 0; k < modes.size(); ++k) {
    const auto& mode = modes[k];
    const double m = median(step_ms[mode]);
    const double ratio = median(round_ratio[mode]);
    std::printf("  %-7s median %8.3f ms  x%.4f of none  sync points per step %.0f\n", mode.c_str(), m, ratio,
                syncs_per_step[mode]);
    if (json.is_open()) {
      json << (k ? ", " : "") << "\"" << mode << "\": {\"median_ms\": " << m << ", \"ratio_to_none\": " << ratio
           << ", \"syncs_per_step\": " << syncs_per_step[mode]
           << ", \"steps\": " << step_ms[mode].size() << "}";
    }
  }
  if (json.is_open()) json << "}}\n";
  return 0;
}
