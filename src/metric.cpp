#include <metrics/metric.h>

#include <ATen/record_function.h>
#include <c10/util/Exception.h>

#include <typeinfo>

namespace metrics {

Metric::Metric(std::string name, BadInputAction action)
    : name_(std::move(name)),
      update_scope_("metrics::" + name_ + "::update"),
      compute_scope_("metrics::" + name_ + "::compute"),
      action_(action) {}

at::Tensor Metric::compute() const {
  RECORD_USER_SCOPE(compute_scope_.c_str());
  if (update_count() == 0) {
    TORCH_WARN(name_, ".compute: called before any update; the value reflects the initial state");
  }
  check();
  return value();
}

void Metric::check() const {
  if (!state().tracks_bad_input()) return;
  const auto report = state().report();
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

InputReport Metric::input_report() const { return state().report(); }

void Metric::reset() { state().reset(); }

void Metric::merge(const Metric& other) {
  TORCH_CHECK_TYPE(typeid(*this) == typeid(other) && name_ == other.name_, name_, ".merge: cannot merge a ",
                   other.name_, " into a ", name_);
  state().merge(other.state(), name_);
}

StateDict Metric::state_dict() const { return state().state_dict(); }

void Metric::load_state_dict(const StateDict& dict) { state().load_state_dict(dict, name_); }

void Metric::to(at::Device device) { state().to(device); }

at::Device Metric::device() const { return state().device(); }

int64_t Metric::update_count() const { return state().updates(); }

}  // namespace metrics
