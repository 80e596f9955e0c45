#include <metrics/functional/classification.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "kernels.h"
#include "unchecked_scores.h"

namespace metrics::functional {
namespace {

using detail::samplewise;

// The dtype that torch divides integers in, and TorchMetrics' floating values of integer counts take.
at::ScalarType default_dtype() { return c10::typeMetaToScalarType(c10::get_default_dtype()); }

// num / den in `dtype`, with zero_division where den == 0 (no scalar tensor: masked_fill takes a
// scalar). Integer counts are rounded into `dtype` and divided there, as TorchMetrics' _safe_divide
// divides them in float32 (past 2^24 they round); a float64 quotient is rounded once into it, as a
// cast after it would round it.
at::Tensor safe_divide(const at::Tensor& num, const at::Tensor& den, double zero_division, at::ScalarType dtype) {
  // (a division of integers takes the default dtype's steps: cast them where that is not `dtype`)
  const bool cast = !num.is_floating_point() && dtype != default_dtype();
  auto quotient = at::empty({0}, num.options().dtype(dtype));
  at::div_out(quotient, cast ? num.to(dtype) : num, cast ? den.to(dtype) : den);
  return quotient.masked_fill_(den == 0, zero_division);
}

// The counts: `all`, [4, ...], whose rows are tp, fp, tn and fn; integer ones in int64 (their sums
// exact, as TorchMetrics' are), weighted ones in float64.
struct Counts {
  at::Tensor all, tp, fp, tn, fn;
  bool integer;
};

// tp, fp, tn and fn as the rows of one tensor: a view where they lie one stride apart in one buffer
// (a state's packed entries), so that one op casts or scales them all; else stacked.
at::Tensor rows_of(const StatCounts& c) {
  const auto& tp = c.tp;
  const int64_t apart = c.fp.storage_offset() - tp.storage_offset();
  const auto row = [&](const at::Tensor& t, int64_t i) {
    return t.is_alias_of(tp) && t.scalar_type() == tp.scalar_type() && t.sizes() == tp.sizes() &&
           t.strides() == tp.strides() && t.storage_offset() == tp.storage_offset() + i * apart;
  };
  if (apart < 0 || !row(c.fp, 1) || !row(c.tn, 2) || !row(c.fn, 3)) return at::stack({c.tp, c.fp, c.tn, c.fn});
  at::DimVector sizes{4}, strides{apart};
  sizes.insert(sizes.end(), tp.sizes().begin(), tp.sizes().end());
  strides.insert(strides.end(), tp.strides().begin(), tp.strides().end());
  return tp.as_strided(sizes, strides);
}

// rows_of(c), integer ones in int64 (int32 ones' sums could overflow); a floating count among
// integer ones makes them all floating.
at::Tensor widened_rows_of(const StatCounts& c) {
  auto rows = rows_of(c);
  return rows.is_floating_point() ? rows : rows.to(at::kLong);
}

// Scores are ratios of counts, unchanged (bit for bit) when every count is scaled by one power of
// two. Weighted counts are scaled down only as far as keeps the scores' sums finite (of all counts,
// each times at most `coefficient`: 1 + beta^2 for F-beta), that is only near the float64 maximum:
// smaller ones, subnormal counts included, stay as they are (a scale to below 2 would turn 5e-324
// beside 3 into 0).
Counts counts_of(const StatCounts& c, double coefficient = 1.0) {
  auto all = widened_rows_of(c);
  const bool integer = !all.is_floating_point();
  if (!integer) all = all.to(at::kDouble);
  if (!integer && all.numel() > 0) {
    // a sum of 4 * numel counts times `coefficient`, each below 2^(floor(log2(largest)) + 1), is
    // below 2^(that + headroom)
    const auto terms = 4.0 * static_cast<double>(std::max<int64_t>(c.tp.numel(), 1));
    const double headroom = std::ceil(std::log2(terms * coefficient));
    const auto excess = all.amax().log2_().floor_().add_(1.0 + headroom - 1023.0).clamp_min_(0);
    all = all * at::pow(2.0, excess.neg_());  // 2^-k: exact (never in place: `all` may be the state)
  }
  return {all, all[0], all[1], all[2], all[3], integer};
}

bool binary(const ClassificationOptions& o) { return o.task() == Task::Binary; }
bool multilabel(const ClassificationOptions& o) { return o.task() == Task::Multilabel; }

// Refuses options no metric takes and counts the reductions cannot read, naming `function` and the
// count (metadata only: nothing is read back).
void check_counts(const char* function, const StatCounts& c, const ClassificationOptions& o) {
  const auto name = std::string("functional::") + function;
  detail::check_options(name, o);
  const std::pair<const char*, const at::Tensor*> counts[] = {{"tp", &c.tp}, {"fp", &c.fp}, {"tn", &c.tn}, {"fn", &c.fn}};
  for (const auto& [label, t] : counts) {
    TORCH_CHECK_VALUE(t->defined(), name, ": counts.", label, " is an undefined tensor");
    TORCH_CHECK_VALUE(t->sizes() == c.tp.sizes() && t->device() == c.tp.device(), name, ": counts.", label, " is ",
                      t->sizes(), " on ", t->device(), " but counts.tp is ", c.tp.sizes(), " on ", c.tp.device());
    TORCH_CHECK_VALUE(!t->requires_grad(), name, ": counts.", label,
                      " requires grad, and the reductions are not differentiable (detach it)");
  }
  const auto& t = c.tp;
  if (binary(o)) {
    TORCH_CHECK_VALUE(samplewise(o) || t.numel() == 1, name, ": a binary task's counts hold one value each, got ",
                      t.sizes());
    TORCH_CHECK_VALUE(!samplewise(o) || t.dim() == 1 || (t.dim() == 2 && t.size(1) == 1), name,
                      ": a binary task's samplewise counts are [samples] or [samples, 1], got ", t.sizes());
    return;
  }
  const bool known = o.num_classes() != kUnknownClasses;
  TORCH_CHECK_VALUE(t.dim() == 1 + samplewise(o) && (!known || t.size(-1) == o.num_classes()), name,
                    ": expected counts of shape ", samplewise(o) ? "[samples, " : "[",
                    known ? std::to_string(o.num_classes()) : std::string("classes"), "] (",
                    detail::sizing_option(o), "), got ", t.sizes());
}

// 1 for each class seen (a tp, fp or fn; top_k > 1: a tp or fn), else 0, shaped as `like`, in
// `dtype`: one compare writes them.
at::Tensor seen_classes(const Counts& c, int64_t top_k, const at::Tensor& like, at::ScalarType dtype) {
  auto seen = at::empty_like(like, dtype);
  at::ne_out(seen, top_k == 1 ? c.tp + c.fp + c.fn : c.tp + c.fn, 0);
  return seen;
}

// The dtype scores are averaged in: TorchMetrics' (`dtype`) for integer counts, so that an average
// is its value to the bit; float64 for weighted counts, which are ours alone.
at::ScalarType averaging_dtype(bool integer_counts, at::ScalarType dtype) {
  return integer_counts ? dtype : at::kDouble;
}

// Combines per-class scores as options.average says (TorchMetrics' _adjust_weights_safe_divide:
// each score times its weight over the weights' sum, then their sum); `score` in averaging_dtype.
at::Tensor average_scores(const at::Tensor& score, const Counts& c, const ClassificationOptions& o, int64_t top_k,
                          at::ScalarType dtype) {
  if (o.average() == Average::None || o.average() == Average::Micro) return score;  // (micro: the callers')
  const auto in = averaging_dtype(c.integer, dtype);
  at::Tensor weights, total;
  if (o.average() == Average::Weighted) {
    const auto support = c.tp + c.fn;
    // an exact sum, of integers rounded into float32 (as _safe_divide rounds them, whatever `dtype`)
    total = support.sum(-1, /*keepdim=*/true).to(averaging_dtype(c.integer, at::kFloat));
    weights = support.to(in);
  } else {
    weights = multilabel(o) ? at::ones_like(score, in) : seen_classes(c, top_k, score, in);
    total = weights.sum(-1, /*keepdim=*/true);  // (of ones and zeros, in `in`, as TorchMetrics sums them)
  }
  return safe_divide(weights * score, total.expand_as(score), 0.0, in).sum(-1);
}

// A binary score is a scalar, or one per sample; float32 as TorchMetrics' scores are, or `dtype`.
at::Tensor finish(const at::Tensor& score, const ClassificationOptions& o, at::ScalarType dtype = at::kFloat) {
  return (binary(o) ? score.reshape(samplewise(o) ? at::IntArrayRef{-1} : at::IntArrayRef{}) : score).to(dtype);
}

// tp / (tp + other): precision (other = fp) and recall (other = fn).
at::Tensor ratio_score(const StatCounts& counts, const ClassificationOptions& o, bool precision) {
  const auto c = counts_of(counts);
  const auto& other = precision ? c.fp : c.fn;
  if (binary(o)) return finish(safe_divide(c.tp, c.tp + other, o.zero_division(), at::kFloat), o);
  if (o.average() == Average::Micro) {
    const auto tp = c.tp.sum(-1);
    return finish(safe_divide(tp, tp + other.sum(-1), o.zero_division(), at::kFloat), o);
  }
  const auto score = safe_divide(c.tp, c.tp + other, o.zero_division(), averaging_dtype(c.integer, at::kFloat));
  return finish(average_scores(score, c, o, o.top_k(), at::kFloat), o);
}

}  // namespace

namespace unchecked {

at::Tensor accuracy(const StatCounts& counts, const ClassificationOptions& o) {
  const auto c = counts_of(counts);
  const bool of_all = binary(o) || multilabel(o);  // (tp + tn) / all; multiclass: tp / (tp + fn)
  const auto right = of_all ? c.tp + c.tn : c.tp;
  const auto total = of_all ? right + c.fp + c.fn : c.tp + c.fn;
  if (binary(o)) return finish(safe_divide(right, total, 0.0, at::kFloat), o);
  if (o.average() == Average::Micro) {
    return finish(safe_divide(right.sum(-1), total.sum(-1), 0.0, at::kFloat), o);
  }
  const auto score = safe_divide(right, total, 0.0, averaging_dtype(c.integer, at::kFloat));
  return finish(average_scores(score, c, o, o.top_k(), at::kFloat), o);
}

at::Tensor precision(const StatCounts& counts, const ClassificationOptions& o) {
  return ratio_score(counts, o, /*precision=*/true);
}

at::Tensor recall(const StatCounts& counts, const ClassificationOptions& o) {
  return ratio_score(counts, o, /*precision=*/false);
}

at::Tensor fbeta_score(const StatCounts& counts, double beta, const ClassificationOptions& o) {
  const double beta2 = beta * beta;
  // in the default dtype, as TorchMetrics' (1 + beta^2) * tp makes it of integer counts; integer
  // counts take its steps in it, so that a score is its value to the bit (float64 ones, ours, stay)
  const auto dtype = default_dtype();
  const auto c = counts_of(counts, 1 + beta2);
  const auto score = [&](const at::Tensor& all, at::ScalarType out) {  // of rows tp, fp, tn, fn
    const auto in = c.integer ? all.to(dtype) : all;
    const auto weighted_tp = (1 + beta2) * in[0];
    return safe_divide(weighted_tp, weighted_tp + beta2 * in[3] + in[1], o.zero_division(), out);
  };
  if (binary(o)) return finish(score(c.all, dtype), o, dtype);
  if (o.average() == Average::Micro) return finish(score(c.all.sum(-1), dtype), o, dtype);
  const auto averaged = score(c.all, averaging_dtype(c.integer, dtype));
  return finish(average_scores(averaged, c, o, /*top_k=*/1, dtype), o, dtype);
}

at::Tensor stat_scores(const StatCounts& c, const ClassificationOptions& o) {
  const auto rows = widened_rows_of(c);  // (int32 counts' support could overflow)
  // [C, 5], samplewise [S, C, 5]: tp, fp, tn, fn and the support
  const auto table = at::stack({rows[0], rows[1], rows[2], rows[3], rows[0] + rows[3]}, /*dim=*/-1);
  if (binary(o)) return samplewise(o) ? table.reshape({-1, 5}).squeeze() : table.reshape({5});  // as TorchMetrics
  switch (o.average()) {
    case Average::Micro:
      return table.sum(-2);
    case Average::Macro:
      return table.to(at::kFloat).mean(-2);
    case Average::Weighted: {
      // integer counts take TorchMetrics' steps in the default dtype (its int64 support over their
      // sum), to its bit; float64 ones are weighed in float64
      const auto dtype = default_dtype();
      const auto in = averaging_dtype(!rows.is_floating_point(), dtype);
      const auto support = table.select(-1, 4);
      const auto share = support.to(in) / support.sum(-1, true).to(in);
      return (table.to(in) * share.unsqueeze(-1)).sum(-2).to(dtype);
    }
    case Average::None:
      break;
  }
  return table;
}

}  // namespace unchecked

at::Tensor accuracy(const StatCounts& counts, const ClassificationOptions& o) {
  check_counts("accuracy", counts, o);
  return unchecked::accuracy(counts, o);
}

at::Tensor precision(const StatCounts& counts, const ClassificationOptions& o) {
  check_counts("precision", counts, o);
  return unchecked::precision(counts, o);
}

at::Tensor recall(const StatCounts& counts, const ClassificationOptions& o) {
  check_counts("recall", counts, o);
  return unchecked::recall(counts, o);
}

at::Tensor fbeta_score(const StatCounts& counts, double beta, const ClassificationOptions& o) {
  check_counts("fbeta_score", counts, o);
  detail::check_beta("functional::fbeta_score", beta);
  return unchecked::fbeta_score(counts, beta, o);
}

at::Tensor stat_scores(const StatCounts& counts, const ClassificationOptions& o) {
  check_counts("stat_scores", counts, o);
  return unchecked::stat_scores(counts, o);
}

at::Tensor normalize_confusion_matrix(const at::Tensor& confusion_matrix, Normalize normalize) {
  TORCH_CHECK_VALUE(confusion_matrix.defined(), "functional::normalize_confusion_matrix: the matrix is undefined");
  TORCH_CHECK_VALUE(confusion_matrix.dim() >= 2, "functional::normalize_confusion_matrix: expected a matrix (or a ",
                    "stack of them), got a tensor of shape ", confusion_matrix.sizes());
  if (normalize == Normalize::None) return confusion_matrix.clone();
  // integer counts in float32, summed there, as TorchMetrics normalizes them; weighted ones in float64
  const auto counts = confusion_matrix.to(confusion_matrix.is_floating_point() ? at::kDouble : at::kFloat);
  at::Tensor total;
  switch (normalize) {
    case Normalize::True:
      total = counts.sum(-1, /*keepdim=*/true);
      break;
    case Normalize::Pred:
      total = counts.sum(-2, /*keepdim=*/true);
      break;
    default:
      total = counts.sum({-2, -1}, /*keepdim=*/true);
  }
  return safe_divide(counts, total.expand_as(counts), 0.0, at::kFloat);
}

}  // namespace metrics::functional
