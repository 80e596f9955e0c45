// Update cost of every metric: nosync-metrics next to the naive (TorchMetrics-style) update and
// the floor of one vectorized read of the same input, with the sync-class ops of one update as a
// counter. --torch_threads=N sets ATen's intra-op threads (default 1).
//
//   update_bench --torch_threads=1 --benchmark_out=results.json --benchmark_out_format=json

#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

#include <cstring>
#include <string>
#include <vector>

#include <metrics/sync_counter.h>

#include "bench_cases.h"

namespace {

int64_t take_threads_flag(int* argc, char** argv) {
  int64_t threads = 1;
  int kept = 1;
  for (int i = 1; i < *argc; ++i) {
    const char* prefix = "--torch_threads=";
    if (std::strncmp(argv[i], prefix, std::strlen(prefix)) == 0) {
      threads = std::stoll(argv[i] + std::strlen(prefix));
    } else {
      argv[kept++] = argv[i];
    }
  }
  *argc = kept;
  return threads;
}

void run_case(benchmark::State& state, const bench::Case& c) {
  auto update = c.make();
  update();  // warm up: first-touch allocations, lazy initialization
  int64_t syncs;
  {
    metrics::SyncCounter counter;
    update();
    syncs = counter.total();
  }
  for (auto _ : state) update();
  state.counters["syncs_per_update"] = static_cast<double>(syncs);
  state.SetItemsProcessed(state.iterations() * c.items);
}

}  // namespace

int main(int argc, char** argv) {
  const auto threads = take_threads_flag(&argc, argv);
  at::set_num_threads(static_cast<int>(threads));
  for (const auto& c : bench::all_cases()) {
    const auto name = c.metric + "/" + c.shape + "/" + c.implementation;
    benchmark::RegisterBenchmark(name.c_str(), [c](benchmark::State& state) { run_case(state, c); })
        ->Unit(benchmark::kMicrosecond);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("torch_threads", std::to_string(threads));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
