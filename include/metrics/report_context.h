#pragma once

// What a metric's bad-input report is about, where its caller knows more than the metric does.

#include <string>

namespace metrics {

/// While alive, puts `prefix` in front of the bad-input reports that this thread's metrics give
/// in compute() and check(), as MetricCollection names the members a report is about
/// ("MetricCollection.compute: 'acc': "); a report given with a context of its own (a collection's
/// members') keeps that one. Contexts nest: the innermost holds.
class ReportContext {
 public:
  explicit ReportContext(std::string prefix);
  ~ReportContext();
  ReportContext(const ReportContext&) = delete;
  ReportContext& operator=(const ReportContext&) = delete;

  /// The prefix in force on this thread, "" where none is.
  static const std::string& current();

 private:
  std::string previous_;
};

}  // namespace metrics
