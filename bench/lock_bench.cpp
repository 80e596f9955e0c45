// What the state's lock costs: an uncontended std::mutex lock and unlock (what every update now
// takes) beside the smallest updates there are, a host double and a one-element tensor into Sum.

#include <ATen/ATen.h>
#include <benchmark/benchmark.h>

#include <mutex>

#include <metrics/aggregation.h>

namespace {

void BM_UncontendedLock(benchmark::State& state) {
  std::mutex mutex;
  for (auto _ : state) {
    const std::lock_guard<std::mutex> lock(mutex);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_UncontendedLock);

void BM_SumOfAHostDouble(benchmark::State& state) {
  metrics::Sum sum;
  for (auto _ : state) sum.update(1.0);
}
BENCHMARK(BM_SumOfAHostDouble);

void BM_SumOfAOneElementTensor(benchmark::State& state) {
  metrics::Sum sum;
  const auto one = at::ones({1});
  for (auto _ : state) sum.update(one);
}
BENCHMARK(BM_SumOfAOneElementTensor);

}  // namespace

BENCHMARK_MAIN();
