#pragma once

#include <charconv>
#include <string>

namespace metrics::detail {

/// The shortest text that reads back as `value` ("0.9", not "0.90000000000000002"): exact enough
/// to tell options apart, short enough for messages.
inline std::string number_text(double value) {
  char buffer[32];
  const auto end = std::to_chars(buffer, buffer + sizeof(buffer), value).ptr;
  return std::string(buffer, end);
}

}  // namespace metrics::detail
