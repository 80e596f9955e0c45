# Sourced by the scripts: one build directory, ccache on, Debian's interpreter (the only one
# that sees Debian's torch).
export METRICS_BUILD_DIR="${METRICS_BUILD_DIR:-build}"
export PYTHON="${PYTHON:-/usr/bin/python3}"
export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}"

configure() {
  cmake -S . -B "$METRICS_BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE="$PYTHON" "$@"
}
