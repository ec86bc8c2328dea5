# Shared helpers for the fencectl end-to-end tests (sourced, not run).
#
# Environment (set by CMake, or by hand):
#   FENCECTL_BIN      the fencectl binary
#   FENCE_BIN_DIR     directory with fence-coordinator (used by scripts/cluster.sh)
#   FENCE_BASE_PORT   this test's own port range (cluster.sh uses BASE+1.. and BASE+101..)
# Every test starts its own cluster and stops it on exit (trap), whatever happens.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
CLUSTER="$ROOT/scripts/cluster.sh"
: "${FENCECTL_BIN:?set FENCECTL_BIN to the fencectl binary}"
: "${FENCE_BASE_PORT:?set FENCE_BASE_PORT (each test needs its own port range)}"
export FENCE_BIN_DIR="${FENCE_BIN_DIR:-$ROOT/build/coordinator/server}"
# Fast elections so that tests are quick; leases must be >= 1.5 x 2 x election-ms.
export FENCE_COORDINATOR_FLAGS="${FENCE_COORDINATOR_FLAGS:---heartbeat-ms 20 --election-ms 150 --min-lease 500}"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/fencectl-e2e.XXXXXX")"
TEST_NAME="$(basename "$0" .sh)"

fencectl() { "$FENCECTL_BIN" "$@"; }

fail() {
    echo "FAIL [$TEST_NAME]: $*" >&2
    exit 1
}

# Tests that must undo something first (resume SIGSTOPped members) redefine
# pre_cleanup; they must not replace the EXIT trap, whose first command has to
# capture the exit status (a trap 'x; cleanup' would hand cleanup x's status
# and turn every failure into a pass).
pre_cleanup() { :; }

cleanup() {
    local rc=$?
    pre_cleanup || true
    "$CLUSTER" stop "$WORK/cluster" >/dev/null 2>&1 || true
    if ((rc != 0)); then
        echo "---- [$TEST_NAME] member logs (tail) ----" >&2
        tail -n 20 "$WORK"/cluster/*.log >&2 2>/dev/null || true
    fi
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT

# start_cluster [N]: starts the cluster and exports FENCE_ENDPOINTS.
start_cluster() {
    local line
    line=$("$CLUSTER" start "$WORK/cluster" "${1:-3}") || fail "cluster.sh start failed"
    [[ "$line" == "export FENCE_ENDPOINTS="* ]] || fail "cluster.sh printed '$line'"
    export FENCE_ENDPOINTS="${line#export FENCE_ENDPOINTS=}"
}

# member_pids: pids of every member.
member_pids() { cat "$WORK"/cluster/*.pid; }

# wait_until SECONDS DESCRIPTION CMD...: polls CMD every 50ms until it succeeds (bounded).
wait_until() {
    local seconds=$1 what=$2 deadline
    shift 2
    deadline=$(($(date +%s%N) + seconds * 1000000000))
    until "$@"; do
        (($(date +%s%N) < deadline)) || fail "timed out after ${seconds}s waiting for: $what"
        sleep 0.05
    done
}

# expect_code CODE CMD...: runs CMD, fails the test unless it exits with CODE.
expect_code() {
    local want=$1 got=0
    shift
    "$@" >"$WORK/last.out" 2>"$WORK/last.err" || got=$?
    ((got == want)) || fail "expected exit $want, got $got from: $* (stderr: $(cat "$WORK/last.err"))"
}

# waiters_total: sum of pgfence_waiters over every member's /metrics.
waiters_total() {
    local total=0 ep v
    for ep in ${FENCE_ENDPOINTS//,/ }; do
        v=$(curl -s -m 1 "http://$ep/metrics" | awk '$1 == "pgfence_waiters" {print $2}') || true
        v=${v%%.*}  # gauge may print as 2 or 2.0
        total=$((total + ${v:-0}))
    done
    echo "$total"
}

# waiters_at_least N: succeeds once the members hold N or more waiters. A
# command for wait_until, which re-runs it on every poll (an argument like
# "$(waiters_total)" would be expanded once, before the first poll).
waiters_at_least() { (($(waiters_total) >= $1)); }
