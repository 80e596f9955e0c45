// The base class: everything every metric offers (compute, reset, merge, state, device, copy).

#include "common.h"

#include <metrics/metric.h>
#include <metrics/report_context.h>
#include <metrics/update_call.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <thread>

namespace metrics::python {
namespace {

bool holds_rows(const Metric& metric) {
  const auto& entries = metric.state().entry_layout();
  return std::any_of(entries.begin(), entries.end(), [](const StateEntry& e) { return e.reduction == Reduction::Cat; });
}

// TorchMetrics' merge_state puts the incoming rows (a samplewise metric's) before the metric's own.
void merge_one(Metric& self, const py::handle& incoming) {
  std::unique_ptr<Metric> loaded;
  if (py::isinstance<py::dict>(incoming)) {
    loaded = self.clone();
    const auto refused = [&](const c10::Error& e) {
      return c10::str(self.name(), ".merge_state: the state dict given is not one that state_dict() makes for this ",
                      "metric: ", e.what_without_backtrace());
    };
    try {
      loaded->load_state_dict(state_from_python(incoming.cast<py::dict>(), self.name()));
    } catch (const c10::ValueError& e) {
      TORCH_CHECK_VALUE(false, refused(e));
    } catch (const c10::TypeError& e) {
      TORCH_CHECK_TYPE(false, refused(e));
    }
  }
  const auto& other = loaded ? *loaded : incoming.cast<const Metric&>();
  if (!holds_rows(self)) return self.merge(other);
  auto merged = self.clone();
  merged->merge(other);  // the checks, as this metric makes them
  merged = other.clone();
  merged->merge(self);
  self.load_state_dict(merged->state_dict());
}

// TorchMetrics' merge_state takes a metric or a state dict; a list of them is merged in turn, into
// a copy first, so that one bad item leaves this metric as it was.
void merge_state(Metric& self, const py::handle& incoming) {
  if (!py::isinstance<py::list>(incoming) && !py::isinstance<py::tuple>(incoming)) return merge_one(self, incoming);
  auto merged = self.clone();
  for (const auto& item : incoming) merge_one(*merged, item);
  self.load_state_dict(merged->state_dict());
}

void update(Metric& self, const py::args& args, const py::kwargs& kwargs) {
  const PythonUpdateArgs converted(args, kwargs, self.name(), self.device(), self.update_parameters());
  py::gil_scoped_release release;
  self.update(converted.get());
}

// update()'s checks (and the conversions of the inputs they make), counting nothing.
void check_update(Metric& self, const py::args& args, const py::kwargs& kwargs) {
  const PythonUpdateArgs converted(args, kwargs, self.name(), self.device(), self.update_parameters());
  self.prepare_update(converted.get());
}

at::Tensor forward(Metric& self, const py::args& args, const py::kwargs& kwargs) {
  const UpdateCall forwarding("forward");  // (the conversions' refusals too)
  const PythonUpdateArgs converted(args, kwargs, self.name(), self.device(), self.update_parameters());
  return self.forward(converted.get());
}

// A ReportContext that a Python with-statement holds: entered and left once, on one thread, the
// scopes entered after it left before it (else a prefix would stay in force).
class ReportContextScope {
 public:
  explicit ReportContextScope(std::string prefix) : prefix_(std::move(prefix)) {}
  void enter() {
    TORCH_CHECK(!context_, "_ReportContext: entered twice");
    context_.emplace(prefix_);
    in_force_ = ReportContext::current();
    thread_ = std::this_thread::get_id();
  }
  void exit(const py::args&) {
    TORCH_CHECK(context_, "_ReportContext: left without being entered");
    TORCH_CHECK(thread_ == std::this_thread::get_id() && ReportContext::current() == in_force_,
                "_ReportContext: left on another thread, or before a context entered after it");
    context_.reset();
  }

 private:
  std::string prefix_, in_force_;
  std::thread::id thread_;
  std::optional<ReportContext> context_;
};

}  // namespace

// Each method's docstring opens with its text signature, "name(parameters)\n--\n\n", the form
// CPython's own builtins use: it becomes __text_signature__, so inspect.signature() and help() show
// the parameters. pybind11's own signature line ("name(self: nosync_metrics._C.Metric) -> ...") is
// turned off for these methods, as CPython reads the text signature only at the docstring's start.
// "self" is spelled plainly, not "$self": pybind11's functions carry a capsule as __self__, which
// inspect would take for a bound object and drop the first parameter.
void init_metric(py::module_& m) {
  py::options options;
  options.disable_function_signatures();
  py::class_<Metric, std::shared_ptr<Metric>> metric(m, "Metric", "Base of every nosync-metrics metric.");
  refuse_new_metrics(metric, "Metric");
  metric
      .def("update", &update,
           "update(self, *args, **kwargs)\n--\n\n"
           "Accumulates a batch: (value, weight=1.0) for aggregators, (preds, target, weight=None) for "
           "classification. Never synchronizes.")
      .def("_check_update", &check_update)
      .def("_shares_state", &Metric::shares_state)
      .def("forward", &forward,
           "forward(self, *args, **kwargs)\n--\n\nAccumulates, and returns the value of this batch alone.")
      .def("__call__", &forward, "__call__(self, *args, **kwargs)\n--\n\nforward()")
      .def("compute", [](const Metric& self) { return with_python_warnings([&] { return self.compute(); }); },
           "compute(self)\n--\n\n"
           "The value over every update since the last reset, on the metric's device. Raises or warns "
           "first if update() counted bad input (NaN values, labels out of range), as the metric's policy says.")
      .def("_compute_without_report", &Metric::compute_without_report)
      .def("check", [](const Metric& self) { with_python_warnings([&] { self.check(); }); },
           "check(self)\n--\n\nRaises or warns if update() counted bad input since the last reset.")
      .def("bad_input", [](const Metric& self) {
             const auto report = self.bad_input_report();
             py::dict counts;
             for (const auto& [kind, count] : report.counts) counts[py::str(kind)] = count;
             py::dict out;
             out["counts"] = counts;
             out["updates"] = report.bad_updates;
             out["first_update"] = report.first_bad_update;
             return out;
           },
           "bad_input(self)\n--\n\n"
           "What update() kept out of the state: counts by kind, the number of updates with bad input, and "
           "the index of the first one (-1 if none). Reads the small tally back to the host.")
      .def("reset", &Metric::reset, "reset(self)\n--\n\nRestores the state the metric was made with.")
      .def("lock_updates", &Metric::lock_updates, py::arg("on"),
           "lock_updates(self, on)\n--\n\n"
           "Whether update() takes the state's lock, so that updates from several threads all count. "
           "nosync_metrics turns it on for every metric it makes.")
      .def("_merge_appended", [](Metric& self, const Metric& batch) { self.merge(batch, MergeOrder::Appended); },
           "_merge_appended(self, batch)\n--\n\n"
           "Folds in `batch` as the updates that follow this metric's (what forward() does).")
      .def("merge_state", &merge_state, py::arg("incoming_state"),
           "merge_state(self, incoming_state)\n--\n\n"
           "Folds in another metric of the same kind and options, a state dict, or a list of them.")
      .def("state_dict", [](const Metric& self) { return state_to_python(self.state_dict()); },
           "state_dict(self)\n--\n\nname -> tensor: a copy of every state tensor and the metric's description.")
      .def("load_state_dict",
           [](Metric& self, const py::dict& dict) { self.load_state_dict(state_from_python(dict, self.name())); },
           py::arg("state_dict"),
           "load_state_dict(self, state_dict)\n--\n\nLoads a dict from state_dict(), checking every key before "
           "changing any.")
      .def("to", [](py::object self, const py::object& device) {
             self.cast<Metric&>().to(to_device(device));
             return self;
           },
           py::arg("device"), "to(self, device)\n--\n\nMoves the state to `device`; returns the metric.")
      .def("_swap_state", &Metric::swap_state, py::arg("other"),
           "_swap_state(self, other)\n--\n\nExchanges the states of two metrics of the same kind and options.")
      .def("clone", [](const Metric& self) { return std::shared_ptr<Metric>(self.clone()); },
           "clone(self)\n--\n\nA deep copy.")
      .def("_clone_alone", [](const Metric& self) { return std::shared_ptr<Metric>(self.clone_alone()); },
           "_clone_alone(self)\n--\n\nA copy in the metric's own layout (clone() keeps a shared one's).")
      .def("__copy__", [](const Metric& self) { return std::shared_ptr<Metric>(self.clone()); },
           "__copy__(self)\n--\n\nA deep copy: a metric's copy never shares its state.")
      .def("__deepcopy__", [](const Metric& self, const py::dict&) { return std::shared_ptr<Metric>(self.clone()); },
           py::arg("memo"), "__deepcopy__(self, memo)\n--\n\nA deep copy.")
      .def_property_readonly("device", &Metric::device, "The device of the state.")
      .def_property_readonly("update_count", &Metric::update_count,
                             "Updates since the metric was made or last reset (read back from the metric's device).")
      .def_property_readonly("metric_name", &Metric::name, "The name used in messages, e.g. 'MulticlassAccuracy'.");
  py::class_<ReportContextScope>(m, "_ReportContext",
                          "with _ReportContext(prefix): the bad-input reports of this thread's metrics say `prefix` "
                          "after any outer context's (metrics::ReportContext).")
      .def(py::init<std::string>(), py::arg("prefix"))
      .def("__enter__", &ReportContextScope::enter)
      .def("__exit__", &ReportContextScope::exit);
  m.def(
      "_in_forward",
      [](const py::function& call) {
        const UpdateCall forwarding("forward");
        return call();
      },
      py::arg("call"),
      "_in_forward(call)\n--\n\nCalls call(): the refusals of the updates it makes name forward() "
      "(metrics::UpdateCall).");
}

}  // namespace metrics::python
