#include <ATen/ATen.h>
#include <metrics/metrics.h>

#include <iostream>

int main() {
  metrics::Mean mean;
  {
    metrics::SyncCounter counter;
    mean.update(at::arange(1.0, 5.0));  // 1, 2, 3, 4
    if (counter.total() != 0) return 1;
  }
  const double value = mean.compute().item<double>();
  std::cout << "mean " << value << "\n";
  return value == 2.5 ? 0 : 1;
}
