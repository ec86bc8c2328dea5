#!/usr/bin/env bash
# pgfence vs etcd 3.4: acquire+release cycles/s and acquire latency at C = 1, 8
# and 32 keep-alive connections (each looping on its own key for BENCH_SECONDS),
# both 3-member clusters on 127.0.0.1 with data on disk (fsync on), in one run
# (connection i starts at member i mod 3: pgfence's follow their 307 to the
# leader, etcd's members proxy lock calls to their leader themselves);
# then pgfence failover time: kill -9 the leader, time until the next acquire
# succeeds, median of FAILOVER_ROUNDS (the killed member is restarted between rounds).
#
# etcd is driven two ways: etcd-grpc, its native gRPC API (v3lockpb Lock +
# Unlock over HTTP/2, bench/etcd_grpc: the client path of etcd's own clientv3,
# the anchor pgfence's figures are quoted against), and etcd-json, its v3 JSON
# gateway (HTTP/1.1 + JSON like pgfence's API; bench_coordinator's etcd
# target). The etcd-grpc row is there when bench_etcd_grpc was built (gRPC++,
# protoc and etcd's .proto files: PGFENCE_BENCH_DEPS=1 scripts/install-deps.sh,
# which `make bench-coordinator` runs); without it the tables have no
# etcd-grpc figures and say so.
#
# With BENCH_TLS=1 (the default) a second set runs beside the first, each
# with TLS on the client and the peer port (the same certificates, made by
# scripts/make-certs.sh through scripts/cluster.sh --tls; etcd with its own
# flags: --cert-file, --peer-client-cert-auth, ...; both etcd clients verify
# the members against the same CA), measured in the same rounds; a second
# table gives the TLS rows and each target's TLS cost.
#
#   bash bench/coordinator/run.sh          (make bench-coordinator)
#
# Environment: BENCH_SECONDS (10), BENCH_CONNECTIONS ("1 8 32"), BENCH_ROUNDS (4: the table
# gives medians over the rounds, each round running every connection count against each target), FAILOVER_ROUNDS (5),
# BUILD_BENCH (build-bench: Release build made here), JOBS (2),
# BENCH_BASE_PORT (19400, pgfence: +1.. peers, +101.. HTTP; the TLS cluster +200), ETCD_BASE_PORT
# (19300; the TLS cluster +50), BENCH_TLS (1: add the TLS rows; 0: plaintext only),
# BENCH_SKIP_BUILD=1 with BENCH_BIN, FENCECTL_BIN, FENCE_BIN_DIR (and GRPC_BENCH_BIN, optional:
# the etcd-grpc row) to use existing binaries.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SECONDS_PER_RUN=${BENCH_SECONDS:-10}
CONNECTIONS=${BENCH_CONNECTIONS:-1 8 32}
TLS=${BENCH_TLS:-1}
[[ "$TLS" == 0 || "$TLS" == 1 ]] || { echo "run.sh: BENCH_TLS must be 0 or 1, got '$TLS'" >&2; exit 2; }
ROUNDS=${FAILOVER_ROUNDS:-5}
BENCH_ROUNDS_N=${BENCH_ROUNDS:-4}
BUILD=${BUILD_BENCH:-$ROOT/build-bench}
PG_BASE=${BENCH_BASE_PORT:-19400}
ETCD_BASE=${ETCD_BASE_PORT:-19300}
ETCD=${ETCD_BIN:-$(command -v etcd || true)}
[[ -x "$ETCD" ]] || { echo "run.sh: etcd not found (apt-get install etcd-server)" >&2; exit 2; }
[[ "$SECONDS_PER_RUN" =~ ^[1-9][0-9]{0,2}$ ]] || { echo "run.sh: BENCH_SECONDS must be 1-999, got '$SECONDS_PER_RUN'" >&2; exit 2; }
[[ "$BENCH_ROUNDS_N" =~ ^[1-9]$ ]] || { echo "run.sh: BENCH_ROUNDS must be 1-9, got '$BENCH_ROUNDS_N'" >&2; exit 2; }

if [[ "${BENCH_SKIP_BUILD:-0}" != 1 ]]; then
    # Warnings are not errors here: g++ 12 at -O3 reports a false -Wrestrict inside
    # std::string (server/bootstrap.cc); make test is where warnings stop a build.
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DPGFENCE_WERROR=OFF >/dev/null
    cmake --build "$BUILD" -j"${JOBS:-2}" --target fence-coordinator fencectl bench_coordinator
    GRPC_BENCH_BIN=""
    # The target exists only where its dependencies were found (bench/etcd_grpc/CMakeLists.txt).
    targets=$(cmake --build "$BUILD" --target help)  # whole, before grep: no SIGPIPE under pipefail
    if grep -q '^\.\.\. bench_etcd_grpc$' <<<"$targets"; then
        cmake --build "$BUILD" -j"${JOBS:-2}" --target bench_etcd_grpc
        GRPC_BENCH_BIN=$BUILD/bench/etcd_grpc/bench_etcd_grpc
    fi
    BENCH_BIN=$BUILD/bench/coordinator/bench_coordinator
    FENCECTL_BIN=$BUILD/coordinator/cli/fencectl
    FENCE_BIN_DIR=$BUILD/coordinator/server
fi
: "${BENCH_BIN:?}" "${FENCECTL_BIN:?}" "${FENCE_BIN_DIR:?}"
export FENCE_BIN_DIR
GRPC_BENCH_BIN=${GRPC_BENCH_BIN:-}
if [[ -z "$GRPC_BENCH_BIN" ]]; then
    echo "run.sh: bench_etcd_grpc not built (gRPC++/protoc/etcd .proto files missing): no etcd-grpc row" >&2
elif [[ ! -x "$GRPC_BENCH_BIN" ]]; then
    echo "run.sh: GRPC_BENCH_BIN '$GRPC_BENCH_BIN' is not an executable" >&2; exit 2
fi

mkdir -p "$BUILD"
WORK=$(mktemp -d "$BUILD/bench-coordinator.XXXXXX")  # on disk, not tmpfs: fsync costs what it costs
ETCD_PIDS=()

alive() {  # PID: running and not a zombie waiting to be reaped
    local state
    state=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
    [[ "$state" != Z* ]]
}

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
            ((SECONDS < deadline)) || { echo "run.sh: etcd not healthy after 30s; see $WORK/etcd-$tag-e$i.log" >&2; exit 1; }
            sleep 0.2
        done
    done
}

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }  # field NAME LINE

line=$(FENCE_BASE_PORT=$PG_BASE "$ROOT/scripts/cluster.sh" start "$WORK/pgfence" 3)
PG_ENDPOINTS=${line#export FENCE_ENDPOINTS=}
start_etcd "$ETCD_BASE"
echo "pgfence: $PG_ENDPOINTS   etcd $("$ETCD" --version | head -1 | awk '{print $3}'): $ETCD_ENDPOINTS"
if ((TLS)); then
    line=$(FENCE_BASE_PORT=$((PG_BASE + 200)) "$ROOT/scripts/cluster.sh" start "$WORK/pgfence-tls" 3 --tls)
    PG_TLS_ENDPOINTS=${line#export FENCE_ENDPOINTS=}
    CACERT="$WORK/pgfence-tls/tls/ca.pem"
    plain_etcd=$ETCD_ENDPOINTS
    start_etcd $((ETCD_BASE + 50)) "$WORK/pgfence-tls/tls"
    ETCD_TLS_ENDPOINTS=$ETCD_ENDPOINTS
    ETCD_ENDPOINTS=$plain_etcd
    echo "TLS on both ports: pgfence $PG_TLS_ENDPOINTS   etcd $ETCD_TLS_ENDPOINTS (CA $CACERT)"
fi
echo "each run: ${SECONDS_PER_RUN}s, every connection loops acquire + release on its own key"
echo

# Rounds: every round runs each connection count against the three targets
# (pgfence, etcd-grpc, etcd-json in odd rounds, the reverse in even ones: use
# an even BENCH_ROUNDS for a balanced order), so they are measured minutes
# apart at most; the disk's speed drifts over minutes (fsync latency by +-15%
# on this VM), and single 10 s runs vary by about as much. The tables give
# per-connection-count medians over the rounds (max us: the largest), each
# ratio the median of the per-round ratios.
declare -A runs=()      # "c round" -> "pgfence line|etcd-json line|etcd-grpc line" (the last "" without it)
declare -A tls_runs=()  # the same, with TLS
load_set() {  # C ROUND PGFENCE-ENDPOINTS ETCD-ENDPOINTS [--cacert F]: prints the three lines joined by '|'
    local c=$1 round=$2 pge=$3 ete=$4 pg="" js="" gr="" t
    shift 4
    local order=(pg grpc json)
    ((round % 2 == 0)) && order=(json grpc pg)  # neither end always on the later disk
    for t in "${order[@]}"; do
        case $t in
        pg) pg=$("$BENCH_BIN" load pgfence --endpoints "$pge" --connections "$c" --seconds "$SECONDS_PER_RUN" "$@") ;;
        json) js=$("$BENCH_BIN" load etcd --endpoints "$ete" --connections "$c" --seconds "$SECONDS_PER_RUN" "$@") ;;
        grpc) [[ -z "$GRPC_BENCH_BIN" ]] ||
            gr=$("$GRPC_BENCH_BIN" load --endpoints "$ete" --connections "$c" --seconds "$SECONDS_PER_RUN" "$@") ;;
        esac
    done
    echo "$pg|$js|$gr"
}
part() {  # pg|json|grpc LINE: one target's line of a load_set result
    local pg js gr
    IFS='|' read -r pg js gr <<<"$2"
    case $1 in pg) echo "$pg" ;; json) echo "$js" ;; grpc) echo "$gr" ;; esac
}
for ((round = 1; round <= BENCH_ROUNDS_N; round++)); do
    for c in $CONNECTIONS; do
        # The plaintext and the TLS set alternate too.
        if ((TLS && round % 2 == 0)); then
            tls_runs["$c $round"]=$(load_set "$c" "$round" "$PG_TLS_ENDPOINTS" "$ETCD_TLS_ENDPOINTS" --cacert "$CACERT")
        fi
        runs["$c $round"]=$(load_set "$c" "$round" "$PG_ENDPOINTS" "$ETCD_ENDPOINTS")
        if ((TLS && round % 2 == 1)); then
            tls_runs["$c $round"]=$(load_set "$c" "$round" "$PG_TLS_ENDPOINTS" "$ETCD_TLS_ENDPOINTS" --cacert "$CACERT")
        fi
        for t in pg grpc json; do
            line=$(part $t "${runs["$c $round"]}")
            [[ -z "$line" ]] || echo "round=$round $line"
            ((TLS)) || continue
            line=$(part $t "${tls_runs["$c $round"]}")
            [[ -z "$line" ]] || echo "round=$round tls $line"
        done
    done
done

median() {  # of the numbers on stdin; "-" when there are none
    sort -g | awk '{a[NR] = $1}
        END {if (NR == 0) print "-"; else if (NR % 2) print a[(NR + 1) / 2]; else printf "%.1f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2}'
}
maxof() { sort -g | awk 'END {print (NR == 0) ? "-" : $1}'; }
sumof() { awk '{s += $1} END {print (NR == 0) ? "-" : s}'; }
# The table read by these: runs (plaintext) or tls_runs.
declare -n RUNS=runs
over_rounds() {  # C pg|json|grpc FIELD REDUCER: one field of C's runs against one target, reduced
    local round
    for ((round = 1; round <= BENCH_ROUNDS_N; round++)); do
        field "$3" "$(part "$2" "${RUNS["$1 $round"]}")"
    done | "$4"
}
ratios() {  # C json|grpc: per-round pgfence/etcd cycles_per_s ratios
    local round line
    for ((round = 1; round <= BENCH_ROUNDS_N; round++)); do
        line=${RUNS["$1 $round"]}
        awk -v a="$(field cycles_per_s "$(part pg "$line")")" -v b="$(field cycles_per_s "$(part "$2" "$line")")" \
            'BEGIN { if (a != "" && b > 0) printf "%.2f\n", a / b }'
    done
}
columns() {  # C TARGET: "c/s p50 p99 max errors" of one target, medians (max: largest, errors: sum)
    printf '%12s %9s %9s %9s %6s' "$(over_rounds "$1" "$2" cycles_per_s median)" "$(over_rounds "$1" "$2" p50_us median)" \
        "$(over_rounds "$1" "$2" p99_us median)" "$(over_rounds "$1" "$2" max_us maxof)" "$(over_rounds "$1" "$2" errors sumof)"
}
table() {  # TITLE
    local c
    local head='%12s %9s %9s %9s %6s'
    echo
    echo "$1, medians over $BENCH_ROUNDS_N round(s); ratios pgfence/etcd cycles/s, etcd-grpc's the anchor:"
    printf "%5s | $head | $head | $head | %9s %9s | %s\n" conns "pgfence c/s" "p50 us" "p99 us" "max us" errors \
        "etcd-grpc" "p50 us" "p99 us" "max us" errors "etcd-json" "p50 us" "p99 us" "max us" errors \
        "/grpc" "/json" "per round /grpc; /json"
    for c in $CONNECTIONS; do
        printf '%5s | %s | %s | %s | %9s %9s | %s; %s\n' "$c" "$(columns "$c" pg)" "$(columns "$c" grpc)" "$(columns "$c" json)" \
            "$(ratios "$c" grpc | median | awk '$1 == "-" {print; next} {printf "%.2fx\n", $1}')" \
            "$(ratios "$c" json | median | awk '$1 == "-" {print; next} {printf "%.2fx\n", $1}')" \
            "$(ratios "$c" grpc | sed 's/$/x/' | paste -sd' ')" "$(ratios "$c" json | sed 's/$/x/' | paste -sd' ')"
    done
    [[ -n "$GRPC_BENCH_BIN" ]] || echo "(no etcd-grpc row: bench_etcd_grpc was not built)"
}
# tls_cost C pg|json|grpc: per-round TLS/plaintext cycles_per_s of one target, median.
tls_cost() {
    local round
    for ((round = 1; round <= BENCH_ROUNDS_N; round++)); do
        awk -v a="$(field cycles_per_s "$(part "$2" "${tls_runs["$1 $round"]}")")" \
            -v b="$(field cycles_per_s "$(part "$2" "${runs["$1 $round"]}")")" \
            'BEGIN { if (a != "" && b > 0) printf "%.3f\n", a / b }'
    done | sort -g | awk '{a[NR] = $1} END {if (NR == 0) print "-"; else if (NR % 2) printf "%.3f\n", a[(NR + 1) / 2];
                                            else printf "%.3f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2}'
}

table "plaintext"
if ((TLS)); then
    declare -n RUNS=tls_runs
    table "TLS on the client and the peer port (all three)"
    echo
    echo "cost of TLS (TLS cycles/s / plaintext cycles/s, median of per-round ratios):"
    for c in $CONNECTIONS; do
        printf '%5s conns: pgfence %s   etcd-grpc %s   etcd-json %s\n' "$c" "$(tls_cost "$c" pg)" "$(tls_cost "$c" grpc)" \
            "$(tls_cost "$c" json)"
    done
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

echo
times=()
for ((round = 1; round <= ROUNDS; round++)); do
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
median=$(printf '%s\n' "${times[@]}" | median)
echo "failover (kill -9 leader -> next acquire succeeds): median ${median} ms of ${ROUNDS} (${times[*]})"
