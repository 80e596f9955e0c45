#!/usr/bin/env bash
# The whole test suite from a fresh clone: installs what is missing, builds everything, runs the
# C++ tests (GoogleTest, the find_package consumer, the examples, a smoke pass of the benchmarks)
# through ctest and the Python tests through pytest, then prints "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

bash scripts/install-deps.sh || exit 1
configure -DMETRICS_WERROR=ON || exit 1
cmake --build "$METRICS_BUILD_DIR" || exit 1

rm -rf "$METRICS_BUILD_DIR/gtest"
ctest --test-dir "$METRICS_BUILD_DIR" -j2 --output-on-failure 2>&1 | tee "$METRICS_BUILD_DIR/ctest.log"

# Every ctest entry counts once, except the GoogleTest binaries (each writes gtest/<entry>.xml),
# whose tests are counted from their XML reports.
gtest_binaries=(metrics_tests naive_metrics_tests)
entries=$(grep -E 'Test +#[0-9]+: ' "$METRICS_BUILD_DIR/ctest.log")
for binary in "${gtest_binaries[@]}"; do entries=$(grep -v " $binary " <<<"$entries"); done
cpp_passed=$(grep -c ' Passed' <<<"$entries")
cpp_failed=$(grep -vc ' Passed' <<<"$entries")
for binary in "${gtest_binaries[@]}"; do
  xml="$METRICS_BUILD_DIR/gtest/$binary.xml"
  if [ ! -f "$xml" ]; then
    echo "test.sh: $binary wrote no report (did it crash?)" >&2
    cpp_failed=$((cpp_failed + 1))
    continue
  fi
  header=$(grep -m1 -o '<testsuites [^>]*>' "$xml")
  total=$(grep -oE ' tests="[0-9]+"' <<<"$header" | grep -oE '[0-9]+')
  failures=$(grep -oE ' failures="[0-9]+"' <<<"$header" | grep -oE '[0-9]+')
  cpp_passed=$((cpp_passed + total - failures))
  cpp_failed=$((cpp_failed + failures))
done
if grep -q "No tests were found" "$METRICS_BUILD_DIR/ctest.log"; then
  echo "test.sh: ctest ran no tests" >&2
  cpp_failed=$((cpp_failed + 1))
fi

py_passed=0
py_failed=0
if [ -d tests/python ]; then
  PYTHONPATH="$METRICS_BUILD_DIR/python" "$PYTHON" -m pytest tests/python -q -p no:cacheprovider 2>&1 |
    tee "$METRICS_BUILD_DIR/pytest.log"
  summary=$(tail -n 1 "$METRICS_BUILD_DIR/pytest.log")
  py_passed=$(grep -oE '[0-9]+ passed' <<<"$summary" | grep -oE '[0-9]+' || echo 0)
  py_failed=$(grep -oE '[0-9]+ (failed|errors?)' <<<"$summary" | awk '{n += $1} END {print n + 0}')
  if [ "$py_passed" -eq 0 ] && [ "$py_failed" -eq 0 ]; then
    echo "test.sh: pytest ran no tests" >&2
    py_failed=1
  fi
fi

passed=$((cpp_passed + py_passed))
failed=$((cpp_failed + py_failed))
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
