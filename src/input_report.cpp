#include <metrics/input_report.h>

namespace metrics {

std::string InputReport::message(const std::string& metric) const {
  std::string text = metric + ": ";
  bool first = true;
  for (const auto& [kind, count] : counts) {
    if (count == 0) continue;
    text += (first ? "" : ", ") + std::to_string(count) + " " + kind;
    first = false;
  }
  text += " in " + std::to_string(bad_updates) + (bad_updates == 1 ? " update" : " updates");
  text += ", first at update " + std::to_string(first_bad_update);
  text += " (kept out of the state)";
  return text;
}

}  // namespace metrics
