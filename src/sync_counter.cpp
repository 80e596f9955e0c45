#include <metrics/sync_counter.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/record_function.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string_view>
#include <unordered_map>

#ifdef METRICS_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>

#include <metrics/warning_capture.h>
#endif

namespace metrics {
namespace {

enum class Condition { Always, CrossDeviceCopy, NoOutputSize, EqualBounds };

struct SyncClassEntry {
  SyncClassOp op;
  Condition condition;
};

const std::vector<SyncClassEntry>& entries() {
  static const std::vector<SyncClassEntry> list = {
      {{"aten::_local_scalar_dense", "copies one value from the device to the host: item(), float(t), int(t)"},
       Condition::Always},
      {{"aten::item", "reads a scalar back to the host (through _local_scalar_dense)"}, Condition::Always},
      {{"aten::is_nonzero", "bool(t) and `if t:` read the value back to branch on it"}, Condition::Always},
      {{"aten::nonzero",
        "output size depends on the data, counted on the device then read back; boolean-mask indexing x[mask] "
        "and x[mask] = v reach it"},
       Condition::Always},
      {{"aten::nonzero_numpy", "torch.where(cond) with one argument: nonzero, size read back"}, Condition::Always},
      {{"aten::argwhere", "output size depends on the data (nonzero)"}, Condition::Always},
      {{"aten::masked_select", "output size depends on the data"}, Condition::Always},
      {{"aten::_unique", "output size depends on the data"}, Condition::Always},
      {{"aten::_unique2", "output size depends on the data (torch.unique)"}, Condition::Always},
      {{"aten::unique_dim", "output size depends on the data"}, Condition::Always},
      {{"aten::unique_consecutive", "output size depends on the data"}, Condition::Always},
      {{"aten::unique_dim_consecutive", "output size depends on the data"}, Condition::Always},
      {{"aten::bincount", "reads the input's min and max back to size and check its output"}, Condition::Always},
      {{"aten::histc", "with min == max it reads the data's range back"}, Condition::EqualBounds},
      {{"aten::equal", "returns a host bool"}, Condition::Always},
      {{"aten::allclose", "returns a host bool (isclose().all().item())"}, Condition::Always},
      {{"aten::repeat_interleave", "without output_size it reads the sum of repeats back to size its output"},
       Condition::NoOutputSize},
      {{"aten::lift_fresh", "torch.tensor()/as_tensor() from host data: a host buffer copied to the device"},
       Condition::Always},
      {{"aten::scalar_tensor", "a tensor made from a host scalar (torch.scalar_tensor, where() with a scalar)"},
       Condition::Always},
      {{"aten::copy_",
        "a copy between two devices: blocking, and pageable host memory makes even non_blocking copies wait"},
       Condition::CrossDeviceCopy},
  };
  return list;
}

const std::unordered_map<std::string_view, Condition>& conditions_by_name() {
  static const auto map = [] {
    std::unordered_map<std::string_view, Condition> m;
    for (const auto& e : entries()) m.emplace(e.op.name, e.condition);
    return m;
  }();
  return map;
}

bool holds(Condition condition, c10::ArrayRef<const c10::IValue> inputs) {
  switch (condition) {
    case Condition::Always:
      return true;
    case Condition::CrossDeviceCopy:  // copy_(self, src, non_blocking)
      return inputs.size() >= 2 && inputs[0].isTensor() && inputs[1].isTensor() &&
             inputs[0].toTensor().device() != inputs[1].toTensor().device();
    case Condition::NoOutputSize: {  // (repeats, output_size) or (self, repeats, dim, output_size)
      if (inputs.empty() || !inputs.back().isNone()) return false;
      const auto& repeats = inputs.size() == 2 ? inputs[0] : inputs[1];
      return repeats.isTensor();
    }
    case Condition::EqualBounds:  // histc(self, bins, min, max)
      return inputs.size() == 4 && inputs[2].isScalar() && inputs[3].isScalar() &&
             inputs[2].toScalar().toDouble() == inputs[3].toScalar().toDouble();
  }
  return false;
}

bool is_sync_class(const char* name, c10::ArrayRef<const c10::IValue> inputs) {
  const auto& map = conditions_by_name();
  auto it = map.find(std::string_view(name));
  return it != map.end() && holds(it->second, inputs);
}

constexpr char kMetricScopePrefix[] = "metrics::";

// The counters one RecordFunction observer feeds: the observer is added with the first counter and
// removed with the last, so with none alive it costs nothing.
struct Watchers {
  std::vector<SyncCounter*> counters;
  at::CallbackHandle handle = 0;

  template <typename AddCallback>
  void add(SyncCounter* counter, AddCallback add_callback) {
    if (counters.empty()) handle = add_callback();
    counters.push_back(counter);
  }

  void remove(SyncCounter* counter) {
    counters.erase(std::remove(counters.begin(), counters.end(), counter), counters.end());
    if (counters.empty()) {
      at::removeCallback(handle);
      handle = 0;
    }
  }

  void record(const std::string& name) const {
    for (auto* counter : counters) counter->record(name);
  }
};

// Per-thread bookkeeping of the observers: this thread's counters, the depth of sync-class ops
// now running (to count only the outermost), and the enclosing metric calls. The all-threads
// observer sees the same ops as this thread's and keeps its own depth, since each counts its own.
struct ThreadState {
  Watchers watchers;
  int sync_depth = 0;
  int all_threads_sync_depth = 0;
  std::vector<std::string> metric_scopes;
};

ThreadState& thread_state() {
  static thread_local ThreadState state;
  return state;
}

// The counters that watch every thread, fed by one global observer while any is alive.
struct AllThreadsState {
  std::mutex mutex;  // the observer reads `watchers` from every thread
  Watchers watchers;
};

AllThreadsState& all_threads_state() {
  static AllThreadsState state;
  return state;
}

void count_on_this_thread(const std::string& name) { thread_state().watchers.record(name); }

void count_on_all_threads(const std::string& name) {
  auto& all = all_threads_state();
  std::lock_guard<std::mutex> lock(all.mutex);
  all.watchers.record(name);
}

struct ObservedCall : at::ObserverContext {
  explicit ObservedCall(bool metric_scope) : is_metric_scope(metric_scope) {}
  bool is_metric_scope;
};

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  auto& state = thread_state();
  const char* name = fn.name();
  if (fn.scope() == at::RecordScope::USER_SCOPE) {
    if (std::strncmp(name, kMetricScopePrefix, sizeof(kMetricScopePrefix) - 1) != 0) return nullptr;
    state.metric_scopes.emplace_back(name);
    return std::make_unique<ObservedCall>(true);
  }
  if (!is_sync_class(name, fn.inputs())) return nullptr;
  if (state.sync_depth++ == 0) count_on_this_thread(name);
  return std::make_unique<ObservedCall>(false);
}

void on_end(const at::RecordFunction& /*fn*/, at::ObserverContext* context) {
  if (context == nullptr) return;
  auto& state = thread_state();
  if (static_cast<ObservedCall*>(context)->is_metric_scope) {
    state.metric_scopes.pop_back();
  } else {
    --state.sync_depth;
  }
}

std::unique_ptr<at::ObserverContext> on_start_all_threads(const at::RecordFunction& fn) {
  if (!is_sync_class(fn.name(), fn.inputs())) return nullptr;
  if (thread_state().all_threads_sync_depth++ == 0) count_on_all_threads(fn.name());
  return std::make_unique<ObservedCall>(false);
}

void on_end_all_threads(const at::RecordFunction& /*fn*/, at::ObserverContext* context) {
  if (context != nullptr) --thread_state().all_threads_sync_depth;
}

at::RecordFunctionCallback observer(at::RecordFunctionCallback::StartCallback start,
                                    at::RecordFunctionCallback::EndCallback end) {
  return at::RecordFunctionCallback(start, end).needsInputs(true);
}

void watch_this_thread(SyncCounter* counter) {
  thread_state().watchers.add(counter, [] {
    return at::addThreadLocalCallback(
        observer(on_start, on_end).scopes({at::RecordScope::FUNCTION, at::RecordScope::USER_SCOPE}));
  });
}

void watch_all_threads(SyncCounter* counter) {
  auto& all = all_threads_state();
  std::lock_guard<std::mutex> lock(all.mutex);
  all.watchers.add(counter, [] {
    return at::addGlobalCallback(
        observer(on_start_all_threads, on_end_all_threads).scopes({at::RecordScope::FUNCTION}));
  });
}

void unwatch_all_threads(SyncCounter* counter) {
  auto& all = all_threads_state();
  std::lock_guard<std::mutex> lock(all.mutex);
  all.watchers.remove(counter);
}

std::string enclosing_metric_call() {
  const auto& scopes = thread_state().metric_scopes;
  return scopes.empty() ? std::string("outside any metric call") : "inside " + scopes.back();
}

// Strict mode: a boxed fallback on the generic mode key, which the thread includes while a
// strict counter is alive. It throws before a sync-class op runs, and redispatches the rest.
constexpr auto kStrictKey = c10::DispatchKey::TESTING_ONLY_GenericMode;

void strict_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const auto arity = schema.arguments().size();
  c10::ArrayRef<const c10::IValue> inputs(stack->data() + stack->size() - arity, arity);
  const std::string name = schema.name();
  if (is_sync_class(name.c_str(), inputs)) {
    TORCH_CHECK(false, "SyncCounter (strict): ", name, " is a sync-class op, ", enclosing_metric_call());
  }
  op.redispatchBoxed(keys & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, kStrictKey), stack);
}

void register_strict_fallback_once() {
  // Leaked on purpose: the dispatcher may outlive any static we could destroy it with.
  static const auto* registration = new c10::RegistrationHandleRAII(c10::Dispatcher::singleton().registerFallback(
      kStrictKey, c10::KernelFunction::makeFromBoxedFunction<&strict_fallback>(), "metrics::SyncCounter strict mode"));
  (void)registration;
}

}  // namespace

const std::vector<SyncClassOp>& sync_class_ops() {
  static const std::vector<SyncClassOp> ops = [] {
    std::vector<SyncClassOp> list;
    for (const auto& e : entries()) list.push_back(e.op);
    return list;
  }();
  return ops;
}

struct SyncCounter::Strict {
  Strict() : include(kStrictKey) {}
  c10::impl::IncludeDispatchKeyGuard include;
};

#ifdef METRICS_WITH_CUDA
// Turns on CUDA's sync debug mode (warn) and counts its warnings instead of printing them.
struct SyncCounter::CudaSyncDebug {
  explicit CudaSyncDebug(SyncCounter* owner)
      : previous_mode(c10::cuda::warning_state().get_sync_debug_mode()),
        capture([owner](const std::string& message) {
          if (message.find("called a synchronizing CUDA operation") == std::string::npos) return false;
          owner->record_cuda_sync();
          return true;
        }) {
    c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_WARN);
  }
  ~CudaSyncDebug() { c10::cuda::warning_state().set_sync_debug_mode(previous_mode); }

  c10::cuda::SyncDebugMode previous_mode;
  WarningCapture capture;
};
#else
struct SyncCounter::CudaSyncDebug {};
#endif

SyncCounter::SyncCounter(SyncCounterOptions options) : all_threads_(options.all_threads()) {
  TORCH_CHECK_VALUE(!(options.strict() && options.all_threads()),
                    "SyncCounterOptions: strict and all_threads cannot be combined: strict mode stops only the "
                    "thread that made the counter");
  if (all_threads_) {
    watch_all_threads(this);
  } else {
    watch_this_thread(this);
  }
  if (options.strict()) {
    register_strict_fallback_once();
    strict_ = std::make_unique<Strict>();
  }
#ifdef METRICS_WITH_CUDA
  if (options.cuda_sync_debug()) cuda_sync_debug_ = std::make_unique<CudaSyncDebug>(this);
#endif
}

SyncCounter::~SyncCounter() {
  cuda_sync_debug_.reset();
  strict_.reset();
  if (all_threads_) {
    unwatch_all_threads(this);
  } else {
    thread_state().watchers.remove(this);
  }
}

int64_t SyncCounter::total() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return total_;
}

std::map<std::string, int64_t> SyncCounter::by_op() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return by_op_;
}

int64_t SyncCounter::cuda_syncs() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cuda_syncs_;
}

void SyncCounter::record(const std::string& op) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++total_;
  ++by_op_[op];
}

void SyncCounter::record_cuda_sync() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++cuda_syncs_;
}

std::string SyncCounter::summary() const {
  const auto counts = by_op();  // one copy, so the total agrees with the names while others record
  int64_t total = 0;
  for (const auto& [op, count] : counts) total += count;
  if (total == 0) return "no sync-class ops";
  std::string text = std::to_string(total) + (total == 1 ? " sync-class op: " : " sync-class ops: ");
  bool first = true;
  for (const auto& [op, count] : counts) {
    text += (first ? "" : ", ") + op + " x" + std::to_string(count);
    first = false;
  }
  return text;
}

HostRead::HostRead(const std::string& name) {
  auto& state = thread_state();
  if (state.sync_depth == 0) count_on_this_thread(name);
  if (state.all_threads_sync_depth == 0) count_on_all_threads(name);
  TORCH_CHECK(!c10::impl::tls_is_dispatch_key_included(kStrictKey), "SyncCounter (strict): ", name,
              " reads tensor data on the host, a sync on an accelerator, ", enclosing_metric_call());
  ++state.sync_depth;
  ++state.all_threads_sync_depth;
}

HostRead::~HostRead() {
  auto& state = thread_state();
  --state.sync_depth;
  --state.all_threads_sync_depth;
}

}  // namespace metrics
