#!/usr/bin/env bash
# scripts/cluster.sh start, as a newcomer uses it:
#   1. it prints one line a shell can eval: export FENCE_ENDPOINTS=...;
#   2. a second start on a DIR whose members still run is refused (non-zero,
#      a message naming the members and `stop`), before it writes anything:
#      the pid files and cluster.env stay as they were;
#   3. so stop still stops every member of the first start;
#   4. a pid file left behind by a member that is gone (its pid now another
#      program's) does not stop a start, and that program is left alone.
# Environment: FENCE_BIN_DIR (fence-coordinator), FENCE_BASE_PORT (this
# test's ports: BASE+1..3 and BASE+101..103).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
CLUSTER="$ROOT/scripts/cluster.sh"
: "${FENCE_BIN_DIR:?set FENCE_BIN_DIR to the directory of fence-coordinator}"
: "${FENCE_BASE_PORT:?set FENCE_BASE_PORT (a port range for this test alone)}"
export FENCE_BIN_DIR FENCE_BASE_PORT
export FENCE_COORDINATOR_FLAGS="--heartbeat-ms 20 --election-ms 150 --min-lease 500"
W=$(mktemp -d "${TMPDIR:-/tmp}/cluster-start-twice.XXXXXX")
DIR=$W/cluster
first_pids=() other_pid=""

# member_runs PID: PID is a fence-coordinator that has not exited (an exited
# one may stay a zombie, state Z, until it is reaped).
member_runs() {
    [[ "$(cat "/proc/$1/comm" 2>/dev/null)" == fence-coordinat* ]] || return 1
    local state
    state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
    [[ -n "$state" && "$state" != Z && "$state" != X ]]
}
fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "PASS: $*"; }
cleanup() {
    local rc=$? pid
    "$CLUSTER" stop "$DIR" >/dev/null 2>&1 || true
    # Whatever stop missed: the first start's members, by the pids we read.
    for pid in "${first_pids[@]}"; do member_runs "$pid" && kill -KILL "$pid" 2>/dev/null; done
    [[ -n "$other_pid" ]] && kill "$other_pid" 2>/dev/null
    if ((rc == 0)); then rm -rf "$W"; else echo "kept: $W" >&2; fi
    exit "$rc"
}
trap cleanup EXIT

# 1. The line is pasteable.
out=$("$CLUSTER" start "$DIR" 3) || fail "the first start failed"
[[ $(wc -l <<<"$out") == 1 ]] || fail "start printed more than one line: $out"
want="127.0.0.1:$((FENCE_BASE_PORT + 101)),127.0.0.1:$((FENCE_BASE_PORT + 102)),127.0.0.1:$((FENCE_BASE_PORT + 103))"
[[ "$out" == "export FENCE_ENDPOINTS=$want" ]] || fail "start printed '$out', not 'export FENCE_ENDPOINTS=$want'"
(unset FENCE_ENDPOINTS; eval "$out"; bash -c '[[ "$FENCE_ENDPOINTS" == "$1" ]]' _ "$want") ||
    fail "eval of '$out' does not export FENCE_ENDPOINTS"
pass "start prints: $out"

for id in 1 2 3; do first_pids+=("$(cat "$DIR/$id.pid")"); done
for pid in "${first_pids[@]}"; do member_runs "$pid" || fail "member pid $pid is not running after start"; done
before=$(cd "$DIR" && md5sum ./*.pid cluster.env)

# 2. A second start is refused and writes nothing.
rc=0
"$CLUSTER" start "$DIR" 3 >"$W/second.out" 2>"$W/second.err" || rc=$?
((rc != 0)) || fail "a second start on running members succeeded: $(cat "$W/second.out")"
[[ ! -s "$W/second.out" ]] || fail "the refused start printed on stdout: $(cat "$W/second.out")"
grep -q "still running" "$W/second.err" && grep -q "stop" "$W/second.err" ||
    fail "the refusal does not say that members run and to stop them: $(cat "$W/second.err")"
for pid in "${first_pids[@]}"; do
    grep -q "pid $pid" "$W/second.err" || fail "the refusal does not name pid $pid: $(cat "$W/second.err")"
done
[[ "$(cd "$DIR" && md5sum ./*.pid cluster.env)" == "$before" ]] || fail "the refused start changed the pid files or cluster.env"
pass "second start refused (exit $rc): $(cat "$W/second.err")"

# 3. stop still stops all three.
"$CLUSTER" stop "$DIR"
for pid in "${first_pids[@]}"; do ! member_runs "$pid" || fail "member pid $pid still runs after stop"; done
pass "stop stopped the first start's members ${first_pids[*]}"

# 4. A stale pid file (its pid now a program that is not a member) does not block a start.
sleep 300 &
other_pid=$!
echo "$other_pid" >"$DIR/1.pid"
out=$("$CLUSTER" start "$DIR" 3) || fail "start refused over a stale pid file (pid $other_pid is sleep)"
kill -0 "$other_pid" || fail "start touched the program named by the stale pid file"
"$CLUSTER" stop "$DIR"
kill -0 "$other_pid" || fail "stop killed the program named by the stale pid file"
pass "a stale pid file naming another program is ignored"
