#!/usr/bin/env bash
# pgfence at scale, side by side with etcd 3.4: for each N in BENCH_SCALE_LOCKS
# held locks, on a fresh 3-member cluster (127.0.0.1, data on disk under the
# build directory, fsync on):
#
#   preload_s     N acquires of distinct keys, lease 3600 s, on the leader
#                 (bench_scale preload: 64 connections x 16 pipelined)
#   c/s p50 p99 max errs terms
#                 acquire+release cycles/s and acquire latency (us) at 32
#                 connections on other keys for BENCH_SECONDS (bench_coordinator
#                 load; etcd: bench_etcd_grpc load, its native gRPC API);
#                 terms: the leader's term before -> after the load (pgfence)
#   rss_mb        VmRSS of each member after the load (/proc/PID/status), member 1/2/3
#   B/lock        (leader's RSS at N - leader's RSS at N=0) / N
#   snap_mb snaps snap_ms
#                 the leader's snapshot file (DIR/ID/snapshot) size, the
#                 snapshots it took (pgfence_snapshots_total; "+K": K of them
#                 during the load), and the newest one's save time
#                 (pgfence_snapshot_save_last_seconds: encoding, writing,
#                 fsyncing and renaming the file on the writer thread; the
#                 table's serialization on the event loop is not in it)
#   restart_f_s restart_l_s
#                 restart time of a follower, then of the leader: C = the
#                 member's commit_index (GET /v1/status) with the cluster
#                 idle; kill -9; start it again (scripts/cluster.sh restart);
#                 seconds from that start (once the killed process is gone:
#                 one killed inside a long fsync lingers, its stderr line
#                 says how long) until its GET /v1/status answers with
#                 applied_index >= C. (etcd: POST /v3/maintenance/status,
#                 raftIndex before, raftAppliedIndex after.)
#   failover_ms   kill -9 of the leader -> first successful acquire (bench_coordinator failover)
#
# then, for N > 0, on another fresh cluster (bench_scale storm):
#   storm 1       N locks expiring together: each acquired with what is left
#                 of a lease L1 since the preload began (bench_scale storm
#                 --aligned 1; L1 = 1.5 x the preload time above + 10 s), never
#                 renewed, so every deadline (the leader's: the lease x 1.05,
#                 --max-clock-drift-ppm 50000) is L1 x 1.05 after the preload
#                 began (spread_s 0); expired_s = from that deadline until the
#                 leader applied N Expires (as bench_etcd_grpc storm counts).
#                 etcd's leases are granted with one TTL: theirs spread over
#                 its preload, and its expired_s counts from the first
#   storm 2       N locks with lease L2 (as L1), then kill -9 of the leader at
#                 once: the new leader restarts every lease at full length
#                 (the last deadline: L2 x 1.05 after the new leader was
#                 first seen; after_last_s from it) or, one checkpointed
#                 before the kill (at half its run), with what was left of
#                 it: ending no earlier than its first deadline (the first
#                 grant's; expired_s and the probe's window from it)
#                 Both: probe p99/max (us) of one connection looping
#                 acquire+release 10 ms apart, over the cycles that overlap
#                 the storm (its first deadline -> all expired; the probe
#                 runs on an idle cluster before), and term before/after
#                 (after: the highest until 3 s past the last expiry; an
#                 increase past the killed leader's = leader changes)
#                 Goals: storm 1 at the largest N: all expired <= 5 s after
#                 its deadline, probe p99 <= 20 ms, term unchanged; storm 2:
#                 the same, its term up by one at most (the killed leader's
#                 successor; a split vote in that election counts as a change)
# and once, at the largest N: KEEPALIVE_CONNECTIONS (10000) connections to
# the leader, each holding its own key (lease 3 s, keepalive every 1 s) for
# BENCH_SECONDS: keepalives/s answered against expected, p99, errors.
#
#   bash bench/scale/run.sh          (make bench-scale)
#
# Flags: every pgfence member runs with --max-connections and
# --max-connections-per-address 12000 (the holders' 10000 connections, all
# from 127.0.0.1) and --max-lease 3600000 (the preload's hour-long leases),
# nothing else: expiry (--max-expire-batch, the wave) is
# measured at the server's defaults, as a user gets them.
#
# Environment: BENCH_SCALE_LOCKS ("0 100000 1000000"; each 0..2000000, at
# most 6 values, ascending, the first 0: bytes per lock are measured against
# it), BENCH_SCALE_SYSTEMS ("pgfence etcd"; one of them alone), BENCH_SCALE_STORMS ("1 2";
# "1" or "2": that storm alone; 0 skips the expiry storms, for a quicker run of the rows alone, e.g. B/lock), BENCH_SECONDS (10, 1..60), KEEPALIVE_CONNECTIONS (10000, 0 = skip,
# at most 15000), ETCD_SCALE_MAX_LOCKS (100000: etcd rows for larger N are
# skipped, see "Time budget"), BUILD_BENCH (build-bench: Release build
# made here), JOBS (2), BENCH_SCALE_BASE_PORT (19800: pgfence peers +1..3,
# HTTP +101..103; the storm cluster +50), ETCD_SCALE_BASE_PORT (19950: clients
# +1..3, peers +11..13), ETCD_GRPC_BIN (default BUILD_BENCH/bench/etcd_grpc/
# bench_etcd_grpc; without it the etcd rows are skipped, with a line saying
# so), BENCH_SKIP_BUILD=1 with FENCE_BIN_DIR, BENCH_BIN, BENCH_SCALE_BIN,
# FENCECTL_BIN to use existing binaries. BENCH_SCALE_STORMS_ONLY=1: pgfence's
# storms alone (no rows, no etcd), each N's lease BENCH_SCALE_STORM_LEASE_MS
# (100000: it must outlast the storm's preload, 40-90 s for 1M on 2 loaded cores; no PNG).
# BENCH_SCALE_EXTRA_FLAGS: appended to every member's flags (an A/B of a
# setting; the output's second line shows the flags a run used).
#
# Output: the tables on stdout; BUILD_BENCH/bench-scale/scale.tsv and
# scale.png (gnuplot: cycles/s and p99 against locks held, both systems);
# goal lines PASS/FAIL at the end.
#
# Time budget (2 cores, default run, about 12-14 min): the storms dominate:
# each waits a lease that outlasts its preload. etcd is measured up to
# ETCD_SCALE_MAX_LOCKS: its lease-per-lock preload of 1M (a LeaseGrant and a
# Put per lock) alone would take minutes, beyond the 15-minute budget.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
RUN_START=$SECONDS

die() { echo "run.sh: $*" >&2; exit 2; }

LOCKS_LIST=${BENCH_SCALE_LOCKS:-0 100000 1000000}
SECONDS_PER_RUN=${BENCH_SECONDS:-10}
KEEPALIVE_CONNS=${KEEPALIVE_CONNECTIONS:-10000}
ETCD_MAX=${ETCD_SCALE_MAX_LOCKS:-100000}
BUILD=${BUILD_BENCH:-$ROOT/build-bench}
PG_BASE=${BENCH_SCALE_BASE_PORT:-19800}
ETCD_BASE=${ETCD_SCALE_BASE_PORT:-19950}
SYSTEMS=${BENCH_SCALE_SYSTEMS:-pgfence etcd}
STORMS_ONLY=${BENCH_SCALE_STORMS_ONLY:-0}
STORM_LEASE_MS=${BENCH_SCALE_STORM_LEASE_MS:-100000}
PG_FLAGS="--max-connections 12000 --max-connections-per-address 12000 --max-lease 3600000${BENCH_SCALE_EXTRA_FLAGS:+ $BENCH_SCALE_EXTRA_FLAGS}"
STORMS=${BENCH_SCALE_STORMS:-1 2}
[[ "$STORMS" =~ ^(0|1|2|1\ 2)$ ]] || die "BENCH_SCALE_STORMS must be '0', '1', '2' or '1 2', got '$STORMS'"

[[ "$SECONDS_PER_RUN" =~ ^[1-9][0-9]?$ && $SECONDS_PER_RUN -le 60 ]] ||
    die "BENCH_SECONDS must be 1..60, got '$SECONDS_PER_RUN'"
[[ "$KEEPALIVE_CONNS" =~ ^[0-9]{1,5}$ && $KEEPALIVE_CONNS -le 15000 ]] ||
    die "KEEPALIVE_CONNECTIONS must be 0..15000, got '$KEEPALIVE_CONNS'"
[[ "$SYSTEMS" =~ ^(pgfence|etcd|pgfence\ etcd)$ ]] || die "BENCH_SCALE_SYSTEMS must be 'pgfence', 'etcd' or 'pgfence etcd', got '$SYSTEMS'"
[[ "$ETCD_MAX" =~ ^[0-9]{1,7}$ ]] || die "ETCD_SCALE_MAX_LOCKS must be 0..9999999, got '$ETCD_MAX'"
for port in "$PG_BASE" "$ETCD_BASE"; do
    [[ "$port" =~ ^[0-9]{4,5}$ && $port -ge 1024 && $port -le 65000 ]] || die "base port must be 1024..65000, got '$port'"
done
[[ "$STORMS_ONLY" =~ ^[01]$ ]] || die "BENCH_SCALE_STORMS_ONLY must be 0 or 1, got '$STORMS_ONLY'"
[[ "$STORM_LEASE_MS" =~ ^[1-9][0-9]{3,6}$ && $STORM_LEASE_MS -le 3600000 ]] ||
    die "BENCH_SCALE_STORM_LEASE_MS must be 1000..3600000, got '$STORM_LEASE_MS'"
((STORMS_ONLY == 0)) || SYSTEMS=pgfence
read -r -a LOCKS <<<"$LOCKS_LIST"
((${#LOCKS[@]} >= 1 && ${#LOCKS[@]} <= 6)) || die "BENCH_SCALE_LOCKS needs 1..6 values, got '$LOCKS_LIST'"
prev=-1
for n in "${LOCKS[@]}"; do
    [[ "$n" =~ ^[0-9]{1,7}$ && $n -le 2000000 ]] || die "BENCH_SCALE_LOCKS: '$n' is not a count 0..2000000"
    ((n > prev)) || die "BENCH_SCALE_LOCKS must ascend, got '$LOCKS_LIST'"
    prev=$n
done
((LOCKS[0] == 0)) || die "BENCH_SCALE_LOCKS must start with 0 (bytes per lock are measured against it), got '$LOCKS_LIST'"
LARGEST=${LOCKS[${#LOCKS[@]} - 1]}

if [[ "${BENCH_SKIP_BUILD:-0}" != 1 ]]; then
    # Warnings are not errors here: g++ 12 at -O3 reports a false -Wrestrict inside
    # std::string (server/bootstrap.cc); make test is where warnings stop a build.
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DPGFENCE_WERROR=OFF >/dev/null
    # on stderr: stdout is the report
    cmake --build "$BUILD" -j"${JOBS:-2}" --target fence-coordinator fencectl bench_coordinator bench_scale >&2
    # etcd's gRPC client, where the gRPC packages are installed (the target exists then).
    targets=$(cmake --build "$BUILD" --target help)  # whole, before grep: make's help dies on a closed pipe
    if grep -q '^\.\.\. bench_etcd_grpc$' <<<"$targets"; then
        cmake --build "$BUILD" -j"${JOBS:-2}" --target bench_etcd_grpc >&2
    fi
    FENCE_BIN_DIR=$BUILD/coordinator/server
    BENCH_BIN=$BUILD/bench/coordinator/bench_coordinator
    BENCH_SCALE_BIN=$BUILD/bench/scale/bench_scale
fi
: "${FENCE_BIN_DIR:?}" "${BENCH_BIN:?}" "${BENCH_SCALE_BIN:?}"
export FENCE_BIN_DIR
ETCD=${ETCD_BIN:-$(command -v etcd || true)}
GRPC_BIN=${ETCD_GRPC_BIN:-$BUILD/bench/etcd_grpc/bench_etcd_grpc}
ETCD_SKIP=""
[[ -x "$GRPC_BIN" ]] || ETCD_SKIP="bench_etcd_grpc not found at $GRPC_BIN (set ETCD_GRPC_BIN)"
[[ -x "$ETCD" ]] || ETCD_SKIP="etcd not found (apt-get install etcd-server)"

OUT=$BUILD/bench-scale
mkdir -p "$OUT"
WORK=$(mktemp -d "$BUILD/bench-scale.XXXXXX")  # on disk, not tmpfs: fsync costs what it costs
ETCD_PIDS=()

# shellcheck source=../../scripts/lib/process.sh
source "$ROOT/scripts/lib/process.sh"  # alive

stop_etcd() {
    local pid i
    for pid in "${ETCD_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${ETCD_PIDS[@]}"; do
        for ((i = 0; i < 150; i++)); do alive "$pid" || break; sleep 0.1; done
        alive "$pid" && { echo "run.sh: etcd pid $pid ignored SIGTERM for 15s; SIGKILL" >&2; kill -KILL "$pid" 2>/dev/null || true; }
        wait "$pid" 2>/dev/null || true
    done
    ETCD_PIDS=()
}

# On exit: every member and etcd stopped; the data removed, but after a
# failure the members' logs are kept in OUT/logs-<time>/ first.
cleanup() {
    local rc=$? d keep
    for d in "$WORK"/pg-* "$WORK"/storm-*; do
        [[ -d "$d" ]] && FENCE_STOP_GRACE_SECONDS=5 "$ROOT/scripts/cluster.sh" stop "$d" >/dev/null 2>&1 || true
    done
    stop_etcd
    if ((rc != 0)); then
        keep="$OUT/logs-$(date +%H%M%S)"
        mkdir -p "$keep"
        for d in "$WORK"/*/; do
            [[ -d "$d" ]] || continue
            mkdir -p "$keep/$(basename "$d")"
            cp "$d"*.log "$keep/$(basename "$d")/" 2>/dev/null || true
        done
        cp "$WORK"/*.log "$keep/" 2>/dev/null || true
        echo "run.sh: failed (exit $rc); the members' logs are in $keep" >&2
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

PHASE_START=$SECONDS
phase() {  # NAME: elapsed time of the phase that just ended, on stderr and in the log
    local now=$SECONDS
    printf 'run.sh: [%4ds total] %-40s %4ds\n' "$((now - RUN_START))" "$1" "$((now - PHASE_START))" | tee -a "$WORK/phases" >&2
    PHASE_START=$now
}
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }  # field NAME LINE
now_s() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now_s)" 'BEGIN {printf "%.2f", b - a}'; }
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

# ---- pgfence cluster helpers ----

pg_start() {  # DIR BASE: sets PG_ENDPOINTS
    local line
    # Limits only (the header's "Flags"): expiry runs at the server's defaults.
    line=$(FENCE_BASE_PORT=$2 FENCE_COORDINATOR_FLAGS="$PG_FLAGS" \
        "$ROOT/scripts/cluster.sh" start "$1" 3)
    PG_ENDPOINTS=${line#export FENCE_ENDPOINTS=}
    PG_DIR=$1
    PG_PORT0=$(($2 + 100))
}
pg_stop() { FENCE_STOP_GRACE_SECONDS=10 "$ROOT/scripts/cluster.sh" stop "$PG_DIR" >/dev/null; }
pg_status() { curl -s -m 1 "http://127.0.0.1:$((PG_PORT0 + $1))/v1/status" 2>/dev/null || true; }
top_field() { { grep -o "\"$1\":[0-9]*" <<<"$2" || true; } | head -1 | cut -d: -f2; }  # the first (top-level) NAME of a JSON status; "" if none
pg_leader() {  # ID of the member that says it leads, or ""
    local i
    for i in 1 2 3; do
        pg_status "$i" | grep -Eq '^\{"id":[0-9]+,"role":"leader"' && { echo "$i"; return; }
    done
    echo ""
}
pg_wait_healthy() {  # all three answer, one leader
    local deadline=$((SECONDS + 30)) i ok leaders
    while :; do
        ok=0 leaders=0
        for i in 1 2 3; do
            s=$(pg_status "$i")
            [[ "$s" =~ ^\{\"id\":[0-9]+,\"role\":\"(leader|follower)\" ]] && ok=$((ok + 1))
            [[ "$s" =~ ^\{\"id\":[0-9]+,\"role\":\"leader\" ]] && leaders=$((leaders + 1))
        done
        ((ok == 3 && leaders == 1)) && return 0
        ((SECONDS < deadline)) || die "pgfence cluster in $PG_DIR not healthy after 30s"
        sleep 0.1
    done
}
# The leader's ID once the cluster is healthy with one; an election may be
# under way when pg_wait_healthy returns (bounded, 30 s).
pg_settled_leader() {
    local deadline=$((SECONDS + 30)) l
    while ((SECONDS < deadline)); do
        pg_wait_healthy
        l=$(pg_leader)
        [[ -n "$l" ]] && { echo "$l"; return; }
        sleep 0.1
    done
    die "no pgfence leader in $PG_DIR for 30s"
}
pg_metric() { curl -s -m 2 "http://127.0.0.1:$((PG_PORT0 + $1))/metrics" | awk -v n="$2" '$1 == n {print $2}'; }

# pg_restart ID: prints the seconds from its restart until it serves its
# commit index of before the kill (see the header), or "timeout" after 60 s
# (then the rest of the run goes on).
pg_restart() {
    local id=$1 pid c t0 s a i
    c=$(top_field commit_index "$(pg_status "$id")")
    [[ -n "$c" ]] || die "member $id does not answer /v1/status before its restart"
    pid=$(cat "$PG_DIR/$id.pid")
    # A process killed inside a long fsync (a snapshot of a million locks)
    # dies only when the write ends, and holds its data directory's lock
    # until then: start the new one after that.
    t0=$(now_s)
    kill -KILL "$pid"
    for ((i = 0; i < 1200; i++)); do alive "$pid" || break; sleep 0.05; done
    if alive "$pid"; then
        echo "run.sh: member $id (pid $pid) still alive 60s after SIGKILL" >&2
        echo timeout
        return
    fi
    echo "run.sh: member $id: dead $(elapsed "$t0") s after SIGKILL" >&2
    t0=$(now_s)
    "$ROOT/scripts/cluster.sh" restart "$PG_DIR" "$id"
    local deadline=$((SECONDS + 60))
    while :; do
        s=$(pg_status "$id")
        if [[ -n "$s" ]]; then
            a=$(top_field applied_index "$s")
            [[ -n "$a" ]] && ((a >= c)) && break
        fi
        if ((SECONDS >= deadline)); then
            echo "run.sh: member $id did not apply index $c within 60s of its restart (it shows: ${s:0:200})" >&2
            echo timeout
            return
        fi
        sleep 0.02
    done
    elapsed "$t0"
}

# ---- etcd helpers ----

etcd_start() {  # DIR: sets ETCD_ENDPOINTS; a fresh 3-member cluster
    local dir=$1 cluster="" i
    ETCD_DIR=$dir
    for i in 1 2 3; do cluster+="${cluster:+,}e$i=http://127.0.0.1:$((ETCD_BASE + 10 + i))"; done
    ETCD_CLUSTER=$cluster
    for i in 1 2 3; do etcd_run "$i" new; done
    ETCD_ENDPOINTS=""
    for i in 1 2 3; do ETCD_ENDPOINTS+="${ETCD_ENDPOINTS:+,}127.0.0.1:$((ETCD_BASE + i))"; done
    for i in 1 2 3; do etcd_wait_health "$i" 30; done
}
etcd_run() {  # I new|existing
    local i=$1
    "$ETCD" --name "e$i" --data-dir "$ETCD_DIR/e$i" \
        --listen-client-urls "http://127.0.0.1:$((ETCD_BASE + i))" \
        --advertise-client-urls "http://127.0.0.1:$((ETCD_BASE + i))" \
        --listen-peer-urls "http://127.0.0.1:$((ETCD_BASE + 10 + i))" \
        --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_BASE + 10 + i))" \
        --initial-cluster "$ETCD_CLUSTER" --initial-cluster-state "$2" \
        --initial-cluster-token pgfence-bench-scale >>"$ETCD_DIR-e$i.log" 2>&1 &
    ETCD_PIDS[$((i - 1))]=$!
}
etcd_wait_health() {  # I SECONDS
    local deadline=$((SECONDS + $2))
    until curl -s -m 1 "http://127.0.0.1:$((ETCD_BASE + $1))/health" | grep -q '"health":"true"'; do
        ((SECONDS < deadline)) || die "etcd e$1 not healthy after $2s; see $ETCD_DIR-e$1.log"
        sleep 0.02
    done
}
etcd_status() { curl -s -m 1 -X POST -d '{}' "http://127.0.0.1:$((ETCD_BASE + $1))/v3/maintenance/status" 2>/dev/null || true; }
etcd_json() { { grep -o "\"$1\":\"\\{0,1\\}[0-9]*" <<<"$2" || true; } | head -1 | tr -dc '0-9'; }  # NAME JSON: a number, quoted or not; "" if none
etcd_leader() {
    local i s
    for i in 1 2 3; do
        s=$(etcd_status "$i")
        [[ -n "$s" && "$(etcd_json leader "$s")" == "$(etcd_json member_id "$s")" ]] && { echo "$i"; return; }
    done
    echo ""
}
# etcd_restart I: sets RESTART_S, the seconds from the restart of member I
# until it answers status with raftAppliedIndex >= its raftIndex of before
# (not in a subshell: it records the new pid in ETCD_PIDS).
etcd_restart() {
    local i=$1 c t0 s a pid=${ETCD_PIDS[$(($1 - 1))]}
    c=$(etcd_json raftIndex "$(etcd_status "$i")")
    [[ -n "$c" ]] || die "etcd e$i does not answer /v3/maintenance/status before its restart"
    kill -KILL "$pid"
    wait "$pid" 2>/dev/null || true
    t0=$(now_s)
    etcd_run "$i" existing
    local deadline=$((SECONDS + 120))
    while :; do
        s=$(etcd_status "$i")
        a=$(etcd_json raftAppliedIndex "$s")
        [[ -n "$a" ]] && ((a >= c)) && break
        ((SECONDS < deadline)) || die "etcd e$i did not apply index $c within 120s of its restart"
        sleep 0.02
    done
    RESTART_S=$(elapsed "$t0")
}

# ---- the runs ----

declare -A R=()  # "system N column" -> value

record_load() {  # pg|etcd N LINE: one load run's line, kept in R
    local sys=$1 n=$2 line=$3 name=etcd
    [[ $sys == pg ]] && name=pgfence
    echo "$name N=$n load: $line"
    R[$sys $n cps]=$(field cycles_per_s "$line") R[$sys $n p50]=$(field p50_us "$line")
    R[$sys $n p99]=$(field p99_us "$line") R[$sys $n max]=$(field max_us "$line") R[$sys $n errors]=$(field errors "$line")
    phase "$name N=$n: load"
}

pg_row() {  # N
    local n=$1 line leader pid i
    pg_start "$WORK/pg-$n" "$PG_BASE"
    phase "pgfence N=$n: cluster start"
    R[pg $n preload_s]=0
    if ((n > 0)); then
        line=$("$BENCH_SCALE_BIN" preload --endpoints "$PG_ENDPOINTS" --locks "$n" --lease-ms 3600000 --prefix held)
        echo "pgfence N=$n preload: $line"
        R[pg $n preload_s]=$(field seconds "$line")
        phase "pgfence N=$n: preload"
    fi
    leader=$(pg_settled_leader)
    local snaps_before term_before
    snaps_before=$(pg_metric "$leader" pgfence_snapshots_total)
    term_before=$(pg_metric "$leader" pgfence_term)
    record_load pg "$n" "$("$BENCH_BIN" load pgfence --endpoints "$PG_ENDPOINTS" --connections 32 --seconds "$SECONDS_PER_RUN")"
    # The leader may lose its leadership during or right after the load (seen at 1M locks):
    # the measures below wait for the cluster to have one again, and the term says so.
    leader=$(pg_settled_leader)
    R[pg $n terms]="$term_before->$(pg_metric "$leader" pgfence_term)"
    R[pg $n rss]="" R[pg $n leader_rss_kb]=$(rss_kb "$(cat "$PG_DIR/$leader.pid")")
    for i in 1 2 3; do R[pg $n rss]+="${R[pg $n rss]:+/}$(($(rss_kb "$(cat "$PG_DIR/$i.pid")") / 1024))"; done
    local snap="$PG_DIR/$leader/snapshot"
    R[pg $n snap_mb]=-
    [[ -f "$snap" ]] && R[pg $n snap_mb]=$(awk -v b="$(stat -c %s "$snap")" 'BEGIN {printf "%.1f", b / 1048576}')
    R[pg $n snaps]="$(pg_metric "$leader" pgfence_snapshots_total)+$(($(pg_metric "$leader" pgfence_snapshots_total) - snaps_before))"
    R[pg $n snap_ms]=$(pg_metric "$leader" pgfence_snapshot_save_last_seconds | awk '{printf "%.0f", $1 * 1000}')
    [[ -n "${R[pg $n snap_ms]}" ]] || R[pg $n snap_ms]=-
    local follower=$((leader % 3 + 1))
    R[pg $n restart_f]=$(pg_restart "$follower")
    pg_wait_healthy
    phase "pgfence N=$n: restart follower $follower"
    leader=$(pg_settled_leader)
    R[pg $n restart_l]=$(pg_restart "$leader")
    pg_wait_healthy
    phase "pgfence N=$n: restart leader $leader"
    leader=$(pg_settled_leader)
    pid=$(cat "$PG_DIR/$leader.pid")
    line=$("$BENCH_BIN" failover --endpoints "$PG_ENDPOINTS" --kill-pid "$pid" --timeout-ms 30000)
    echo "pgfence N=$n failover (killed leader $leader): $line"
    R[pg $n failover]=$(field failover_ms "$line")
    "$ROOT/scripts/cluster.sh" restart "$PG_DIR" "$leader"
    pg_wait_healthy
    phase "pgfence N=$n: failover"
    if ((n == LARGEST && KEEPALIVE_CONNS > 0)); then
        line=$("$BENCH_SCALE_BIN" keepalive --endpoints "$PG_ENDPOINTS" --connections "$KEEPALIVE_CONNS" \
            --seconds "$SECONDS_PER_RUN" --lease-ms 3000 --interval-ms 1000 2> >(tail -n 3 >&2)) || true
        echo "pgfence N=$n $KEEPALIVE_CONNS holders: $line"
        R[pg holders]=$line
        phase "pgfence N=$n: $KEEPALIVE_CONNS holders"
    fi
    pg_stop
}

# storm_lease_ms pg|etcd N: a lease that outlasts the storm's preload (one
# more like the one measured at N): 1.5 x that preload time + 10 s
# (BENCH_SCALE_STORMS_ONLY: BENCH_SCALE_STORM_LEASE_MS, no preload measured)
storm_lease_ms() {
    [[ -n "${R[$1 $2 preload_s]:-}" ]] || { echo "$STORM_LEASE_MS"; return; }
    awk -v p="${R[$1 $2 preload_s]}" 'BEGIN {l = p * 1.5 + 10; printf "%d", l * 1000}'
}

pg_storms() {  # N
    local n=$1 lease line leader
    lease=$(storm_lease_ms pg "$n")
    pg_start "$WORK/storm-$n" $((PG_BASE + 50))
    if [[ " $STORMS " == *" 1 "* ]]; then
        line=$("$BENCH_SCALE_BIN" storm --endpoints "$PG_ENDPOINTS" --locks "$n" --lease-ms "$lease" --prefix storm1 \
            --aligned 1 2> >(grep -v 'preload [0-9]' >&2)) || true
        echo "pgfence N=$n storm 1: $line"
        R[pg $n storm1]=$line R[pg $n storm1_lease_ms]=$lease
        phase "pgfence N=$n: storm 1 (lease ${lease} ms)"
    fi
    [[ " $STORMS " == *" 2 "* ]] || { pg_stop; return; }
    leader=$(pg_settled_leader)
    line=$("$BENCH_SCALE_BIN" storm --endpoints "$PG_ENDPOINTS" --locks "$n" --lease-ms "$lease" --prefix storm2 \
        --kill-pid "$(cat "$PG_DIR/$leader.pid")" 2> >(grep -v 'preload [0-9]' >&2)) || true
    echo "pgfence N=$n storm 2 (killed leader $leader): $line"
    R[pg $n storm2]=$line R[pg $n storm2_lease_ms]=$lease
    phase "pgfence N=$n: storm 2 (lease ${lease} ms)"
    pg_stop
}

etcd_row() {  # N
    local n=$1 line leader i follower spread
    etcd_start "$WORK/etcd-$n"
    phase "etcd N=$n: cluster start"
    R[etcd $n preload_s]=0
    if ((n > 0)); then
        line=$("$GRPC_BIN" preload --endpoints "$ETCD_ENDPOINTS" --locks "$n" --ttl-s 3600 --prefix held --connections 4)
        echo "etcd N=$n preload: $line"
        R[etcd $n preload_s]=$(field seconds "$line")
        phase "etcd N=$n: preload"
    fi
    record_load etcd "$n" "$("$GRPC_BIN" load --endpoints "$ETCD_ENDPOINTS" --connections 32 --seconds "$SECONDS_PER_RUN" --prefix load)"
    leader=$(etcd_leader)
    [[ -n "$leader" ]] || die "no etcd leader after the load at N=$n"
    R[etcd $n rss]="" R[etcd $n leader_rss_kb]=$(rss_kb "${ETCD_PIDS[$((leader - 1))]}")
    for i in 1 2 3; do R[etcd $n rss]+="${R[etcd $n rss]:+/}$(($(rss_kb "${ETCD_PIDS[$((i - 1))]}") / 1024))"; done
    R[etcd $n snap_mb]=$(du -sm "$ETCD_DIR/e$leader/member/snap" 2>/dev/null | awk '{print $1}')
    R[etcd $n snaps]=- R[etcd $n snap_ms]=-
    follower=$((leader % 3 + 1))
    etcd_restart "$follower"
    R[etcd $n restart_f]=$RESTART_S
    phase "etcd N=$n: restart follower e$follower"
    leader=$(etcd_leader)
    etcd_restart "$leader"
    R[etcd $n restart_l]=$RESTART_S
    for i in 1 2 3; do etcd_wait_health "$i" 30; done
    phase "etcd N=$n: restart leader e$leader"
    R[etcd $n failover]=-
    if ((n > 0)) && [[ "$STORMS" != 0 ]]; then
        local ttl
        ttl=$(($(storm_lease_ms etcd "$n") / 1000))
        line=$("$GRPC_BIN" storm --endpoints "$ETCD_ENDPOINTS" --locks "$n" --ttl-s "$ttl" --prefix storm1 \
            2> >(tee "$WORK/etcd-storm-$n.err" | grep -v '^preload: ' >&2)) || true
        # Its deadlines spread over its preload (its stderr: "storm: preloaded N locks in X s"),
        # its expired_all_s counts from the first: after_last_s = expired_all_s - X.
        spread=$(sed -n 's/.*preloaded [0-9]* locks in \([0-9.]*\) s.*/\1/p' "$WORK/etcd-storm-$n.err" | head -1)
        if [[ -n "$spread" && -n "$(field expired_all_s "$line")" ]]; then
            line+=" deadline_spread_s=$spread after_last_s=$(awk -v e="$(field expired_all_s "$line")" -v s="$spread" \
                'BEGIN {printf "%.2f", e - s}') probe_errors=-"
        fi
        echo "etcd N=$n storm 1: $line"
        R[etcd $n storm1]=$line R[etcd $n storm1_lease_ms]=$((ttl * 1000))
        phase "etcd N=$n: storm 1 (ttl ${ttl} s)"
    fi
    stop_etcd
}

echo "pgfence at scale vs etcd 3.4; N held locks: ${LOCKS[*]}; load ${SECONDS_PER_RUN}s at 32 connections"
echo "data under $WORK (on disk); pgfence members' flags: $PG_FLAGS"
((STORMS_ONLY == 0)) || echo "BENCH_SCALE_STORMS_ONLY=1: pgfence's storms alone, lease $STORM_LEASE_MS ms"
if [[ " $SYSTEMS " == *" pgfence "* ]]; then
    for n in "${LOCKS[@]}"; do
        ((STORMS_ONLY)) || pg_row "$n"
        ((n > 0)) && [[ "$STORMS" != 0 ]] && pg_storms "$n"
    done
fi
if [[ " $SYSTEMS " != *" etcd "* ]]; then
    echo "etcd rows skipped: BENCH_SCALE_SYSTEMS='$SYSTEMS'"
elif [[ -n "$ETCD_SKIP" ]]; then
    echo "etcd rows skipped: $ETCD_SKIP"
else
    for n in "${LOCKS[@]}"; do
        if ((n > ETCD_MAX)); then
            echo "etcd N=$n skipped: above ETCD_SCALE_MAX_LOCKS=$ETCD_MAX (time budget; see the script's header)"
            continue
        fi
        etcd_row "$n"
    done
fi

# ---- tables ----
v() { echo "${R[$1]:--}"; }
bytes_per_lock() {  # SYSTEM N
    local base=${R[$1 0 leader_rss_kb]:-} at=${R[$1 $2 leader_rss_kb]:-}
    if (($2 == 0)) || [[ -z "$base" || -z "$at" ]]; then echo -; return; fi
    awk -v a="$at" -v b="$base" -v n="$2" 'BEGIN {printf "%.0f", (a - b) * 1024 / n}'
}
echo
echo "steady state and recovery (p50/p99/max: acquire latency in us; rss_mb: members 1/2/3; restart_f/l: seconds):"
printf '%-7s %8s | %9s %8s %7s %8s %8s %5s %6s | %-14s %7s | %7s %7s %7s | %9s %9s %11s\n' system N preload_s "c/s" p50 p99 max \
    errs terms rss_mb B/lock snap_mb snaps snap_ms restart_f restart_l failover_ms
for sys in pg etcd; do
    for n in "${LOCKS[@]}"; do
        [[ -n "${R[$sys $n cps]:-}" ]] || continue
        printf '%-7s %8s | %9s %8s %7s %8s %8s %5s %6s | %-14s %7s | %7s %7s %7s | %9s %9s %11s\n' \
            "$([[ $sys == pg ]] && echo pgfence || echo etcd)" "$n" "$(v "$sys $n preload_s")" "$(v "$sys $n cps")" \
            "$(v "$sys $n p50")" "$(v "$sys $n p99")" "$(v "$sys $n max")" "$(v "$sys $n errors")" "$(v "$sys $n terms")" "$(v "$sys $n rss")" \
            "$(bytes_per_lock "$sys" "$n")" "$(v "$sys $n snap_mb")" "$(v "$sys $n snaps")" "$(v "$sys $n snap_ms")" \
            "$(v "$sys $n restart_f")" "$(v "$sys $n restart_l")" "$(v "$sys $n failover")"
    done
done

echo
if [[ "$STORMS" == 0 ]]; then
    echo "expiry storms skipped: BENCH_SCALE_STORMS=0 (no storm rows, no storm goals)"
else
echo "expiry storms (expired_s: the first deadline -> all expired; after_last_s: the last deadline -> all expired;"
echo "probe: one connection's acquire+release cycles that overlap the storm, us; etcd: Lock + Unlock):"
printf '%-7s %-6s %8s | %8s %9s %10s %12s | %10s %10s %6s | %s\n' system storm N lease_ms spread_s expired_s \
    after_last_s probe_p99 probe_max errs terms
fi
for sys in pg etcd; do
    for n in "${LOCKS[@]}"; do
        for s in storm1 storm2; do
            line=${R[$sys $n $s]:-}
            [[ -n "$line" ]] || continue
            printf '%-7s %-6s %8s | %8s %9s %10s %12s | %10s %10s %6s | %s\n' "$([[ $sys == pg ]] && echo pgfence || echo etcd)" \
                "$s" "$(field storm_locks "$line")" "$(v "$sys $n ${s}_lease_ms")" "$(field deadline_spread_s "$line")" \
                "$(field expired_all_s "$line")" "$(field after_last_s "$line")" "$(field probe_p99_us "$line")" "$(field probe_max_us "$line")" \
                "$(field probe_errors "$line")" "$(field term_before "$line")->$(field term_after "$line")"
        done
    done
done
if [[ -n "${R[pg holders]:-}" ]]; then
    line=${R[pg holders]}
    echo
    echo "$(field connections "$line") holders at N=$LARGEST (lease 3 s, keepalive every 1 s, ${SECONDS_PER_RUN}s): holding $(field holding "$line"), keepalives/s $(field keepalives_per_s "$line") of $(field expected_per_s "$line") expected, p50 $(field p50_us "$line") us, p99 $(field p99_us "$line") us, max $(field max_us "$line") us, late $(field late "$line"), errors $(field errors "$line"), ramp $(field ramp_s "$line") s"
fi

echo
echo "pgfence / etcd per N (cycles/s ratio, p99 ratio etcd/pgfence, RSS ratio etcd/pgfence of the leader):"
for n in "${LOCKS[@]}"; do
    if [[ -z "${R[etcd $n cps]:-}" || -z "${R[pg $n cps]:-}" ]]; then echo "N=$n: not both measured"; continue; fi
    awk -v n="$n" -v pc="${R[pg $n cps]}" -v ec="${R[etcd $n cps]}" -v pp="${R[pg $n p99]}" -v ep="${R[etcd $n p99]}" \
        -v pr="${R[pg $n leader_rss_kb]}" -v er="${R[etcd $n leader_rss_kb]}" \
        'BEGIN {printf "N=%s: cycles/s %.1fx, p99 %.1fx, rss %.1fx\n", n, pc / ec, ep / pp, er / pr}'
done

# ---- TSV + PNG ----
TSV=$OUT/scale.tsv
{
    printf 'locks\tpgfence_cps\tpgfence_p99_us\tetcd_cps\tetcd_p99_us\n'
    for n in "${LOCKS[@]}"; do
        printf '%s\t%s\t%s\t%s\t%s\n' "$n" "$(v "pg $n cps")" "$(v "pg $n p99")" "$(v "etcd $n cps")" "$(v "etcd $n p99")"
    done
} >"$TSV"
if ((STORMS_ONLY)); then
    echo "run.sh: no PNG with BENCH_SCALE_STORMS_ONLY=1 (no rows); the table is in $TSV" >&2
elif command -v gnuplot >/dev/null; then
    # x: locks held (0 is drawn at 1 on the log axis); "-" cells are missing points.
    gnuplot <<GP || echo "run.sh: gnuplot failed; the table is in $TSV" >&2
set terminal pngcairo size 1100,450 font ",10"
set output "$OUT/scale.png"
set datafile separator "\t"
set datafile missing "-"
set key top left
set multiplot layout 1,2 title "pgfence vs etcd 3.4, 3 members, 32 connections (make bench-scale)"
set logscale x
set xlabel "locks held (0 drawn at 1)"
set ylabel "acquire+release cycles/s"
set yrange [0:*]
plot "$TSV" using (\$1 > 0 ? \$1 : 1):2 every ::1 with linespoints title "pgfence", \
     "" using (\$1 > 0 ? \$1 : 1):4 every ::1 with linespoints title "etcd (gRPC)"
set ylabel "acquire p99 (ms)"
plot "$TSV" using (\$1 > 0 ? \$1 : 1):(\$3 / 1000) every ::1 with linespoints title "pgfence", \
     "" using (\$1 > 0 ? \$1 : 1):(\$5 / 1000) every ::1 with linespoints title "etcd (gRPC)"
unset multiplot
GP
    echo
    echo "written: $TSV and $OUT/scale.png"
fi

# ---- goals ----
goal() {  # NAME CONDITION-VALUE(1/0/"") DETAIL
    local verdict=FAIL
    [[ "$2" == 1 ]] && verdict=PASS
    [[ -z "$2" ]] && verdict="N/A "
    printf '%s  %-58s %s\n' "$verdict" "$1" "$3"
}
ratio_ok() { awk -v a="$1" -v b="$2" -v lim="$3" -v op="$4" 'BEGIN {
    if (a == "" || b == "" || a == "-" || b == "-" || b + 0 == 0) exit
    r = a / b; print ((op == "ge" ? r >= lim : r <= lim) ? 1 : 0) }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "" || b == "" || a == "-" || b == "-" || b + 0 == 0) print "-"; else printf "%.2f", a / b}'; }
echo
echo "goals (this run; N=$LARGEST is the largest N measured, the goals name 1M):"
goal "cycles/s at N=$LARGEST >= 0.9x N=0" "$(ratio_ok "${R[pg $LARGEST cps]:-}" "${R[pg 0 cps]:-}" 0.9 ge)" \
    "$(ratio "${R[pg $LARGEST cps]:-}" "${R[pg 0 cps]:-}")x"
goal "p99 at N=$LARGEST <= 2x N=0" "$(ratio_ok "${R[pg $LARGEST p99]:-}" "${R[pg 0 p99]:-}" 2 le)" \
    "$(ratio "${R[pg $LARGEST p99]:-}" "${R[pg 0 p99]:-}")x"
s1=${R[pg $LARGEST storm1]:-}
if [[ -n "$s1" ]]; then
    # The leases were asked to end together (--aligned 1): one deadline.
    e=$(field after_last_s "$s1")
    goal "storm of N=$LARGEST leases all expired within 5 s" "$(awk -v e="$e" 'BEGIN {print (e ~ /^-?[0-9.]+$/ && e <= 5) ? 1 : 0}')" \
        "${e} s after the last deadline ($(field expired_all_s "$s1") s after the first, $(field deadline_spread_s "$s1") s apart)"
    goal "storm probe p99 <= 20 ms" "$(awk -v p="$(field probe_p99_us "$s1")" 'BEGIN {print (p != "" && p <= 20000) ? 1 : 0}')" "$(field probe_p99_us "$s1") us"
    goal "storm: no leader change" "$([[ "$(field term_before "$s1")" == "$(field term_after "$s1")" ]] && echo 1 || echo 0)" \
        "term $(field term_before "$s1") -> $(field term_after "$s1")"
elif [[ "$STORMS" == 0 ]]; then
    echo "storm goals skipped: BENCH_SCALE_STORMS=0"
fi
s2=${R[pg $LARGEST storm2]:-}
if [[ -n "$s2" ]]; then
    e=$(field after_last_s "$s2")
    goal "storm 2 (leader killed): all expired within 5 s" "$(awk -v e="$e" 'BEGIN {print (e ~ /^-?[0-9.]+$/ && e <= 5) ? 1 : 0}')" \
        "${e} s after the new leader's deadline"
    goal "storm 2 probe p99 <= 20 ms" "$(awk -v p="$(field probe_p99_us "$s2")" 'BEGIN {print (p != "" && p <= 20000) ? 1 : 0}')" "$(field probe_p99_us "$s2") us"
    goal "storm 2: no leader change but the kill's" \
        "$(awk -v b="$(field term_before "$s2")" -v a="$(field term_after "$s2")" 'BEGIN {if (a == "" || b == "") exit; print (a <= b + 1) ? 1 : 0}')" \
        "term $(field term_before "$s2") -> $(field term_after "$s2")"
fi
goal "member holding N=$LARGEST restarts and serves within 2 s" \
    "$(awk -v f="${R[pg $LARGEST restart_f]:-}" -v l="${R[pg $LARGEST restart_l]:-}" 'BEGIN {if (f == "" || l == "") exit; print (f <= 2 && l <= 2) ? 1 : 0}')" \
    "follower ${R[pg $LARGEST restart_f]:--} s, leader ${R[pg $LARGEST restart_l]:--} s"
bpl=$(bytes_per_lock pg "$LARGEST")
goal "RSS <= 200 B per held lock (N=$LARGEST)" "$(awk -v b="$bpl" 'BEGIN {if (b == "-" || b == "") exit; print (b <= 200) ? 1 : 0}')" "$bpl B"
goal ">= 10x etcd (gRPC) cycles/s at N=0" "$(ratio_ok "${R[pg 0 cps]:-}" "${R[etcd 0 cps]:-}" 10 ge)" \
    "$(ratio "${R[pg 0 cps]:-}" "${R[etcd 0 cps]:-}")x"
for n in "${LOCKS[@]}"; do
    ((n >= 100000)) || continue
    goal ">= 20x etcd (gRPC) cycles/s at N=$n" "$(ratio_ok "${R[pg $n cps]:-}" "${R[etcd $n cps]:-}" 20 ge)" \
        "$(ratio "${R[pg $n cps]:-}" "${R[etcd $n cps]:-}")x"
done
echo
echo "phases:"
cat "$WORK/phases"
echo "total: $((SECONDS - RUN_START)) s"
