#include "cpu_isa.h"

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

}  // namespace

Isa best_isa() {
  static const Isa isa = detect();
  return isa;
}

bool isa_available(Isa isa) { return static_cast<int>(isa) <= static_cast<int>(best_isa()); }

}  // namespace metrics::detail::cpu
