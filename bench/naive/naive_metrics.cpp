#include "naive_metrics.h"

#include <ATen/ATen.h>

#include <limits>

namespace naive {

Aggregator::Aggregator(Kind kind) : kind_(kind) {
  const double initial = kind == Kind::Min   ? std::numeric_limits<double>::infinity()
                         : kind == Kind::Max ? -std::numeric_limits<double>::infinity()
                                             : 0.0;
  value_ = at::full({}, initial, at::kFloat);
  weight_ = at::zeros({}, at::kFloat);
}

void Aggregator::update(const at::Tensor& value_in, double weight_in) {
  auto value = value_in.to(at::kFloat);
  auto weight = at::scalar_tensor(weight_in, value.options());  // a new tensor from a host double
  weight = weight.expand_as(value);
  const auto nans = at::isnan(value);
  const auto nans_weight = at::isnan(weight);
  if (nans.any().item<bool>() || nans_weight.any().item<bool>()) {  // "warn": branch on the host, then drop
    const auto keep = (nans | nans_weight).logical_not();
    value = value.index({keep});
    weight = weight.index({keep});
  }
  if (value.numel() == 0) return;
  switch (kind_) {
    case Kind::Mean:
      value_ += (value * weight).sum();
      weight_ += weight.sum();
      break;
    case Kind::Sum:
      value_ += value.sum();
      break;
    case Kind::Min:
      value_ = at::minimum(value_, value.min());
      break;
    case Kind::Max:
      value_ = at::maximum(value_, value.max());
      break;
  }
}

at::Tensor Aggregator::compute() const { return kind_ == Kind::Mean ? value_ / weight_ : value_; }

StatScores::StatScores(const metrics::ClassificationOptions& options) : options_(options) {
  const auto k = options.num_classes();
  if (options.task() == metrics::Task::Multiclass) {
    confmat_ = at::zeros({k, k}, at::kLong);
  } else {
    tp_ = at::zeros({k}, at::kLong);
    fp_ = at::zeros({k}, at::kLong);
    tn_ = at::zeros({k}, at::kLong);
    fn_ = at::zeros({k}, at::kLong);
  }
}

void StatScores::update(const at::Tensor& preds, const at::Tensor& target) {
  options_.task() == metrics::Task::Multiclass ? update_multiclass(preds, target) : update_entries(preds, target);
}

void StatScores::update_multiclass(at::Tensor preds, at::Tensor target) {
  const auto k = options_.num_classes();
  // _multiclass_stat_scores_tensor_validation: the number of unique targets, read back
  const auto allowed = options_.ignore_index() ? k + 1 : k;
  TORCH_CHECK(std::get<0>(at::_unique2(target)).size(0) <= allowed, "more unique values in target than classes");
  if (preds.dim() == target.dim() + 1) preds = preds.argmax(1);
  preds = preds.reshape({-1});
  target = target.reshape({-1});
  if (options_.ignore_index()) {  // boolean indexing
    const auto keep = target != *options_.ignore_index();
    preds = preds.index({keep});
    target = target.index({keep});
  }
  const auto bins = at::bincount(target * k + preds, {}, k * k);
  confmat_ += bins.reshape({k, k});
}

void StatScores::update_entries(at::Tensor preds, at::Tensor target) {
  // _binary_stat_scores_tensor_validation: unique targets, checked with a host branch
  const auto values = std::get<0>(at::_unique2(target));
  auto unexpected = (values != 0) & (values != 1);
  if (options_.ignore_index()) unexpected &= values != *options_.ignore_index();
  TORCH_CHECK(!unexpected.any().item<bool>(), "target has values other than 0 and 1");
  if (preds.is_floating_point()) {
    // normalize_logits_if_needed on the CPU: a host branch on all(0 <= p <= 1)
    if (!((preds >= 0) * (preds <= 1)).all().item<bool>()) preds = preds.sigmoid();
    preds = preds > options_.threshold();
  }
  const auto labels = options_.task() == metrics::Task::Binary ? 1 : options_.num_classes();
  preds = preds.reshape({-1, labels}).to(at::kLong);
  target = target.reshape({-1, labels});
  if (options_.ignore_index()) {  // target[idx] = -1: an index_put with a boolean mask
    target = target.clone();
    target.index_put_({target == *options_.ignore_index()}, -1);
  }
  tp_ += ((target == preds) & (target == 1)).sum(0);
  fn_ += ((target != preds) & (target == 1)).sum(0);
  fp_ += ((target != preds) & (target == 0)).sum(0);
  tn_ += ((target == preds) & (target == 0)).sum(0);
}

metrics::StatCounts StatScores::counts() const {
  if (options_.task() != metrics::Task::Multiclass) return {tp_, fp_, tn_, fn_};
  const auto tp = confmat_.diagonal();
  const auto fp = confmat_.sum(0) - tp;
  const auto fn = confmat_.sum(1) - tp;
  return {tp, fp, confmat_.sum() - tp - fp - fn, fn};
}

}  // namespace naive
