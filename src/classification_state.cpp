#include <metrics/classification_state.h>

#include <ATen/ATen.h>

#include <metrics/backend.h>

#include "classification_kernels.h"
#include "input_tally.h"

namespace metrics {
namespace {

using Layout = ClassificationState::Layout;

bool is_integral(at::ScalarType type) { return at::isIntegralType(type, /*includeBool=*/true); }

bool is_score_type(at::ScalarType type) {
  return type == at::kFloat || type == at::kDouble || type == at::kHalf || type == at::kBFloat16;
}

std::vector<std::string> bad_input_kinds(const ClassificationOptions& o) {
  if (o.task() == Task::Multiclass) {
    return {"targets outside [0, " + std::to_string(o.num_classes()) + ")", "NaN or out-of-range predictions",
            "NaN or negative weights"};
  }
  return {"targets not 0 or 1", "NaN or non-binary predictions", "NaN or negative weights"};
}

// Dtype changes and reshapes only where needed: each ATen call costs a dispatch even as a no-op.
at::Tensor as_long(const at::Tensor& t) { return t.scalar_type() == at::kLong ? t : t.to(at::kLong); }
at::Tensor flat(const at::Tensor& t) { return t.dim() == 1 ? t : t.reshape({-1}); }

// (N, K, ...) -> (N * ..., K): the class or label dimension last, every other one flattened.
at::Tensor classes_last(const at::Tensor& t, int64_t k) {
  return t.dim() == 2 ? t : t.movedim(1, -1).reshape({-1, k});
}

}  // namespace

namespace detail {
namespace {

void check_tensors(const std::string& metric, const at::Tensor& preds, const at::Tensor& target,
                   at::Device state_device) {
  TORCH_CHECK_TYPE(preds.defined() && target.defined(), metric, ".update: preds and target must be defined tensors");
  TORCH_CHECK_TYPE(is_integral(target.scalar_type()), metric, ".update: target has dtype ", target.scalar_type(),
                   "; expected an integer (or bool) tensor of class labels");
  TORCH_CHECK_TYPE(is_score_type(preds.scalar_type()) || is_integral(preds.scalar_type()), metric,
                   ".update: preds has dtype ", preds.scalar_type(),
                   "; expected float32/float64/float16/bfloat16 scores or integer labels");
  TORCH_CHECK_VALUE(preds.device() == state_device && target.device() == state_device, metric,
                    ".update: preds is on ", preds.device(), " and target on ", target.device(),
                    " but the metric's state is on ", state_device, "; move the metric with .to(device)");
  TORCH_CHECK_VALUE(target.dim() >= 1, metric, ".update: target must have a batch dimension, got a 0-dim tensor");
}

// The shape of the weights the task takes, checked: (N,) or the target's own shape.
void check_weight(const std::string& metric, const ClassificationOptions& o, const at::Tensor& weight,
                  const at::Tensor& target) {
  TORCH_CHECK_VALUE(o.weighted(), metric,
                    ".update: weight given, but the metric counts without weights; build it with weighted=true");
  TORCH_CHECK_TYPE(is_score_type(weight.scalar_type()), metric, ".update: weight has dtype ", weight.scalar_type(),
                   "; expected a floating-point tensor");
  TORCH_CHECK_VALUE(weight.device() == target.device(), metric, ".update: weight is on ", weight.device(),
                    " but target is on ", target.device());
  const bool per_sample = weight.dim() == 1 && weight.size(0) == target.size(0);
  TORCH_CHECK_VALUE(per_sample || weight.sizes() == target.sizes(), metric, ".update: weight has shape ",
                    weight.sizes(), "; expected (N,) = [", target.size(0), "] or the target's shape ", target.sizes());
}

at::Tensor canonical_weight(const ClassificationOptions& o, const at::Tensor& weight, const at::Tensor& target) {
  const auto w = weight.scalar_type() == at::kDouble ? weight : weight.to(at::kDouble);
  if (w.sizes() == target.sizes()) {
    return o.task() == Task::Multilabel ? classes_last(w, o.num_classes()) : flat(w);
  }
  // One weight per sample: repeat it over the extra dimensions (multilabel: per row of labels).
  auto shape = target.sizes().vec();
  if (o.task() == Task::Multilabel) shape.erase(shape.begin() + 1);
  std::vector<int64_t> view(shape.size(), 1);
  view[0] = w.size(0);
  return w.view(view).expand(shape).reshape({-1});
}

void check_shapes(const std::string& metric, const ClassificationOptions& o, const at::Tensor& preds,
                  const at::Tensor& target) {
  const auto k = o.num_classes();
  switch (o.task()) {
    case Task::Binary:
      TORCH_CHECK_VALUE(preds.sizes() == target.sizes(), metric, ".update: preds has shape ", preds.sizes(),
                        " but target has ", target.sizes(), "; expected the same shape (N, ...)");
      return;
    case Task::Multilabel:
      TORCH_CHECK_VALUE(preds.sizes() == target.sizes() && preds.dim() >= 2 && preds.size(1) == k, metric,
                        ".update: preds has shape ", preds.sizes(), " and target ", target.sizes(),
                        "; expected both (N, ", k, ", ...)");
      return;
    case Task::Multiclass:
      break;
  }
  if (preds.dim() == target.dim() + 1) {
    TORCH_CHECK_TYPE(is_score_type(preds.scalar_type()), metric, ".update: preds of shape ", preds.sizes(),
                     " must hold floating-point scores, got ", preds.scalar_type());
    const bool same_rest = preds.size(0) == target.size(0) && preds.sizes().slice(2) == target.sizes().slice(1);
    TORCH_CHECK_VALUE(preds.size(1) == k && same_rest, metric, ".update: preds has shape ", preds.sizes(),
                      " but target has ", target.sizes(), "; expected preds (N, ", k, ", ...) and target (N, ...)");
    return;
  }
  TORCH_CHECK_VALUE(preds.sizes() == target.sizes(), metric, ".update: preds has shape ", preds.sizes(),
                    " but target has ", target.sizes(), "; expected preds (N, ", k,
                    ", ...) scores or (N, ...) labels shaped like target");
  TORCH_CHECK_TYPE(is_integral(preds.scalar_type()), metric, ".update: preds shaped like target are labels and ",
                   "must be integers, got ", preds.scalar_type(), "; scores need a class dimension (N, ", k, ", ...)");
  TORCH_CHECK_VALUE(o.top_k() == 1, metric, ".update: top_k = ", o.top_k(),
                    " needs scores (N, ", k, ", ...), but preds are labels");
}

}  // namespace

ClassificationBatch canonicalize(const std::string& metric, const ClassificationOptions& o, const at::Tensor& preds,
                                 const at::Tensor& target, const c10::optional<at::Tensor>& weight,
                                 at::Device state_device) {
  check_tensors(metric, preds, target, state_device);
  check_shapes(metric, o, preds, target);
  if (weight) check_weight(metric, o, *weight, target);

  ClassificationBatch batch;
  batch.scores = is_score_type(preds.scalar_type());
  auto p = preds;
  if (batch.scores && (p.scalar_type() == at::kHalf || p.scalar_type() == at::kBFloat16)) p = p.to(at::kFloat);
  if (!batch.scores) p = as_long(p);
  const bool multiclass_scores = o.task() == Task::Multiclass && preds.dim() == target.dim() + 1;
  if (o.task() == Task::Multilabel) {
    batch.preds = classes_last(p, o.num_classes());
    batch.target = classes_last(as_long(target), o.num_classes());
  } else {
    batch.preds = multiclass_scores ? classes_last(p, o.num_classes()) : flat(p);
    batch.target = flat(as_long(target));
  }
  if (weight) batch.weight = canonical_weight(o, *weight, target);
  return batch;
}

}  // namespace detail

ClassificationState::ClassificationState(const ClassificationOptions& options, Layout layout)
    : options_(options), layout_(layout) {
  const auto dtype = options.weighted() ? at::kDouble : at::kLong;
  const auto classes = options.num_classes();
  const auto device = options.device();
  if (layout == Layout::Matrix) {
    TORCH_INTERNAL_ASSERT(options.task() == Task::Multiclass);
    state_.add("confmat", {classes, classes}, dtype, 0, Reduction::Sum, device);
  } else {
    for (const char* name : {"tp", "fp", "tn", "fn"}) state_.add(name, {classes}, dtype, 0, Reduction::Sum, device);
  }
  if (options.validate_args()) state_.track_bad_input(bad_input_kinds(options), device);
}

void ClassificationState::update(const std::string& metric, const at::Tensor& preds, const at::Tensor& target,
                                 const c10::optional<at::Tensor>& weight) {
  const auto batch = detail::canonicalize(metric, options_, preds, target, weight, state_.device());
  const auto index = state_.begin_update();
  detail::CountSink sink;
  sink.layout = layout_;
  if (layout_ == Layout::Matrix) {
    sink.matrix = state_[0];
  } else {
    sink.tp = state_[0];
    sink.fp = state_[1];
    sink.tn = state_[2];
    sink.fn = state_[3];
  }
  if (cpu_fast_path_enabled() && batch.target.is_cpu()) {
    auto contiguous = batch;
    contiguous.preds = batch.preds.contiguous();
    contiguous.target = batch.target.contiguous();
    if (batch.weight) contiguous.weight = batch.weight->contiguous();
    const auto bad = detail::cpu::count(contiguous, options_, sink);
    if (options_.validate_args()) detail::tally_on_host(state_, {bad.targets, bad.predictions, bad.weights}, index);
    return;
  }
  const auto bad = detail::count_on_aten(batch, options_, sink);
  if (options_.validate_args()) detail::tally_on_device(state_, bad, index);
}

StatCounts ClassificationState::stat_counts() const {
  if (layout_ == Layout::PerClass) return {state_[0], state_[1], state_[2], state_[3]};
  const auto& matrix = state_[0];
  const auto tp = matrix.diagonal();
  const auto fp = matrix.sum(0) - tp;
  const auto fn = matrix.sum(1) - tp;
  const auto tn = matrix.sum() - tp - fp - fn;
  return {tp, fp, tn, fn};
}

at::Tensor ClassificationState::confusion_matrix() const {
  if (layout_ == Layout::Matrix) return state_[0].clone();
  TORCH_INTERNAL_ASSERT(options_.task() != Task::Multiclass, "a multiclass confusion matrix needs the Matrix layout");
  const auto c = stat_counts();
  // [L, 2, 2]: [[tn, fp], [fn, tp]] per label
  const auto matrix = at::stack({c.tn, c.fp, c.fn, c.tp}, -1).reshape({-1, 2, 2});
  return options_.task() == Task::Binary ? matrix.reshape({2, 2}) : matrix;
}

}  // namespace metrics
