#include <metrics/nan_policy.h>

#include <c10/util/Exception.h>

namespace metrics {

NanPolicy NanPolicy::parse(const std::string& text, const std::string& metric) {
  if (text == "error") return error();
  if (text == "warn") return warn();
  if (text == "ignore") return ignore();
  if (text == "disable") return disable();
  TORCH_CHECK_VALUE(false, metric, ": unknown nan_strategy '", text,
                    "'; expected 'error', 'warn', 'ignore', 'disable' or a float to replace NaNs with");
}

}  // namespace metrics
