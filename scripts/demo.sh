#!/usr/bin/env bash
# The main job: installs what is missing, builds the example, and trains an MLP while
# nosync-metrics tracks its metrics and counts the sync points of every step.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

bash scripts/install-deps.sh
configure
cmake --build "$METRICS_BUILD_DIR" --target train_mlp
"$METRICS_BUILD_DIR/examples/train_mlp" --steps 300 --log-every 50
