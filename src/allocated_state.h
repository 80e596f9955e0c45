#pragma once

#include <c10/util/Exception.h>

#include <string>

#include <metrics/metric_state.h>

namespace metrics::detail {

// make()'s state; where it cannot be allocated (a device this torch lacks, too little memory), an
// error that names the metric and `what` it allocated, ahead of the allocator's own message.
template <class MakeState>
MetricState allocated_state(const std::string& metric, const std::string& what, MakeState make) {
  try {
    return make();
  } catch (const c10::Error& e) {
    TORCH_CHECK(false, metric, ": could not allocate ", what, ": ", e.what_without_backtrace());
  }
}

}  // namespace metrics::detail
