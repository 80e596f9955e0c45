// Soak: `updates` updates of a mixed collection (multiclass accuracy, precision, recall and F1
// sharing one state, and a confusion matrix) and of a Mean, cycling over a few fixed batches.
// Resident memory is read after a warm-up and at the end; the confusion matrix and the mean are
// checked against a brute-force count of the same batches. Prints one line, and exits 1 if a
// value differs or memory grew by more than 4 MiB.
//
//   soak_bench [updates]   (default 10^7; the test suite runs a short one)

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <vector>

#include <metrics/metrics.h>

namespace {

using metrics::ClassificationOptions;

constexpr int64_t kClasses = 10;
constexpr int64_t kRows = 64;
constexpr int64_t kBatches = 8;

int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

struct Batch {
  at::Tensor logits, labels, loss;
};

}  // namespace

int main(int argc, char** argv) {
  const int64_t updates = argc > 1 ? std::atoll(argv[1]) : 10'000'000;
  at::set_num_threads(1);
  const auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
  std::vector<Batch> batches;
  for (int64_t b = 0; b < kBatches; ++b) {
    batches.push_back({at::randn({kRows, kClasses}, gen), at::randint(kClasses, {kRows}, gen),
                       at::randint(0, 100, {kRows}, gen).to(at::kFloat)});
  }

  // Brute force: the confusion matrix and the loss sum of every batch, on the host.
  std::vector<int64_t> matrix(kClasses * kClasses, 0);
  std::vector<int64_t> per_batch_matrix_updates(kBatches, 0);
  std::vector<double> loss_sum(kBatches, 0.0);
  for (int64_t b = 0; b < kBatches; ++b) per_batch_matrix_updates[b] = updates / kBatches + (b < updates % kBatches);
  for (int64_t b = 0; b < kBatches; ++b) {
    const auto logits = batches[b].logits.accessor<float, 2>();
    const auto labels = batches[b].labels.accessor<int64_t, 1>();
    const auto loss = batches[b].loss.accessor<float, 1>();
    for (int64_t r = 0; r < kRows; ++r) {
      int64_t best = 0;
      for (int64_t c = 1; c < kClasses; ++c) best = logits[r][c] > logits[r][best] ? c : best;
      matrix[labels[r] * kClasses + best] += per_batch_matrix_updates[b];
      loss_sum[b] += loss[r];
    }
  }
  double loss_total = 0.0;
  for (int64_t b = 0; b < kBatches; ++b) loss_total += loss_sum[b] * static_cast<double>(per_batch_matrix_updates[b]);
  const double mean_want = loss_total / (static_cast<double>(updates) * kRows);

  const auto opts = ClassificationOptions::multiclass(kClasses);
  metrics::MetricCollection collection;
  collection.add("accuracy", std::make_shared<metrics::Accuracy>(opts))
      .add("precision", std::make_shared<metrics::Precision>(opts))
      .add("recall", std::make_shared<metrics::Recall>(opts))
      .add("f1", std::make_shared<metrics::F1Score>(opts))
      .add("confusion", std::make_shared<metrics::ConfusionMatrix>(opts));
  metrics::Mean mean;

  const int64_t warm_up = std::min<int64_t>(updates, 10'000);
  int64_t rss_after_warm_up = 0;
  for (int64_t i = 0; i < updates; ++i) {
    if (i == warm_up) rss_after_warm_up = resident_bytes();
    const auto& batch = batches[i % kBatches];
    collection.update(batch.logits, batch.labels);
    mean.update(batch.loss);
  }
  if (rss_after_warm_up == 0) rss_after_warm_up = resident_bytes();
  const int64_t growth = resident_bytes() - rss_after_warm_up;

  const auto values = collection.compute();
  const auto got = values.at("confusion").contiguous();
  bool same = got.numel() == kClasses * kClasses;
  for (int64_t k = 0; same && k < got.numel(); ++k) same = got.data_ptr<int64_t>()[k] == matrix[k];
  const double mean_got = mean.compute().item<double>();
  same = same && std::abs(mean_got - mean_want) <= 1e-12 * std::abs(mean_want);
  const bool flat = growth <= (int64_t{4} << 20);
  std::printf("soak: %lld updates | resident memory %+.2f MiB after warm-up (%.1f MiB) | values %s\n",
              static_cast<long long>(updates), growth / 1048576.0, rss_after_warm_up / 1048576.0,
              same ? "equal the brute-force reference" : "DIFFER from the brute-force reference");
  return same && flat ? 0 : 1;
}
