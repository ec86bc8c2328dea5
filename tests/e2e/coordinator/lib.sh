# Shared helpers for the coordinator end-to-end tests (bash, curl only).
# Each test: source this file, call `cluster_start N [flags]`; the cluster is
# stopped by an EXIT trap. Ports come from FENCE_BASE_PORT (each test gets its
# own, set by tests/e2e/CMakeLists.txt) so tests can run in parallel.
# Every wait is a bounded poll on a condition.
set -euo pipefail

E2E_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
CLUSTER="$E2E_ROOT/scripts/cluster.sh"
: "${FENCE_BASE_PORT:?set FENCE_BASE_PORT}"
BASE=$FENCE_BASE_PORT
DIR=$(mktemp -d "${TMPDIR:-/tmp}/pgfence-e2e.XXXXXX")
N=3
FAST_FLAGS="--heartbeat-ms 20 --election-ms 150 --min-lease 500"

fail() {
    echo "FAIL: $*" >&2
    for f in "$DIR"/*.log; do [[ -e "$f" ]] && { echo "---- $f (tail)" >&2; tail -n 30 "$f" >&2; }; done
    exit 1
}
pass() { echo "PASS: $*"; }

cleanup() {
    local rc=$?
    "$CLUSTER" stop "$DIR" >/dev/null 2>&1 || true
    if [[ $rc -eq 0 && -z "${KEEP_E2E_DIR:-}" ]]; then rm -rf "$DIR"; else echo "cluster dir kept: $DIR" >&2; fi
}
trap cleanup EXIT

cluster_start() {  # N [extra flags]
    N=${1:-3}
    local out
    out=$(FENCE_COORDINATOR_FLAGS="$FAST_FLAGS ${2:-}" "$CLUSTER" start "$DIR" "$N") || fail "cluster did not start"
    [[ "$out" == "export FENCE_ENDPOINTS="* ]] || fail "cluster.sh printed '$out'"
    export FENCE_ENDPOINTS=${out#export FENCE_ENDPOINTS=}
}

client_port() { echo $((BASE + 100 + $1)); }
url() { echo "http://127.0.0.1:$(client_port "$1")$2"; }

status_of() { curl -s -m 1 "$(url "$1" /v1/status)" 2>/dev/null || true; }
# json_field JSON FIELD -> value of the first "FIELD": in JSON (strings
# unquoted). Our answers put top-level scalars before any nested object, so
# the first match is the top-level field. Pure bash: no process per call.
json_field() {
    local re="\"$2\":(\"([^\"]*)\"|[^,}]*)"
    [[ $1 =~ $re ]] || return 0
    if [[ ${BASH_REMATCH[1]} == \"* ]]; then echo "${BASH_REMATCH[2]}"; else echo "${BASH_REMATCH[1]}"; fi
}

# Prints the id of a member that reports itself leader, polling for up to $1 s
# (default 10), skipping members listed in $2 (space separated ids).
wait_leader() {
    local limit=${1:-10} skip=" ${2:-} " deadline i s
    deadline=$((SECONDS + limit))
    while ((SECONDS < deadline)); do
        for ((i = 1; i <= N; i++)); do
            [[ "$skip" == *" $i "* ]] && continue
            s=$(status_of "$i")
            [[ "$(json_field "$s" role)" == leader ]] && { echo "$i"; return 0; }
        done
        sleep 0.05
    done
    return 1
}

# wait_until SECONDS DESCRIPTION COMMAND...: polls COMMAND until it succeeds.
wait_until() {
    local limit=$1 what=$2 deadline
    shift 2
    deadline=$((SECONDS + limit))
    while ((SECONDS < deadline)); do
        "$@" && return 0
        sleep 0.05
    done
    fail "timed out after ${limit}s waiting for: $what"
}

# caught_up LEADER MEMBER: MEMBER has applied everything LEADER has committed.
caught_up() {
    local c a
    c=$(json_field "$(status_of "$1")" commit_index)
    a=$(json_field "$(status_of "$2")" applied_index)
    [[ -n "$a" && -n "$c" ]] && ((a >= c))
}

# post MEMBER PATH BODY -> sets HTTP_CODE and HTTP_BODY (no redirect following)
post() {
    local out
    out=$(curl -s -m 5 -w '\n%{http_code}' -X POST -H 'Content-Type: application/json' --data-binary "$3" "$(url "$1" "$2")" || true)
    HTTP_CODE=${out##*$'\n'}
    HTTP_BODY=${out%$'\n'*}
}
get() {
    local out
    out=$(curl -s -m 5 -w '\n%{http_code}' "$(url "$1" "$2")" || true)
    HTTP_CODE=${out##*$'\n'}
    HTTP_BODY=${out%$'\n'*}
}

# acquire_anywhere KEY LEASE_MS [SECONDS]: tries every live member, following
# 307s, until one grants; prints the token. Bounded.
acquire_anywhere() {
    local key=$1 lease=$2 limit=${3:-10} deadline i out
    deadline=$((SECONDS + limit))
    while ((SECONDS < deadline)); do
        for ((i = 1; i <= N; i++)); do
            out=$(curl -s -m 2 -L --post301 --post302 --post303 -X POST -H 'Content-Type: application/json' --data-binary "{\"key\":\"$key\",\"lease_ms\":$lease}" "$(url "$i" /v1/acquire)" 2>/dev/null || true)
            if [[ "$(json_field "$out" token)" =~ ^[0-9]+$ ]]; then
                json_field "$out" token
                return 0
            fi
        done
        sleep 0.05
    done
    return 1
}

member_pid() { cat "$DIR/$1.pid"; }
