#!/usr/bin/env bash
# A bounded fuzzing run from the seed corpus kept in the repository:
#   bash fuzz/run.sh <fuzz_metrics binary> <work dir> [seconds (60)] [most executions (10000000)]
# New inputs go to <work dir>/corpus (libFuzzer writes to its first corpus directory only, so
# fuzz/corpus stays as committed), a crashing input to <work dir>/artifacts/. One job: one core.
# Ends with "fuzz_metrics: N executions in S s, ..." and fails when libFuzzer found something.
set -uo pipefail
fuzzer=$1
work=$2
seconds=${3:-60}
runs=${4:-10000000}
seeds="$(cd "$(dirname "$0")" && pwd)/corpus"
mkdir -p "$work/corpus" "$work/artifacts"

# ASan's defaults, leak detection included (libFuzzer checks each input that allocates more than
# it frees); a stack trace with every UB report, which aborts (-fno-sanitize-recover).
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"

start=$(date +%s)
"$fuzzer" -max_total_time="$seconds" -runs="$runs" -max_len=2048 -timeout=60 -rss_limit_mb=4096 \
  -print_final_stats=1 -artifact_prefix="$work/artifacts/" "$work/corpus" "$seeds" >"$work/fuzz.log" 2>&1
rc=$?
elapsed=$(($(date +%s) - start))

# Everything but the progress lines (kept in fuzz.log).
grep -vE '^#[0-9]+\s+(NEW|REDUCE|pulse|INITED)' "$work/fuzz.log" | tail -n 60
executions=$(grep -oE 'Done [0-9]+ runs' "$work/fuzz.log" | grep -oE '[0-9]+' | tail -n 1)
if [ -z "$executions" ]; then  # a crash ends the run before "Done": take the last progress line
  executions=$(grep -oE '^#[0-9]+' "$work/fuzz.log" | tail -n 1 | tr -d '#')
fi
corpus=$(find "$work/corpus" -type f | wc -l)
echo "fuzz_metrics: ${executions:-0} executions in ${elapsed} s, $corpus inputs in $work/corpus, exit $rc"
if [ "$rc" -ne 0 ]; then
  echo "fuzz_metrics: FAILED; the input is in $work/artifacts/ (rerun: $fuzzer <that file>)" >&2
fi
exit "$rc"
