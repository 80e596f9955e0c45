#include <metrics/metric.h>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <ATen/record_function.h>
#include <c10/util/Exception.h>

#include <mutex>
#include <sstream>
#include <typeinfo>
#include <utility>

#include <metrics/report_context.h>
#include <metrics/update_call.h>

#include "collection_call.h"
#include "dense_input.h"
#include "host_copy.h"
#include "normal_tensors.h"
#include "update_locks.h"

namespace metrics {
namespace {

using detail::UpdateLocks;

std::shared_ptr<MetricState> copy_between_updates(const MetricState& state) {
  const UpdateLocks locks(state, state);
  return std::make_shared<MetricState>(state);
}

constexpr char kVersionKey[] = "_version";
constexpr char kDescriptionKey[] = "_metric";
// Version 2: aggregators count in float64, their compensation covers the packed row, and
// first_bad_update's none is 2^62. A version-1 state whose description is unchanged (every
// classification metric's) reads as it is.
// 3: a tally that counts its kinds cumulatively (weighted aggregators: NaN values, then NaN values
// or infinite weights) holds them so; version 2 held each kind's own count.
// 4: float32 Mean and Sum accumulate in float64, as float64 ones do (upgrade_state converts theirs).
// 5: a binary ConfusionMatrix with ignore_index keeps its matrix beside tp, fp, tn, fn
// (CountLayout::PerClassAndKeptMatrix; upgrade_state makes it from the cells it held alone).
constexpr int64_t kStateFormatVersion = 5;
constexpr int64_t kOldestReadableVersion = 1;

std::string as_text(const at::Tensor& bytes) {
  const auto host = detail::host_copy(bytes).contiguous();
  const auto* data = host.data_ptr<uint8_t>();
  return std::string(data, data + host.numel());
}

at::Tensor as_bytes(const std::string& text) {
  auto bytes = at::empty({static_cast<int64_t>(text.size())}, at::kByte);
  std::copy(text.begin(), text.end(), bytes.data_ptr<uint8_t>());
  return bytes;
}

// Marks the state busy for one update; a second update meanwhile (another thread) raises.
class ExclusiveUpdate {
 public:
  ExclusiveUpdate(std::atomic<bool>& busy, const std::string& metric) : busy_(busy) {
    TORCH_CHECK(!busy_.exchange(true), UpdateCall::prefix(metric),
                "called from two threads at once; update a metric from ",
                "one thread at a time, or turn on lock_updates(True) (C++: lock_updates(true))");
  }
  ~ExclusiveUpdate() { busy_ = false; }
  ExclusiveUpdate(const ExclusiveUpdate&) = delete;
  ExclusiveUpdate& operator=(const ExclusiveUpdate&) = delete;

 private:
  std::atomic<bool>& busy_;
};

// A description's first line: the metric's name and options.
std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// `line` as a message quotes it: bytes outside printable ASCII (a NUL, bytes that are not UTF-8:
// an edited header) as \xNN, so that the message shows them and stays whole.
std::string printable(const std::string& line) {
  std::string text;
  for (const unsigned char c : line) {
    if (c >= 0x20 && c < 0x7f) {
      text += static_cast<char>(c);
      continue;
    }
    constexpr char kHex[] = "0123456789abcdef";
    text += {'\\', 'x', kHex[c >> 4], kHex[c & 0xf]};
  }
  return text;
}

}  // namespace

std::string first_difference(const std::string& a, const std::string& b) {
  std::istringstream left(a), right(b);
  std::string l, r;
  while (true) {
    const bool more_left = static_cast<bool>(std::getline(left, l));
    const bool more_right = static_cast<bool>(std::getline(right, r));
    if (!more_left && !more_right) return "";
    if (!more_left) l = "(nothing)";
    if (!more_right) r = "(nothing)";
    if (l != r) return "'" + printable(l) + "' against '" + printable(r) + "'";
  }
}

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
      state_(copy_between_updates(*other.state_)) {}

void Metric::update(const UpdateArgs& args) {
  RECORD_USER_SCOPE(update_scope_.c_str());
  apply(prepare_update(args));
}

void Metric::apply(c10::function_ref<void()> step) {
  check_alone("update");
  const detail::NormalTensors normal_tensors;  // what the update keeps (buffers it reuses, rows it adds)
  const at::NoGradGuard no_grad;  // an input that requires grad must not join the state to its graph
  const UpdateLocks locks(*state_, *state_);
#if METRICS_CHECK_THREADS
  const ExclusiveUpdate exclusive(state_->busy(), name_);
#endif
  try {
    step();
  } catch (const c10::Error& e) {
    rethrow_named(e, UpdateCall::name());
  }
}

bool checks_concurrent_use() { return METRICS_CHECK_THREADS; }

void Metric::rethrow_named(const c10::Error& e, const char* call) const {
  if (e.msg().rfind(name_, 0) == 0) throw;
  const auto message = name_ + "." + call + " failed: " + e.what_without_backtrace();
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e)) TORCH_CHECK_WITH(OutOfMemoryError, false, message);
  if (dynamic_cast<const c10::ValueError*>(&e)) TORCH_CHECK_VALUE(false, message);
  if (dynamic_cast<const c10::TypeError*>(&e)) TORCH_CHECK_TYPE(false, message);
  if (dynamic_cast<const c10::IndexError*>(&e)) TORCH_CHECK_INDEX(false, message);
  if (dynamic_cast<const c10::NotImplementedError*>(&e)) TORCH_CHECK_NOT_IMPLEMENTED(false, message);
  TORCH_CHECK(false, message);
}

at::Tensor Metric::forward(const UpdateArgs& args) {
  check_alone("forward");
  const UpdateCall forwarding("forward");
  const std::lock_guard<std::mutex> one_forward(batch_.mutex());
  auto& batch = batch_.get([&] { return clone(); }, [&](const Metric& b) { return b.state().same_layout(state()); });
  batch.reset();
  batch.update(args);
  merge_batch(batch);
  return batch.value();
}

void Metric::check_alone(const char* call) const {
  TORCH_CHECK_VALUE(shared_in_groups_ == 0 || detail::CollectionCall::active(), name_, ".", call,
                    ": the metric shares its state with other metrics of a MetricCollection (a compute group), ",
                    "so this call would change theirs too; make it through the collection, or first give the ",
                    "metric a state of its own with MetricCollection::detach(name)");
}

std::unique_ptr<Metric> Metric::clone_alone() const {
  auto copy = clone();
  copy->unshare_state();
  return copy;
}

void Metric::unshare_state() {
  std::shared_ptr<MetricState> own;
  {
    const UpdateLocks locks(*state_, *state_);
    own = std::make_shared<MetricState>(own_state_copy());
  }
  own->lock_updates(state_->locks_updates());
  state_ = std::move(own);
  batch_.clear();
}

void Metric::merge_batch(const Metric& batch) {
  const UpdateLocks locks(*state_, *batch.state_);
  state_->merge(*batch.state_, name_, MergeOrder::Appended);
}

std::vector<const ValueArg*> Metric::bind(const UpdateArgs& args) const {
  const auto& names = update_parameters();
  TORCH_CHECK_TYPE(args.positional.size() <= names.size(), UpdateCall::prefix(name_), "takes at most ", names.size(),
                   names.size() == 1 ? " argument" : " arguments", ", got ", args.positional.size());
  std::vector<const ValueArg*> bound(names.size(), nullptr);
  for (size_t i = 0; i < args.positional.size(); ++i) bound[i] = &args.positional[i];
  for (const auto& [keyword, value] : args.keywords) {
    const auto it = std::find(names.begin(), names.end(), keyword);
    if (args.skip_unknown_keywords && (it == names.end() || !takes(keyword))) continue;
    TORCH_CHECK_TYPE(it != names.end(), UpdateCall::prefix(name_), "unexpected argument '", keyword, "'");
    auto& slot = bound[it - names.begin()];
    TORCH_CHECK_TYPE(slot == nullptr, UpdateCall::prefix(name_), "argument '", keyword, "' given twice");
    slot = &value;
  }
  return bound;
}

const ValueArg& Metric::required(const std::vector<const ValueArg*>& bound, size_t i) const {
  TORCH_CHECK_TYPE(bound[i] != nullptr, UpdateCall::prefix(name_), "missing argument '", update_parameters()[i],
                   "' (not given, or given as None)");
  return *bound[i];
}

at::Tensor Metric::compute() const {
  RECORD_USER_SCOPE(compute_scope_.c_str());
  const UpdateLocks locks(*state_, *state_);
  if (!state_->device().is_meta()) {  // a meta state holds no count or tally to read
    const auto [count, report] = state_->update_count_and_report();
    if (count == 0) TORCH_WARN(name_, ".compute: called before any update; the value reflects the initial state");
    report_locked(report);
  }
  return value();
}

at::Tensor Metric::compute_without_report() const {
  RECORD_USER_SCOPE(compute_scope_.c_str());
  const UpdateLocks locks(*state_, *state_);
  return value();
}

int64_t Metric::update_count() const {
  TORCH_CHECK_VALUE(!device().is_meta(), name_, ".update_count: the state is on meta, which holds no values; move ",
                    "the metric to a device first");
  const UpdateLocks locks(*state_, *state_);
  return state_->update_count();
}

void Metric::check() const {
  const UpdateLocks locks(*state_, *state_);
  if (!state_->device().is_meta()) report_locked(state_->bad_input_report());  // meta holds no tally
}

void Metric::report_locked(const BadInputReport& report) const {
  auto problem = report.clean() ? state_problem() : report.message(name_);
  if (problem.empty()) return;
  const auto message = ReportContext::current() + problem;
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

BadInputReport Metric::bad_input_report() const {
  TORCH_CHECK_VALUE(!device().is_meta(), name_, ".bad_input: the state is on meta, which holds no values; move ",
                    "the metric to a device first");
  const UpdateLocks locks(*state_, *state_);
  return state_->bad_input_report();
}

void Metric::reset() {
  check_alone("reset");
  const UpdateLocks locks(*state_, *state_);
  state_->reset();
}

void Metric::merge(const Metric& other, MergeOrder order) {
  TORCH_CHECK_TYPE(typeid(*this) == typeid(other) && name_ == other.name_, name_, ".merge: cannot merge a ",
                   other.name_, " into a ", name_);
  check_alone("merge");
  // one of the same options whose state is laid out for another metric (a ConfusionMatrix's it
  // shares, or shared when it was cloned) gives its counts in its own layout
  const bool same_options = options_text() == other.options_text();
  const bool laid_out_apart = same_options && [&] {
    const UpdateLocks locks(*state_, *other.state_);
    return !other.state_->same_entries(*state_);
  }();
  const auto alone = laid_out_apart ? other.clone_alone() : nullptr;
  const auto& source = alone ? *alone : other;
  const UpdateLocks locks(*state_, *source.state_);
  const auto difference = first_difference(description(), source.description());
  TORCH_CHECK_VALUE(difference.empty(), name_, ".merge: the other metric has other ",
                    same_options ? "state: " : "options or state: ", difference, " there; ",
                    same_options ? "this one's is laid out for a metric it shares a state with, or shared one with "
                                   "when it was cloned (clone_alone() gives a copy in its own layout)"
                                 : "merge metrics built with the same options");
  state_->merge(*source.state_, name_, order);
}

std::string Metric::description_of(const MetricState& state) const {
  std::ostringstream text;
  text << name_ << "(" << options_text() << ")\n";
  for (const auto& entry : state.entry_layout()) {
    text << entry.name << " " << entry.tensor.scalar_type() << shape_text(entry) << " "
         << reduction_name(entry.reduction) << "\n";
  }
  return text.str();
}

StateDict Metric::state_dict() const {
  const UpdateLocks locks(*state_, *state_);
  const auto own = own_state_copy();
  auto dict = own.state_dict();
  dict.emplace(kVersionKey, at::full({}, kStateFormatVersion, at::kLong));
  dict.emplace(kDescriptionKey, as_bytes(description_of(own)));
  return dict;
}

void Metric::load_state_dict(const StateDict& dict) {
  const auto scope = "metrics::" + name_ + "::load_state_dict";  // its reads of the dict are the metric's
  RECORD_USER_SCOPE(scope.c_str());
  check_alone("load_state_dict");
  const UpdateLocks locks(*state_, *state_);
  for (const auto& [key, tensor] : dict) {
    TORCH_CHECK_VALUE(!tensor.defined() || detail::is_dense(tensor), name_, ".load_state_dict: '", key, "'",
                      detail::not_dense(tensor));
  }
  auto state = dict;
  const auto version = take_format_version(state);
  take_description(state, version);
  if (version < kStateFormatVersion) upgrade(state, version);
  state_->load_state_dict(state, name_);
}

int64_t Metric::take_format_version(StateDict& dict) const {
  const auto version = dict.find(kVersionKey);
  if (version == dict.end()) return kStateFormatVersion;
  const auto& v = version->second;
  TORCH_CHECK_VALUE(v.defined() && !v.is_meta() && v.numel() == 1 && v.scalar_type() == at::kLong, name_,
                    ".load_state_dict: '", kVersionKey, "' must be one int64");
  const auto found = v.item<int64_t>();
  TORCH_CHECK_VALUE(found >= kOldestReadableVersion && found <= kStateFormatVersion, name_,
                    ".load_state_dict: the state is of format version ", found, ", this build reads versions ",
                    kOldestReadableVersion, " to ", kStateFormatVersion);
  dict.erase(version);
  return found;
}

void Metric::take_description(StateDict& dict, int64_t version) const {
  const auto described = dict.find(kDescriptionKey);
  const bool has_text = described != dict.end();
  std::string text;
  if (has_text) {
    const auto& bytes = described->second;
    TORCH_CHECK_VALUE(bytes.defined() && !bytes.is_meta() && bytes.scalar_type() == at::kByte && bytes.dim() == 1,
                      name_, ".load_state_dict: '", kDescriptionKey, "' must be a 1-D uint8 tensor with values");
    text = as_text(bytes);
    dict.erase(described);
  }
  const bool old = version < kStateFormatVersion;
  const auto expected = old ? description_in_version(version) : description();
  const auto difference = has_text ? first_difference(text, expected) : std::string();
  // an old state of this metric and options whose layout it cannot tell, or no longer has
  const bool unreadable = old && (!has_text || first_line(text) == first_line(expected));
  TORCH_CHECK_VALUE(!unreadable || (has_text && difference.empty()), name_,
                    ".load_state_dict: the state is of format version ", version,
                    ", whose layout this metric no longer has (version ", kStateFormatVersion,
                    " counts aggregators in float64); it cannot be read by this build");
  TORCH_CHECK_VALUE(difference.empty(), name_, ".load_state_dict: the state is of another metric: it has ", difference,
                    " here");
}

void Metric::upgrade(StateDict& dict, int64_t version) const {
  upgrade_state(dict, version);
  const auto* tally = state_->bad_input();
  const auto counts = tally ? dict.find("bad_input_counts") : dict.end();
  if (version < 3 && counts != dict.end() && counts->second.defined() && !counts->second.is_meta() &&
      counts->second.dim() == 1 && counts->second.size(0) == static_cast<int64_t>(tally->kinds().size()) + 1) {
    counts->second = tally->from_version_2(counts->second);  // version 2 kept each kind's own count
  }
}

void Metric::to(at::Device device) {
  check_alone("to");
  {
    const UpdateLocks locks(*state_, *state_);
    state_->to(device);
  }
  batch_.clear();  // after the state's lock: forward() holds the batch's lock while it takes the state's
}

void Metric::share_state_of(const Metric& other) {
  const auto mine = sharing_key();
  const auto theirs = other.sharing_key();
  TORCH_CHECK_VALUE(!mine.counts.empty() && mine.counts == theirs.counts && theirs.level >= mine.level &&
                        device() == other.device(),
                    name_, ": cannot share the state of ", other.name_, ", which counts other things");
  state_ = other.state_;
  batch_.clear();
}

void Metric::swap_state(Metric& other) {
  TORCH_CHECK_VALUE(typeid(*this) == typeid(other) && options_text() == other.options_text(), name_,
                    ": cannot take the state of ", other.name_, "(", other.options_text(), ")");
  check_alone("swap_state");
  other.check_alone("swap_state");
  const UpdateLocks locks(*state_, *other.state_);
  state_->swap_tensors(*other.state_);
}

}  // namespace metrics
