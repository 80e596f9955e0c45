// The sync counter under nosync_metrics.count_syncs: a SyncCounter whose lifetime a Python
// with-statement controls, and the host reads that count_syncs wraps Tensor methods with.

#include "common.h"

#include <metrics/sync_counter.h>

namespace metrics::python {
namespace {

class SyncScope {
 public:
  explicit SyncScope(const SyncCounterOptions& options) : counter_(std::make_unique<SyncCounter>(options)) {}

  /// Ends counting (on the thread that started it) and keeps the figures.
  void close() {
    if (!counter_) return;
    total_ = counter_->total();
    by_op_ = counter_->by_op();
    cuda_syncs_ = counter_->cuda_syncs();
    counter_.reset();
  }
  int64_t total() const { return counter_ ? counter_->total() : total_; }
  std::map<std::string, int64_t> by_op() const { return counter_ ? counter_->by_op() : by_op_; }
  int64_t cuda_syncs() const { return counter_ ? counter_->cuda_syncs() : cuda_syncs_; }

 private:
  std::unique_ptr<SyncCounter> counter_;
  int64_t total_ = 0;
  int64_t cuda_syncs_ = 0;
  std::map<std::string, int64_t> by_op_;
};

}  // namespace

void init_sync_counter(py::module_& m) {
  py::class_<SyncScope>(m, "SyncScope", "A running SyncCounter; see nosync_metrics.count_syncs.")
      .def(py::init([](bool strict, bool cuda_sync_debug, bool all_threads) {
             return SyncScope(
                 SyncCounterOptions().strict(strict).cuda_sync_debug(cuda_sync_debug).all_threads(all_threads));
           }),
           py::arg("strict") = false, py::arg("cuda_sync_debug") = false, py::arg("all_threads") = false)
      .def("close", &SyncScope::close)
      .def_property_readonly("total", &SyncScope::total)
      .def_property_readonly("by_op", &SyncScope::by_op)
      .def_property_readonly("cuda_syncs", &SyncScope::cuda_syncs);
  m.def("sync_class_ops", [] {
    std::vector<std::pair<std::string, std::string>> ops;
    for (const auto& op : sync_class_ops()) ops.emplace_back(op.name, op.why);
    return ops;
  }, "The ops the counter counts, as (name, why) pairs.");
  m.def(
      "host_read",
      [](const std::string& name, const py::object& read, const py::args& args, const py::kwargs& kwargs) {
        HostRead counted(name);
        return read(*args, **kwargs);
      },
      "Calls read(*args, **kwargs), counted as one sync-class op named `name` (metrics::HostRead).");
}

}  // namespace metrics::python
