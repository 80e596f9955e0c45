#pragma once

// A refusal raised deep inside a call, told where it happened: the caller's context before the
// message ("MetricCollection.load_state_dict: the part of 'aux' ...: Mean.load_state_dict: ...").

#include <c10/util/Exception.h>

#include <string>

namespace metrics::detail {

/// Runs `run`; a c10::ValueError it throws is thrown again with `context` before its message.
template <typename Run>
void with_context(const std::string& context, Run&& run) {
  try {
    run();
  } catch (const c10::ValueError& e) {
    TORCH_CHECK_VALUE(false, context, e.what_without_backtrace());
  }
}

}  // namespace metrics::detail
