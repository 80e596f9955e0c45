#pragma once

#include <string>

#include <metrics/collection.h>
#include <metrics/metric.h>

namespace metrics {

/// Checkpoints: a metric's or a collection's state_dict() (with its "_version" and "_metric"
/// entries) written with torch::pickle_save, the format Python's torch.load reads too, so a
/// checkpoint saved from C++ loads in Python and the other way round.
///
/// Loading checks the file, the format version and the metric's description (name, options, state
/// layout) before changing anything: another metric's state, other options, or a truncated or
/// corrupted file give a ValueError naming the metric and the path, and leave the metric as it was.
/// The file is read with torch's unpickler: load checkpoints you wrote, not ones from strangers.
void save_checkpoint(const Metric& metric, const std::string& path);
void load_checkpoint(Metric& metric, const std::string& path);
void save_checkpoint(const MetricCollection& collection, const std::string& path);
void load_checkpoint(MetricCollection& collection, const std::string& path);

}  // namespace metrics
