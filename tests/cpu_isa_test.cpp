// METRICS_CPU_ISA caps the instruction set the CPU kernels use; ctest runs the whole suite once
// more under avx2 and under scalar (tests/CMakeLists.txt), where these checks see the cap.

#include <cstdlib>
#include <string>

#include "../src/cpu_isa.h"
#include "test_support.h"

namespace metrics::detail::cpu {
namespace {

TEST(CpuIsa, TheRequestedSetCapsTheOneUsed) {
  const char* value = std::getenv("METRICS_CPU_ISA");
  const std::string requested = value ? value : "";
  bool avx2 = false;
#ifdef METRICS_HAS_X86
  avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("popcnt");
#endif
  if (requested == "scalar") {
    EXPECT_EQ(best_isa(), Isa::Scalar);
  } else if (requested == "avx2") {
    EXPECT_EQ(best_isa(), avx2 ? Isa::Avx2 : Isa::Scalar);
  } else {
    EXPECT_EQ(best_isa() != Isa::Scalar, avx2);
  }
  EXPECT_TRUE(isa_available(Isa::Scalar));
  EXPECT_EQ(isa_available(Isa::Avx512), best_isa() == Isa::Avx512);
}

}  // namespace
}  // namespace metrics::detail::cpu
