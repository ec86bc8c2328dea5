#!/usr/bin/env bash
# scripts/pg-chroot.sh keeps its promises (scripts/pg-matrix.sh runs this
# first, on a chroot it has made):
#   1. a half-made, outdated or broken chroot is never "ready" (so `ensure`
#      makes it again instead of using it);
#   2. `with` gives the chroot its mounts inside the command's own namespace:
#      the host's namespace never has one, during or after the run; what a run
#      writes in the chroot is gone when it ends (the overlay);
#   3. a run ended by SIGINT (Ctrl-C, to its process group) or SIGKILL (to
#      unshare alone: --kill-child must do the rest) leaves no process of the
#      namespace behind (the server a test started there included).
#   pgmatrix/chroot_selftest.sh SUITE     (a suite whose chroot is made)
# Needs root. Ends with "chroot: N passed, N failed".
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=../e2e/safety/lib/common.sh
source "$ROOT/tests/e2e/safety/lib/common.sh"
suite=${1:?usage: chroot_selftest.sh SUITE}
chroot_sh="$ROOT/scripts/pg-chroot.sh"
real=$(bash "$chroot_sh" path "$suite")
cache=$(dirname "$real")
passed=0
failed=0
ok() { echo "PASS: $*"; passed=$((passed + 1)); }
bad() { echo "FAIL: $*" >&2; failed=$((failed + 1)); }
W=$(mktemp -d /tmp/pgfence-chroot-selftest.XXXXXX)
runner=""
cleanup() {
  [[ -n $runner ]] && kill -KILL "$runner" 2>/dev/null
  rm -rf --one-file-system "$W"
}
trap cleanup EXIT

# host_mounts: mounts of this (the host's) namespace under the chroot cache
host_mounts() { awk -v d="$cache" 'index($2, d) == 1' /proc/self/mounts | wc -l; }

# --- 1. never ready unless whole -------------------------------------------------
bash "$chroot_sh" ready "$suite" && ok "the made $suite chroot is ready" || bad "the made $suite chroot is not ready"
fake=$W/cache
mkdir -p "$fake/$suite/usr/bin"
PGFENCE_CHROOT_CACHE=$fake bash "$chroot_sh" ready "$suite" &&
  bad "a chroot without its stamp (debootstrap stopped halfway) counts as ready" ||
  ok "a chroot without its stamp is not ready"
cp "$real/.pgfence-chroot" "$fake/$suite/"
PGFENCE_CHROOT_CACHE=$fake bash "$chroot_sh" ready "$suite" &&
  bad "a chroot with its stamp but no PostgreSQL counts as ready" ||
  ok "a chroot with its stamp but no PostgreSQL is not ready"
echo "pgfence chroot v0 $suite: an older package list" >"$fake/$suite/.pgfence-chroot"
PGFENCE_CHROOT_CACHE=$fake bash "$chroot_sh" ready "$suite" &&
  bad "a chroot stamped with another package list counts as ready" ||
  ok "a chroot stamped with another package list is not ready"

# --- 2. mounts only inside the run's namespace --------------------------------------
# the mount points a run's chroot must have, each by name
missing=$(bash "$chroot_sh" with "$suite" bash -c '
  for m in "$PG_CHROOT" "$PG_CHROOT/proc" "$PG_CHROOT/dev" "$PG_CHROOT/dev/shm" "$PG_CHROOT/tmp" "$PG_CHROOT$PGFENCE_ROOT"; do
    awk -v m="$m" "\$2 == m { found = 1 } END { exit !found }" /proc/self/mounts || echo "$m"
  done
  chroot "$PG_CHROOT" sh -c "echo written >/etc/pgfence-selftest"' 2>&1)
[[ -z $missing ]] && ok "inside a run the chroot is an overlay with proc, dev, dev/shm, /tmp and the checkout mounted" ||
  bad "inside a run these are not mount points: $missing"
[[ ! -e $real/etc/pgfence-selftest ]] && ok "what a run wrote in the chroot did not reach the chroot itself" ||
  bad "a run's write reached $real/etc/pgfence-selftest"
seen=$(bash "$chroot_sh" with "$suite" bash -c 'ls "$PG_CHROOT/etc/pgfence-selftest" 2>&1')
[[ $seen == *"No such file"* ]] && ok "the next run does not see it either" || bad "the next run sees the previous run's write: $seen"
(($(host_mounts) == 0)) && ok "after a run the host's namespace has no mount under $cache" ||
  bad "$(host_mounts) mount(s) under $cache remain in the host's namespace"

# --- 3. SIGINT and SIGKILL end every process of the run -------------------------------
for sig in INT KILL; do
  marker="pgfence-selftest-$sig-$$"
  # (a command started with & here ignores SIGINT, as Ctrl-C's target would
  # not: perl puts the default action back before the run starts)
  setsid perl -e '$SIG{INT} = "DEFAULT"; exec @ARGV or die "exec: $!"' bash "$chroot_sh" with "$suite" \
    bash -c 'chroot "$PG_CHROOT" bash -c "exec -a $1 sleep 300" & echo started; wait' _ "$marker" >"$W/run.out" 2>&1 &
  runner=$!
  disown "$runner"
  started() { grep -q started "$W/run.out" && pgrep -f "^$marker" >/dev/null; }
  if ! e2e_wait_for 20 started; then
    bad "SIG$sig: the run's process in the chroot did not start: $(cat "$W/run.out")"
    continue
  fi
  (($(host_mounts) == 0)) && ok "SIG$sig: during a run the host's namespace has no mount under $cache" ||
    bad "SIG$sig: during a run $(host_mounts) mount(s) under $cache are in the host's namespace"
  if [[ $sig == INT ]]; then kill -INT -- "-$runner"; else kill -KILL "$runner"; fi 2>/dev/null
  gone() { ! pgrep -f "^$marker" >/dev/null; }
  if e2e_wait_for 10 gone; then
    ok "SIG$sig to the run ended its process in the chroot"
  else
    bad "SIG$sig to the run left its process in the chroot running: $(pgrep -af "^$marker")"
    pkill -KILL -f "^$marker"
  fi
  runner=""
done

echo "chroot: $passed passed, $failed failed"
((failed == 0))
