#include "cpu_isa.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdlib>
#include <string>

namespace metrics::detail::cpu {
namespace {

Isa detect() {
#ifdef METRICS_HAS_X86
  const bool base = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("popcnt");
  if (base && __builtin_cpu_supports("avx512f")) return Isa::Avx512;
  if (base) return Isa::Avx2;
#endif
  return Isa::Scalar;
}

Isa requested() {
  const char* value = std::getenv("METRICS_CPU_ISA");
  if (value == nullptr || *value == '\0') return Isa::Avx512;
  const std::string name(value);
  if (name == "scalar") return Isa::Scalar;
  if (name == "avx2") return Isa::Avx2;
  TORCH_CHECK_VALUE(name == "avx512", "METRICS_CPU_ISA is '", name, "'; expected scalar, avx2 or avx512");
  return Isa::Avx512;
}

}  // namespace

Isa best_isa() {
  static const Isa isa = std::min(detect(), requested());
  return isa;
}

bool isa_available(Isa isa) { return static_cast<int>(isa) <= static_cast<int>(best_isa()); }

}  // namespace metrics::detail::cpu
