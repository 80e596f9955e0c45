#!/usr/bin/env bash
# The whole test suite from a fresh clone: installs what is missing, builds everything, runs the
# C++ tests (GoogleTest, the find_package consumer, the examples, a smoke pass of the benchmarks)
# through ctest and the Python tests through pytest, then prints "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

bash scripts/install-deps.sh || exit 1
configure || exit 1
cmake --build "$METRICS_BUILD_DIR" || exit 1

rm -f "$METRICS_BUILD_DIR/gtest-results.xml"
ctest --test-dir "$METRICS_BUILD_DIR" -j2 --output-on-failure 2>&1 | tee "$METRICS_BUILD_DIR/ctest.log"

# Every ctest entry counts once, except the GoogleTest binary, whose tests are counted from its XML.
cpp_passed=$(grep -E 'Test +#[0-9]+: ' "$METRICS_BUILD_DIR/ctest.log" | grep -v ' metrics_tests ' | grep -c ' Passed')
cpp_failed=$(grep -E 'Test +#[0-9]+: ' "$METRICS_BUILD_DIR/ctest.log" | grep -v ' metrics_tests ' | grep -vc ' Passed')
gtest_xml="$METRICS_BUILD_DIR/gtest-results.xml"
if [ -f "$gtest_xml" ]; then
  header=$(grep -m1 -o '<testsuites [^>]*>' "$gtest_xml")
  gtest_total=$(grep -oE ' tests="[0-9]+"' <<<"$header" | grep -oE '[0-9]+')
  gtest_failed=$(grep -oE ' failures="[0-9]+"' <<<"$header" | grep -oE '[0-9]+')
  cpp_passed=$((cpp_passed + gtest_total - gtest_failed))
  cpp_failed=$((cpp_failed + gtest_failed))
else
  echo "test.sh: the GoogleTest binary wrote no report (did it crash?)" >&2
  cpp_failed=$((cpp_failed + 1))
fi
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
