#!/usr/bin/env bash
# The concurrency curve, pgfence against etcd 3.4: acquire+release cycles/s and
# acquire latency (p50, p99) at C = 1, 8, 32, 128, 512 and 2,048 keep-alive
# connections (each looping on its own key for BENCH_SECONDS), both 3-member
# clusters on 127.0.0.1 with data on disk (fsync on), in one run (connection i
# starts at member i mod 3: pgfence's follow their 307 to the leader, etcd's
# members proxy lock calls to their leader themselves); then pgfence failover
# time: kill -9 the leader, time until the next acquire succeeds, median of
# FAILOVER_ROUNDS (the killed member is restarted between rounds).
#
# etcd is driven through its native gRPC API (etcd-grpc: v3lockpb Lock +
# Unlock over HTTP/2, bench/etcd_grpc, the client path of etcd's own
# clientv3; pgfence's ratios are quoted against it). It needs gRPC++, protoc
# and etcd's .proto files (PGFENCE_BENCH_DEPS=1 scripts/install-deps.sh, which
# `make bench-coordinator` runs); without them there is no etcd curve and the
# output says so. BENCH_ETCD_JSON=1 adds etcd-json, its v3 JSON gateway
# (HTTP/1.1 + JSON like pgfence's API; bench_coordinator's etcd target), as a
# third column of the tables (not drawn).
#
# With BENCH_TLS=1 (the default) a second pair of curves runs beside the
# first, each with TLS on the client and the peer port (certificates made for
# the run by scripts/make-certs.sh through scripts/cluster.sh --tls; pgfence
# with its TLS flags, etcd with its own: --cert-file, --peer-client-cert-auth,
# ...; both clients verify the members against the same CA), in the same rounds;
# a second table gives the TLS points and each system's cost of TLS.
#
# Every point is measured after a warm-up: the clock starts once every
# connection has completed one cycle (connected, followed its redirect to the
# leader, made its TLS handshake; at 2,048 connections that alone takes
# seconds), at most BENCH_WARMUP_S; the warm-up's cycles are not counted.
#
# Rounds: every round measures each connection count against each system,
# interleaved (pgfence, etcd in odd rounds, etcd, pgfence in even ones; the
# plaintext and the TLS point alternate the same way), so the two are measured
# seconds apart at each point: the disk's speed drifts over minutes (fsync
# latency by +-15% on a VM), single runs vary by about as much. The tables
# give medians over the rounds (max: the largest, errors: the sum); a ratio is
# the median of the per-round ratios at that point; "best" is a system's
# point with the most cycles/s (medians).
#
# Limits, raised for this run only: the soft open-files limit of this script
# and what it starts (ulimit -Sn, to 2 x the largest C + 1024, within the hard
# limit: the run stops, naming it, if the hard limit is lower); pgfence's
# members get --max-connections and --max-connections-per-address of
# max(1024, largest C + 256) (defaults 1024 and 512: every connection comes
# from 127.0.0.1). etcd 3.4 has no connection limit to raise (its
# --max-concurrent-streams is per connection and unlimited by default).
#
#   bash bench/coordinator/run.sh          (make bench-coordinator)
#
# Time (2 cores): the default run about 12 minutes; a quick one,
# BENCH_ROUNDS=2 BENCH_SECONDS=3 FAILOVER_ROUNDS=1, about 4. The points at 2,048
# connections take longest: etcd's setup (a lease per connection, granted and
# revoked one by one, untimed) and pgfence's TLS warm-up take seconds each.
#
# Environment: BENCH_CONNECTIONS ("1 8 32 128 512 2048": 1-8 counts, ascending,
# each 1-4096), BENCH_SECONDS (5: the timed part of each point), BENCH_ROUNDS
# (4, 1-9: use an even count for a balanced order), BENCH_WARMUP_S (30),
# BENCH_TLS (1: add the TLS curves; 0: plaintext only), BENCH_ETCD_JSON (0),
# FAILOVER_ROUNDS (5; 0 skips failover), BUILD_BENCH (build-bench: Release
# build made here), JOBS (2), BENCH_BASE_PORT (19400, pgfence: +1.. peers,
# +101.. HTTP; the TLS cluster +200), ETCD_BASE_PORT (19300; the TLS cluster
# +50), FENCE_COORDINATOR_FLAGS (more member flags, after the limits above),
# BENCH_SKIP_BUILD=1 with BENCH_BIN, FENCECTL_BIN, FENCE_BIN_DIR (and
# GRPC_BENCH_BIN, optional: the etcd-grpc curve; WAL_BENCH_BIN, optional:
# bench_wal, the floor) to use existing binaries.
#
# The commit path: around every plaintext pgfence point every member's
# GET /metrics is scraped before and after the load (the "before" scrape
# precedes the load generator's warm-up, so the deltas include it); after the
# tables, the commit decomposition (pgfence_commit_phase_seconds,
# server/commit_phases.h: per-phase mean and p50 per commit,
# bench/coordinator/phases.py; the leader's phases from the leader, f_* from
# the followers) over the rounds at each point, with the batch size (entries
# and bytes per fdatasync) and the coverage (commits timed vs proposals
# answered from a batch); then the floor measured in the same run on the
# same disk, after a 1 s settle following each round's point nearest 32
# connections (bench_wal --floor-bytes, 3 s: one writer persisting one entry
# of that point's mean batch bytes on the leader at a time through the WAL,
# encode + pwrite + fdatasync, in the clusters' directory, plus a loopback TCP
# round trip of a message that size; medians over the rounds; each round's
# floor as a `round=N ...` line on stderr), and the goal line
# "total p50 (request read -> answer written) at N connections <= 2x floor"
# (total: the decomposition's, on the leader; N/A with the reason when a
# figure is missing).
#
# Output: progress on stderr (each point as it is measured, with the time
# spent and an estimate of what is left); on stdout each run's line, the
# tables, the best points, goal lines (PASS/FAIL: >= 10x etcd-grpc's cycles/s
# at every point from 8 connections up, >= 20x at each system's best point),
# failover; BUILD_BENCH/bench-coordinator/curve.tsv and curve.png (gnuplot:
# cycles/s, p50 and p99 against connections, both systems, plaintext and TLS,
# the ratio written at each pgfence point), whose paths are printed last.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
RUN_START=$SECONDS
die() { echo "run.sh: $*" >&2; exit 2; }

SECONDS_PER_RUN=${BENCH_SECONDS:-5}
CONNECTIONS=${BENCH_CONNECTIONS:-1 8 32 128 512 2048}
TLS=${BENCH_TLS:-1}
ETCD_JSON=${BENCH_ETCD_JSON:-0}
WARMUP_S=${BENCH_WARMUP_S:-30}
FAILOVER_N=${FAILOVER_ROUNDS:-5}
BENCH_ROUNDS_N=${BENCH_ROUNDS:-4}
BUILD=${BUILD_BENCH:-$ROOT/build-bench}
PG_BASE=${BENCH_BASE_PORT:-19400}
ETCD_BASE=${ETCD_BASE_PORT:-19300}
ETCD=${ETCD_BIN:-$(command -v etcd || true)}
[[ -x "$ETCD" ]] || die "etcd not found (apt-get install etcd-server)"
[[ "$TLS" == 0 || "$TLS" == 1 ]] || die "BENCH_TLS must be 0 or 1, got '$TLS'"
[[ "$ETCD_JSON" == 0 || "$ETCD_JSON" == 1 ]] || die "BENCH_ETCD_JSON must be 0 or 1, got '$ETCD_JSON'"
[[ "$SECONDS_PER_RUN" =~ ^[1-9][0-9]{0,2}$ ]] || die "BENCH_SECONDS must be 1-999, got '$SECONDS_PER_RUN'"
[[ "$BENCH_ROUNDS_N" =~ ^[1-9]$ ]] || die "BENCH_ROUNDS must be 1-9, got '$BENCH_ROUNDS_N'"
[[ "$WARMUP_S" =~ ^[0-9]{1,3}$ && $WARMUP_S -le 600 ]] || die "BENCH_WARMUP_S must be 0-600, got '$WARMUP_S'"
[[ "$FAILOVER_N" =~ ^[0-9]$ ]] || die "FAILOVER_ROUNDS must be 0-9, got '$FAILOVER_N'"
read -r -a CONNS <<<"$CONNECTIONS"
((${#CONNS[@]} >= 1 && ${#CONNS[@]} <= 8)) || die "BENCH_CONNECTIONS needs 1-8 counts, got '$CONNECTIONS'"
prev=0
for c in "${CONNS[@]}"; do
    [[ "$c" =~ ^[1-9][0-9]{0,3}$ && $c -le 4096 ]] || die "BENCH_CONNECTIONS: '$c' is not a count 1-4096"
    ((c > prev)) || die "BENCH_CONNECTIONS must ascend, got '$CONNECTIONS'"
    prev=$c
done
MAX_C=${CONNS[${#CONNS[@]} - 1]}
NEAR32=""  # the connection count nearest 32: the commit path's goal point
for c in "${CONNS[@]}"; do
    [[ -z "$NEAR32" ]] || (((c - 32) * (c - 32) < (NEAR32 - 32) * (NEAR32 - 32))) && NEAR32=$c
done

# ---- limits, for this run only ----
need_files=$((2 * MAX_C + 1024))
soft=$(ulimit -Sn) hard=$(ulimit -Hn)
if [[ "$soft" != unlimited ]] && ((soft < need_files)); then
    [[ "$hard" == unlimited ]] || ((hard >= need_files)) ||
        die "$MAX_C connections need $need_files open files; the hard limit is $hard (raise it: ulimit -Hn, LimitNOFILE=)"
    ulimit -Sn "$need_files"
    echo "open files: soft limit raised from $soft to $need_files for this run (ulimit -Sn)" >&2
fi
PG_MAX_CONNS=$((MAX_C + 256 > 1024 ? MAX_C + 256 : 1024))
export FENCE_COORDINATOR_FLAGS="--max-connections $PG_MAX_CONNS --max-connections-per-address $PG_MAX_CONNS ${FENCE_COORDINATOR_FLAGS:-}"

if [[ "${BENCH_SKIP_BUILD:-0}" != 1 ]]; then
    # Warnings are not errors here: g++ 12 at -O3 reports a false -Wrestrict inside
    # std::string (server/bootstrap.cc); make test is where warnings stop a build.
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DPGFENCE_WERROR=OFF >/dev/null
    cmake --build "$BUILD" -j"${JOBS:-2}" --target fence-coordinator fencectl bench_coordinator bench_wal >&2
    GRPC_BENCH_BIN=""
    # The target exists only where its dependencies were found (bench/etcd_grpc/CMakeLists.txt).
    targets=$(cmake --build "$BUILD" --target help)  # whole, before grep: no SIGPIPE under pipefail
    if grep -q '^\.\.\. bench_etcd_grpc$' <<<"$targets"; then
        cmake --build "$BUILD" -j"${JOBS:-2}" --target bench_etcd_grpc >&2
        GRPC_BENCH_BIN=$BUILD/bench/etcd_grpc/bench_etcd_grpc
    fi
    BENCH_BIN=$BUILD/bench/coordinator/bench_coordinator
    FENCECTL_BIN=$BUILD/coordinator/cli/fencectl
    FENCE_BIN_DIR=$BUILD/coordinator/server
    WAL_BENCH_BIN=$BUILD/bench/bench_wal
fi
WAL_BENCH_BIN=${WAL_BENCH_BIN:-}  # optional with BENCH_SKIP_BUILD=1: no floor without it
: "${BENCH_BIN:?}" "${FENCECTL_BIN:?}" "${FENCE_BIN_DIR:?}"
export FENCE_BIN_DIR
GRPC_BENCH_BIN=${GRPC_BENCH_BIN:-}
if [[ -z "$GRPC_BENCH_BIN" ]]; then
    echo "run.sh: bench_etcd_grpc not built (gRPC++/protoc/etcd .proto files missing): no etcd-grpc curve" >&2
elif [[ ! -x "$GRPC_BENCH_BIN" ]]; then
    die "GRPC_BENCH_BIN '$GRPC_BENCH_BIN' is not an executable"
fi

mkdir -p "$BUILD"
OUT=$BUILD/bench-coordinator
mkdir -p "$OUT"
WORK=$(mktemp -d "$BUILD/bench-coordinator.XXXXXX")  # on disk, not tmpfs: fsync costs what it costs
ETCD_PIDS=()

# shellcheck source=../../scripts/lib/process.sh
source "$ROOT/scripts/lib/process.sh"  # alive

cleanup() {
    FENCE_STOP_GRACE_SECONDS=5 "$ROOT/scripts/cluster.sh" stop "$WORK/pgfence" >/dev/null 2>&1 || true
    FENCE_STOP_GRACE_SECONDS=5 "$ROOT/scripts/cluster.sh" stop "$WORK/pgfence-tls" >/dev/null 2>&1 || true
    local pid i
    for pid in "${ETCD_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${ETCD_PIDS[@]}"; do
        for ((i = 0; i < 150; i++)); do alive "$pid" || break; sleep 0.1; done
        alive "$pid" && { echo "run.sh: etcd pid $pid ignored SIGTERM for 15s; SIGKILL" >&2; kill -KILL "$pid"; }
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$WORK"
}
trap cleanup EXIT

start_etcd() {  # BASE [TLS-DIR]: sets ETCD_ENDPOINTS (a TLS-DIR from cluster.sh --tls: TLS on both ports)
    local base=$1 certs=${2:-} scheme=http cluster="" i tag=plain
    local tls=() curl_tls=()
    [[ -n "$certs" ]] && { scheme=https; tag=tls; curl_tls=(--cacert "$certs/ca.pem"); }
    for i in 1 2 3; do cluster+="${cluster:+,}e$i=$scheme://127.0.0.1:$((base + 10 + i))"; done
    for i in 1 2 3; do
        [[ -n "$certs" ]] && tls=(--cert-file "$certs/member-$i.pem" --key-file "$certs/member-$i-key.pem"
            --peer-cert-file "$certs/peer-$i.pem" --peer-key-file "$certs/peer-$i-key.pem"
            --peer-trusted-ca-file "$certs/peer-ca.pem" --peer-client-cert-auth)
        "$ETCD" --name "e$i" --data-dir "$WORK/etcd-$tag/e$i" \
            --listen-client-urls "$scheme://127.0.0.1:$((base + i))" \
            --advertise-client-urls "$scheme://127.0.0.1:$((base + i))" \
            --listen-peer-urls "$scheme://127.0.0.1:$((base + 10 + i))" \
            --initial-advertise-peer-urls "$scheme://127.0.0.1:$((base + 10 + i))" \
            --initial-cluster "$cluster" --initial-cluster-state new "${tls[@]}" \
            --initial-cluster-token "pgfence-bench-$tag" >"$WORK/etcd-$tag-e$i.log" 2>&1 &
        ETCD_PIDS+=($!)
    done
    ETCD_ENDPOINTS=""
    for i in 1 2 3; do
        if [[ -n "$certs" ]]; then ETCD_ENDPOINTS+="${ETCD_ENDPOINTS:+,}https://127.0.0.1:$((base + i))"
        else ETCD_ENDPOINTS+="${ETCD_ENDPOINTS:+,}127.0.0.1:$((base + i))"; fi
    done
    local deadline=$((SECONDS + 30))
    for i in 1 2 3; do
        until curl -s -m 1 "${curl_tls[@]}" "$scheme://127.0.0.1:$((base + i))/health" | grep -q '"health":"true"'; do
            ((SECONDS < deadline)) || die "etcd not healthy after 30s; see $WORK/etcd-$tag-e$i.log"
            sleep 0.2
        done
    done
}

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }  # field NAME LINE

line=$(FENCE_BASE_PORT=$PG_BASE "$ROOT/scripts/cluster.sh" start "$WORK/pgfence" 3)
PG_ENDPOINTS=${line#export FENCE_ENDPOINTS=}
start_etcd "$ETCD_BASE"
echo "pgfence: $PG_ENDPOINTS   etcd $("$ETCD" --version | head -1 | awk '{print $3}'): $ETCD_ENDPOINTS"
MODES=(plain)
if ((TLS)); then
    MODES=(plain tls)
    line=$(FENCE_BASE_PORT=$((PG_BASE + 200)) "$ROOT/scripts/cluster.sh" start "$WORK/pgfence-tls" 3 --tls)
    PG_TLS_ENDPOINTS=${line#export FENCE_ENDPOINTS=}
    CACERT="$WORK/pgfence-tls/tls/ca.pem"
    plain_etcd=$ETCD_ENDPOINTS
    start_etcd $((ETCD_BASE + 50)) "$WORK/pgfence-tls/tls"
    ETCD_TLS_ENDPOINTS=$ETCD_ENDPOINTS
    ETCD_ENDPOINTS=$plain_etcd
    echo "TLS on both ports: pgfence $PG_TLS_ENDPOINTS   etcd $ETCD_TLS_ENDPOINTS (CA $CACERT)"
fi
echo "pgfence members: --max-connections $PG_MAX_CONNS --max-connections-per-address $PG_MAX_CONNS;" \
    "open files: $(ulimit -Sn) (soft)"
echo "each point: warm-up (every connection one cycle, at most ${WARMUP_S}s), then ${SECONDS_PER_RUN}s;" \
    "every connection loops acquire + release on its own key; connections: ${CONNS[*]}; $BENCH_ROUNDS_N round(s)"
echo

TARGETS=(pg)
[[ -n "$GRPC_BENCH_BIN" ]] && TARGETS+=(grpc)
((ETCD_JSON)) && TARGETS+=(json)
declare -A NAME=([pg]=pgfence [grpc]=etcd-grpc [json]=etcd-json)
declare -A R=()  # "MODE C ROUND TARGET" -> the load generator's line ("" if it failed)
METRICS=$WORK/metrics  # the leader's /metrics around each plaintext pgfence point
mkdir -p "$METRICS"
scrape() {  # NAME: every plaintext pgfence member's /metrics into METRICS/NAME-ID (ID: 1, 2, 3 in endpoint order)
    local eps ep i=0
    IFS=, read -r -a eps <<<"$PG_ENDPOINTS"
    for ep in "${eps[@]}"; do
        i=$((i + 1))
        curl -s -m 2 "http://$ep/metrics" >"$METRICS/$1-$i" || : >"$METRICS/$1-$i"
    done
}

measure() {  # MODE C ROUND TARGET: one point, its line in R
    local mode=$1 c=$2 round=$3 t=$4 pge=$PG_ENDPOINTS ete=$ETCD_ENDPOINTS out
    local common=(--connections "$c" --seconds "$SECONDS_PER_RUN" --warmup-s "$WARMUP_S")
    if [[ $mode == tls ]]; then
        pge=$PG_TLS_ENDPOINTS ete=$ETCD_TLS_ENDPOINTS
        common+=(--cacert "$CACERT")
    fi
    [[ $t == pg && $mode == plain ]] && scrape "$c-$round-before"
    case $t in
    pg) out=$("$BENCH_BIN" load pgfence --endpoints "$pge" "${common[@]}") || out="" ;;
    json) out=$("$BENCH_BIN" load etcd --endpoints "$ete" "${common[@]}") || out="" ;;
    grpc) out=$("$GRPC_BENCH_BIN" load --endpoints "$ete" "${common[@]}") || out="" ;;
    esac
    R["$mode $c $round $t"]=$out
    [[ $t == pg && $mode == plain ]] && scrape "$c-$round-after"
    if [[ -z "$out" ]]; then
        echo "run.sh: ${NAME[$t]} ($mode) at $c connections, round $round: no cycle completed (its error above)" >&2
    elif [[ $mode == tls ]]; then
        echo "round=$round tls $out"
    else
        echo "round=$round $out"
    fi
}

points_per_round=$((${#CONNS[@]} * ${#MODES[@]} * ${#TARGETS[@]}))
points_total=$((BENCH_ROUNDS_N * points_per_round))
points_done=0
MEASURE_START=$SECONDS
POINT_START=$SECONDS
FIRST_ROUND_S=()  # seconds each point of round 1 took: later rounds measure the same points, C ascending
progress() {  # MODE C ROUND TARGET: one stderr line for the point just measured
    local line=${R["$1 $2 $3 $4"]} spent=$((SECONDS - MEASURE_START)) left=0 j
    ((points_done < points_per_round)) && FIRST_ROUND_S+=($((SECONDS - POINT_START)))
    POINT_START=$SECONDS
    points_done=$((points_done + 1))
    if ((points_done < points_per_round)); then  # the points so far, averaged (the large C come last: low)
        left=$((spent * (points_total - points_done) / points_done))
    else
        for ((j = points_done; j < points_total; j++)); do left=$((left + FIRST_ROUND_S[j % points_per_round])); done
    fi
    printf 'run.sh: [%4ds] round %d/%d %-5s %4s conns %-9s %9s c/s p50 %6s us p99 %7s us (warm-up %ss)  point %d/%d, ~%ss left\n' \
        "$((SECONDS - RUN_START))" "$3" "$BENCH_ROUNDS_N" "$1" "$2" "${NAME[$4]}" "$(field cycles_per_s "$line")" \
        "$(field p50_us "$line")" "$(field p99_us "$line")" "$(field warmup_s "$line")" "$points_done" "$points_total" "$left" >&2
}

declare -A FLOOR=()  # round -> bench_wal's floor line
floor_point() {  # ROUND: the floor, right after that round's plaintext pgfence point at NEAR32 connections
    [[ -n "$WAL_BENCH_BIN" && -x "$WAL_BENCH_BIN" ]] || return 0
    local f id bytes=""
    for f in "$METRICS/$NEAR32-$1-after-"*; do
        grep -q '^pgfence_is_leader 1$' "$f" 2>/dev/null || continue
        id=${f##*-}
        [[ -s "$f" && -s "$METRICS/$NEAR32-$1-before-$id" ]] || continue  # an empty scrape: no delta
        bytes=$(python3 "$ROOT/bench/coordinator/phases.py" leader "$METRICS/$NEAR32-$1-before-$id" "$f" |
            sed -n 's/.* bytes_per_sync=\([0-9]*\).*/\1/p') || bytes=
    done
    [[ "$bytes" =~ ^[0-9]+$ && $bytes -gt 0 ]] || bytes=100
    sleep 1  # the members' last writes of the load settle first
    FLOOR[$1]=$("$WAL_BENCH_BIN" --floor-bytes "$bytes" --dir "$WORK/floor" --seconds 3) || FLOOR[$1]=""
    echo "round=$1 ${FLOOR[$1]:-floor not measured}" >&2
}

for ((round = 1; round <= BENCH_ROUNDS_N; round++)); do
    order=("${TARGETS[@]}") modes=("${MODES[@]}")
    if ((round % 2 == 0)); then  # neither system, nor plaintext, always on the later disk
        order=() modes=()
        for ((i = ${#TARGETS[@]} - 1; i >= 0; i--)); do order+=("${TARGETS[i]}"); done
        for ((i = ${#MODES[@]} - 1; i >= 0; i--)); do modes+=("${MODES[i]}"); done
    fi
    for c in "${CONNS[@]}"; do
        for mode in "${modes[@]}"; do
            for t in "${order[@]}"; do
                measure "$mode" "$c" "$round" "$t"
                progress "$mode" "$c" "$round" "$t"
                [[ $t == pg && $mode == plain && $c == "$NEAR32" ]] && floor_point "$round"
            done
        done
    done
done

# ---- tables ----
median() {  # of the numbers on stdin, unrounded; "-" when there are none
    sort -g | awk '{a[NR] = $1}
        END {if (NR == 0) print "-"; else if (NR % 2) print a[(NR + 1) / 2]; else printf "%.10g\n", (a[NR / 2] + a[NR / 2 + 1]) / 2}'
}
fmt() { awk -v f="$1" '$1 == "-" {print; next} {printf f "\n", $1}'; }  # FORMAT: each number on stdin, "-" kept
maxof() { sort -g | awk 'END {print (NR == 0) ? "-" : $1}'; }
sumof() { awk '{s += $1} END {print (NR == 0) ? "-" : s}'; }
over_rounds() {  # MODE C TARGET FIELD REDUCER: one field of a point over the rounds, reduced
    local round v
    for ((round = 1; round <= BENCH_ROUNDS_N; round++)); do
        v=$(field "$4" "${R["$1 $2 $round $3"]:-}")
        [[ -z "$v" ]] || echo "$v"
    done | "$5"
}
ratios() {  # MODE C TARGET-A TARGET-B: per-round A/B cycles_per_s ratios
    local round
    for ((round = 1; round <= BENCH_ROUNDS_N; round++)); do
        awk -v a="$(field cycles_per_s "${R["$1 $2 $round $3"]:-}")" -v b="$(field cycles_per_s "${R["$1 $2 $round $4"]:-}")" \
            'BEGIN { if (a != "" && b != "" && b > 0) printf "%.3f\n", a / b }'
    done
}
ratio_at() { ratios "$1" "$2" pg "$3" | median | fmt %.2f; }  # MODE C TARGET: pgfence/TARGET at C
columns() {  # MODE C TARGET: "c/s p50 p99 max errors", medians (max: largest, errors: sum)
    printf '%10s %8s %8s %8s %6s' "$(over_rounds "$1" "$2" "$3" cycles_per_s median | fmt %.0f)" \
        "$(over_rounds "$1" "$2" "$3" p50_us median | fmt %.0f)" "$(over_rounds "$1" "$2" "$3" p99_us median | fmt %.0f)" \
        "$(over_rounds "$1" "$2" "$3" max_us maxof)" "$(over_rounds "$1" "$2" "$3" errors sumof)"
}
table() {  # MODE TITLE
    local mode=$1 c t
    echo
    echo "$2, medians over $BENCH_ROUNDS_N round(s); x: pgfence/etcd cycles/s (median of the per-round ratios):"
    printf '%5s' conns
    for t in "${TARGETS[@]}"; do printf ' | %10s %8s %8s %8s %6s' "${NAME[$t]}" "p50 us" "p99 us" "max us" errors; done
    for t in "${TARGETS[@]:1}"; do printf ' | %9s' "x ${NAME[$t]#etcd-}"; done
    printf ' | per round\n'
    for c in "${CONNS[@]}"; do
        printf '%5s' "$c"
        for t in "${TARGETS[@]}"; do printf ' | %s' "$(columns "$mode" "$c" "$t")"; done
        for t in "${TARGETS[@]:1}"; do printf ' | %9s' "$(ratio_at "$mode" "$c" "$t")"; done
        printf ' |'
        for t in "${TARGETS[@]:1}"; do printf ' %s' "$(ratios "$mode" "$c" pg "$t" | awk '{printf "%.2f ", $1}')"; done
        echo
    done
}
best() {  # MODE TARGET: "C c/s" of the target's point with the most cycles/s (medians); "" if none
    local c
    for c in "${CONNS[@]}"; do echo "$c $(over_rounds "$1" "$c" "$2" cycles_per_s median)"; done |
        awk '$2 != "-" && (best == "" || $2 > bestv) {best = $1; bestv = $2} END {if (best != "") print best, bestv}'
}
best_points() {  # MODE: pgfence's and etcd-grpc's best points and the ratios there
    local mode=$1 pb eb
    [[ -n "$GRPC_BENCH_BIN" ]] || return 0
    pb=$(best "$mode" pg) eb=$(best "$mode" grpc)
    [[ -n "$pb" && -n "$eb" ]] || { echo "$mode: best points not measured"; return 0; }
    read -r PB_C PB_V <<<"$pb"
    read -r EB_C EB_V <<<"$eb"
    printf '%s: pgfence best %.0f c/s at %s conns (pgfence/etcd-grpc there: %sx); etcd-grpc best %.0f c/s at %s conns (pgfence/etcd-grpc there: %sx); best / best: %sx\n' \
        "$mode" "$PB_V" "$PB_C" "$(ratio_at "$mode" "$PB_C" grpc)" "$EB_V" "$EB_C" "$(ratio_at "$mode" "$EB_C" grpc)" \
        "$(awk -v a="$PB_V" -v b="$EB_V" 'BEGIN {printf "%.2f", a / b}')"
}

table plain "plaintext"
((TLS)) && table tls "TLS on the client and the peer port (both systems)"
[[ -n "$GRPC_BENCH_BIN" ]] || echo "(no etcd-grpc curve: bench_etcd_grpc was not built)"
echo
for mode in "${MODES[@]}"; do best_points "$mode"; done
if ((TLS)); then
    echo
    echo "cost of TLS (TLS cycles/s / plaintext cycles/s, median of per-round ratios):"
    for c in "${CONNS[@]}"; do
        printf '%5s conns:' "$c"
        for t in "${TARGETS[@]}"; do
            printf '  %s %s' "${NAME[$t]}" "$(for ((round = 1; round <= BENCH_ROUNDS_N; round++)); do
                awk -v a="$(field cycles_per_s "${R["tls $c $round $t"]:-}")" -v b="$(field cycles_per_s "${R["plain $c $round $t"]:-}")" \
                    'BEGIN { if (a != "" && b != "" && b > 0) printf "%.3f\n", a / b }'
            done | median | fmt %.2f)"
        done
        echo
    done
fi

# ---- goals ----
if [[ -n "$GRPC_BENCH_BIN" ]]; then
    goal() {  # NAME RATIO MIN
        local verdict
        verdict=$(awk -v r="$2" -v m="$3" 'BEGIN {print (r == "-" || r == "") ? "N/A " : (r >= m ? "PASS" : "FAIL")}')
        printf '%s  %-52s %sx\n' "$verdict" "$1" "$2"
    }
    echo
    echo "goals (this run, ratios to etcd-grpc's cycles/s):"
    for mode in "${MODES[@]}"; do
        for c in "${CONNS[@]}"; do
            ((c >= 8)) && goal "$mode: >= 10x at $c connections" "$(ratio_at "$mode" "$c" grpc)" 10
        done
        pb=$(best "$mode" pg) eb=$(best "$mode" grpc)
        [[ -n "$pb" ]] && goal "$mode: >= 20x at pgfence's best point (${pb%% *})" "$(ratio_at "$mode" "${pb%% *}" grpc)" 20
        [[ -n "$eb" ]] && goal "$mode: >= 20x at etcd-grpc's best point (${eb%% *})" "$(ratio_at "$mode" "${eb%% *}" grpc)" 20
    done
fi

# ---- the commit path on the leader, and its floor ----
phase_pairs() {  # C: "ROLE BEFORE AFTER" per member and round (ROLE: leader or follower after the load; phases.py)
    local round f id
    for ((round = 1; round <= BENCH_ROUNDS_N; round++)); do
        for f in "$METRICS/$1-$round-after-"*; do
            id=${f##*-}
            [[ -s "$f" && -s "$METRICS/$1-$round-before-$id" ]] || continue  # an empty scrape: no delta
            if grep -q '^pgfence_is_leader 1$' "$f"; then echo "leader $METRICS/$1-$round-before-$id $f"
            else echo "follower $METRICS/$1-$round-before-$id $f"; fi
        done
    done
}
echo
echo "the commit path on the pgfence leader (plaintext; GET /metrics before and after each point, summed over rounds):"
declare -A PHASE_SUMMARY=()
for c in "${CONNS[@]}"; do
    read -r -a pairs <<<"$(phase_pairs "$c" | tr '\n' ' ')"
    if [[ " ${pairs[*]} " != *" leader "* ]]; then
        echo "$c connections: no leader's metrics"
        continue
    fi
    decomposition=$(python3 "$ROOT/bench/coordinator/phases.py" "${pairs[@]}") || { echo "$c connections: phases.py failed"; continue; }
    PHASE_SUMMARY[$c]=$(grep '^summary ' <<<"$decomposition")
    if [[ $c == "$NEAR32" ]]; then
        echo "$c connections:"
        grep -v '^summary ' <<<"$decomposition" | sed 's/^/  /'
    else
        echo "$c connections: ${PHASE_SUMMARY[$c]#summary }"
    fi
done
s32=${PHASE_SUMMARY[$NEAR32]:-}
floor_of() {  # FIELD: its median over the rounds' floor lines
    local round
    for ((round = 1; round <= BENCH_ROUNDS_N; round++)); do field "$1" "${FLOOR[$round]:-}"; done | { grep . || true; } | median
}
floors=0
for ((r = 1; r <= BENCH_ROUNDS_N; r++)); do [[ -n "${FLOOR[$r]:-}" ]] && floors=$((floors + 1)); done
goal="total p50 (request read -> answer written) at $NEAR32 connections <= 2x floor"
if [[ -n "$s32" && $floors -gt 0 ]]; then
    fp50=$(floor_of floor_p50_us) cp50=$(field total_p50_us "$s32")
    echo
    echo "the floor (same run, same disk, one writer, after each round's $NEAR32-connection pgfence point; medians of $floors):" \
        "WAL write + fdatasync of $(floor_of bytes) B: p50 $(floor_of fdatasync_p50_us) us;" \
        "loopback round trip: p50 $(floor_of rtt_p50_us) us; floor p50 $fp50 us (per round: $(for ((r = 1; r <= BENCH_ROUNDS_N; r++)); do
            printf '%s ' "$(field floor_p50_us "${FLOOR[$r]:-}")"; done)us; the disk is shared: a noisy floor shows here)"
    num='^[0-9]+([.][0-9]+)?$'
    if [[ ! "$cp50" =~ $num ]]; then
        echo "N/A   $goal: no total p50 at $NEAR32 connections (${cp50:-none}: no commit timed)"
    elif [[ ! "$fp50" =~ $num ]] || awk -v f="$fp50" 'BEGIN { exit !(f <= 0) }'; then
        echo "N/A   $goal: no floor p50 (${fp50:-none}: bench_wal printed none)"
    else
        awk -v c="$cp50" -v f="$fp50" -v g="$goal" 'BEGIN {
            printf "%s  %s: %.0f us vs floor %.0f us (%.2fx)\n", (c <= 2 * f) ? "PASS" : "FAIL", g, c, f, c / f }'
    fi
elif [[ -z "$WAL_BENCH_BIN" ]]; then
    echo "N/A   $goal: bench_wal not given (WAL_BENCH_BIN)"
elif [[ -z "$s32" ]]; then
    echo "N/A   $goal: no decomposition at $NEAR32 connections (no leader's metrics, or phases.py failed)"
else
    echo "N/A   $goal: the floor was not measured (bench_wal failed in every round: its error above)"
fi

# ---- TSV + PNG ----
TSV=$OUT/curve.tsv
{
    printf 'conns'
    for mode in plain tls; do printf '\t%s_pg_cps\t%s_pg_p50_us\t%s_pg_p99_us\t%s_etcd_cps\t%s_etcd_p50_us\t%s_etcd_p99_us\t%s_ratio' \
        "$mode" "$mode" "$mode" "$mode" "$mode" "$mode" "$mode"; done
    echo
    for c in "${CONNS[@]}"; do
        printf '%s' "$c"
        for mode in plain tls; do
            for t in pg grpc; do
                printf '\t%s\t%s\t%s' "$(over_rounds "$mode" "$c" "$t" cycles_per_s median)" \
                    "$(over_rounds "$mode" "$c" "$t" p50_us median)" "$(over_rounds "$mode" "$c" "$t" p99_us median)"
            done
            printf '\t%s' "$(ratio_at "$mode" "$c" grpc)"
        done
        echo
    done
} >"$TSV"
PNG=$OUT/curve.png
rm -f "$PNG"
# curves PANEL (0 cycles/s, 1 p50, 2 p99): that panel's gnuplot plot clauses,
# one per curve measured, and on panel 0 the ratio at each pgfence point.
# TSV columns: 1 conns; plaintext 2-4 pgfence c/s p50 p99, 5-7 etcd, 8 ratio;
# TLS 9-15 the same. "-" cells (not measured) are missing points.
curves() {
    local panel=$1 mode t off col y style=0 out="" suffix
    local -A label=([pg]=pgfence [grpc]="etcd (gRPC)")
    for mode in "${MODES[@]}"; do
        off=0 suffix=""
        [[ $mode == tls ]] && off=7 suffix=", TLS"
        for t in pg grpc; do
            style=$((style + 1))
            [[ $t == pg || -n "$GRPC_BENCH_BIN" ]] || continue
            col=$((off + panel + 2))
            [[ $t == grpc ]] && col=$((col + 3))
            y=$col
            ((panel == 0)) || y="(\$$col / 1000)"  # us -> ms
            out+="${out:+, }\"$TSV\" using 1:$y every ::1 with linespoints ls $style title \"${label[$t]}$suffix\""
        done
        if ((panel == 0)) && [[ -n "$GRPC_BENCH_BIN" ]]; then
            out+=", \"$TSV\" using 1:$((off + 2)):(sprintf(\"%sx\", stringcolumn($((off + 8))))) every ::1 with labels"
            [[ $mode == plain ]] && out+=" offset 0,1 notitle" || out+=" offset 0,-1 tc rgb \"#555555\" notitle"
        fi
    done
    echo "$out"
}
if command -v gnuplot >/dev/null; then
    title="pgfence vs etcd 3.4 (gRPC), 3 members each, fsync on, $(nproc) CPUs; medians of $BENCH_ROUNDS_N round(s) x ${SECONDS_PER_RUN}s (make bench-coordinator)"
    xtics=$(printf '%s,' "${CONNS[@]}")
    gnuplot <<GP || echo "run.sh: gnuplot failed; the table is in $TSV" >&2
set terminal pngcairo size 1500,560 font ",10"
set output "$PNG"
set datafile separator "\t"
set datafile missing "-"
set key below height 2
set logscale x 2
set xrange [${CONNS[0]} / 1.6 : $MAX_C * 1.6]
set xtics (${xtics%,})
set xlabel "connections"
set grid
set style line 1 lc rgb "#1f77b4" lw 2 pt 7
set style line 2 lc rgb "#d62728" lw 2 pt 5
set style line 3 lc rgb "#1f77b4" lw 2 pt 6 dt 2
set style line 4 lc rgb "#d62728" lw 2 pt 4 dt 2
set multiplot layout 1,3 title "$title"
set logscale y
set ylabel "acquire+release cycles/s (labels: pgfence/etcd)"
plot $(curves 0)
set ylabel "acquire p50 (ms)"
plot $(curves 1)
set ylabel "acquire p99 (ms)"
plot $(curves 2)
unset multiplot
GP
else
    echo "run.sh: gnuplot not installed (make deps installs gnuplot-nox): no PNG" >&2
fi

# ---- failover ----
leader_id() { "$FENCECTL_BIN" --endpoints "$PG_ENDPOINTS" --timeout 2s status 2>/dev/null | awk '$2 == "leader" {print $1; exit}'; }
healthy() {  # three members answer, one leader, all on the leader's term
    local s
    s=$("$FENCECTL_BIN" --endpoints "$PG_ENDPOINTS" --timeout 2s status 2>/dev/null) || return 1
    [[ $(grep -cE '^[0-9]+ +(leader|follower) ' <<<"$s") == 3 && $(grep -cE '^[0-9]+ +leader ' <<<"$s") == 1 ]]
}
wait_healthy() {
    local deadline=$((SECONDS + 30))
    until healthy; do
        ((SECONDS < deadline)) || { echo "run.sh: pgfence cluster not healthy after 30s" >&2; exit 1; }
        sleep 0.1
    done
}

times=()
for ((round = 1; round <= FAILOVER_N; round++)); do
    ((round > 1)) || echo
    wait_healthy
    id=$(leader_id)
    [[ -n "$id" ]] || { echo "run.sh: no leader before failover round $round" >&2; exit 1; }
    pid=$(cat "$WORK/pgfence/$id.pid")
    out=$("$BENCH_BIN" failover --endpoints "$PG_ENDPOINTS" --kill-pid "$pid" --timeout-ms 20000)
    ms=$(field failover_ms "$out")
    echo "failover round $round: killed leader $id (pid $pid): $out"
    times+=("$ms")
    FENCE_BASE_PORT=$PG_BASE "$ROOT/scripts/cluster.sh" restart "$WORK/pgfence" "$id"
done
if ((FAILOVER_N > 0)); then
    echo "failover (kill -9 leader -> next acquire succeeds): median $(printf '%s\n' "${times[@]}" | median) ms of $FAILOVER_N (${times[*]})"
fi

echo
echo "total: $((SECONDS - RUN_START)) s"
echo "written: $TSV"
if [[ -s "$PNG" ]]; then echo "the curve: $PNG"; else echo "the curve: not drawn (see above); the table is in $TSV"; fi
