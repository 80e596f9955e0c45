#include <metrics/collection.h>

#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <exception>
#include <mutex>

#include <metrics/report_context.h>
#include <metrics/update_call.h>

#include "collection_call.h"
#include "error_context.h"
#include "update_locks.h"

namespace metrics {
namespace {

constexpr char kName[] = "MetricCollection";

UpdateArgs classification_args(const at::Tensor& preds, const at::Tensor& target,
                               const c10::optional<at::Tensor>& weight) {
  UpdateArgs args{{preds, target}};
  if (weight) args.positional.emplace_back(*weight);
  return args;
}

// What a refusal of the part of a dict that belongs to the metric named `name` says first: two
// metrics of one class would give one message.
std::string part_of(const char* who, const std::string& name) {
  return c10::str(kName, who, ": the part of '", name, "' (its keys '", name, ".*'): ");
}

// What the exception in flight says.
std::string message_of_current_exception() {
  try {
    throw;
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception that is no std::exception";
  }
}

// Calls report(i) for i < count, each whatever the ones before raised, so that every report that
// warns does; then raises the first that raised, with what the others raised as its context.
template <class Report>
void report_each(size_t count, Report&& report) {
  std::exception_ptr first;
  std::vector<std::string> others;
  for (size_t i = 0; i < count; ++i) {
    try {
      report(i);
    } catch (...) {
      if (first) {
        others.push_back(message_of_current_exception());
      } else {
        first = std::current_exception();
      }
    }
  }
  if (!first) return;
  try {
    std::rethrow_exception(first);
  } catch (c10::Error& e) {
    for (auto& other : others) e.add_context("Also raised: " + std::move(other));
    throw;
  }
}

// Whether `metric` holds a fresh state, which it may give up for a group's (a meta one does, so that
// meta collections group as real ones do); a state loaded without updates is not fresh.
bool holds_fresh_state(const Metric& metric) {
  const detail::UpdateLocks locks(metric.state(), metric.state());
  return metric.state().holds_fresh_values();
}

// The largest magnitude among the float64 tensors of two state dicts (0 where none).
double largest_float(const StateDict& a, const StateDict& b) {
  double largest = 0.0;
  for (const auto* dict : {&a, &b}) {
    for (const auto& [key, x] : *dict) {
      if (x.is_floating_point() && !x.is_meta() && x.numel() > 0) {
        largest = std::max(largest, x.abs().nan_to_num(0.0, 0.0, 0.0).max().item<double>());
      }
    }
  }
  return largest;
}

// Whether two state dicts of one metric hold the same counts: equal, or for float64 (weighted)
// counts equal up to the rounding of sums taken in another order (a per-class count derived from
// a C x C matrix against one counted directly): relative to each count, and for tn, the kept total
// less the others, relative to the largest count (a tn that is 0 comes out as noise of the
// totals). 1e-11 covers the rounding of 1e8 additions; a real difference changes a count by far
// more, relative to it. A meta tensor holds no values to differ in.
bool same_counts(const StateDict& a, const StateDict& b) {
  if (a.size() != b.size()) return false;
  const double largest = largest_float(a, b);
  for (const auto& [key, x] : a) {
    const auto it = b.find(key);
    if (it == b.end()) return false;
    const auto& y = it->second;
    if (x.sizes() != y.sizes() || x.scalar_type() != y.scalar_type()) return false;
    if (x.is_meta() || y.is_meta()) continue;
    if (!x.is_floating_point()) {
      if (!at::equal(x, y)) return false;
      continue;
    }
    constexpr double kRounding = 1e-11;
    const auto bound = key == "tn" ? at::full_like(x, kRounding * largest) : (x.abs() + y.abs()).mul_(kRounding);
    // within the bound where both are finite (an infinite count, an overflow, matches only itself)
    const auto within = (x - y).abs().le(bound).bitwise_and_(x.isfinite()).bitwise_and_(y.isfinite());
    const auto close = within.bitwise_or_(x.eq(y)).bitwise_or_(x.isnan().bitwise_and_(y.isnan()));
    if (!close.all().item<bool>()) return false;
  }
  return true;
}

// A state dict's tensors without what describes it ("_version", "_metric"): two metrics of one
// state hold the same.
StateDict counts_in(StateDict dict) {
  for (auto it = dict.begin(); it != dict.end();) it = it->first.rfind('_', 0) == 0 ? dict.erase(it) : std::next(it);
  return dict;
}

// Groups of names as a partition: their order, and the order within each, set aside.
std::vector<std::vector<std::string>> partition_of(std::vector<std::vector<std::string>> groups) {
  for (auto& group : groups) std::sort(group.begin(), group.end());
  std::sort(groups.begin(), groups.end());
  return groups;
}

// Whether every group of `finer` lies within one group of `coarser`: each then reads its state
// through any of its metrics there.
bool refines(const std::vector<std::vector<std::string>>& finer,
             const std::vector<std::vector<std::string>>& coarser) {
  return std::all_of(finer.begin(), finer.end(), [&](const auto& group) {
    return std::any_of(coarser.begin(), coarser.end(), [&](const auto& holder) {
      return std::all_of(group.begin(), group.end(),
                         [&](const auto& name) { return std::find(holder.begin(), holder.end(), name) != holder.end(); });
    });
  });
}

// Whether `server`'s state holds what `metric` counts, wherever either is.
bool serves(const Metric& metric, const Metric& server) {
  const auto mine = metric.sharing_key();
  const auto theirs = server.sharing_key();
  return !mine.counts.empty() && mine.counts == theirs.counts && theirs.level >= mine.level;
}

// Whether `metric` can count into and read from `server`'s state (Metric::share_state_of).
bool can_share(const Metric& metric, const Metric& server) {
  return serves(metric, server) && metric.device() == server.device();
}

}  // namespace

MetricCollection::MetricCollection(MetricCollectionOptions options) : options_(options) {}

MetricCollection& MetricCollection::add(const std::string& name, std::shared_ptr<Metric> metric, Updates updates) {
  const auto taking_turns = lock();
  TORCH_CHECK_VALUE(metric != nullptr, kName, ".add: metric '", name, "' is null");
  TORCH_CHECK_VALUE(!name.empty() && name.find('.') == std::string::npos, kName, ".add: a metric's name must be ",
                    "non-empty and hold no '.', which separates it from the state's name in state_dict() keys; got '",
                    name, "'");
  TORCH_CHECK_VALUE(std::none_of(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.name == name; }),
                    kName, ".add: a metric named '", name, "' is already in the collection");
  marks_.hold(metric);
  entries_.push_back({name, std::move(metric)});
  join_group(entries_.size() - 1, updates);
  mark_shared();
  return *this;
}

// Puts entry `index` in the first group it can share a fresh state with (making its state the
// group's if it serves more), else in a group of its own.
void MetricCollection::join_group(size_t index, Updates updates) {
  batch_.clear();
  // a metric already here under another name is one state, updated once: it joins its own group
  for (auto& group : groups_) {
    const auto same = [&](size_t m) { return same_object(m, index); };
    if (std::any_of(group.members.begin(), group.members.end(), same)) return group.members.push_back(index);
  }
  auto& metric = *entries_[index].metric;
  const auto key = metric.sharing_key();
  const bool can_share = options_.compute_groups() && updates == Updates::Together && !key.counts.empty() &&
                         holds_fresh_state(metric);
  for (auto& group : groups_) {
    if (!can_share) break;
    if (group.updates == Updates::Apart || group.closed) continue;
    auto& current = owner(group);
    const auto theirs = current.sharing_key();
    if (theirs.counts != key.counts || current.device() != metric.device() || !holds_fresh_state(current)) continue;
    return share_group_with(group, index);
  }
  groups_.push_back({index, {index}, updates});
}

void MetricCollection::share_group_with(Group& group, size_t index) {
  auto& metric = *entries_[index].metric;
  if (metric.sharing_key().level > owner(group).sharing_key().level) {
    for (auto member : group.members) entries_[member].metric->share_state_of(metric);
    group.owner = index;
  } else {
    metric.share_state_of(owner(group));
  }
  group.members.push_back(index);
}

void MetricCollection::update(const UpdateArgs& args) {
  RECORD_USER_SCOPE("metrics::MetricCollection::update");
  const auto taking_turns = lock();
  const detail::CollectionCall call;
  auto shared = args;
  shared.skip_unknown_keywords = true;
  std::vector<std::pair<Metric*, UpdateStep>> steps;
  steps.reserve(groups_.size());
  for (size_t g = 0; g < groups_.size(); ++g) {
    if (!counts_batches(g)) continue;
    try {
      steps.emplace_back(&owner(groups_[g]), owner(groups_[g]).prepare_update(shared));
    } catch (c10::Error& e) {  // (the metric names its class; which of the collection's is it?)
      e.add_context(c10::str("in ", kName, ": ", names_sharing_state_of(g)));
      throw;
    }
  }
  for (auto& [metric, step] : steps) metric->apply(step);
}

void MetricCollection::update(const at::Tensor& preds, const at::Tensor& target,
                              const c10::optional<at::Tensor>& weight) {
  update(classification_args(preds, target, weight));
}

std::string MetricCollection::names_sharing_state_of(size_t g) const {
  std::string names;
  for (size_t h = 0; h < groups_.size(); ++h) {
    if (&owner(groups_[h]).state() != &owner(groups_[g]).state()) continue;
    for (auto member : groups_[h].members) names += (names.empty() ? "'" : ", '") + entries_[member].name + "'";
  }
  return names;
}

std::string MetricCollection::report_prefix(const char* who, size_t g) const {
  return c10::str(kName, who, ": ", names_sharing_state_of(g), ": ");
}

void MetricCollection::check() const {
  const auto taking_turns = lock();
  report_each(groups_.size(), [&](size_t g) {
    if (!counts_batches(g)) return;
    const ReportContext named(report_prefix(".check", g));
    entries_[groups_[g].members.front()].metric->check();
  });
}

std::map<std::string, at::Tensor> MetricCollection::compute() const {
  RECORD_USER_SCOPE("metrics::MetricCollection::compute");
  const auto taking_turns = lock();
  std::string fresh;  // the metrics not updated yet (a meta state holds no count to read)
  std::vector<std::pair<size_t, BadInputReport>> reports;  // by group
  std::vector<int64_t> counts(groups_.size(), -1);
  for (size_t g = 0; g < groups_.size(); ++g) {
    const auto& group = groups_[g];
    const auto& head = owner(group);
    if (group.updates == Updates::Apart || head.device().is_meta()) continue;
    if (counts_batches(g)) {
      const detail::UpdateLocks locks(head.state(), head.state());
      auto [count, report] = head.state().update_count_and_report();  // one read-back per state
      reports.emplace_back(g, std::move(report));
      counts[g] = count;
    }
    if (counts[first_with_state_of(g)] != 0) continue;
    for (auto member : group.members) fresh += (fresh.empty() ? "" : ", ") + entries_[member].name;
  }
  if (!fresh.empty()) {
    TORCH_WARN(kName, ".compute: ", fresh, " called before any update; values reflect the initial state");
  }
  report_each(reports.size(), [&](size_t i) {
    const auto& [g, report] = reports[i];
    const auto& group = groups_[g];
    const detail::UpdateLocks locks(owner(group).state(), owner(group).state());
    const ReportContext named(report_prefix(".compute", g));
    entries_[group.members.front()].metric->report_locked(report);
  });
  return values();
}

std::map<std::string, at::Tensor> MetricCollection::compute_without_report() const {
  RECORD_USER_SCOPE("metrics::MetricCollection::compute");
  const auto taking_turns = lock();
  return values();
}

std::map<std::string, at::Tensor> MetricCollection::forward(const UpdateArgs& args) {
  const auto taking_turns = lock();
  const detail::CollectionCall call;
  const UpdateCall forwarding("forward");
  const std::lock_guard<std::mutex> one_forward(batch_.mutex());
  // a member's state may have moved or changed layout through another collection it is in
  const auto same_states = [&](const MetricCollection& b) {
    for (size_t g = 0; g < groups_.size(); ++g) {
      if (!b.owner(b.groups_[g]).state().same_layout(owner(groups_[g]).state())) return false;
    }
    return true;
  };
  auto& batch = batch_.get([&] { return std::make_unique<MetricCollection>(clone()); }, same_states);
  batch.reset();
  batch.update(args);
  for (size_t g = 0; g < groups_.size(); ++g) {
    if (counts_batches(g)) owner(groups_[g]).merge_batch(batch.owner(batch.groups_[g]));
  }
  return batch.values();
}

size_t MetricCollection::first_with_state_of(size_t g) const {
  size_t first = 0;
  while (&owner(groups_[first]).state() != &owner(groups_[g]).state()) ++first;
  return first;
}

size_t MetricCollection::server_of(size_t g) const {
  const auto level = [&](size_t h) { return owner(groups_[h]).sharing_key().level; };
  auto server = first_with_state_of(g);
  for (auto h = server; h < groups_.size(); ++h) {
    if (first_with_state_of(h) == first_with_state_of(g) && level(h) > level(server)) server = h;
  }
  return server;
}

bool MetricCollection::lays_out(size_t g) const { return owner(groups_[g]).holds_own_layout(); }

bool MetricCollection::counts_batches(size_t g) const {
  return groups_[g].updates == Updates::Together && first_with_state_of(g) == g;
}

std::map<std::string, at::Tensor> MetricCollection::values() const {
  std::map<std::string, at::Tensor> values;
  for (const auto& group : groups_) {
    if (group.updates == Updates::Apart) continue;
    const detail::UpdateLocks locks(owner(group).state(), owner(group).state());
    for (auto member : group.members) values.emplace(entries_[member].name, entries_[member].metric->value());
  }
  return values;
}

std::map<std::string, at::Tensor> MetricCollection::forward(const at::Tensor& preds, const at::Tensor& target,
                                                             const c10::optional<at::Tensor>& weight) {
  return forward(classification_args(preds, target, weight));
}

void MetricCollection::reset() {
  const auto taking_turns = lock();
  const detail::CollectionCall call;
  for (const auto& group : groups_) owner(group).reset();
}

void MetricCollection::merge(const MetricCollection& other, MergeOrder order) {
  const std::scoped_lock taking_turns(*mutex_, *other.mutex_);
  const detail::CollectionCall call;
  // the groups may come in another order (a load or a detach appends the groups it makes)
  TORCH_CHECK_VALUE(names() == other.names() && refines(groups(), other.groups()), kName,
                    ".merge: the other collection has different metrics or groups");
  for (size_t i = 0; i < entries_.size(); ++i) {
    const auto& mine = *entries_[i].metric;
    const auto& theirs = *other.entries_[i].metric;
    TORCH_CHECK_VALUE(typeid(mine) == typeid(theirs) && mine.name() == theirs.name(), kName, ".merge: '",
                      entries_[i].name, "' is a ", mine.name(), " here but a ", theirs.name(), " in the other");
  }
  // Each group takes the state of the other's group through the same metric there, read in this
  // group's layout where the other's holds more (a C x C state where this one counts per class;
  // where it cannot serve this one, the metric's own merge says what differs).
  std::vector<const MetricState*> states;
  for (const auto& group : groups_) states.push_back(&owner(group).state());
  for (const auto& theirs : other.entries_) {
    TORCH_CHECK_VALUE(std::find(states.begin(), states.end(), &theirs.metric->state()) == states.end(), kName,
                      ".merge: '", theirs.name, "' there counts into a state of this collection, which cannot merge ",
                      "into itself");
  }
  // groups that share a state here take the source of the one that serves the others: theirs must
  // hold its counts
  for (size_t i = 0; i < groups_.size(); ++i) {
    const auto mine = groups_[i].owner, server = groups_[server_of(i)].owner;
    TORCH_CHECK_VALUE(same_counts_for(mine, *other.entries_[mine].metric, server, *other.entries_[server].metric),
                      kName, ".merge: '", entries_[mine].name, "' and '", entries_[server].name,
                      "' share one state here (a nested collection handed them over), but the other holds different ",
                      "counts for them");
  }
  std::vector<std::unique_ptr<Metric>> read;
  std::vector<const Metric*> sources;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const auto& group = groups_[g];
    const auto& source = *other.entries_[group.owner].metric;
    const auto& mine = owner(group);
    TORCH_CHECK_VALUE(server_of(g) != g || source.state().same_entries(mine.state()) || lays_out(g), kName,
                      ".merge: '", entries_[group.owner].name, "' counts here into the state of a collection this one ",
                      "was handed to, laid out for a metric of that one, which the other's counts do not give: merge ",
                      "into that collection");
    if (source.state().same_entries(mine.state()) || !serves(mine, source)) {
      sources.push_back(&source);
    } else {
      read.push_back(copy_reading(group.owner, &source));
      sources.push_back(read.back().get());
    }
  }
  // Check every state before changing any: merging a copy first throws what the real merge would.
  auto trial = clone();
  for (auto* into : {&trial, this}) {
    for (size_t i = 0; i < groups_.size(); ++i) {
      if (server_of(i) == i) into->owner(into->groups_[i]).merge(*sources[i], order);
    }
  }
}

StateDict MetricCollection::state_dict() const {
  const auto taking_turns = lock();
  StateDict dict;
  for (const auto& e : entries_) {
    for (auto& [key, tensor] : e.metric->state_dict()) dict.emplace(e.name + "." + key, tensor);
  }
  return dict;
}

void MetricCollection::load_state_dict(const StateDict& dict, AbsentMetric absent) {
  RECORD_USER_SCOPE("metrics::MetricCollection::load_state_dict");
  const auto taking_turns = lock();
  const detail::CollectionCall call;
  std::vector<StateDict> parts(entries_.size());
  // the metric each key names ("<name>.<state>"), or none
  const auto owner_of = [&](const std::string& key) {
    const auto dot = key.find('.');
    if (dot == std::string::npos) return entries_.end();
    const auto name = key.substr(0, dot);
    return std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.name == name; });
  };
  const bool names_a_metric =
      std::any_of(dict.begin(), dict.end(), [&](const auto& item) { return owner_of(item.first) != entries_.end(); });
  for (const auto& [key, tensor] : dict) {
    const auto it = owner_of(key);
    TORCH_CHECK_VALUE(it != entries_.end(), kName, ".load_state_dict: unexpected key '", key, "'",
                      names_a_metric ? "" : ": a collection's keys are '<metric name>.<state>' (is this one "
                                            "metric's state_dict()?)");
    parts[it - entries_.begin()].emplace(key.substr(key.find('.') + 1), tensor);
  }
  // every part loads into a copy first: a bad dict changes nothing
  std::vector<std::unique_ptr<Metric>> loaded(entries_.size());
  for (size_t i = 0; i < entries_.size(); ++i) {
    TORCH_CHECK_VALUE(!parts[i].empty() || absent != AbsentMetric::Refused, kName,
                      ".load_state_dict: the dict holds no key of metric '", entries_[i].name, "' (its keys start with '",
                      entries_[i].name, ".')");
    if (!parts[i].empty()) {
      detail::with_context(part_of(".load_state_dict", entries_[i].name),
                           [&] { loaded[i] = loaded_alone(i, parts[i]); });
    }
  }
  // a metric under several names holds the part of its first name in the dict under all of them
  for (size_t i = 0; i < entries_.size(); ++i) {
    for (size_t j = 0; j < entries_.size() && !loaded[i]; ++j) {
      if (loaded[j] && !parts[j].empty() && same_object(i, j)) loaded[i] = loaded[j]->clone();
    }
  }
  // absent owners first: an absent metric reads what its owner holds after the load
  for (const auto& group : groups_) {
    if (!loaded[group.owner]) loaded[group.owner] = absent_metric_state(group.owner, loaded);
  }
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (!loaded[i]) loaded[i] = absent_metric_state(i, loaded);
  }
  state_loaders(parts, loaded);  // its checks, before the regroup changes anything
  const auto groups = groups_holding(loaded);
  if (partition_of(groups) != partition_of(this->groups())) regroup(groups);
  const auto loaders = state_loaders(parts, loaded);
  for (size_t g = 0; g < groups_.size(); ++g) {
    if (loaders.count(groups_[g].owner)) owner(groups_[g]).load_state_dict(loaded[groups_[g].owner]->state_dict());
  }
}

std::set<size_t> MetricCollection::state_loaders(const std::vector<StateDict>& parts,
                                                 const std::vector<std::unique_ptr<Metric>>& loaded) const {
  const auto level = [&](size_t owner) { return entries_[owner].metric->sharing_key().level; };
  std::set<size_t> loaders;
  for (size_t g = 0; g < groups_.size(); ++g) {
    if (first_with_state_of(g) != g) continue;
    std::vector<size_t> given;  // the owners of the groups on this state whose part the dict holds
    for (auto h = g; h < groups_.size(); ++h) {
      if (first_with_state_of(h) == g && !parts[groups_[h].owner].empty()) given.push_back(groups_[h].owner);
    }
    const auto server = groups_[server_of(g)].owner;
    const bool laid_out = lays_out(server_of(g));
    if (given.empty()) {
      if (laid_out) loaders.insert(server);
      continue;
    }
    const auto loader =
        *std::max_element(given.begin(), given.end(), [&](size_t a, size_t b) { return level(a) < level(b); });
    for (auto other : given) {
      TORCH_CHECK_VALUE(same_counts_for(other, *loaded[other], loader, *loaded[loader]), kName, ".load_state_dict: '",
                        entries_[other].name, "' and '", entries_[loader].name, "' share one state here (a nested ",
                        "collection handed them over), but the dict gives them different parts");
    }
    if (!laid_out || level(loader) < level(server)) {
      // a part in a smaller layout than the state's cannot load it: it may only agree with it
      TORCH_CHECK_VALUE(same_counts_for(loader, *loaded[loader], server, *entries_[server].metric), kName,
                        ".load_state_dict: '", entries_[loader].name, "' shares one state here with ",
                        laid_out ? "'" + entries_[server].name + "' (a nested collection handed them over)"
                                 : std::string("a metric of a collection this one was handed to"),
                        ", laid out for the latter, whose part the dict lacks; the part given differs from that ",
                        "state, and cannot load it");
      continue;
    }
    loaders.insert(loader);
  }
  return loaders;
}

bool MetricCollection::same_counts_for(size_t a, const Metric& ma, size_t b, const Metric& mb) const {
  if (&ma.state() == &mb.state()) return true;
  const bool b_serves = mb.sharing_key().level >= ma.sharing_key().level;
  const auto read = b_serves ? copy_reading(a, &mb) : copy_reading(b, &ma);
  return same_counts(counts_in((b_serves ? ma : mb).state_dict()), counts_in(read->state_dict()));
}

std::unique_ptr<Metric> MetricCollection::absent_metric_state(size_t index,
                                                              const std::vector<std::unique_ptr<Metric>>& loaded) const {
  const auto& metric = *entries_[index].metric;
  const auto& group = group_of(index);
  // the group's owner first: its state is the group's
  auto mates = group.members;
  std::stable_partition(mates.begin(), mates.end(), [&](size_t m) { return m == group.owner; });
  for (auto mate : mates) {
    if (mate != index && loaded[mate] && can_share(metric, *loaded[mate])) return copy_reading(index, loaded[mate].get());
  }
  return copy_reading(index);
}

std::unique_ptr<Metric> MetricCollection::copy_reading(size_t index, const Metric* server) const {
  auto copy = entries_[index].metric->clone();
  if (server) {
    copy->to(server->device());  // (what it held is not read)
    copy->share_state_of(*server);
  }
  copy->unshare_state();
  return copy;
}

std::vector<std::vector<std::string>> MetricCollection::groups_holding(
    const std::vector<std::unique_ptr<Metric>>& loaded) const {
  // one metric object under several names holds one state: its names go where its first goes
  const auto holds = [&](const std::vector<size_t>& group, size_t member) {
    return std::any_of(group.begin(), group.end(), [&](size_t m) { return same_object(m, member); }) ||
           reads(*loaded[group.front()], member, *loaded[member]);
  };
  std::vector<std::vector<size_t>> groups;
  std::vector<size_t> leaving;
  for (const auto& group : groups_) {
    groups.push_back({group.owner});
    for (auto member : group.members) {
      if (member == group.owner) continue;
      const bool left_before = std::any_of(leaving.begin(), leaving.end(), [&](size_t m) { return same_object(m, member); });
      (!left_before && holds(groups.back(), member) ? groups.back() : leaving).push_back(member);
    }
  }
  const auto kept = static_cast<std::ptrdiff_t>(groups.size());
  for (auto member : leaving) {
    const auto joined = std::find_if(groups.begin() + kept, groups.end(), [&](const auto& g) { return holds(g, member); });
    joined == groups.end() ? groups.push_back({member}) : joined->push_back(member);
  }
  std::vector<std::vector<std::string>> names;
  for (const auto& group : groups) {
    names.emplace_back();
    for (auto member : group) names.back().push_back(entries_[member].name);
  }
  return names;
}

bool MetricCollection::reads(const Metric& server, size_t index, const Metric& held) const {
  return can_share(*entries_[index].metric, server) &&
         same_counts(copy_reading(index, &server)->state_dict(), held.state_dict());
}

std::unique_ptr<Metric> MetricCollection::loaded_alone(size_t index, const StateDict& part) const {
  const auto& metric = *entries_[index].metric;
  auto own = copy_reading(index);
  try {
    own->load_state_dict(part);
    return own;
  } catch (const c10::Error&) {
    if (own->state().same_layout(metric.state())) throw;
    // a part in the layout of the state the metric shares, as state_dict() wrote it before it
    // took each metric's own: loaded there, then converted
    const auto own_layout_error = std::current_exception();
    auto shared = metric.clone();
    try {
      shared->load_state_dict(part);
    } catch (const c10::Error&) {
      std::rethrow_exception(own_layout_error);
    }
    shared->unshare_state();
    return shared;
  }
}

void MetricCollection::to(at::Device device) {
  const auto taking_turns = lock();
  const detail::CollectionCall call;
  for (const auto& group : groups_) owner(group).to(device);
  batch_.clear();
}

MetricCollection MetricCollection::clone() const {
  const auto taking_turns = lock();
  MetricCollection copy(options_);
  for (const auto& e : entries_) {
    copy.entries_.push_back({e.name, std::shared_ptr<Metric>(e.metric->clone())});
    copy.marks_.hold(copy.entries_.back().metric);
  }
  copy.groups_ = groups_;
  // groups that share a state here (a nested collection's, handed over) share one in the copy: the
  // first of them whose owner has the highest level serves the others
  for (size_t g = 0; g < groups_.size(); ++g) {
    if (server_of(g) != g) copy.owner(copy.groups_[g]).share_state_of(copy.owner(copy.groups_[server_of(g)]));
  }
  for (const auto& group : copy.groups_) {
    for (auto member : group.members) {
      if (member != group.owner) copy.entries_[member].metric->share_state_of(copy.owner(group));
    }
  }
  copy.mark_shared();
  return copy;
}

void MetricCollection::detach(const std::string& name) {
  const auto taking_turns = lock();
  const auto index = index_of(name);
  auto& group = group_of(index);
  auto& metric = *entries_[index].metric;
  std::vector<size_t> leaving;  // every name of this metric object
  for (auto member : group.members) {
    if (same_object(member, index)) leaving.push_back(member);
  }
  if (leaving.size() == group.members.size()) return;
  metric.unshare_state();
  for (auto member : leaving) group.members.erase(std::find(group.members.begin(), group.members.end(), member));
  if (same_object(group.owner, index)) {
    // the state has the layout the metric that left needed: the group takes its new owner's own
    // (as regroup() would make it)
    group.owner = *std::max_element(group.members.begin(), group.members.end(), [&](size_t a, size_t b) {
      return entries_[a].metric->sharing_key().level < entries_[b].metric->sharing_key().level;
    });
    auto& head = owner(group);
    head.unshare_state();
    for (auto member : group.members) {
      if (!same_object(member, group.owner)) entries_[member].metric->share_state_of(head);
    }
  }
  groups_.push_back({index, leaving, Updates::Together});
  mark_shared();
  batch_.clear();
}

void MetricCollection::keep_alone(const std::string& name) {
  const auto taking_turns = lock();
  detach(name);
  group_of(index_of(name)).closed = true;
}

void MetricCollection::regroup(const std::vector<std::vector<std::string>>& groups) {
  const auto taking_turns = lock();
  std::vector<size_t> seen;
  std::vector<Group> regrouped;
  for (const auto& names : groups) {
    TORCH_CHECK_VALUE(!names.empty(), kName, ".regroup: a group is empty");
    const auto first = index_of(names.front());
    const auto& was = group_of(first);
    Group group{first, {}, was.updates, was.closed};
    const auto updates = group.updates;
    for (const auto& name : names) {
      const auto index = index_of(name);
      const auto& metric = *entries_[index].metric;
      const auto& head = *entries_[first].metric;
      TORCH_CHECK_VALUE(std::find(seen.begin(), seen.end(), index) == seen.end(), kName, ".regroup: '", name,
                        "' is in two groups");
      // a closed group takes no other metric (keep_alone); one metric under several names is one state
      const bool can_join = !group.closed && !group_of(index).closed && updates == Updates::Together &&
                            group_of(index).updates == updates &&
                            !metric.sharing_key().counts.empty() &&
                            metric.sharing_key().counts == head.sharing_key().counts && metric.device() == head.device();
      TORCH_CHECK_VALUE(index == first || same_object(index, first) || can_join, kName, ".regroup: '", name,
                        "' cannot share the state of '", names.front(), "'");
      seen.push_back(index);
      group.members.push_back(index);
    }
    regrouped.push_back(std::move(group));
  }
  TORCH_CHECK_VALUE(seen.size() == entries_.size(), kName, ".regroup: the groups name ", seen.size(), " of the ",
                    entries_.size(), " metrics");
  for (auto& entry : entries_) entry.metric->unshare_state();
  for (auto& group : regrouped) {
    const auto members = group.members;
    group.members.assign(1, group.owner);
    for (size_t m = 1; m < members.size(); ++m) share_group_with(group, members[m]);
  }
  groups_ = std::move(regrouped);
  mark_shared();
  batch_.clear();
}

void MetricCollection::mark_shared() {
  std::vector<std::shared_ptr<Metric>> shared;
  for (const auto& group : groups_) {
    std::vector<std::shared_ptr<Metric>> objects;  // a metric under several names is one object
    for (auto member : group.members) {
      const auto& metric = entries_[member].metric;
      if (std::find(objects.begin(), objects.end(), metric) == objects.end()) objects.push_back(metric);
    }
    if (objects.size() > 1) shared.insert(shared.end(), objects.begin(), objects.end());
  }
  marks_.set_shared(std::move(shared));
}

MetricCollection::Marks& MetricCollection::Marks::operator=(Marks&& other) noexcept {
  if (this != &other) {
    release();
    held_ = std::exchange(other.held_, {});
    shared_ = std::exchange(other.shared_, {});
  }
  return *this;
}

void MetricCollection::Marks::hold(const std::shared_ptr<Metric>& metric) {
  if (std::find(held_.begin(), held_.end(), metric) != held_.end()) return;  // (under another name)
  held_.push_back(metric);
  count_held(*metric, 1);
}

void MetricCollection::Marks::set_shared(std::vector<std::shared_ptr<Metric>> metrics) {
  for (const auto& metric : metrics) count_shared(*metric, 1);
  for (const auto& metric : shared_) count_shared(*metric, -1);
  shared_ = std::move(metrics);
}

void MetricCollection::Marks::release() noexcept {
  set_shared({});
  for (const auto& metric : std::exchange(held_, {})) {
    // (no collection updates it now; the last of a group holds its state alone, maybe laid out
    // for another metric: it takes its own too)
    if (count_held(*metric, -1) != 0 || metric.use_count() == 1) continue;
    try {
      metric->unshare_state();
    } catch (...) {  // out of memory, in a destructor: it shares on, as it did
    }
  }
}

size_t MetricCollection::index_of(const std::string& name) const {
  return static_cast<size_t>(&entry(name) - entries_.data());
}

const MetricCollection::Group& MetricCollection::group_of(size_t index) const {
  return *std::find_if(groups_.begin(), groups_.end(), [&](const Group& g) {
    return std::find(g.members.begin(), g.members.end(), index) != g.members.end();
  });
}

const MetricCollection::Entry& MetricCollection::entry(const std::string& name) const {
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.name == name; });
  TORCH_CHECK_INDEX(it != entries_.end(), kName, ": no metric named '", name, "'");
  return *it;
}

const Metric& MetricCollection::at(const std::string& name) const {
  const auto taking_turns = lock();
  return *entry(name).metric;
}

std::vector<std::string> MetricCollection::names() const {
  const auto taking_turns = lock();
  std::vector<std::string> names;
  for (const auto& e : entries_) names.push_back(e.name);
  return names;
}

std::vector<std::vector<std::string>> MetricCollection::groups() const {
  const auto taking_turns = lock();
  std::vector<std::vector<std::string>> groups;
  for (const auto& group : groups_) {
    groups.emplace_back();
    for (auto member : group.members) groups.back().push_back(entries_[member].name);
  }
  return groups;
}

std::vector<StateEntry> MetricCollection::state_entries() const {
  const auto taking_turns = lock();
  std::vector<StateEntry> entries;
  for (const auto& group : groups_) {
    const auto& prefix = entries_[group.members.front()].name;
    const auto& state = owner(group).state();
    const detail::UpdateLocks locks(state, state);  // a member may be updated on its own
    for (auto entry : state.entries()) {
      entry.name = prefix + "." + entry.name;
      entry.tensor = entry.tensor.clone();
      entries.push_back(std::move(entry));
    }
  }
  return entries;
}

void MetricCollection::load_state_entries(const StateDict& dict) {
  const auto taking_turns = lock();
  const detail::CollectionCall call;
  std::vector<StateDict> parts(groups_.size());
  size_t used = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const auto prefix = entries_[groups_[g].members.front()].name + ".";
    for (const auto& entry : owner(groups_[g]).state().entry_layout()) {
      const auto it = dict.find(prefix + entry.name);
      TORCH_CHECK_VALUE(it != dict.end(), kName, ".load_state_entries: missing key '", prefix + entry.name, "'");
      parts[g].emplace(entry.name, it->second);
      ++used;
    }
  }
  TORCH_CHECK_VALUE(used == dict.size(), kName, ".load_state_entries: ", dict.size() - used, " unexpected keys");
  for (size_t g = 0; g < groups_.size(); ++g) {
    detail::with_context(part_of(".load_state_entries", entries_[groups_[g].members.front()].name),
                         [&] { owner(groups_[g]).clone()->load_state_dict(parts[g]); });
  }
  for (size_t g = 0; g < groups_.size(); ++g) owner(groups_[g]).load_state_dict(parts[g]);
}

}  // namespace metrics
