// Checks of a classification update's arguments (metadata only) and their canonical form.

#include <ATen/ATen.h>

#include <limits>

#include <metrics/shape_error.h>
#include <metrics/update_call.h>

#include "../dense_input.h"
#include "../input_dtypes.h"
#include "../input_devices.h"
#include "kernels.h"

namespace metrics {
namespace {

bool is_integral(at::ScalarType type) { return at::isIntegralType(type, /*includeBool=*/true); }

// Dtype changes and reshapes only where needed: each ATen call costs a dispatch even as a no-op.
at::Tensor as_long(const at::Tensor& t) { return t.scalar_type() == at::kLong ? t : t.to(at::kLong); }
at::Tensor flat(const at::Tensor& t) { return t.dim() == 1 ? t : t.reshape({-1}); }

// Labels may be floats, as TorchMetrics takes them: targets {0., 1.} (what BCEWithLogitsLoss takes)
// or class indices, and multiclass preds shaped like the target (logits.argmax(1).float()). A float
// that is not a whole number (0.5, NaN) becomes `not_a_label`, which is no class and no
// ignore_index, so it is counted as a bad target or prediction (TorchMetrics truncates it); whole
// numbers keep their value (-1. can be the ignore_index). Targets and preds take different ones,
// so that without num_classes, where labels are compared as they are, two never match.
constexpr int64_t kNotATarget = std::numeric_limits<int64_t>::min(), kNotAPrediction = kNotATarget + 1;

at::Tensor labels_of(const at::Tensor& labels, int64_t not_a_label) {
  if (!labels.is_floating_point()) return as_long(labels);
  const auto whole = labels.to(at::kLong);
  return whole.masked_fill_(whole.to(labels.scalar_type()).ne(labels), not_a_label);
}

// Labels (predictions and targets) of uint8, a signed integer dtype or bool are read as they are
// by the device path's ops that take them (a cast would be an op more): binary and multilabel ones
// by bucketize, in their dtype (bool as uint8, a view of the same bytes: bucketize refuses bool);
// multiclass ones, where there are num_classes, by the clamps that widen them into the int64 class
// rows. The CPU path casts them itself (counts.cpp). PyTorch 2's uint16, uint32 and uint64, which
// neither op takes, are made int64 first, as float labels and (the device path compares them as
// they are) multiclass labels without num_classes are.
bool read_as_they_are(const ClassificationOptions& o, const at::Tensor& labels) {
  const auto dtype = labels.scalar_type();
  const bool integer = dtype == at::kByte || dtype == at::kChar || dtype == at::kShort || dtype == at::kInt ||
                       dtype == at::kLong || dtype == at::kBool;
  return integer && (o.task() != Task::Multiclass || o.num_classes() != kUnknownClasses);
}

at::Tensor labels_to_read(const ClassificationOptions& o, const at::Tensor& labels, int64_t not_a_label) {
  if (!read_as_they_are(o, labels)) return labels_of(labels, not_a_label);
  return labels.scalar_type() == at::kBool ? labels.view(at::kByte) : labels;
}

// (N, L, ...) -> (N, L, X): the extra dimensions flattened where they are, after the labels (a
// view of a contiguous input, where bringing the labels last copied it). X is spelled out: an
// empty batch's -1 would be ambiguous.
at::Tensor labels_then_rest(const at::Tensor& t) {
  if (t.dim() <= 3) return t;
  return t.reshape({t.size(0), t.size(1), c10::multiply_integers(t.sizes().slice(2))});
}

}  // namespace

namespace detail {
namespace {

void check_tensors(const std::string& metric, const at::Tensor& preds, const at::Tensor& target, bool binary_like) {
  TORCH_CHECK_TYPE(preds.defined() && target.defined(), UpdateCall::prefix(metric),
                   "preds and target must be defined tensors");
  check_dense(metric, "preds", preds);
  check_dense(metric, "target", target);
  TORCH_CHECK_TYPE(is_integral(target.scalar_type()) || is_input_floating(target.scalar_type()),
                   UpdateCall::prefix(metric), "target has dtype ", target.scalar_type(),
                   binary_like ? "; expected 0/1 labels as an integer, bool or floating tensor"
                               : "; expected class labels as an integer, bool or floating tensor");
  TORCH_CHECK_TYPE(is_input_floating(preds.scalar_type()) || is_integral(preds.scalar_type()),
                   UpdateCall::prefix(metric), "preds has dtype ", preds.scalar_type(),
                   "; expected float32/float64/float16/bfloat16 scores or integer labels");
  TORCH_CHECK_VALUE(target.dim() >= 1, UpdateCall::prefix(metric),
                    "target must have a batch dimension, got a 0-dim tensor");
}

// A weight, where the metric takes one: a dense floating-point tensor.
void check_weight_type(const std::string& metric, const ClassificationOptions& o, const at::Tensor& weight) {
  // a TypeError, as an unexpected argument is (TorchMetrics' metrics take no weight)
  TORCH_CHECK_TYPE(o.weighted(), UpdateCall::prefix(metric),
                   "a weight was given (the third argument or weight=), but the ",
                   "metric counts without weights; build it with weighted=True (C++: .weighted(true))");
  check_dense(metric, "weight", weight);
  TORCH_CHECK_TYPE(is_input_floating(weight.scalar_type()), UpdateCall::prefix(metric), "weight has dtype ",
                   weight.scalar_type(), "; expected a floating-point tensor");
}

// The shape of the weights the task takes, checked: (N,) or the target's own shape.
void check_weight_shape(const std::string& metric, const at::Tensor& weight, const at::Tensor& target) {
  const bool per_sample = weight.dim() == 1 && weight.size(0) == target.size(0);
  METRICS_CHECK_SHAPE(per_sample || weight.sizes() == target.sizes(), UpdateCall::prefix(metric), "weight has shape ",
                      weight.sizes(), "; expected (N,) = [", target.size(0), "] or the target's shape ",
                      target.sizes());
}

// Weights keep their dtype: the ATen path's float64 arithmetic widens float32 and half-precision
// ones exactly, as it goes (the CPU path widens them first).
at::Tensor canonical_weight(const ClassificationOptions& o, const at::Tensor& weight, const at::Tensor& target) {
  if (weight.sizes() == target.sizes()) return o.task() == Task::Multilabel ? labels_then_rest(weight) : flat(weight);
  return weight;  // one per sample, (N,): each path spreads it over the sample's entries or rows
}

void check_shapes(const std::string& metric, const ClassificationOptions& o, const at::Tensor& preds,
                  const at::Tensor& target) {
  const auto k = o.num_classes();
  switch (o.task()) {
    case Task::Binary:
      METRICS_CHECK_SHAPE(preds.sizes() == target.sizes(), UpdateCall::prefix(metric), "preds has shape ",
                          preds.sizes(), " but target has ", target.sizes(), "; expected the same shape (N, ...)");
      return;
    case Task::Multilabel:
      METRICS_CHECK_SHAPE(preds.sizes() == target.sizes() && preds.dim() >= 2 && preds.size(1) == k,
                          UpdateCall::prefix(metric), "preds has shape ", preds.sizes(), " and target ", target.sizes(),
                          "; expected both (N, ", k, ", ...)");
      return;
    case Task::Multiclass:
      break;
  }
  // without num_classes, scores may have any number of classes C >= 1 (argmax needs one)
  const bool unknown = k == kUnknownClasses;
  const auto classes = unknown ? std::string("C") : std::to_string(k);
  if (preds.dim() == target.dim() + 1) {
    // a ValueError, as TorchMetrics raises
    TORCH_CHECK_VALUE(is_input_floating(preds.scalar_type()), UpdateCall::prefix(metric), "preds of shape ",
                      preds.sizes(), " must hold floating-point scores, got ", preds.scalar_type());
    const bool same_rest = preds.size(0) == target.size(0) && preds.sizes().slice(2) == target.sizes().slice(1);
    const bool classes_ok = unknown ? preds.size(1) >= 1 : preds.size(1) == k;
    METRICS_CHECK_SHAPE(classes_ok && same_rest, UpdateCall::prefix(metric), "preds has shape ", preds.sizes(),
                        " but target has ", target.sizes(), "; expected preds (N, ", classes, ", ...)",
                        unknown ? " with C >= 1" : "", " and target (N, ...)");
    return;
  }
  METRICS_CHECK_SHAPE(preds.sizes() == target.sizes(), UpdateCall::prefix(metric), "preds has shape ", preds.sizes(),
                      " but target has ", target.sizes(), "; expected preds (N, ", classes,
                      ", ...) scores or (N, ...) labels shaped like target");
  TORCH_CHECK_VALUE(o.top_k() == 1, UpdateCall::prefix(metric), "top_k = ", o.top_k(),
                    " needs scores (N, ", k, ", ...), but preds are labels");
}

// Samplewise counts a sample over its extra dimensions: TorchMetrics asks for them.
void check_samplewise(const std::string& metric, const ClassificationOptions& o, const at::Tensor& preds,
                      const at::Tensor& target) {
  if (!samplewise(o)) return;
  const bool with_classes = o.task() == Task::Multilabel || preds.dim() == target.dim() + 1;
  const auto needed = with_classes ? 3 : 2;
  TORCH_CHECK_VALUE(preds.dim() >= needed, UpdateCall::prefix(metric),
                    "multidim_average=samplewise needs preds of at least ", needed, " dimensions (",
                    with_classes ? "N, C, P, ..." : "N, P, ...", "), got shape ", preds.sizes());
}

}  // namespace

ClassificationBatch canonicalize(const std::string& metric, const ClassificationOptions& o, const at::Tensor& preds,
                                 const at::Tensor& target, const c10::optional<at::Tensor>& weight,
                                 at::Device state_device) {
  check_tensors(metric, preds, target, o.task() != Task::Multiclass);
  if (weight) check_weight_type(metric, o, *weight);
  const NamedInput inputs[] = {{"preds", &preds}, {"target", &target}, {"weight", weight ? &*weight : nullptr}};
  check_devices(metric, c10::ArrayRef<NamedInput>(inputs, weight ? 3 : 2), state_device);
  check_shapes(metric, o, preds, target);
  check_samplewise(metric, o, preds, target);
  if (weight) check_weight_shape(metric, *weight, target);

  ClassificationBatch batch;
  const bool multiclass_labels = o.task() == Task::Multiclass && preds.dim() == target.dim();
  batch.scores = is_input_floating(preds.scalar_type()) && !multiclass_labels;
  if (batch.scores) batch.score_dtype = preds.scalar_type();
  // scores keep their dtype, half-precision too: bucketize, max and the sort read them as they are
  // (binary and multilabel ones are thresholded in it; the CPU path widens them itself, counts.cpp)
  const auto p = batch.scores ? preds : labels_to_read(o, preds, kNotAPrediction);
  const auto t = labels_to_read(o, target, kNotATarget);
  if (o.task() == Task::Multilabel) {
    batch.preds = labels_then_rest(p);
    batch.target = labels_then_rest(t);
  } else {
    // multiclass scores keep their extra dimensions, classes last: a view (the ATen path reads them so)
    const bool multiclass_scores = o.task() == Task::Multiclass && !multiclass_labels;
    batch.preds = multiclass_scores ? (p.dim() == 2 ? p : p.movedim(1, -1)) : flat(p);
    batch.target = flat(t);
  }
  if (weight) batch.weight = canonical_weight(o, *weight, target);
  batch.samples = target.size(0);
  return batch;
}

}  // namespace detail
}  // namespace metrics
