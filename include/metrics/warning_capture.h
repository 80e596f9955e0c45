#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace metrics {

/// While alive, receives the c10 warnings (TORCH_WARN) that would otherwise go to the current
/// handler: compute()'s NaN and bad-input reports among them. c10 keeps a handler per thread (its
/// header says global; its implementation is thread-local), so a capture sees the warnings of the
/// thread that made it; create and destroy captures in a nested (stack) order.
class WarningCapture {
 public:
  /// Returns true if it consumed the warning, false to pass it on to the previous handler.
  using Sink = std::function<bool(const std::string& message)>;

  /// Keeps every warning in messages().
  WarningCapture();
  explicit WarningCapture(Sink sink);
  ~WarningCapture();
  WarningCapture(const WarningCapture&) = delete;
  WarningCapture& operator=(const WarningCapture&) = delete;

  const std::vector<std::string>& messages() const { return messages_; }

 private:
  class Handler;
  std::vector<std::string> messages_;
  std::unique_ptr<Handler> handler_;
};

}  // namespace metrics
