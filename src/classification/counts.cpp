// The classification counting state: its layouts, its bad-input kinds, and one update's counting.

#include <ATen/ATen.h>

#include <metrics/backend.h>

#include "../input_dtypes.h"
#include "kernels.h"

namespace metrics::detail {

std::vector<std::string> bad_input_kinds(const ClassificationOptions& o) {
  if (o.task() == Task::Multiclass && o.num_classes() == kUnknownClasses) {
    // no range without num_classes: only NaN scores are bad, as a kind the tally keeps in its place
    return {"targets (none without num_classes)", "NaN predictions", "NaN, negative or infinite weights"};
  }
  if (o.task() == Task::Multiclass) {
    return {"targets outside [0, " + std::to_string(o.num_classes()) + ")", "NaN or out-of-range predictions",
            "NaN, negative or infinite weights"};
  }
  return {"targets not 0 or 1", "NaN or non-binary predictions", "NaN, negative or infinite weights"};
}

MetricState make_count_state(const ClassificationOptions& options, CountLayout layout) {
  const auto dtype = options.weighted() ? at::kDouble : at::kLong;
  const auto classes = counted_classes(options);
  MetricState state(options.device(), dtype);  // the update count and the tally beside the counts
  // tn may go below 0 without num_classes (TorchMetrics' 1 * n - (tp + fp + fn): minus the wrong
  // predictions), and a little where weighted multiclass: the kept weight less the weights each class
  // is involved in, two float64 sums that may round apart
  const bool signed_tn = options.num_classes() == kUnknownClasses ||
                         (options.weighted() && options.task() == Task::Multiclass);
  const auto counts_of = [&](const std::string& name) {
    return signed_tn && name == "tn" ? Counts::kSigned : Counts::kUnsigned;
  };
  if (layout == CountLayout::Matrix) {
    TORCH_INTERNAL_ASSERT(options.task() == Task::Multiclass);
    state.add("confmat", {classes, classes}, dtype, 0, Reduction::Sum, Counts::kUnsigned);
  } else {
    const auto rows = samplewise(options);
    for (const std::string name : {"tp", "fp", "tn", "fn"}) {
      state.add(name, rows ? std::vector<int64_t>{0, classes} : std::vector<int64_t>{classes}, dtype, 0,
                rows ? Reduction::Cat : Reduction::Sum, counts_of(name));
    }
  }
  if (layout == CountLayout::PerClassAndKeptMatrix) {
    TORCH_INTERNAL_ASSERT(options.task() == Task::Binary && !samplewise(options));
    state.add("confmat", {2, 2}, dtype, 0, Reduction::Sum, Counts::kUnsigned);
  }
  if (options.validate_args()) state.track_bad_input(bad_input_kinds(options));
  state.add_scratch(1);  // the ATen path's spare slot, where a piece that counts nothing goes
  if (samplewise(options) && options.task() != Task::Multiclass) {
    state.add_row_spare();  // and a dropped entry's cell, samplewise (entries_aten.cpp)
  }
  if (layout == CountLayout::PerClass && options.task() == Task::Multiclass) {
    // tn's: the ATen path adds every kept row to all of tn (samplewise, of its sample's row) there
    state.add_pending_addend(3);
  }
  return state;
}

// Slot 0 is the update count; the counts follow in the order make_count_state adds them.
CountLayout layout_of(const MetricState& state) {
  if (state.name(1) == "confmat") return CountLayout::Matrix;
  const bool kept_matrix = state.size() > kKeptMatrixSlot && state.name(kKeptMatrixSlot) == "confmat";
  return kept_matrix ? CountLayout::PerClassAndKeptMatrix : CountLayout::PerClass;
}

StatCounts stat_counts(const MetricState& state) {
  const auto& e = state.value_entries();  // settled once
  if (layout_of(state) != CountLayout::Matrix) return {e[1].tensor, e[2].tensor, e[3].tensor, e[4].tensor};
  const auto& matrix = e[1].tensor;
  const auto tp = matrix.diagonal();
  const auto fp = matrix.sum(0) - tp;
  const auto fn = matrix.sum(1) - tp;
  const auto tn = matrix.sum() - tp - fp - fn;
  return {tp, fp, tn, fn};
}

at::Tensor confusion_matrix(const MetricState& state, const ClassificationOptions& options, CountLayout reader) {
  if (layout_of(state) == CountLayout::Matrix) return state[1].clone();
  if (reader == CountLayout::PerClassAndKeptMatrix) {
    TORCH_INTERNAL_ASSERT(layout_of(state) == CountLayout::PerClassAndKeptMatrix);
    return state[kKeptMatrixSlot].clone();
  }
  TORCH_INTERNAL_ASSERT(options.task() != Task::Multiclass, "a multiclass confusion matrix needs the Matrix layout");
  const auto c = stat_counts(state);
  // [L, 2, 2]: [[tn, fp], [fn, tp]] per label
  const auto matrix = at::stack({c.tn, c.fp, c.fn, c.tp}, -1).reshape({-1, 2, 2});
  return options.task() == Task::Binary ? matrix.reshape({2, 2}) : matrix;
}

namespace {

// (N, L, X) multilabel entries (and their weights) as the CPU kernels read them, (N * X, L).
at::Tensor labels_last(const at::Tensor& t) { return t.dim() < 3 ? t : t.movedim(1, -1).reshape({-1, t.size(1)}); }

// The batch as the CPU kernels read it, contiguous: binary (M,), multiclass (M, C) scores or (M,)
// labels, multilabel (M, L) rows, int64 labels and targets, float32 or float64 scores, a float32 or
// float64 weight per row or per entry (one per sample repeated over its rows or binary entries).
ClassificationBatch cpu_rows(const ClassificationBatch& batch, const ClassificationOptions& options) {
  auto rows = batch;
  // (scores keep their dtype, labels and targets an integer one: canonicalize.cpp)
  const bool multilabel = options.task() == Task::Multilabel;
  const auto& preds = multilabel                ? labels_last(batch.preds)
                      : batch.preds.dim() > 2 ? batch.preds.reshape({-1, batch.preds.size(-1)})
                                              : batch.preds;
  // (a cast only where the dtype changes: each ATen call costs a dispatch even as a no-op)
  const auto contiguous_as = [](const at::Tensor& t, at::ScalarType dtype) {
    return (t.scalar_type() == dtype ? t : t.to(dtype)).contiguous();
  };
  const auto half_widened = [&](const at::Tensor& t) {
    return contiguous_as(t, is_half_precision(t.scalar_type()) ? at::kFloat : t.scalar_type());
  };
  rows.preds = batch.scores ? half_widened(preds) : contiguous_as(preds, at::kLong);
  rows.target = contiguous_as(multilabel ? labels_last(batch.target) : batch.target, at::kLong);
  if (!batch.weight) return rows;
  const auto& w = *batch.weight;
  const int64_t samples = w.size(0), per_sample = rows.target.size(0) / std::max<int64_t>(samples, 1);
  const bool spread = batch.weight_per_sample() && per_sample > 1;
  const auto& weight = spread ? w.view({samples, 1}).expand({samples, per_sample}).reshape({-1}) : labels_last(w);
  rows.weight = half_widened(weight);
  return rows;
}

}  // namespace

// (The CPU path reads the inputs' memory: a view with the negative bit (x.conj().imag), whose values
// are that memory negated, takes the ATen path, whose ops apply it.)
void count(MetricState& state, const ClassificationOptions& options, const ClassificationBatch& batch) {
  const bool negated = batch.preds.is_neg() || batch.target.is_neg() || (batch.weight && batch.weight->is_neg());
  if (samplewise(options) || !cpu_fast_path_enabled() || !batch.target.is_cpu() || negated) {
    return count_on_aten(state, batch, options);
  }
  CountSink sink;
  sink.layout = layout_of(state);
  if (sink.layout == CountLayout::Matrix) {
    sink.matrix = state[1];
  } else {
    sink.tp = state[1];
    sink.fp = state[2];
    sink.tn = state[3];
    sink.fn = state[4];
  }
  const auto contiguous = cpu_rows(batch, options);
  const auto bad = cpu::count(contiguous, options, sink).in_order();
  if (sink.layout == CountLayout::PerClassAndKeptMatrix) {
    // the matrix's reading: again, judged by the kept scores; [[tn, fp], [fn, tp]]
    const auto cells = state[kKeptMatrixSlot].view({4, 1});
    CountSink kept{CountLayout::PerClass, cells[3], cells[1], cells[0], cells[2], {}, /*judges_kept_scores=*/true};
    cpu::count(contiguous, options, kept);
  }
  state.finish_update(options.validate_args() ? c10::ArrayRef<int64_t>(bad) : c10::ArrayRef<int64_t>());
}

}  // namespace metrics::detail
