#!/usr/bin/env bash
# The whole test suite from a fresh clone: installs what is missing, builds everything, runs the
# C++ tests (GoogleTest, the find_package consumer, the examples, a smoke pass of the benchmarks)
# through ctest and the Python tests through pytest; then the same C++ and Python tests again
# with AddressSanitizer and UndefinedBehaviorSanitizer (build-asan), and a bounded libFuzzer run
# (build-fuzz, $METRICS_FUZZ_SECONDS seconds, 60 by default); then prints "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

bash scripts/install-deps.sh || exit 1
warn_if_short_of_space 8  # build, build-asan, build-fuzz: 4 GiB; ccache: up to 4
configure -DMETRICS_WERROR=ON || exit 1
cmake --build "$METRICS_BUILD_DIR" || exit 1

passed=0
failed=0

# Runs ctest in build dir $1 (extra ctest arguments after it) and adds its results: every entry
# counts once, except the GoogleTest binaries (each writes gtest/<entry>.xml), whose tests are
# counted from their XML reports.
run_ctest() {
  local dir=$1
  shift
  rm -rf "$dir/gtest"
  ctest --test-dir "$dir" --output-on-failure "$@" 2>&1 | tee "$dir/ctest.log"
  local gtest_binaries=(metrics_tests metrics_tests_avx2 metrics_tests_scalar naive_metrics_tests) entries binary
  entries=$(grep -E 'Test +#[0-9]+: ' "$dir/ctest.log")
  for binary in "${gtest_binaries[@]}"; do entries=$(grep -v " $binary " <<<"$entries"); done
  passed=$((passed + $(grep -c ' Passed' <<<"$entries")))
  failed=$((failed + $(grep -v ' Passed' <<<"$entries" | grep -c .)))  # no entry left: no empty line counted
  for binary in "${gtest_binaries[@]}"; do
    grep -qE "Test +#[0-9]+: $binary " "$dir/ctest.log" || continue
    local xml="$dir/gtest/$binary.xml" header total failures
    if [ ! -f "$xml" ]; then
      echo "test.sh: $dir: $binary wrote no report (did it crash?)" >&2
      failed=$((failed + 1))
      continue
    fi
    header=$(grep -m1 -o '<testsuites [^>]*>' "$xml")
    total=$(grep -oE ' tests="[0-9]+"' <<<"$header" | grep -oE '[0-9]+')
    failures=$(grep -oE ' failures="[0-9]+"' <<<"$header" | grep -oE '[0-9]+')
    passed=$((passed + total - failures))
    failed=$((failed + failures))
  done
  if grep -q "No tests were found" "$dir/ctest.log"; then
    echo "test.sh: $dir: ctest ran no tests" >&2
    failed=$((failed + 1))
  fi
}

# Runs pytest with the package from build dir $1 and adds its results; arguments after it are
# environment assignments (for env), then "--" and pytest options. A run that ends without
# pytest's summary (a sanitizer abort, a crash) counts as one failure, with the log's last lines.
run_pytest() {
  local dir=$1 summary py_passed py_failed
  shift
  local assignments=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do assignments+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  env "${assignments[@]}" PYTHONPATH="$dir/python" "$PYTHON" -m pytest tests/python -q -p no:cacheprovider "$@" 2>&1 |
    tee "$dir/pytest.log"
  summary=$(tail -n 1 "$dir/pytest.log")
  if ! grep -qE '[0-9]+ (passed|failed|errors?|skipped)' <<<"$summary"; then
    grep -m1 -A3 -E 'ERROR: (Address|Leak)Sanitizer|runtime error' "$dir/pytest.log" >&2
    echo "test.sh: $dir: pytest did not finish (crashed?); see $dir/pytest.log" >&2
    failed=$((failed + 1))
    return
  fi
  py_passed=$(grep -oE '[0-9]+ passed' <<<"$summary" | grep -oE '[0-9]+' || echo 0)
  py_failed=$(grep -oE '[0-9]+ (failed|errors?)' <<<"$summary" | awk '{n += $1} END {print n + 0}')
  if [ "$py_passed" -eq 0 ] && [ "$py_failed" -eq 0 ]; then
    echo "test.sh: $dir: pytest ran no tests" >&2
    py_failed=1
  fi
  passed=$((passed + py_passed))
  failed=$((failed + py_failed))
}

# A build that fails counts as one failed test, with its log named, and the suite goes on.
build_or_fail() {
  local dir=$1 what=$2
  shift 2
  mkdir -p "$dir"
  echo "test.sh: building $dir (the $what build; log in $dir/build.log)"
  if "$@" >"$dir/build.log" 2>&1 && cmake --build "$dir" >>"$dir/build.log" 2>&1; then return 0; fi
  tail -n 30 "$dir/build.log"
  echo "test.sh: the $what build failed; its log is $dir/build.log" >&2
  failed=$((failed + 1))
  return 1
}

run_ctest "$METRICS_BUILD_DIR" -j2
[ -d tests/python ] && run_pytest "$METRICS_BUILD_DIR"
echo "test.sh: release build: $passed passed, $failed failed (${SECONDS} s so far)"

# The same C++ tests, and the Python tests, with AddressSanitizer and UBSan in our code (LibTorch
# is not instrumented); ctest sets ASAN/LSAN/UBSAN_OPTIONS (CMakeLists.txt). Python needs ASan's
# runtime preloaded (scripts/env.sh, asan_preload); CPython's own allocations live until exit by
# design, so leak detection is off there. --capture=sys: a sanitizer report goes to the log, not
# into pytest's captured output, which an abort would lose.
before_passed=$passed before_failed=$failed
if build_or_fail "$METRICS_ASAN_BUILD_DIR" "sanitized (ASan + UBSan)" configure_sanitized; then
  run_ctest "$METRICS_ASAN_BUILD_DIR" -j2
  [ -d tests/python ] && run_pytest "$METRICS_ASAN_BUILD_DIR" LD_PRELOAD="$(asan_preload)" \
    ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 -- --capture=sys
fi
echo "test.sh: sanitized build: $((passed - before_passed)) passed, $((failed - before_failed)) failed" \
  "(${SECONDS} s so far)"

# A bounded fuzzing run (fuzz/run.sh) counts as one test; it prints how many executions ran.
if build_or_fail "$METRICS_FUZZ_BUILD_DIR" "fuzz (clang)" configure_fuzz \
  -DMETRICS_FUZZ_SECONDS="${METRICS_FUZZ_SECONDS:-60}"; then
  run_ctest "$METRICS_FUZZ_BUILD_DIR" --verbose >/dev/null  # the whole output is in ctest.log
  if grep -qE 'Test +#[0-9]+: fuzz_metrics +\.+ +Passed' "$METRICS_FUZZ_BUILD_DIR/ctest.log"; then
    grep -E 'Test +#[0-9]+: fuzz_metrics ' "$METRICS_FUZZ_BUILD_DIR/ctest.log"
  else
    tail -n 80 "$METRICS_FUZZ_BUILD_DIR/ctest.log"
  fi
  grep -hoE 'fuzz_metrics: [0-9]+ executions.*' "$METRICS_FUZZ_BUILD_DIR/ctest.log" | tail -n 1
fi
echo "test.sh: fuzz build and run done (${SECONDS} s so far)"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
