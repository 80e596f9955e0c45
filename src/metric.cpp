#include <metrics/metric.h>

#include <ATen/record_function.h>
#include <c10/util/Exception.h>

#include <typeinfo>

namespace metrics {

Metric::Metric(std::string name, BadInputAction action, MetricState state)
    : name_(std::move(name)),
      update_scope_("metrics::" + name_ + "::update"),
      compute_scope_("metrics::" + name_ + "::compute"),
      action_(action),
      state_(std::make_shared<MetricState>(std::move(state))) {}

Metric::Metric(const Metric& other)
    : name_(other.name_),
      update_scope_(other.update_scope_),
      compute_scope_(other.compute_scope_),
      action_(other.action_),
      state_(std::make_shared<MetricState>(*other.state_)) {}

void Metric::update(const UpdateArgs& args) {
  RECORD_USER_SCOPE(update_scope_.c_str());
  prepare_update(args)();
}

at::Tensor Metric::forward(const UpdateArgs& args) {
  const auto batch = clone();
  batch->reset();
  batch->update(args);
  merge(*batch, MergeOrder::Appended);
  return batch->value();
}

std::vector<const ValueArg*> Metric::bind(const UpdateArgs& args) const {
  const auto& names = update_parameters();
  TORCH_CHECK_TYPE(args.positional.size() <= names.size(), name_, ".update: takes at most ", names.size(),
                   " arguments, got ", args.positional.size());
  std::vector<const ValueArg*> bound(names.size(), nullptr);
  for (size_t i = 0; i < args.positional.size(); ++i) bound[i] = &args.positional[i];
  for (const auto& [keyword, value] : args.keywords) {
    const auto it = std::find(names.begin(), names.end(), keyword);
    if (it == names.end() && args.skip_unknown_keywords) continue;
    TORCH_CHECK_TYPE(it != names.end(), name_, ".update: unexpected argument '", keyword, "'");
    auto& slot = bound[it - names.begin()];
    TORCH_CHECK_TYPE(slot == nullptr, name_, ".update: argument '", keyword, "' given twice");
    slot = &value;
  }
  return bound;
}

at::Tensor Metric::compute() const {
  RECORD_USER_SCOPE(compute_scope_.c_str());
  if (update_count() == 0) {
    TORCH_WARN(name_, ".compute: called before any update; the value reflects the initial state");
  }
  check();
  return value();
}

void Metric::check() const {
  if (!state_->tracks_bad_input()) return;
  const auto report = state_->bad_input_report();
  if (report.clean()) return;
  const auto message = report.message(name_);
  switch (action_) {
    case BadInputAction::Warn:
      TORCH_WARN(message);
      break;
    case BadInputAction::RaiseRuntimeError:
      TORCH_CHECK(false, message);
    case BadInputAction::RaiseValueError:
      TORCH_CHECK_VALUE(false, message);
  }
}

BadInputReport Metric::bad_input_report() const { return state_->bad_input_report(); }

void Metric::reset() { state_->reset(); }

void Metric::merge(const Metric& other, MergeOrder order) {
  TORCH_CHECK_TYPE(typeid(*this) == typeid(other) && name_ == other.name_, name_, ".merge: cannot merge a ",
                   other.name_, " into a ", name_);
  state_->merge(*other.state_, name_, order);
}

StateDict Metric::state_dict() const { return state_->state_dict(); }

void Metric::load_state_dict(const StateDict& dict) { state_->load_state_dict(dict, name_); }

void Metric::to(at::Device device) { state_->to(device); }

void Metric::share_state_of(const Metric& other) {
  const auto mine = sharing_key();
  const auto theirs = other.sharing_key();
  TORCH_CHECK_VALUE(!mine.counts.empty() && mine.counts == theirs.counts && theirs.level >= mine.level &&
                        device() == other.device(),
                    name_, ": cannot share the state of ", other.name_, ", which counts other things");
  state_ = other.state_;
}

}  // namespace metrics
