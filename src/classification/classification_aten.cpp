// ATen path of the classification update, for every device and layout: fixed-size scatters
// (index_add_) instead of bincount, masks through weights instead of boolean indexing, nothing
// read back.

#include <ATen/ATen.h>

#include <cmath>
#include <limits>

#include "kernels.h"
#include "../aten_masks.h"

namespace metrics::detail {
namespace {

using Layout = CountLayout;

at::Tensor not_ignored(const at::Tensor& target, const ClassificationOptions& o) {
  return o.ignore_index() ? target.ne(*o.ignore_index()) : at::ones_like(target, at::kBool);
}

// The weight of each kept entry (0 for the others), in the counts' dtype.
at::Tensor kept_weight(const ClassificationBatch& b, const at::Tensor& keep, const ClassificationOptions& o) {
  if (!b.weight) return keep.to(o.weighted() ? at::kDouble : at::kLong);
  return b.weight->expand_as(keep).masked_fill(keep.bitwise_not(), 0.0);
}

at::Tensor weight_ok(const ClassificationBatch& b, const at::Tensor& shape_like) {
  if (!b.weight) return at::ones_like(shape_like, at::kBool);
  // false for NaN, negative and infinite weights
  return b.weight->ge(0).bitwise_and_(b.weight->le(std::numeric_limits<double>::max())).expand_as(shape_like);
}

at::Tensor bad_counts(const at::Tensor& valid, const at::Tensor& target_ok, const at::Tensor& pred_ok,
                      const at::Tensor& w_ok) {
  const auto bad = [&](const at::Tensor& ok) { return valid.bitwise_and(ok.bitwise_not()).sum(); };
  return bad_counts_tensor(bad(target_ok), bad(pred_ok), bad(w_ok));
}

at::Tensor count_multiclass(const ClassificationBatch& b, const ClassificationOptions& o, CountSink& sink) {
  const int64_t classes = o.num_classes();
  const auto& t = b.target;
  const auto valid = not_ignored(t, o);
  const auto target_ok = t.ge(0).bitwise_and_(t.lt(classes));
  const auto tc = t.clamp(0, classes - 1);
  at::Tensor p, pred_ok;
  if (b.scores) {
    pred_ok = nan_mask(b.preds).any(1).bitwise_not_();
    p = b.preds.argmax(1);
    if (o.top_k() > 1) {
      const auto xt = b.preds.gather(1, tc.unsqueeze(1));
      const auto before = at::arange(classes, t.options()).unsqueeze(0).lt(tc.unsqueeze(1));
      const auto ahead = b.preds.gt(xt).sum(1).add_(b.preds.eq(xt).bitwise_and_(before).sum(1));
      p = select(ahead.lt(o.top_k()).bitwise_and_(target_ok), tc, p);
    }
  } else {
    pred_ok = b.preds.ge(0).bitwise_and_(b.preds.lt(classes));
    p = b.preds.clamp(0, classes - 1);
  }
  const auto w_ok = weight_ok(b, t);
  const auto keep = valid.bitwise_and(target_ok).bitwise_and_(pred_ok).bitwise_and_(w_ok);
  const auto w = kept_weight(b, keep, o);
  auto bad = bad_counts(valid, target_ok, pred_ok, w_ok);
  if (sink.layout == Layout::Matrix) {
    sink.matrix.view({-1}).index_add_(0, tc * classes + p, w);
  } else {
    // Everything is computed before the first write into the state, so a failure leaves it as it was.
    const auto wrong = w * p.ne(tc);
    const auto right = w - wrong;
    const auto involved = at::zeros_like(sink.tn).index_add_(0, tc, w).index_add_(0, p, wrong);
    const auto negatives = w.sum() - involved;
    sink.tp.index_add_(0, tc, right);
    sink.fn.index_add_(0, tc, wrong);
    sink.fp.index_add_(0, p, wrong);
    sink.tn.add_(negatives);
  }
  return bad;
}

// Binary (M,) and multilabel (M, L) entries, each a binary prediction of its label.
at::Tensor count_entries(const ClassificationBatch& b, const ClassificationOptions& o, CountSink& sink) {
  const auto& t = b.target;
  const auto& x = b.preds;
  const auto valid = not_ignored(t, o);
  const auto target_ok = t.eq(0).bitwise_or_(t.eq(1));
  at::Tensor pred, pred_ok;
  if (b.scores) {
    pred_ok = nan_mask(x).bitwise_not_();
    const auto logits = x.lt(0).bitwise_or_(x.gt(1)).any();
    const double logit_threshold = std::log(o.threshold() / (1.0 - o.threshold()));
    pred = select(logits, x.gt(logit_threshold), x.gt(o.threshold()));
  } else {
    pred_ok = x.eq(0).bitwise_or_(x.eq(1));
    pred = x.eq(1);
  }
  const auto per_row = b.weight && b.weight->dim() < t.dim();
  ClassificationBatch shaped = b;
  if (per_row) shaped.weight = b.weight->unsqueeze(1);
  const auto w_ok = weight_ok(shaped, t);
  const auto keep = valid.bitwise_and(target_ok).bitwise_and_(pred_ok).bitwise_and_(w_ok);
  const auto w = kept_weight(shaped, keep, o);
  const auto positive = t.eq(1);
  const auto cell = [&](const at::Tensor& is_target, const at::Tensor& is_pred) {
    return w.mul(is_target.bitwise_and(is_pred)).sum(0);
  };
  const auto negative = positive.bitwise_not();
  const auto predicted_negative = pred.bitwise_not();
  const auto tp = cell(positive, pred), fp = cell(negative, pred);
  const auto fn = cell(positive, predicted_negative), tn = cell(negative, predicted_negative);
  auto bad = bad_counts(valid, target_ok, pred_ok, w_ok);
  sink.tp.add_(tp);
  sink.fp.add_(fp);
  sink.fn.add_(fn);
  sink.tn.add_(tn);
  return bad;
}

}  // namespace

at::Tensor count_on_aten(const ClassificationBatch& batch, const ClassificationOptions& options, CountSink& sink) {
  return options.task() == Task::Multiclass ? count_multiclass(batch, options, sink)
                                            : count_entries(batch, options, sink);
}

}  // namespace metrics::detail
