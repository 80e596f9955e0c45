// ATen path of the classification update: which part counts a batch (multiclass_aten.cpp,
// entries_aten.cpp; each counts samplewise too). Nothing is read back, and the number of ops is
// fixed (bench/launch_bench.py counts them).

#include <ATen/ATen.h>

#include "kernels.h"

namespace metrics::detail {
namespace {

// An update without entries: samplewise, its samples' counts are zeros.
void count_nothing(MetricState& state, const ClassificationBatch& b, const ClassificationOptions& o) {
  if (samplewise(o)) state.grow_rows(b.samples);
  state.finish_update();
}

}  // namespace

void count_on_aten(MetricState& state, const ClassificationBatch& batch, const ClassificationOptions& options) {
  if (batch.target.numel() == 0) return count_nothing(state, batch, options);
  if (options.task() == Task::Multiclass) return count_multiclass_on_aten(state, batch, options);
  count_entries_on_aten(state, batch, options);
}

}  // namespace metrics::detail
