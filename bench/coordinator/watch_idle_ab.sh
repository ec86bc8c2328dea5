#!/usr/bin/env bash
# Acquire+release cycles/s of a 3-member cluster with no watch and with
# WATCHERS (default 100) idle watches (each of its own key, never touched by
# the load) spread over the members, alternating ROUNDS (default 3) times;
# prints each run and the medians. Issue 35: within 3%.
#   bash bench/coordinator/watch_idle_ab.sh   (BENCH_BIN, FENCE_BIN_DIR, BASE_PORT=13070, SECONDS_PER_RUN=10, CONNECTIONS=8)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BENCH=${BENCH_BIN:-$ROOT/build/bench/coordinator/bench_coordinator}
export FENCE_BIN_DIR=${FENCE_BIN_DIR:-$ROOT/build/coordinator/server}
export FENCE_BASE_PORT=${BASE_PORT:-13070}
WATCHERS=${WATCHERS:-100} ROUNDS=${ROUNDS:-3} SECS=${SECONDS_PER_RUN:-10} CONNS=${CONNECTIONS:-8}
DIR=$(mktemp -d /tmp/pgfence-watchab.XXXXXX)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; "$ROOT/scripts/cluster.sh" stop "$DIR" >/dev/null 2>&1 || true; rm -rf "$DIR"; }
trap cleanup EXIT
out=$("$ROOT/scripts/cluster.sh" start "$DIR" 3)
EP=${out#export FENCE_ENDPOINTS=}
run() {  # prints cycles/s
    "$BENCH" load pgfence --endpoints "$EP" --connections "$CONNS" --seconds "$SECS" | tee -a "$DIR/runs" |
        grep -o 'cycles_per_s=[0-9.]*' | cut -d= -f2
}
none=() with=()
for ((r = 0; r < ROUNDS; r++)); do
    none+=("$(run)")
    for ((i = 0; i < WATCHERS; i++)); do
        curl -sN "http://127.0.0.1:$((FENCE_BASE_PORT + 101 + i % 3))/v1/watch?key=idle-$i" >/dev/null 2>&1 &
        pids+=($!)
    done
    sleep 1
    with+=("$(run)")
    kill "${pids[@]}" 2>/dev/null || true
    pids=()
    sleep 1
done
median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
echo "no watch:          ${none[*]}  median $(median "${none[@]}")"
echo "$WATCHERS idle watches: ${with[*]}  median $(median "${with[@]}")"
awk -v a="$(median "${none[@]}")" -v b="$(median "${with[@]}")" 'BEGIN { printf "change: %+.1f%%\n", (b - a) / a * 100 }'
