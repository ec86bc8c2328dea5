#!/usr/bin/env bash
# A/B of two fence-coordinator builds on this machine: is B slower than A?
#
#   bash bench/coordinator/ab.sh DIR_A DIR_B
#
# DIR_A and DIR_B hold a fence-coordinator each (e.g. build-bench/coordinator/
# server of two worktrees, both Release). The run has AB_BLOCKS blocks; each
# starts a 3-member cluster of each build at once (A's and B's ports and their
# start order swap from one block to the next, as the first-started cluster
# was seen to run a few percent apart), then runs AB_ROUNDS rounds of one
# 32-connection acquire+release load of AB_SECONDS against each, alternating
# which goes first. One bench_coordinator binary drives every run.
# Prints one TSV line per run (block, round, A|B, cycles/s, the load's line)
# and then bench/coordinator/ab_stats.py's summary: medians, the paired
# per-round B/A ratio with a bootstrap interval, and each block's ratio.
#
# DIR_A and DIR_B may be the same build with different member flags
# (AB_FLAGS_A, AB_FLAGS_B: e.g. signing off against on), or with watchers
# beside the load (AB_WATCHERS_A, AB_WATCHERS_B: that many watches of
# AB_WATCH_PREFIX held open on the side's cluster for the whole block, spread
# over its members, by bench/coordinator/hold_watchers.py).
# Environment: AB_BLOCKS (4), AB_ROUNDS (8), AB_SECONDS (10), AB_CONNECTIONS
# (32), AB_PORT (19400: clusters at AB_PORT and AB_PORT+200), AB_FLAGS_A and
# AB_FLAGS_B (extra fence-coordinator flags of each side, default none),
# AB_WATCHERS_A and AB_WATCHERS_B (0), AB_WATCH_PREFIX (bench-idle/: no key of
# the load's, which are bench-PID-N; "bench-" watches every one of them), BENCH_BIN
# (build-bench/bench/coordinator/bench_coordinator). Run it alone: anything
# else on the machine (a build, a test) moves the figures more than most
# changes do.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
usage() { sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; }
[[ "${1:-}" == -h || "${1:-}" == --help ]] && { usage; exit 0; }
(($# == 2)) || { usage >&2; exit 2; }
declare -A BIN=([A]=$1 [B]=$2) FLAGS=([A]=${AB_FLAGS_A:-} [B]=${AB_FLAGS_B:-})
declare -A WATCHERS=([A]=${AB_WATCHERS_A:-0} [B]=${AB_WATCHERS_B:-0}) HOLDER=()
WATCH_PREFIX=${AB_WATCH_PREFIX:-bench-idle/}
for v in A B; do
    [[ -x "${BIN[$v]}/fence-coordinator" ]] || { echo "ab.sh: no fence-coordinator in ${BIN[$v]}" >&2; exit 2; }
done
BLOCKS=${AB_BLOCKS:-4} ROUNDS=${AB_ROUNDS:-8} SECS=${AB_SECONDS:-10} CONNS=${AB_CONNECTIONS:-32} PORT=${AB_PORT:-19400}
for n in BLOCKS ROUNDS SECS CONNS PORT; do
    [[ "${!n}" =~ ^[1-9][0-9]*$ ]] || { echo "ab.sh: AB_$n must be a positive integer, got '${!n}'" >&2; exit 2; }
done
for v in A B; do
    [[ "${WATCHERS[$v]}" =~ ^[0-9]+$ ]] ||
        { echo "ab.sh: AB_WATCHERS_$v must be a count, got '${WATCHERS[$v]}'" >&2; exit 2; }
done
BENCH=${BENCH_BIN:-$ROOT/build-bench/bench/coordinator/bench_coordinator}
[[ -x "$BENCH" ]] || { echo "ab.sh: no bench_coordinator at $BENCH (make bench-coordinator builds it)" >&2; exit 2; }
W=$(mktemp -d /tmp/pgfence-ab.XXXXXX)
OUT="$W/runs.tsv"
stop_all() {
    for v in A B; do
        [[ -n "${HOLDER[$v]:-}" ]] && { kill "${HOLDER[$v]}" 2>/dev/null; wait "${HOLDER[$v]}" 2>/dev/null || true; }
        HOLDER[$v]=""
    done
    for v in A B; do FENCE_BIN_DIR=${BIN[$v]} "$ROOT/scripts/cluster.sh" stop "$W/$v" >/dev/null 2>&1 || true; done
    rm -rf "$W/A" "$W/B"
}
trap 'stop_all; rm -rf "$W"' EXIT
for ((b = 1; b <= BLOCKS; b++)); do
    if ((b % 2)); then first=A second=B; else first=B second=A; fi
    declare -A EP=()
    line=$(FENCE_BIN_DIR=${BIN[$first]} FENCE_COORDINATOR_FLAGS=${FLAGS[$first]} FENCE_BASE_PORT=$PORT \
        "$ROOT/scripts/cluster.sh" start "$W/$first" 3)
    EP[$first]=${line#export FENCE_ENDPOINTS=}
    line=$(FENCE_BIN_DIR=${BIN[$second]} FENCE_COORDINATOR_FLAGS=${FLAGS[$second]} FENCE_BASE_PORT=$((PORT + 200)) \
        "$ROOT/scripts/cluster.sh" start "$W/$second" 3)
    EP[$second]=${line#export FENCE_ENDPOINTS=}
    for v in A B; do
        ((WATCHERS[$v] > 0)) || continue
        python3 "$ROOT/bench/coordinator/hold_watchers.py" --endpoints "${EP[$v]}" --count "${WATCHERS[$v]}" \
            --prefix "$WATCH_PREFIX" >"$W/watchers-$v" &
        HOLDER[$v]=$!
        for ((t = 0; t < 600; t++)); do
            grep -q '^ready' "$W/watchers-$v" && break
            kill -0 "${HOLDER[$v]}" 2>/dev/null || { echo "ab.sh: the watchers of $v failed" >&2; exit 1; }
            sleep 0.1
        done
        grep -q '^ready' "$W/watchers-$v" || { echo "ab.sh: $v's ${WATCHERS[$v]} watches not open in 60 s" >&2; exit 1; }
    done
    for ((r = 1; r <= ROUNDS; r++)); do
        if ((r % 2)); then order="A B"; else order="B A"; fi
        for v in $order; do
            for w in A B; do
                [[ -z "${HOLDER[$w]:-}" ]] || kill -0 "${HOLDER[$w]}" 2>/dev/null ||
                    { echo "ab.sh: the watchers of $w stopped (see above)" >&2; exit 1; }
            done
            run=$("$BENCH" load pgfence --endpoints "${EP[$v]}" --connections "$CONNS" --seconds "$SECS")
            c=$(sed -n 's/.* cycles_per_s=\([^ ]*\).*/\1/p' <<<" $run")
            printf '%s\t%s\t%s\t%s\t%s\n' "$b" "$r" "$v" "$c" "$run" | tee -a "$OUT"
        done
    done
    echo "ab.sh: block $b of $BLOCKS done" >&2
    stop_all
done
python3 "$ROOT/bench/coordinator/ab_stats.py" "$OUT"
