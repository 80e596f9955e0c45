#include <metrics/nan_policy.h>

#include <c10/util/Exception.h>

namespace metrics {

NanPolicy NanPolicy::parse(const std::string& text, const std::string& metric) {
  if (text == "error") return error();
  if (text == "warn") return warn();
  if (text == "ignore") return ignore();
  if (text == "disable") return disable();
  // TorchMetrics' words, so code that matches its message still does
  TORCH_CHECK_VALUE(false, metric, ": Arg `nan_strategy` should either be a float or one of ",
                    "['error', 'warn', 'ignore', 'disable'] but got '", text, "'.");
}

}  // namespace metrics
