#!/usr/bin/env bash
# Installs what the build, the tests and the examples need, from Debian packages only (Debian 12;
# Debian 13 too, which scripts/test-torch2.sh checks). Idempotent and quick when everything is
# present: apt is only called for missing packages.
#
# An entry "a|b" is satisfied by either package; when neither is installed, the first one the
# archive has (apt-cache policy shows a candidate) is installed. The first name is Debian 12's, so
# Debian 12 installs exactly the first names.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache
  libtorch-dev python3-torch python3-dev python3-venv pybind11-dev
  libopenblas0-pthread  # recommended by libtorch; without it matmuls fall back to reference BLAS
  libeigen3-dev libgtest-dev libgmock-dev libbenchmark-dev
  libgloo-dev  # the gloo headers that c10d's ProcessGroupGloo includes (the C++ sync tests)
  clang libclang-rt-dev  # the fuzz build: clang, and its runtimes (libFuzzer, ASan, UBSan)
  python3-pytest python3-numpy python3-sklearn python3-torchvision python3-matplotlib
  python3-pip python3-setuptools python3-wheel  # pip install --no-build-isolation . (the package test;
  # Debian 13's pip no longer pulls in setuptools, which setup.py needs)
)

installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

has_candidate() {
  local policy  # not piped into grep -q: with pipefail, apt-cache's SIGPIPE would fail the check
  policy=$(apt-cache policy "$1" 2>/dev/null)
  [[ $policy == *"Candidate: "[!\(]* ]]
}

missing=()
for entry in "${packages[@]}"; do
  found=""
  for p in ${entry//|/ }; do
    if installed "$p"; then found=$p; break; fi
  done
  [ -n "$found" ] || missing+=("$entry")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing ${missing[*]}; run as root to install them" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update -q

chosen=()
unavailable=()
for entry in "${missing[@]}"; do
  pick=""
  for p in ${entry//|/ }; do
    if has_candidate "$p"; then pick=$p; break; fi
  done
  if [ -n "$pick" ]; then chosen+=("$pick"); else unavailable+=("$entry"); fi
done
if [ ${#unavailable[@]} -gt 0 ]; then
  . /etc/os-release 2>/dev/null || true
  echo "install-deps: not in this system's apt sources (${PRETTY_NAME:-unknown release}): ${unavailable[*]}" >&2
  exit 1
fi

echo "install-deps: installing ${chosen[*]}"
apt-get install -y -q --no-install-recommends "${chosen[@]}"
