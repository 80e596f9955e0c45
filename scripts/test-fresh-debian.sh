#!/usr/bin/env bash
# Checks the README's set-up promise on a fresh Debian 12: runs both README commands,
# `bash scripts/demo.sh` then `bash scripts/test.sh`, as root in a clean environment, in a fresh
# clone of the current commit (HEAD of this repository: commit first) inside a throwaway copy of
# a minimal Debian 12 (debootstrap --variant=minbase bookworm, from the mirror this machine's apt
# uses). Ends with one verdict line, e.g.
#   fresh-debian: PASS demo=ok test="10752 passed, 0 failed" commit=abc1234 time=21m05s
#
# Run as root, not part of .ci/run: the first run downloads ~0.5 GB (the minbase chroot, made once
# and kept pristine under /var/cache/nosync-metrics/chroots/bookworm-minbase, then the packages).
# Each run works in an overlay over that chroot, thrown away at the end, so each starts from a
# fresh minbase. Kept between runs to make reruns fast: the downloaded .deb files (apt still
# installs them) and a ccache directory bind-mounted on the chroot's /root/.cache/ccache. Mounts
# are undone on exit, whatever happens. Everything runs under nice 19. The mechanics are in
# scripts/chroot.sh; the full output goes to /var/cache/nosync-metrics/logs/.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/chroot.sh

start=$(date +%s)
chroot_init fresh-debian
chroot_prepare bookworm-minbase bookworm || { echo "fresh-debian: FAIL (no chroot; see above)"; exit 1; }
chroot_start bookworm-minbase || { echo "fresh-debian: FAIL (cannot enter the chroot; see above)"; exit 1; }

demo=ok
chroot_run 'bash scripts/demo.sh' || demo=failed
chroot_run 'bash scripts/test.sh'
test_rc=$?
counts=$(chroot_counts)

if [ "$demo" = ok ] && [ "$test_rc" -eq 0 ] && [ -n "$counts" ]; then verdict=PASS; else verdict=FAIL; fi
echo "fresh-debian: $verdict demo=$demo test=\"${counts:-no count (test.sh exit $test_rc)}\" commit=$CHROOT_COMMIT time=$(chroot_elapsed "$start") log=$CHROOT_LOG" | tee -a "$CHROOT_LOG"
[ "$verdict" = PASS ]
