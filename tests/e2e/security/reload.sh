#!/usr/bin/env bash
# SIGHUP reloads certificates and keys while clients run: a held lock keeps
# being kept alive over its open connection, new clients and new peer
# connections get the new certificates, nothing fails; a reload that fails (a
# malformed certificate, a key readable by others) keeps the old ones, logged
# and counted.
source "$(dirname "$0")/lib.sh"

tls_cluster_start 3
CA=(--cacert "$TLS_DIR/ca.pem")
leader=$(wait_leader 10) || fail "no leader"

# A holder whose lease (3s) must be kept alive across the reloads (its child
# runs until told to stop), and a stream of new clients (each fencectl makes
# new connections).
"$FENCECTL" --endpoints "$FENCE_ENDPOINTS" "${CA[@]}" run reload/held --lease 3s -- \
    bash -c "while [ ! -e '$DIR/stop' ]; do sleep 0.1; done" >"$DIR/run.out" 2>&1 &
run_pid=$!
(
    for i in $(seq 1 60); do
        # stderr apart: a retry notice there is no error, and must not end up in the token
        t=$("$FENCECTL" --endpoints "$FENCE_ENDPOINTS" "${CA[@]}" acquire "reload/k$i" --lease 5s 2>"$DIR/acquire.err") ||
            { echo "acquire $i: $t $(cat "$DIR/acquire.err")"; continue; }
        "$FENCECTL" --endpoints "$FENCE_ENDPOINTS" "${CA[@]}" release "reload/k$i" "$t" >/dev/null 2>&1 || echo "release $i failed"
        sleep 0.1
    done
) >"$DIR/loop.out" 2>&1 &
loop_pid=$!
wait_until 5 "the holder holds reload/held" bash -c "'$FENCECTL' --endpoints '$FENCE_ENDPOINTS' --cacert '$TLS_DIR/ca.pem' get reload/held >/dev/null 2>&1"

# New certificates for every member (same CAs, new serials), then SIGHUP.
for i in 1 2 3; do
    "$MAKE_CERTS" leaf "$TLS_DIR" "member-$i" ca "/CN=member-$i" "IP:127.0.0.1,DNS:localhost"
    "$MAKE_CERTS" leaf "$TLS_DIR" "peer-$i" peer-ca "/CN=$i" "URI:pgfence:member:$i,IP:127.0.0.1"
done
for i in 1 2 3; do kill -HUP "$(member_pid "$i")"; done
serves() { [[ "$(served_serial "$1")" == "$2" ]]; }  # PORT SERIAL
peer_serves() {  # PORT SERIAL: what the peer port presents to a peer
    [[ "$(openssl s_client -connect "127.0.0.1:$1" -cert "$TLS_DIR/peer-1.pem" -key "$TLS_DIR/peer-1-key.pem" </dev/null 2>/dev/null |
        openssl x509 -noout -serial 2>/dev/null | cut -d= -f2)" == "$2" ]]
}
for i in 1 2 3; do
    wait_until 5 "member $i serves its new HTTP certificate" serves "$(client_port "$i")" "$(file_serial "$TLS_DIR/member-$i.pem")"
    wait_until 5 "member $i serves its new peer certificate" peer_serves $((BASE + i)) "$(file_serial "$TLS_DIR/peer-$i.pem")"
done
pass "after SIGHUP new connections get the new certificates on both ports"

# A reload that fails keeps what was loaded.
good=$(file_serial "$TLS_DIR/member-1.pem")
cp "$TLS_DIR/member-1.pem" "$DIR/member-1.pem.keep"
echo "not a certificate" >"$TLS_DIR/member-1.pem"
kill -HUP "$(member_pid 1)"
wait_until 5 "member 1 logs the failed reload" grep -q "event=reload_failed.*member-1.pem" "$DIR/1.log"
cp "$DIR/member-1.pem.keep" "$TLS_DIR/member-1.pem"
chmod 644 "$TLS_DIR/peer-1-key.pem"
kill -HUP "$(member_pid 1)"
wait_until 5 "member 1 refuses a key readable by others" grep -q "event=reload_failed.*peer-1-key.pem.*mode 0644" "$DIR/1.log"
chmod 600 "$TLS_DIR/peer-1-key.pem"
serves "$(client_port 1)" "$good" || fail "member 1 stopped serving its certificate after a failed reload"
metric_at_least 1 pgfence_security_reloads_failed_total 2 || fail "failed reloads are not counted"
pass "a malformed certificate and a key readable by others are refused on reload; the old ones stay"

# The clients ran through it all: the holder still holds (its keepalives
# crossed every reload), and no new client failed.
kill -0 "$run_pid" 2>/dev/null || fail "the holder ended during the reloads: $(cat "$DIR/run.out")"
"$FENCECTL" --endpoints "$FENCE_ENDPOINTS" "${CA[@]}" get reload/held >/dev/null || fail "reload/held is not held after the reloads"
touch "$DIR/stop"
wait "$run_pid" || fail "the holder lost its lease across the reload: $(cat "$DIR/run.out")"
wait "$loop_pid" || true
[[ ! -s "$DIR/loop.out" ]] || fail "clients failed during the reload: $(head -5 "$DIR/loop.out")"
pass "60 new clients and a held lock's keepalives ran through the reloads without an error"

# New peer connections with the new certificates: a restarted member catches up.
t=$("$FENCECTL" --endpoints "$FENCE_ENDPOINTS" "${CA[@]}" acquire reload/after --lease 5m) || fail "acquire after the reloads"
victim=$(( leader % N + 1 ))
"$CLUSTER" restart "$DIR" "$victim"
leader=$(wait_leader 10 "$victim") || fail "no leader"
wait_until 15 "member $victim catches up over new peer connections" caught_up "$leader" "$victim"
pass "a member restarted after the reload catches up (token $t)"
