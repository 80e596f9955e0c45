#!/usr/bin/env bash
# Installs what the build, the tests and the examples need, from Debian 12 packages only.
# Idempotent and quick when everything is present: apt is only called for missing packages.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache
  libtorch-dev python3-torch python3-dev python3-venv pybind11-dev
  libopenblas0-pthread  # recommended by libtorch; without it matmuls fall back to reference BLAS
  libeigen3-dev libgtest-dev libgmock-dev libbenchmark-dev
  libgloo-dev  # the gloo headers that c10d's ProcessGroupGloo includes (the C++ sync tests)
  python3-pytest python3-numpy python3-sklearn python3-torchvision python3-matplotlib
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing ${missing[*]}; run as root to install them" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
