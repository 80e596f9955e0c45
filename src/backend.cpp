#include <metrics/backend.h>

namespace metrics {
namespace {
thread_local bool fast_path_enabled = true;
}

ForceAtenPath::ForceAtenPath() : previous_(fast_path_enabled) { fast_path_enabled = false; }

ForceAtenPath::~ForceAtenPath() { fast_path_enabled = previous_; }

bool cpu_fast_path_enabled() { return fast_path_enabled; }

}  // namespace metrics
