#!/usr/bin/env bash
# The main job: installs what is missing, builds the example and the benchmarks, trains an MLP
# while nosync-metrics tracks its metrics and counts the sync points of every step, then runs a
# short benchmark (naive vs nosync vs the floor) and prints its table.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

bash scripts/install-deps.sh
warn_if_short_of_space 3
configure
cmake --build "$METRICS_BUILD_DIR" --target train_mlp update_bench training_step_bench _C  # _C: run_bench.py imports it
"$METRICS_BUILD_DIR/examples/train_mlp" --steps 300 --log-every 50
echo
echo "== a short benchmark run (bench/run_bench.py --quick; the full table is in README.md) =="
"$PYTHON" bench/run_bench.py --quick --build "$METRICS_BUILD_DIR" --out "$METRICS_BUILD_DIR/bench-quick"
