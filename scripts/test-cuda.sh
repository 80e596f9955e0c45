#!/usr/bin/env bash
# The Python suite against a CUDA PyTorch, on a machine with a GPU: builds the extension with the
# python3 on PATH (its torch, e.g. a pip wheel with CUDA), then runs tests/python, the CPU tests and
# tests/python/test_cuda.py (CUDA tensors under torch.cuda.set_sync_debug_mode("error"), CUDA-graph
# capture and replay), and prints "N passed, N failed".
#
#   bash scripts/test-cuda.sh [BUILD_DIR]        (default: build-cuda)
#
# Extra pytest arguments: PYTEST_ARGS="-k cuda" bash scripts/test-cuda.sh. Installs nothing.
set -uo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR="${1:-build-cuda}"
PYTHON="${PYTHON:-$(command -v python3)}"

if ! "$PYTHON" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "test-cuda.sh: $PYTHON's torch sees no CUDA device (the CUDA tests would all be skipped)" >&2
  exit 1
fi
"$PYTHON" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, torch.cuda.get_device_name(0))'

# CMake finds this interpreter's torch and pybind11, and nvcc's CUDA toolkit (cmake/TorchOfInterpreter.cmake).
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE="$PYTHON" \
  -DMETRICS_BUILD_TESTS=OFF -DMETRICS_BUILD_BENCH=OFF -DMETRICS_BUILD_EXAMPLES=OFF -DMETRICS_BUILD_PYTHON=ON || exit 1
cmake --build "$BUILD_DIR" --target _C || exit 1
build_abs=$(cd "$BUILD_DIR" && pwd)

# A pip wheel of torch may be built against an older libstdc++ than the compiler's; the extension
# then needs the compiler's (README, Build options).
libstdcxx=$(g++ -print-file-name=libstdc++.so.6 2>/dev/null || true)
if [ -n "$libstdcxx" ] && [ "${libstdcxx#/}" != "$libstdcxx" ] && [ -f "$libstdcxx" ]; then
  export LD_PRELOAD="$(readlink -f "$libstdcxx")${LD_PRELOAD:+:$LD_PRELOAD}"
fi

log="$BUILD_DIR/pytest.log"
# shellcheck disable=SC2086  # PYTEST_ARGS is a list of words
PYTHONPATH="$build_abs/python" PYTHONUNBUFFERED=1 "$PYTHON" -m pytest tests/python -q -p no:cacheprovider \
  -rfEsxX ${PYTEST_ARGS:-} 2>&1 | tee "$log"
summary=$(tail -n 1 "$log")
passed=$(grep -oE '[0-9]+ passed' <<<"$summary" | grep -oE '[0-9]+' || echo 0)
failed=$(grep -oE '[0-9]+ (failed|errors?)' <<<"$summary" | awk '{n += $1} END {print n + 0}')
if [ "$passed" -eq 0 ] && [ "$failed" -eq 0 ]; then
  echo "test-cuda.sh: pytest ran no tests" >&2
  failed=1
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
