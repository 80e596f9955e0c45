#pragma once

// What a metric's bad-input report is about, where its caller knows more than the metric does.

#include <string>

namespace metrics {

/// While alive, puts `prefix` in front of the bad-input reports that this thread's metrics give
/// in compute() and check(): what the caller knows that the metric does not, as MetricCollection
/// names the members a report is about ("MetricCollection.compute: 'acc': "). Contexts nest, the
/// outer prefix first ("epoch 3: MetricCollection.compute: 'acc': ").
class ReportContext {
 public:
  explicit ReportContext(const std::string& prefix);
  ~ReportContext();
  ReportContext(const ReportContext&) = delete;
  ReportContext& operator=(const ReportContext&) = delete;

  /// The prefix in force on this thread, "" where none is.
  static const std::string& current();

 private:
  std::string previous_;
};

}  // namespace metrics
