# Helpers for the TLS and authorization end-to-end tests: the coordinator
# tests' helpers (tests/e2e/coordinator/lib.sh), over https with the
# certificates that `scripts/cluster.sh start DIR N --tls` makes in DIR/tls.
# shellcheck source=../coordinator/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../coordinator/lib.sh"
# A command that fails outside a check says where (set -e would end the test silently).
trap 'rc=$?; [[ $- == *e* ]] && echo "FAIL: line $LINENO: $BASH_COMMAND exited $rc" >&2' ERR
FENCECTL=${FENCECTL_BIN:?set FENCECTL_BIN}
MAKE_CERTS="$E2E_ROOT/scripts/make-certs.sh"
# at_offset OFFSET CMD...: runs CMD with the clock moved by OFFSET (libfaketime,
# e.g. -3d), to make expired and not-yet-valid certificates. The preload, not
# the faketime wrapper: the wrapper's named semaphore races between tests.
FAKETIME_LIB=${FAKETIME_LIB:-/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1}
[[ -f "$FAKETIME_LIB" ]] || { echo "FAIL: libfaketime not at $FAKETIME_LIB (apt-get install faketime)" >&2; exit 1; }
at_offset() { local offset=$1; shift; LD_PRELOAD=$FAKETIME_LIB FAKETIME=$offset "$@"; }
TLS_DIR="$DIR/tls"
# What curl presents: the cluster's CA, and client-admin's certificate (for
# --client-cert-auth); STATUS_AUTH adds a bearer header when the test sets it.
CURL_TLS=()
STATUS_AUTH=()

url() { echo "https://127.0.0.1:$(client_port "$1")$2"; }
status_of() { curl -s -m 1 "${CURL_TLS[@]}" "${STATUS_AUTH[@]}" "$(url "$1" /v1/status)" 2>/dev/null || true; }

tls_cluster_start() {  # N [extra flags]
    N=${1:-3}
    local out
    out=$(FENCE_COORDINATOR_FLAGS="$FAST_FLAGS ${2:-}" "$CLUSTER" start "$DIR" "$N" --tls) || fail "TLS cluster did not start"
    [[ "$out" == "export FENCE_ENDPOINTS=https://"* ]] || fail "cluster.sh --tls printed '$out'"
    export FENCE_ENDPOINTS=${out#export FENCE_ENDPOINTS=}
    CURL_TLS=(--cacert "$TLS_DIR/ca.pem" --cert "$TLS_DIR/client-admin.pem" --key "$TLS_DIR/client-admin-key.pem")
}

# curl_code ARGS...: the HTTP status curl got ("000": no HTTP answer at all).
curl_code() { curl -s -o /dev/null -m 3 -w '%{http_code}' "$@" 2>/dev/null || true; }

# metric MEMBER 'NAME{labels}' -> its value (admin's view), "" when missing.
metric() {
    curl -s -m 2 "${CURL_TLS[@]}" "${STATUS_AUTH[@]}" "$(url "$1" /metrics)" 2>/dev/null |
        awk -v m="$2" '$1 == m && !found {print $2; found = 1}'  # reads to the end: curl must not see a closed pipe
}

metric_at_least() {  # MEMBER 'NAME{labels}' MIN
    local v
    v=$(metric "$1" "$2")
    [[ -n "$v" ]] && (( v >= $3 ))
}

# The serial number of the certificate a TLS port presents now (a new
# connection; client-admin's certificate is offered for --client-cert-auth).
served_serial() {  # PORT
    openssl s_client -connect "127.0.0.1:$1" -servername localhost -cert "$TLS_DIR/client-admin.pem" \
        -key "$TLS_DIR/client-admin-key.pem" </dev/null 2>/dev/null |
        openssl x509 -noout -serial 2>/dev/null | cut -d= -f2
}
file_serial() { openssl x509 -noout -serial -in "$1" | cut -d= -f2; }

# Members' lock tables agree and hold exactly the keys given (sorted, one per line).
locks_are() {  # EXPECTED-KEYS-TEXT
    local got
    got=$("$FENCECTL" --endpoints "$FENCE_ENDPOINTS" --cacert "$TLS_DIR/ca.pem" --cert "$TLS_DIR/client-admin.pem" \
        --key "$TLS_DIR/client-admin-key.pem" "${ADMIN_FLAGS[@]}" list -o json) || return 1
    [[ "$(grep -o '"key":"[^"]*"' <<<"$got" | cut -d'"' -f4 | sort | paste -sd' ')" == "$1" ]]
}
ADMIN_FLAGS=()
