#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>
#include <torch/arg.h>

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <metrics/forward_batch.h>
#include <metrics/metric.h>

namespace metrics {

struct MetricCollectionOptions {
  /// Let metrics that count the same things share one state (TorchMetrics' compute_groups):
  /// worked out from their sharing keys when they are added (no trial update, no comparison of
  /// states: add() reads back once whether a state is fresh).
  TORCH_ARG(bool, compute_groups) = true;
};

/// What MetricCollection::load_state_dict does with a metric that has no key in the dict.
enum class AbsentMetric {
  Refused,          ///< an error: the dict must hold every metric's state
  FollowsItsGroup,  ///< it reads what its group's owner holds after the load (as TorchMetrics' compute
                    ///< groups make it); an absent owner reads a group-mate's part that can serve
                    ///< it, or keeps its state
};

/// Who updates a metric of a collection: the collection, with the others (sharing states where
/// they count the same things), or the caller, apart (a Python subclass with its own update()).
/// A metric updated apart keeps its own state, which update(), forward(), compute() and check()
/// leave alone (the caller computes it too); state dicts, merge, reset, to and sync treat it as
/// the others.
enum class Updates { Together, Apart };

/// Named metrics of any family, updated and computed together.
///
/// Metrics whose sharing keys match share one state (a multiclass ConfusionMatrix's C x C state
/// also serves the other multiclass metrics with the same counting options), so update() counts
/// each batch once per distinct state. Metrics whose state holds counts (updates, or a load) keep
/// their own state. update() checks every distinct state's arguments before counting into any: a
/// call that throws changes nothing. Calls from several threads take turns (a lock of the
/// collection's own, taken before any state's): add() and detach() never run in the middle of an
/// update.
class MetricCollection {
 public:
  explicit MetricCollection(MetricCollectionOptions options = {});
  MetricCollection(MetricCollection&&) = default;
  MetricCollection& operator=(MetricCollection&&) = default;
  MetricCollection(const MetricCollection&) = delete;
  MetricCollection& operator=(const MetricCollection&) = delete;

  /// Adds `metric` under `name` (names are unique). The collection shares the metric: updates
  /// through the collection show in it, and it may now share its state with others. While it does,
  /// it refuses update, forward, reset, merge, load_state_dict, to and swap_state called on it
  /// directly (they would change its group-mates too): make them here, or detach() it first.
  MetricCollection& add(const std::string& name, std::shared_ptr<Metric> metric,
                        Updates updates = Updates::Together);
  /// Adds a copy of `metric`.
  template <class M, class = std::enable_if_t<std::is_base_of_v<Metric, M>>>
  MetricCollection& add(const std::string& name, const M& metric) {
    return add(name, std::shared_ptr<Metric>(metric.clone()));
  }

  /// Every metric takes the same arguments (keywords each by the names it knows).
  void update(const UpdateArgs& args);
  /// update(preds, target[, weight]) by position to every metric, as classification metrics take
  /// them (a Mean would take target as its weight: with aggregators, give keywords).
  void update(const at::Tensor& preds, const at::Tensor& target, const c10::optional<at::Tensor>& weight = {});
  /// name -> value (of the metrics updated together); raises or warns once per distinct state that
  /// counted bad input, naming the metrics that share it ("MetricCollection.compute: 'a', 'b': ...").
  /// Every report that warns does; then the first that raises is raised.
  std::map<std::string, at::Tensor> compute() const;
  /// name -> value, with no report and no read-back: what forward() gives of its batch.
  std::map<std::string, at::Tensor> compute_without_report() const;
  /// Accumulates, and returns each metric's value on this batch alone (counted on a batch
  /// collection kept from one forward to the next, see ForwardBatch).
  std::map<std::string, at::Tensor> forward(const UpdateArgs& args);
  std::map<std::string, at::Tensor> forward(const at::Tensor& preds, const at::Tensor& target,
                                            const c10::optional<at::Tensor>& weight = {});
  /// compute()'s reports, without the values.
  void check() const;
  void reset();
  /// Folds in a collection with the same names and metrics, whose groups each hold one of this
  /// one's groups or more (the same groups, or fewer metrics kept alone there); `other` is unchanged.
  void merge(const MetricCollection& other, MergeOrder order = MergeOrder::Parallel);
  /// "<name>.<state>" -> tensor, for every metric, each in its own layout (Metric::state_dict):
  /// the keys are the same however the metrics are grouped.
  StateDict state_dict() const;
  /// Checks every part before loading any: a bad dict changes nothing. A metric whose part differs
  /// from the state its group loads (a dict from a collection grouped otherwise, or one member
  /// reset alone) leaves its group, as detach() makes it; metrics whose parts are equal share one
  /// state, as they did when the dict was written. `absent` says what a metric with no key in
  /// `dict` does.
  void load_state_dict(const StateDict& dict, AbsentMetric absent = AbsentMetric::Refused);
  void to(at::Device device);
  /// A deep copy that shares states between the same metrics as this one does.
  MetricCollection clone() const;
  /// Gives metric `name` a copy of the state it shares with others (in its own layout: see
  /// Metric::own_state_copy), in a group of its own with its other names: what it then counts,
  /// resets or loads on its own no longer reaches them, as with TorchMetrics' copied states. The
  /// collection updates it as before. Nothing changes for a metric alone in its group.
  void detach(const std::string& name);
  /// detach(), and no metric added later joins its group: for a metric that another collection
  /// updates too, whose batches would otherwise reach the metrics that share its state here. Before
  /// adding a metric to a second collection, keep it alone in the first; after, in the second (the
  /// Python package does both): added first, it may join a group there whose state it then takes.
  void keep_alone(const std::string& name);
  /// Makes `groups` (every metric's name once, each group's metrics counting the same things on one
  /// device, a metric updated apart alone) the collection's compute groups, in that order, each
  /// sharing one state (the own state of the metric that counts most): how a copy rebuilds the
  /// groups of the collection it copies, which detach() and metrics added after updates (or a load)
  /// make differ from what add() works out. Load the state after. On error nothing has changed.
  void regroup(const std::vector<std::vector<std::string>>& groups);

  const Metric& at(const std::string& name) const;
  /// Names in the order added.
  std::vector<std::string> names() const;
  /// The metrics of each distinct state, in the order added (TorchMetrics' compute_groups).
  std::vector<std::vector<std::string>> groups() const;
  /// The reduction seam: each group's state tensors, named "<first metric of its group>.<entry>",
  /// with their reduction and dtype (groups that share one state, handed over by a nested
  /// collection, list it once each: the same values, reduced alike). Read them, never write them.
  std::vector<StateEntry> state_entries() const;
  /// Loads values for the entries state_entries() walks, keyed as it names them (what a
  /// cross-process reduction of the walk gives back). Checks everything before loading anything.
  void load_state_entries(const StateDict& dict);

 private:
  struct Entry {
    std::string name;
    std::shared_ptr<Metric> metric;
  };
  struct Group {
    size_t owner;                 // the entry whose state the group uses
    std::vector<size_t> members;  // entries, in the order added
    Updates updates;
    bool closed = false;  // no metric joins it (keep_alone)
  };
  void join_group(size_t index, Updates updates);
  // Makes every member of group `g` share entry `index`'s state, which the group then uses.
  void share_group_with(Group& group, size_t index);
  size_t index_of(const std::string& name) const;
  // "'<name>', ...": the metrics that share group `g`'s state.
  std::string names_sharing_state_of(size_t g) const;
  // "MetricCollection<who>: '<name>', ...: ", the metrics that share group `g`'s state: what a
  // report of the bad input it counted says first.
  std::string report_prefix(const char* who, size_t g) const;
  // A copy of metric `index` in its own layout with `part` loaded (throws what loading it throws).
  std::unique_ptr<Metric> loaded_alone(size_t index, const StateDict& part) const;
  // What metric `index`, absent from a dict (AbsentMetric::FollowsItsGroup), holds after the load:
  // the state in `loaded` of its group's owner, else of a group-mate that can serve it, else its own.
  std::unique_ptr<Metric> absent_metric_state(size_t index, const std::vector<std::unique_ptr<Metric>>& loaded) const;
  // The groups that hold the states of `loaded` (one per metric, each in its own layout): a group
  // keeps the metrics that read in its owner's state what they hold; the others group by equal
  // states.
  std::vector<std::vector<std::string>> groups_holding(const std::vector<std::unique_ptr<Metric>>& loaded) const;
  // Whether metric `index`, sharing the state of `server`, would hold what `held` holds.
  bool reads(const Metric& server, size_t index, const Metric& held) const;
  // A copy of metric `index` in its own layout holding what it reads in `server`'s state, on
  // server's device (its own state where none is given).
  std::unique_ptr<Metric> copy_reading(size_t index, const Metric* server = nullptr) const;
  // Whether entries `a` and `b` are one metric object (under two names).
  bool same_object(size_t a, size_t b) const { return entries_[a].metric == entries_[b].metric; }
  const Group& group_of(size_t index) const;
  Group& group_of(size_t index) { return const_cast<Group&>(std::as_const(*this).group_of(index)); }
  std::unique_lock<std::recursive_mutex> lock() const { return std::unique_lock<std::recursive_mutex>(*mutex_); }
  /// name -> value of the metrics updated together, with no report.
  std::map<std::string, at::Tensor> values() const;
  // The first group that holds the state of group `g` (`g` where no earlier one does). Groups here
  // share one where a nested collection handed its metrics over to another, in which they share
  // states anew: a state takes a batch, a merge, a load and a report once.
  size_t first_with_state_of(size_t g) const;
  // Of the groups that hold the state of group `g`, the first whose owner has the highest level:
  // its layout is the state's (unless no owner's here is: lays_out()), and serves the others.
  size_t server_of(size_t g) const;
  // Whether the state of group `g` is laid out as its owner's own. The server of a state is not
  // where the state is a collection's this one was handed to, laid out for a metric of that one
  // alone (an outer ConfusionMatrix's C x C counts, shared by an inner Precision and Recall).
  bool lays_out(size_t g) const;
  // Whether group `g` counts the collection's batches: updated together, and first with its state.
  bool counts_batches(size_t g) const;
  // The owners whose loaded part loads their state, one per state: where groups share one, of
  // those whose part the dict holds the highest level's (the others' must agree: else ValueError),
  // or the server's; none where that part is in a smaller layout than the state's (it must agree
  // with the state: else ValueError), or where the state is laid out for no owner here (lays_out()).
  std::set<size_t> state_loaders(const std::vector<StateDict>& parts,
                                 const std::vector<std::unique_ptr<Metric>>& loaded) const;
  // Whether `ma` and `mb`, states for entries `a` and `b` (of groups that share one state here),
  // hold the same counts: the higher level's read in the other's layout where they differ.
  bool same_counts_for(size_t a, const Metric& ma, size_t b, const Metric& mb) const;
  const Entry& entry(const std::string& name) const;
  Metric& owner(const Group& group) const { return *entries_[group.owner].metric; }

  // The metrics this collection holds, and those it counts as sharing a state with others
  // (Metric::check_alone), counted again whenever the groups change. Once the collection is gone it
  // counts neither, and a metric it held that no collection holds any more, kept by its caller,
  // takes a state of its own: its group-mates of then count on without it. (Before entries_: it
  // lets go of the metrics after them.)
  class Marks {
   public:
    Marks() = default;
    Marks(Marks&& other) noexcept
        : held_(std::exchange(other.held_, {})), shared_(std::exchange(other.shared_, {})) {}
    Marks& operator=(Marks&& other) noexcept;
    ~Marks() { release(); }
    void hold(const std::shared_ptr<Metric>& metric);
    void set_shared(std::vector<std::shared_ptr<Metric>> metrics);

   private:
    void release() noexcept;
    std::vector<std::shared_ptr<Metric>> held_, shared_;
  };

  MetricCollectionOptions options_;
  Marks marks_;
  std::vector<Entry> entries_;
  std::vector<Group> groups_;  // distinct states, in the order first used
  // Marks the metrics of every group of more than one metric object.
  void mark_shared();
  static void count_shared(Metric& metric, int by) { metric.shared_in_groups_ += by; }
  // Counts `metric` as held by one collection more (by = 1) or less (-1); returns how many hold it.
  static int count_held(Metric& metric, int by) { return metric.held_by_collections_ += by; }
  ForwardBatch<MetricCollection> batch_;
  std::unique_ptr<std::recursive_mutex> mutex_ = std::make_unique<std::recursive_mutex>();
};

}  // namespace metrics
