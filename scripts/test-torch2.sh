#!/usr/bin/env bash
# Runs the whole test suite (`bash scripts/test.sh`) against PyTorch 2.x: Debian 13 (trixie) ships
# PyTorch 2.6, Debian 12 ships 1.13.1. As root, in a clean environment, in a fresh clone of the
# current commit (HEAD of this repository: commit first) inside a throwaway overlay over a cached
# Debian 13 chroot. Ends with one verdict line, e.g.
#   torch2: PASS torch=2.6.0+debian test="10752 passed, 0 failed" commit=abc1234 time=16m30s
#
# Run as root, not part of .ci/run: the first run makes the chroot (debootstrap --variant=minbase
# trixie from the mirror this machine's apt uses, kept as chroots/trixie-minbase, then a copy with
# scripts/install-deps.sh run in it: ~0.5 GB downloaded, 2.6 GB on disk, mostly PyTorch) under
# /var/cache/nosync-metrics/chroots/trixie-deps and keeps it; later runs start from it at once
# (test.sh still installs any package added to install-deps.sh since). The
# downloaded .deb files and a ccache directory (bind-mounted on the chroot's /root/.cache/ccache)
# are kept too, so reruns compile from the cache. Mounts are undone on exit, whatever happens.
# Everything runs under nice 19. To remake the chroot: rm -rf that directory. The mechanics are in
# scripts/chroot.sh; the full output goes to /var/cache/nosync-metrics/logs/.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/chroot.sh

start=$(date +%s)
chroot_init torch2
chroot_prepare trixie-deps trixie 'bash scripts/install-deps.sh' ||
  { echo "torch2: FAIL (no Debian 13 chroot; see above)"; exit 1; }
chroot_start trixie-deps || { echo "torch2: FAIL (cannot enter the chroot; see above)"; exit 1; }

chroot_run 'bash scripts/test.sh'
test_rc=$?
counts=$(chroot_counts)
torch=$(chroot "$CHROOT_ROOT" /usr/bin/python3 -c 'import torch; print(torch.__version__)' 2>/dev/null || echo unknown)

if [ "$test_rc" -eq 0 ] && [ -n "$counts" ]; then verdict=PASS; else verdict=FAIL; fi
echo "torch2: $verdict torch=$torch test=\"${counts:-no count (test.sh exit $test_rc)}\" commit=$CHROOT_COMMIT time=$(chroot_elapsed "$start") log=$CHROOT_LOG" | tee -a "$CHROOT_LOG"
[ "$verdict" = PASS ]
