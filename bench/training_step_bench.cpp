// What a training step pays for its metrics: the example's training loop with metrics none,
// naive and nosync, in one process, interleaved round by round (the order rotating), so drift in
// clock speed or cache state hits every mode alike. Prints and writes the median step time of
// each mode and the ratios to none.
//
//   training_step_bench [--rounds R] [--steps S] [--classes C] [--hidden H] [--threads T] [--json FILE]

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
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
  const std::vector<std::string> modes = {"none", "naive", "nosync"};
  std::map<std::string, example::Trainer> trainers;
  std::map<std::string, std::unique_ptr<example::StepMetrics>> step_metrics;
  std::map<std::string, std::vector<double>> step_ms;
  std::map<std::string, double> syncs_per_step;
  for (const auto& mode : modes) {
    trainers.emplace(mode, args.config);
    step_metrics[mode] = example::make_step_metrics(mode, args.config.classes);
    metrics::SyncCounter counter;
    trainers.at(mode).step(*step_metrics[mode]);  // warm-up step, counted
    syncs_per_step[mode] = static_cast<double>(counter.total());
  }
  for (int64_t round = 0; round < args.rounds; ++round) {
    for (size_t k = 0; k < modes.size(); ++k) {
      const auto& mode = modes[(k + round) % modes.size()];
      for (int64_t s = 0; s < args.steps; ++s) {
        const auto start = std::chrono::steady_clock::now();
        trainers.at(mode).step(*step_metrics[mode]);
        const auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        if (round > 0) step_ms[mode].push_back(ms);  // round 0 warms every mode up
      }
    }
  }
  const double none = median(step_ms["none"]);
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
    std::printf("  %-7s median %8.3f ms  x%.4f of none  sync points per step %.0f\n", mode.c_str(), m,
                none > 0 ? m / none : 0.0, syncs_per_step[mode]);
    if (json.is_open()) {
      json << (k ? ", " : "") << "\"" << mode << "\": {\"median_ms\": " << m
           << ", \"ratio_to_none\": " << (none > 0 ? m / none : 0.0) << ", \"syncs_per_step\": " << syncs_per_step[mode]
           << ", \"steps\": " << step_ms[mode].size() << "}";
    }
  }
  if (json.is_open()) json << "}}\n";
  return 0;
}
