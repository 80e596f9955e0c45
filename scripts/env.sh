# Sourced by the scripts: one build directory (and one each for the sanitized tests and the
# fuzzer), ccache on, Debian's interpreter (the only one that sees Debian's torch).
export METRICS_BUILD_DIR="${METRICS_BUILD_DIR:-build}"
export METRICS_ASAN_BUILD_DIR="${METRICS_ASAN_BUILD_DIR:-build-asan}"
export METRICS_FUZZ_BUILD_DIR="${METRICS_FUZZ_BUILD_DIR:-build-fuzz}"
export PYTHON="${PYTHON:-/usr/bin/python3}"
export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}"

configure() {
  cmake -S . -B "$METRICS_BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE="$PYTHON" "$@"
}

# The library, the C++ tests and the Python extension with AddressSanitizer and
# UndefinedBehaviorSanitizer (GCC), at -O1 (an ASan build's usual level, and a quicker compile),
# and with the check for concurrent updates of one metric (METRICS_CHECK_THREADS) on.
configure_sanitized() {
  METRICS_BUILD_DIR="$METRICS_ASAN_BUILD_DIR" configure -DMETRICS_SANITIZE=address,undefined \
    -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" -DMETRICS_CHECK_THREADS=ON -DMETRICS_BUILD_BENCH=OFF \
    -DMETRICS_BUILD_EXAMPLES=OFF -DMETRICS_INSTALL=OFF "$@"
}

# The library and the libFuzzer target, with clang: fuzzing, ASan and UBSan instrumentation.
configure_fuzz() {
  CC=clang CXX=clang++ METRICS_BUILD_DIR="$METRICS_FUZZ_BUILD_DIR" configure -DMETRICS_FUZZ=ON \
    -DMETRICS_SANITIZE=address,undefined -DMETRICS_BUILD_TESTS=OFF -DMETRICS_BUILD_BENCH=OFF \
    -DMETRICS_BUILD_PYTHON=OFF -DMETRICS_BUILD_EXAMPLES=OFF -DMETRICS_INSTALL=OFF "$@"
}

# LD_PRELOAD for Python with the sanitized extension: ASan's runtime must be the first library
# loaded, and libstdc++ must be loaded when it starts, or its __cxa_throw interceptor finds no
# real __cxa_throw and the first C++ exception aborts (python3 itself does not link libstdc++).
asan_preload() {
  echo "$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libstdc++.so)"
}

# Warns (on stderr) when the file system of the working tree has less than $1 GiB free: short of
# space, a build stops with "No space left on device" (a precompiled header alone is 0.3 to 0.7 GiB).
warn_if_short_of_space() {
  local free_gib
  free_gib=$(df -Pk . | awk 'NR == 2 {print int($4 / 1048576)}')
  [ "$free_gib" -ge "$1" ] ||
    echo "$(basename "$0"): warning: $free_gib GiB free here, and this run writes about $1 GiB (builds, ccache)" >&2
}
