#pragma once

#include <c10/util/Exception.h>
#include <c10/util/StringUtil.h>

#include <string>
#include <utility>

namespace metrics {

/// Inputs whose shapes do not fit together (preds and target, a weight and the values): a
/// ValueError, which Python raises as a RuntimeError too (TorchMetrics raises one there).
class ShapeError : public c10::ValueError {
 public:
  ShapeError(c10::SourceLocation location, std::string message) : c10::ValueError(location, std::move(message)) {}
};

}  // namespace metrics

/// Throws metrics::ShapeError with the arguments' text where `cond` is false (as TORCH_CHECK_VALUE).
#define METRICS_CHECK_SHAPE(cond, ...)                                                                 \
  if (!(cond)) {                                                                                       \
    throw ::metrics::ShapeError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, ::c10::str(__VA_ARGS__)); \
  }
