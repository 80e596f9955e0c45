# Sourced by scripts/test-fresh-debian.sh and scripts/test-torch2.sh: the mechanics, once, of
# running a command of this repository in a fresh Debian chroot, as root, in a clean environment.
#
#   chroot_prepare NAME SUITE [SETUP]   makes, once, the cached chroot $CHROOT_CACHE/chroots/NAME:
#                                       SUITE-minbase is debootstrap --variant=minbase SUITE from
#                                       the mirror this machine's apt uses; with SETUP, NAME is a
#                                       copy of it in which SETUP ran as chroot_run runs a command
#                                       (a fresh clone in /src, removed afterwards)
#   chroot_start NAME                   a throwaway root over the cached chroot (overlayfs, or a
#                                       copy where overlayfs is missing) with /proc, /sys, /dev,
#                                       /dev/pts, /dev/shm mounted and a fresh clone of HEAD in /src
#   chroot_run COMMAND                  runs `cd /src && COMMAND` there: env -i HOME=/root
#                                       PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8, nice 19;
#                                       output to the terminal and to $CHROOT_LOG
#   chroot_cleanup                      unmounts everything and removes the throwaway root; set as
#                                       the EXIT INT TERM trap by chroot_init
#
# Kept between runs, under $CHROOT_CACHE (default /var/cache/nosync-metrics): chroots/ (the cached
# chroots, never written to after they are made), ccache/SUITE (bind-mounted on the chroot's
# /root/.cache/ccache, so a rerun compiles from the cache) and apt/SUITE (bind-mounted on
# /var/cache/apt/archives: the .deb files, so a rerun does not download them again; apt still
# installs them). Everything else of a run is thrown away. Run as root. Set NOSYNC_DEBIAN_MIRROR
# to use another mirror.

CHROOT_CACHE="${CHROOT_CACHE:-/var/cache/nosync-metrics}"
CHROOT_REPO="$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)"
CHROOT_MOUNTS=()      # mount points to undo, in mount order
CHROOT_RUN_DIR=""     # the throwaway run directory, removed by chroot_cleanup
CHROOT_PARTIAL=""     # a cached chroot being made, removed by chroot_cleanup unless it was kept
CHROOT_ROOT=""        # the root that chroot_run enters
CHROOT_SUITE=""
CHROOT_TAG="chroot"   # prefix of the messages
CHROOT_LOG=""

chroot_say() { echo "$CHROOT_TAG: $*" >&2; }

# chroot_init TAG: checks root, installs debootstrap if missing, sets the trap, opens the log.
chroot_init() {
  CHROOT_TAG="$1"
  if [ "$(id -u)" -ne 0 ]; then
    chroot_say "must run as root (debootstrap, mount, chroot)"
    exit 2
  fi
  trap chroot_cleanup EXIT
  trap 'chroot_say "interrupted"; exit 130' INT
  trap 'chroot_say "terminated"; exit 143' TERM
  mkdir -p "$CHROOT_CACHE/chroots" "$CHROOT_CACHE/runs" "$CHROOT_CACHE/logs"
  CHROOT_LOG="$CHROOT_CACHE/logs/$CHROOT_TAG-$(date +%Y%m%d-%H%M%S).log"
  : >"$CHROOT_LOG"
  if ! command -v debootstrap >/dev/null; then
    chroot_say "installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >>"$CHROOT_LOG" 2>&1 ||
      { apt-get update -q >>"$CHROOT_LOG" 2>&1 &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >>"$CHROOT_LOG" 2>&1; } ||
      { chroot_say "cannot install debootstrap (apt-get install -y debootstrap failed; see $CHROOT_LOG)"; exit 2; }
  fi
  _chroot_sweep
}

# The Debian archive this machine's apt uses: the first enabled "deb" source of the host's own
# suite, from /etc/apt/sources.list and sources.list.d/*.list (one-line) or *.sources (deb822).
chroot_mirror() {
  if [ -n "${NOSYNC_DEBIAN_MIRROR:-}" ]; then echo "$NOSYNC_DEBIAN_MIRROR"; return; fi
  local codename files=() f
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] && files+=("$f")
  done
  [ ${#files[@]} -gt 0 ] || return 1
  awk -v codename="$codename" '
    function flush() {
      if (types ~ /(^| )deb( |$)/ && enabled != "no")
        for (i = 1; i <= nu; i++) for (j = 1; j <= ns; j++) consider(uris[i], suites[j])
      types = ""; enabled = ""; nu = 0; ns = 0
    }
    function consider(uri, suite) {
      if (suite == codename && exact == "") exact = uri
      if (suite !~ /[-\/]/ && any == "") any = uri
    }
    FNR == 1 { if (deb822) flush(); deb822 = (FILENAME ~ /\.sources$/) }
    /^[ \t]*#/ { next }  # a comment, which in deb822 does not end a stanza
    { sub(/#.*/, "") }
    deb822 && /^[ \t]*$/ { flush(); next }
    deb822 {
      key = tolower($1); sub(/:$/, "", key)
      if (key == "types") { types = ""; for (k = 2; k <= NF; k++) types = types " " $k; types = types " " }
      else if (key == "uris") for (k = 2; k <= NF; k++) uris[++nu] = $k
      else if (key == "suites") for (k = 2; k <= NF; k++) suites[++ns] = $k
      else if (key == "enabled") enabled = tolower($2)
      next
    }
    $1 == "deb" {
      k = 2
      if ($k ~ /^\[/) { while (k <= NF && $k !~ /\]$/) k++; k++ }
      consider($k, $(k + 1))
    }
    END { if (deb822) flush(); if (exact != "") print exact; else if (any != "") print any; else exit 1 }
  ' "${files[@]}"
}

# Unmounts and removes what runs killed before their cleanup left behind.
_chroot_sweep() {
  local d pid
  for d in "$CHROOT_CACHE"/runs/*.[0-9]* "$CHROOT_CACHE"/chroots/*.partial.[0-9]*; do
    [ -d "$d" ] || continue
    pid=${d##*.}
    kill -0 "$pid" 2>/dev/null && continue
    chroot_say "removing what an interrupted run left: $d"
    _chroot_umount_under "$d" && rm -rf --one-file-system "$d"
  done
}

# Unmounts everything mounted at or under $1 (deepest first); fails if something stays mounted.
_chroot_umount_under() {
  local dir m
  dir=$(readlink -f "$1")
  for m in $(awk -v d="$dir" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/self/mounts | sort -r); do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done
  if awk -v d="$dir" '$2 == d || index($2, d "/") == 1 { found = 1 } END { exit !found }' /proc/self/mounts; then
    chroot_say "still mounted under $dir; not removing it"
    return 1
  fi
}

_chroot_mount() {  # _chroot_mount TARGET MOUNT-ARGS...: mounts and remembers the target
  local target=$1; shift
  mkdir -p "$target"
  mount "$@" "$target" || { chroot_say "mount $* $target failed"; return 1; }
  CHROOT_MOUNTS+=("$target")
}

# _chroot_wait COMMAND...: runs COMMAND in the background and waits for it, so that a signal to
# this script runs its trap at once (bash defers traps until a foreground command ends).
CHROOT_CHILD=""
_chroot_wait() {
  "$@" &
  CHROOT_CHILD=$!
  wait "$CHROOT_CHILD"
  local rc=$?
  CHROOT_CHILD=""
  return "$rc"
}

_chroot_kill_tree() {  # _chroot_kill_tree PID: the process and its descendants, by id
  local child
  kill -STOP "$1" 2>/dev/null
  for child in $(ps -o pid= --ppid "$1" 2>/dev/null); do _chroot_kill_tree "$child"; done
  kill -KILL "$1" 2>/dev/null
}

chroot_cleanup() {
  local rc=$? i
  trap - EXIT INT TERM
  if [ -n "$CHROOT_CHILD" ]; then
    _chroot_kill_tree "$CHROOT_CHILD"
    wait "$CHROOT_CHILD" 2>/dev/null
  fi
  for ((i = ${#CHROOT_MOUNTS[@]} - 1; i >= 0; i--)); do
    umount "${CHROOT_MOUNTS[i]}" 2>/dev/null || umount -l "${CHROOT_MOUNTS[i]}" 2>/dev/null || true
  done
  CHROOT_MOUNTS=()
  local d
  for d in "$CHROOT_RUN_DIR" "$CHROOT_PARTIAL"; do
    [ -n "$d" ] && [ -d "$d" ] || continue
    _chroot_umount_under "$d" && rm -rf --one-file-system "$d"
  done
  CHROOT_RUN_DIR=""
  CHROOT_PARTIAL=""
  exit "$rc"
}

# _chroot_enter ROOT: mounts the kernel file systems and the caches, copies a fresh clone in.
_chroot_enter() {
  local root=$1 commit
  CHROOT_ROOT=$root
  _chroot_mount "$root/proc" -t proc proc &&
    _chroot_mount "$root/sys" -t sysfs sysfs &&
    _chroot_mount "$root/dev" --bind /dev &&
    mount --make-private "$root/dev" &&  # what is mounted under it stays out of the host's /dev
    _chroot_mount "$root/dev/pts" --bind /dev/pts &&
    _chroot_mount "$root/dev/shm" -t tmpfs -o mode=1777,nosuid,nodev shm &&
    mkdir -p "$CHROOT_CACHE/ccache/$CHROOT_SUITE" "$CHROOT_CACHE/apt/$CHROOT_SUITE/partial" &&
    _chroot_mount "$root/root/.cache/ccache" --bind "$CHROOT_CACHE/ccache/$CHROOT_SUITE" &&
    _chroot_mount "$root/var/cache/apt/archives" --bind "$CHROOT_CACHE/apt/$CHROOT_SUITE" || return 1
  cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
  cp /etc/hosts "$root/etc/hosts" 2>/dev/null || true
  commit=$(git -C "$CHROOT_REPO" rev-parse HEAD) || return 1
  rm -rf "$root/src"
  git clone -q --no-hardlinks "$CHROOT_REPO" "$root/src" &&
    git -C "$root/src" checkout -q --detach "$commit" || { chroot_say "cannot clone $CHROOT_REPO"; return 1; }
  CHROOT_COMMIT=$(git -C "$root/src" rev-parse --short HEAD)
}

# chroot_run COMMAND: `cd /src && COMMAND` as root in the chroot, in a clean environment.
chroot_run() {
  echo "+ chroot: cd /src && $1" | tee -a "$CHROOT_LOG"
  _chroot_wait _chroot_run_logged "$1"
}

_chroot_run_logged() {
  set -o pipefail
  nice -n 19 env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
    chroot "$CHROOT_ROOT" bash -c "cd /src && $1" 2>&1 | tee -a "$CHROOT_LOG"
}

# chroot_prepare NAME SUITE [SETUP]: without SETUP, NAME is SUITE-minbase, the debootstrap result;
# with it, NAME is a copy of SUITE-minbase (made first if missing) in which SETUP has run.
chroot_prepare() {
  local name=$1 suite=$2 setup=${3:-} base
  CHROOT_SUITE=$suite
  base="$suite-minbase"
  _chroot_locked_make "$base" _chroot_debootstrap "$suite" || return 1
  [ -z "$setup" ] && return 0
  _chroot_locked_make "$name" _chroot_setup "$base" "$setup"
}

# _chroot_locked_make NAME MAKER ARGS...: unless NAME is cached, runs MAKER DIR ARGS... into a
# partial directory and keeps it as NAME when MAKER succeeds; one maker at a time.
_chroot_locked_make() {
  local name=$1 maker=$2 dir lock rc
  shift 2
  dir="$CHROOT_CACHE/chroots/$name"
  exec {lock}>"$dir.lock"
  flock "$lock"  # a second run waits, then finds it made
  if [ ! -f "$dir/.nosync-complete" ]; then
    CHROOT_PARTIAL="$dir.partial.$$"
    rm -rf --one-file-system "$CHROOT_PARTIAL"
    chroot_say "making the cached chroot $dir (once; log: $CHROOT_LOG)"
    "$maker" "$CHROOT_PARTIAL" "$@"
    rc=$?
    if [ "$rc" -ne 0 ]; then exec {lock}>&-; return "$rc"; fi
    date -u +%FT%TZ >"$CHROOT_PARTIAL/.nosync-complete"
    rm -rf --one-file-system "$dir"
    mv "$CHROOT_PARTIAL" "$dir"
    CHROOT_PARTIAL=""
    chroot_say "cached $dir ($(du -sh "$dir" | cut -f1))"
  fi
  exec {lock}>&-
}

_chroot_debootstrap() {  # _chroot_debootstrap DIR SUITE
  local dir=$1 suite=$2 mirror
  mirror=$(chroot_mirror) || {
    chroot_say "cannot make a $suite chroot: no Debian mirror in /etc/apt/sources.list{,.d/*} (set NOSYNC_DEBIAN_MIRROR)"
    return 1
  }
  chroot_say "debootstrap --variant=minbase $suite $dir $mirror"
  if ! _chroot_wait nice -n 19 debootstrap --variant=minbase "$suite" "$dir" "$mirror" >>"$CHROOT_LOG" 2>&1; then
    tail -n 15 "$CHROOT_LOG" >&2
    chroot_say "cannot make a $suite chroot: debootstrap --variant=minbase $suite $dir $mirror failed" \
      "(network? disk space? is $suite on that mirror, signed with a key this machine has?); full log: $CHROOT_LOG"
    return 1
  fi
  rm -f "$dir/etc/resolv.conf"  # each run copies the host's
}

_chroot_setup() {  # _chroot_setup DIR BASE SETUP
  local dir=$1 base=$2 setup=$3 i
  cp -a "$CHROOT_CACHE/chroots/$base" "$dir" && rm -f "$dir/.nosync-complete" || return 1
  chroot_say "in it: $setup"
  _chroot_enter "$dir" || return 1
  if ! chroot_run "$setup"; then
    chroot_say "cannot make the chroot: \`$setup\` failed in it; full log: $CHROOT_LOG"
    return 1
  fi
  for ((i = ${#CHROOT_MOUNTS[@]} - 1; i >= 0; i--)); do umount "${CHROOT_MOUNTS[i]}" || return 1; done
  CHROOT_MOUNTS=()
  rm -rf "$dir/src" "$dir/etc/resolv.conf"
}

# chroot_start NAME: a throwaway root over the cached chroot NAME, entered.
chroot_start() {
  local name=$1 cached
  cached="$CHROOT_CACHE/chroots/$name"
  CHROOT_RUN_DIR="$CHROOT_CACHE/runs/$name.$$"
  mkdir -p "$CHROOT_RUN_DIR/root" "$CHROOT_RUN_DIR/upper" "$CHROOT_RUN_DIR/work"
  if ! _chroot_mount "$CHROOT_RUN_DIR/root" -t overlay overlay \
      -o "lowerdir=$cached,upperdir=$CHROOT_RUN_DIR/upper,workdir=$CHROOT_RUN_DIR/work" 2>/dev/null; then
    chroot_say "overlayfs unavailable; copying $cached"
    cp -a --reflink=auto "$cached/." "$CHROOT_RUN_DIR/root/" || { chroot_say "cannot copy $cached"; return 1; }
  fi
  _chroot_enter "$CHROOT_RUN_DIR/root"
}

# chroot_verdict_counts: the last "N passed, N failed" line of the log.
chroot_counts() {
  grep -aoE '^[0-9]+ passed, [0-9]+ failed' "$CHROOT_LOG" | tail -n 1
}

chroot_elapsed() {  # chroot_elapsed START_SECONDS
  local s=$(($(date +%s) - $1))
  printf '%dm%02ds' $((s / 60)) $((s % 60))
}
