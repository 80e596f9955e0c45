#pragma once

// Which public call an update serves, for its refusals to name.

#include <string>

namespace metrics {

/// While alive, the updates this thread makes serve `call`, which their refusals name: forward()
/// sets "forward" for its batch's update ("Mean.forward: weight of shape [2] ..."), as the Python
/// package does around a forward() it runs itself; "update" where none is alive.
class UpdateCall {
 public:
  explicit UpdateCall(const char* call) : outer_(current()) { current() = call; }
  ~UpdateCall() { current() = outer_; }
  UpdateCall(const UpdateCall&) = delete;
  UpdateCall& operator=(const UpdateCall&) = delete;

  static const char* name() { return current(); }

  /// "Mean.update: " (or "Mean.forward: "): how a refusal of `metric`'s input starts.
  static std::string prefix(const std::string& metric) { return metric + "." + name() + ": "; }

 private:
  static const char*& current() {
    thread_local const char* call = "update";
    return call;
  }

  const char* outer_;
};

}  // namespace metrics
