#pragma once

#include <string>

namespace metrics::detail {

/// The public call that counts a batch on this thread, which the update's checks name: "forward"
/// while a forward() runs (its batch's update), else "update".
class UpdateCall {
 public:
  explicit UpdateCall(const char* call) : outer_(current()) { current() = call; }
  ~UpdateCall() { current() = outer_; }
  UpdateCall(const UpdateCall&) = delete;
  UpdateCall& operator=(const UpdateCall&) = delete;

  static const char* name() { return current(); }

 private:
  static const char*& current() {
    thread_local const char* call = "update";
    return call;
  }

  const char* outer_;
};

/// "Mean.update: " (or "Mean.forward: "): how a message about `metric`'s input starts.
inline std::string caller(const std::string& metric) { return metric + "." + UpdateCall::name() + ": "; }

}  // namespace metrics::detail
