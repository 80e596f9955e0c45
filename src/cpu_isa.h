#pragma once

// The instruction sets the hand-written CPU kernels are compiled for. Each kernel is built for its
// set with a function target attribute, so the library still runs on CPUs without it; the best one
// this CPU has is chosen at run time.

#if defined(__x86_64__) || defined(_M_X64)
// GCC 12's avx512fintrin.h trips -Wmaybe-uninitialized and -Wuninitialized on its own
// _mm512_undefined_* (GCC bug 105593), which -Werror would turn into a build failure. (Clang
// knows no -Wmaybe-uninitialized.)
#pragma GCC diagnostic push
#ifndef __clang__
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#pragma GCC diagnostic pop
#define METRICS_HAS_X86 1
#define METRICS_TARGET_AVX2 __attribute__((target("avx2,fma,popcnt")))
#define METRICS_TARGET_AVX512 __attribute__((target("avx512f,avx2,fma,popcnt")))
#endif

namespace metrics::detail::cpu {

enum class Isa { Scalar, Avx2, Avx512 };

/// The widest set this CPU runs: Avx512 needs AVX-512F, Avx2 needs AVX2 and FMA; both POPCNT. The
/// environment variable METRICS_CPU_ISA (scalar, avx2 or avx512) caps it, so that the narrower
/// kernels run, and are tested, on a CPU with wider ones.
Isa best_isa();

/// Whether `isa` runs here (every set up to best_isa()).
bool isa_available(Isa isa);

}  // namespace metrics::detail::cpu
