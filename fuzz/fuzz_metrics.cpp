// libFuzzer target: a sequence of update / forward / merge / state_dict / load_state_dict /
// reset / clone / compute calls on two metrics of one configuration (and one of another), with
// the inputs and options of fuzz_calls.cpp. After every call:
//   - a call that throws threw a c10::Error naming the metric, only where the documented
//     metadata checks reject the arguments, and left every state bit-identical;
//   - a call that returns left the state the reference (reference.h) has, and compute() gives the
//     reference's value, raising or warning on counted bad input as the metric's policy says.
// Any violation aborts with the call and its arguments (fuzz_check.h).

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#include <fuzzer/FuzzedDataProvider.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <metrics/backend.h>
#include <metrics/classification.h>
#include <metrics/warning_capture.h>

#include "fuzz_calls.h"
#include "fuzz_check.h"
#include "fuzz_input.h"
#include "reference.h"

namespace fuzz {
namespace {

using metrics::Metric;
using metrics::StateDict;

enum class Outcome { Succeeds, Throws, Either };

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }


// Runs `op`. If it throws, the error must be allowed, a c10::Error naming `name`, and `metric` and
// `untouched` bit-identical to before; if it returns, it must have been allowed to, and `untouched`
// must still be bit-identical. Returns whether it returned.
template <typename Op>
bool attempt(const Metric& metric, const Metric* untouched, Outcome outcome, Op op) {
  const auto before = snapshot(metric.state_dict());
  const auto other_before = untouched ? snapshot(untouched->state_dict()) : StateDict{};
  try {
    op();
  } catch (const c10::Error& e) {
    const std::string message = e.what_without_backtrace();
    FUZZ_CHECK(outcome != Outcome::Succeeds, "unexpected error: ", message);
    FUZZ_CHECK(contains(message, metric.name()), "the error does not name ", metric.name(), ": ", message);
    const auto changed = bit_difference(before, metric.state_dict());
    FUZZ_CHECK(changed.empty(), "a call that threw changed the state: ", changed, "; error: ", message);
    if (untouched) {
      const auto other = bit_difference(other_before, untouched->state_dict());
      FUZZ_CHECK(other.empty(), "a call that threw changed its argument's state: ", other);
    }
    return false;
  } catch (const std::exception& e) {
    FUZZ_CHECK(false, "threw something other than a c10::Error: ", e.what());
  }
  FUZZ_CHECK(outcome != Outcome::Throws, "expected an error; the call returned");
  if (untouched) {
    const auto other = bit_difference(other_before, untouched->state_dict());
    FUZZ_CHECK(other.empty(), "the argument's state changed: ", other);
  }
  return true;
}

// The reference and its checks for either family.
struct Reference {
  explicit Reference(const Config& c) : agg(c), cls(c), classification(c.classification) {}
  AggReference agg;
  ClsReference cls;
  bool classification;

  const Tally& tally() const { return classification ? cls.tally : agg.tally; }
  void reset() { classification ? cls.reset() : agg.reset(); }
  void apply(const Call& call) { classification ? call.apply_cls(cls) : call.apply_agg(agg); }
  void merge(const Reference& other, bool appended) {
    classification ? cls.merge(other.cls, appended) : agg.merge(other.agg, appended);
  }
  void expect_state(const Metric& m) const {
    if (classification) return cls.expect_state(dynamic_cast<const metrics::ClassificationMetric&>(m));
    agg.expect_state(m);
  }
  void expect_value(const at::Tensor& value) const {
    classification ? cls.expect_value(value) : agg.expect_value(value);
  }
};

class Session {
 public:
  Session(Source& in, Config config, std::unique_ptr<Metric> a)
      : in_(in), config_(std::move(config)), a_(std::move(a)), b_(make_metric(config_)), ra_(config_), rb_(config_) {
    const auto other = foreign_config(in_, config_);
    if (options_valid(other)) foreign_ = make_metric(other);
  }

  void run() {
    for (int step = 0; step < 24 && !in_.empty(); ++step) {
      std::optional<metrics::ForceAtenPath> aten;
      if (in_.range(0, 1) == 0) aten.emplace();
      switch (in_.range(0, 15)) {
        case 0: case 1: case 2: case 3: update(*a_, ra_, false); break;
        case 4: case 5: update(*b_, rb_, false); break;
        case 6: case 7: update(*a_, ra_, true); break;
        case 8: merge(); break;
        case 9: bad_merge(); break;
        case 10: load(); break;
        case 11: bad_load(); break;
        case 12: reset_or_clone(); break;
        default: compute(*a_, ra_); break;
      }
    }
    compute(*a_, ra_);
    compute(*b_, rb_);
  }

 private:
  void context(const std::string& op, const std::string& detail = "") {
    set_context(c10::str(metric_name(config_), "(", a_->options_text(), ") step ", ++steps_, ": ", op, " ", detail));
  }

  void update(Metric& m, Reference& ref, bool forward) {
    const auto call = draw_call(in_, config_);
    context(forward ? "forward" : (&m == a_.get() ? "update a" : "update b"), call.text);
    at::Tensor batch_value;
    const auto outcome = call.rejected ? Outcome::Throws : Outcome::Succeeds;
    if (!attempt(m, nullptr, outcome, [&] { batch_value = call.run(m, forward); })) return;
    if (forward) {
      Reference batch(config_);
      batch.apply(call);
      batch.expect_value(batch_value);
      ref.merge(batch, /*appended=*/true);
    } else {
      ref.apply(call);
    }
    ref.expect_state(m);
  }

  void merge() {
    const bool into_a = in_.range(0, 1) == 0;
    Metric& target = into_a ? *a_ : *b_;
    Metric& source = into_a ? *b_ : *a_;
    context(into_a ? "merge b into a" : "merge a into b");
    attempt(target, &source, Outcome::Succeeds, [&] { target.merge(source); });
    (into_a ? ra_ : rb_).merge(into_a ? rb_ : ra_, /*appended=*/false);
    (into_a ? ra_ : rb_).expect_state(target);
  }

  void bad_merge() {
    if (foreign_ && in_.range(0, 1) == 0) {
      context("merge a metric of other options", foreign_->name() + "(" + foreign_->options_text() + ")");
      attempt(*a_, foreign_.get(), Outcome::Throws, [&] { a_->merge(*foreign_); });
      return;
    }
    context("merge a into itself");
    attempt(*a_, nullptr, Outcome::Throws, [&] { a_->merge(*a_); });
  }

  // b's state into a (with or without its "_version" and "_metric", laid out otherwise in
  // memory), or a's own back into a.
  void load() {
    const bool own = in_.range(0, 2) == 0;
    auto dict = own ? a_->state_dict() : b_->state_dict();
    if (in_.one_in(3)) dict.erase("_version");
    if (in_.one_in(3)) dict.erase("_metric");
    for (auto& [name, tensor] : dict) {
      if (tensor.dim() >= 1 && in_.one_in(3)) {
        tensor = at::stack({tensor, tensor}, 1).select(1, 0);  // the same values, strided
      }
    }
    context(own ? "load a's own state" : "load b's state into a");
    const auto want = snapshot(own ? a_->state_dict() : b_->state_dict());
    attempt(*a_, nullptr, Outcome::Succeeds, [&] { a_->load_state_dict(dict); });
    const auto difference = bit_difference(want, a_->state_dict());
    FUZZ_CHECK(difference.empty(), "the loaded state differs from the dict: ", difference);
    if (!own) ra_ = rb_;
    ra_.expect_state(*a_);
  }

  void bad_load() {
    auto dict = b_->state_dict();
    std::vector<std::string> states;
    for (const auto& [name, tensor] : dict) {
      if (name[0] != '_') states.push_back(name);
    }
    const auto& victim = states[in_.range(0, static_cast<int64_t>(states.size()) - 1)];
    const int how = static_cast<int>(in_.range(0, 8));
    auto& t = dict.at(victim);
    switch (how) {
      case 0: dict.erase(victim); break;
      case 1: dict.emplace("bogus", at::zeros({1})); break;
      case 2: t = t.to(other_dtype(t.scalar_type())); break;
      case 3: t = t.unsqueeze(0); break;
      case 4: dict["_version"] = dict.at("_version") + 1; break;  // a version after this build's
      case 5: dict["_version"] = at::ones({2}, at::kLong); break;
      case 6: {
        auto bytes = dict.at("_metric").clone();
        const auto i = in_.range(0, bytes.numel() - 1);
        bytes[i].fill_((bytes[i].item<uint8_t>() + 1 + in_.range(0, 200)) % 256);  // another byte
        dict["_metric"] = bytes;
        break;
      }
      case 7:  // a count below 0 (update_count, bad_input_counts, unweighted classification counts)
        victim_count(dict);
        break;
      default:
        if (!foreign_) return;
        dict = foreign_->state_dict();
        break;
    }
    context("load a bad state", c10::str("change ", how, " to '", victim, "'"));
    attempt(*a_, nullptr, Outcome::Throws, [&] { a_->load_state_dict(dict); });
  }

  // A dtype the entry's cannot be converted from (int64 counts load into float64 ones exactly).
  static at::ScalarType other_dtype(at::ScalarType dtype) { return dtype == at::kDouble ? at::kFloat : at::kDouble; }

  static void victim_count(StateDict& dict) {
    auto& count = dict.at("update_count");
    count = count.clone().fill_(-1);
  }

  void reset_or_clone() {
    if (in_.range(0, 1) == 0) {
      context("reset a");
      attempt(*a_, nullptr, Outcome::Succeeds, [&] { a_->reset(); });
      const auto fresh = make_metric(config_);
      const auto difference = bit_difference(fresh->state_dict(), a_->state_dict());
      FUZZ_CHECK(difference.empty(), "reset() is not the initial state: ", difference);
      ra_.reset();
      return;
    }
    context("clone a");
    auto copy = a_->clone();
    const auto difference = bit_difference(a_->state_dict(), copy->state_dict());
    FUZZ_CHECK(difference.empty(), "the clone's state differs: ", difference);
    a_ = std::move(copy);
  }

  // compute() twice: the same bits, the reference's value, and a report as the policy says.
  void compute(const Metric& m, const Reference& ref) {
    context(&m == a_.get() ? "compute a" : "compute b");
    std::vector<std::string> warnings;
    metrics::WarningCapture capture([&](const std::string& message) {
      warnings.push_back(message);
      return true;
    });
    const bool bad = !ref.tally().clean() && m.state().tracks_bad_input();
    auto outcome = bad && raises_on_bad_input(config_) ? Outcome::Throws : Outcome::Succeeds;
    // Weighted counts past float64's range make check() raise too; near it, whether they
    // overflowed depends on the order of additions.
    if (outcome == Outcome::Succeeds && ref.classification && !ref.cls.comparable) outcome = Outcome::Either;
    at::Tensor first, second;
    if (!attempt(m, nullptr, outcome, [&] { first = m.compute(); })) return;
    attempt(m, nullptr, Outcome::Succeeds, [&] { second = m.compute(); });
    const auto difference = bit_difference({{"value", first}}, {{"value", second}});
    FUZZ_CHECK(difference.empty(), "compute() is not idempotent: ", difference);
    ref.expect_value(first);
    for (const auto& w : warnings) FUZZ_CHECK(contains(w, m.name()), "a warning does not name the metric: ", w);
    if (bad) FUZZ_CHECK(!warnings.empty(), "bad input counted, but compute() neither raised nor warned");
    if (!bad && outcome == Outcome::Succeeds && ref.tally().updates > 0) {
      FUZZ_CHECK(warnings.empty(), "compute() warned without bad input: ", warnings.front());
    }
  }

  Source& in_;
  Config config_;
  std::unique_ptr<Metric> a_, b_, foreign_;
  Reference ra_, rb_;
  int steps_ = 0;
};

bool initialize() {
  at::set_num_threads(1);  // one thread: the runs are small, and repeatable
  static metrics::WarningCapture quiet([](const std::string&) { return true; });
  return true;
}

}  // namespace
}  // namespace fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool initialized = fuzz::initialize();
  (void)initialized;
  FuzzedDataProvider provider(data, size);
  fuzz::Source in(provider);
  const auto config = fuzz::draw_config(in);
  std::unique_ptr<metrics::Metric> metric;
  const bool valid = fuzz::options_valid(config);
  fuzz::set_context(c10::str("construct ", fuzz::metric_name(config)));
  try {
    metric = fuzz::make_metric(config);
  } catch (const c10::Error& e) {
    const std::string message = e.what_without_backtrace();
    FUZZ_CHECK(!valid, "the constructor rejected valid options: ", message);
    FUZZ_CHECK(fuzz::contains(message, fuzz::metric_name(config)), "the error does not name the metric: ", message);
    return 0;
  }
  FUZZ_CHECK(valid, "the constructor accepted invalid options: ", metric->options_text());
  fuzz::Session(in, config, std::move(metric)).run();
  return 0;
}
