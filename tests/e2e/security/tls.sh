#!/usr/bin/env bash
# A cluster with TLS on both ports (client certificates required, users named
# by their CN): works end to end through fencectl, and refuses — with nothing
# changed — plaintext clients and peers, a wrong CA, expired and not-yet-valid
# certificates, a client certificate from another CA, a would-be peer with a
# client certificate, a member certificate used for another member's ID, and
# a server whose certificate names another host.
source "$(dirname "$0")/lib.sh"

cat >"$DIR/auth.txt" <<'AUTH'
role all admin read: lock:
role reader read:
user admin all
user reader reader
AUTH
tls_cluster_start 3 "--client-cert-auth --auth-file $DIR/auth.txt"
CA=(--cacert "$TLS_DIR/ca.pem")
ADMIN=(--cert "$TLS_DIR/client-admin.pem" --key "$TLS_DIR/client-admin-key.pem")
fctl() { "$FENCECTL" --endpoints "$FENCE_ENDPOINTS" --timeout 3s "$@"; }

# ---- end to end ----
leader=$(wait_leader 10) || fail "no leader"
follower=$(( leader % N + 1 ))
# A follower's 307 keeps https (asked right after finding the leader; a
# leader change in between would answer 200 or another 307, both https).
loc=$(curl -s -o /dev/null -m 3 -w '%{http_code} %{redirect_url}' "${CURL_TLS[@]}" "$(url "$follower" /v1/locks)")
[[ "$loc" =~ ^(307\ https://127\.0\.0\.1:[0-9]+/v1/locks|200\ )$ ]] || fail "a follower's redirect: '$loc'"
# Only a follower's endpoint: fencectl follows its 307.
tok=$("$FENCECTL" --endpoints "https://127.0.0.1:$(client_port "$follower")" "${CA[@]}" "${ADMIN[@]}" acquire tls/a --lease 5m) ||
    fail "acquire through a follower over TLS"
[[ "$tok" =~ ^[0-9]+$ ]] || fail "acquire printed '$tok'"
fctl "${CA[@]}" "${ADMIN[@]}" keepalive tls/a "$tok" >/dev/null || fail "keepalive over TLS"
[[ "$(fctl "${CA[@]}" "${ADMIN[@]}" get tls/a -o json)" == *"\"token\":$tok"* ]] || fail "get over TLS"
s=$(status_of "$leader")
[[ "$s" == *'"tls":{"client":true,"peer":true,"client_cert_auth":true}'* ]] || fail "status does not show TLS on: $s"
[[ "$s" == *'"client_url":"https://127.0.0.1:'* ]] || fail "status does not give https client URLs: $s"
st=$(fctl "${CA[@]}" "${ADMIN[@]}" status) || fail "status over TLS"
[[ "$st" != *unreachable* ]] || fail "fencectl status lists plaintext endpoints: $st"
pass "TLS end to end: acquire through a follower, keepalive, get, status"

# A reader (CN=reader) may read but not lock.
"$MAKE_CERTS" leaf "$TLS_DIR" client-reader ca "/CN=reader" ""
READER=(--cert "$TLS_DIR/client-reader.pem" --key "$TLS_DIR/client-reader-key.pem")
[[ "$(fctl "${CA[@]}" "${READER[@]}" get tls/a -o json)" == *"\"token\":$tok"* ]] || fail "reader cannot read"
set +e
fctl "${CA[@]}" "${READER[@]}" acquire tls/b --lease 5s 2>"$DIR/err"; rc=$?
set -e
[[ $rc == 7 ]] || fail "reader's acquire: exit $rc, want 7 ($(cat "$DIR/err"))"
grep -q "has no lock permission on key 'tls/b'" "$DIR/err" || fail "reader's 403 does not say why: $(cat "$DIR/err")"
locks_are "tls/a" || fail "a refused acquire changed the lock table"
pass "a certificate's CN names the user: reader reads, its acquire is 403 (exit 7), nothing changed"

grants_before=$(metric "$leader" pgfence_grants_total)
client_failures() { metric "$1" 'pgfence_tls_handshake_failures_total{port="client"}'; }
serves() { [[ "$(served_serial "$1")" == "$2" ]]; }  # PORT SERIAL
refused() {  # WHAT EXPECTED-MESSAGE FENCECTL-ARGS...: an acquire and a release of tls/a, both refused
    local what=$1 want=$2 rc
    shift 2
    for cmd in "acquire tls/refused --lease 5s --wait 0ms" "release tls/a $tok"; do
        set +e
        # shellcheck disable=SC2086
        "$FENCECTL" --endpoints "https://127.0.0.1:$(client_port "$leader")" --timeout 1s "$@" $cmd >/dev/null 2>"$DIR/err"
        rc=$?
        set -e
        [[ $rc == 5 ]] || fail "$what ($cmd): fencectl exit $rc, want 5 (unavailable): $(cat "$DIR/err")"
        [[ -z "$want" ]] || grep -q "$want" "$DIR/err" || fail "$what: error does not say '$want': $(cat "$DIR/err")"
    done
}

# ---- the client refuses the server ----
"$MAKE_CERTS" "$DIR/other" 1 admin
refused "a CA that did not sign the member" "certificate was refused" --cacert "$DIR/other/ca.pem" "${ADMIN[@]}"
refused "no CA given (the system's do not know ours)" "certificate was refused" "${ADMIN[@]}"

# ---- the server refuses the client ----
f0=$(client_failures "$leader")
refused "no client certificate" "" "${CA[@]}"
refused "a client certificate from another CA" "" "${CA[@]}" --cert "$DIR/other/client-admin.pem" --key "$DIR/other/client-admin-key.pem"
at_offset -3d "$MAKE_CERTS" leaf "$TLS_DIR" client-expired ca "/CN=admin" "" 1
refused "an expired client certificate" "" "${CA[@]}" --cert "$TLS_DIR/client-expired.pem" --key "$TLS_DIR/client-expired-key.pem"
at_offset +3d "$MAKE_CERTS" leaf "$TLS_DIR" client-future ca "/CN=admin" "" 5
refused "a not-yet-valid client certificate" "" "${CA[@]}" --cert "$TLS_DIR/client-future.pem" --key "$TLS_DIR/client-future-key.pem"
# Signed by the client CA, but made for serving (extended key usage serverAuth only).
refused "a member's HTTP certificate as a client certificate" "" "${CA[@]}" --cert "$TLS_DIR/member-1.pem" --key "$TLS_DIR/member-1-key.pem"
[[ "$(curl_code "http://127.0.0.1:$(client_port "$leader")/v1/status")" == 000 ]] || fail "plaintext HTTP got an HTTP answer"
wait_until 5 "the leader counts the refused handshakes" \
    metric_at_least "$leader" 'pgfence_tls_handshake_failures_total{port="client"}' $((f0 + 7))
grep -q "event=tls_handshake_failed remote=127.0.0.1:[0-9]" "$DIR/$leader.log" || fail "a refused handshake is not logged with the client's address"
pass "the member refuses: no client certificate, another CA's, an expired one, a not-yet-valid one, a server certificate, plaintext"

# ---- the server's own certificate: expired, not yet valid, naming another host ----
served_by() {  # swaps member LEADER's HTTP certificate for NAME's and reloads it
    cp "$TLS_DIR/$1.pem" "$TLS_DIR/member-$leader.pem"
    cp "$TLS_DIR/$1-key.pem" "$TLS_DIR/member-$leader-key.pem"
    kill -HUP "$(member_pid "$leader")"
    wait_until 5 "member $leader serves certificate $1" serves "$(client_port "$leader")" "$(file_serial "$TLS_DIR/$1.pem")"
}
cp "$TLS_DIR/member-$leader.pem" "$TLS_DIR/good.pem"
cp "$TLS_DIR/member-$leader-key.pem" "$TLS_DIR/good-key.pem"
at_offset -3d "$MAKE_CERTS" leaf "$TLS_DIR" srv-expired ca "/CN=member" "IP:127.0.0.1" 1
served_by srv-expired
refused "an expired member certificate" "certificate has expired" "${CA[@]}" "${ADMIN[@]}"
at_offset +3d "$MAKE_CERTS" leaf "$TLS_DIR" srv-future ca "/CN=member" "IP:127.0.0.1" 5
served_by srv-future
refused "a not-yet-valid member certificate" "certificate is not yet valid" "${CA[@]}" "${ADMIN[@]}"
"$MAKE_CERTS" leaf "$TLS_DIR" srv-other ca "/CN=member" "IP:127.0.0.2,DNS:other.example"
served_by srv-other
refused "a member certificate for another IP" "certificate was refused" "${CA[@]}" "${ADMIN[@]}"
set +e
"$FENCECTL" --endpoints "https://localhost:$(client_port "$leader")" --timeout 2s "${CA[@]}" "${ADMIN[@]}" get tls/a >/dev/null 2>"$DIR/err"
rc=$?
set -e
[[ $rc == 5 ]] && grep -q "certificate was refused" "$DIR/err" || fail "a member certificate for another DNS name: exit $rc: $(cat "$DIR/err")"
served_by good
[[ "$("$FENCECTL" --endpoints "https://localhost:$(client_port "$leader")" "${CA[@]}" "${ADMIN[@]}" get tls/a -o json)" == *tls/a* ]] ||
    fail "the restored certificate (DNS:localhost) is not accepted"
[[ "$(metric "$leader" pgfence_grants_total)" == "$grants_before" ]] || fail "a refused client got a grant"
locks_are "tls/a" || fail "refused clients changed the lock table"
pass "fencectl refuses a member certificate that is expired, not yet valid, or names another IP or host"

# ---- the peer port ----
peer_port() { echo $((BASE + $1)); }
p0=$(metric "$leader" 'pgfence_tls_handshake_failures_total{port="peer"}')
# A client certificate (the client CA's) is no peer certificate.
openssl s_client -connect "127.0.0.1:$(peer_port "$leader")" -cert "$TLS_DIR/client-admin.pem" \
    -key "$TLS_DIR/client-admin-key.pem" -CAfile "$TLS_DIR/peer-ca.pem" </dev/null >"$DIR/sclient.out" 2>&1 || true
# Plaintext bytes to the peer port.
exec 3<>"/dev/tcp/127.0.0.1/$(peer_port "$leader")"
printf 'PGFENCE plaintext frame\n' >&3 || true
exec 3>&-
wait_until 5 "the peer port counts both refusals" \
    metric_at_least "$leader" 'pgfence_tls_handshake_failures_total{port="peer"}' $((p0 + 2))
grep -q "event=peer_tls_refused remote=127.0.0.1:[0-9]" "$DIR/$leader.log" || fail "the refused peer handshake is not logged with its address"
pass "the peer port refuses a client certificate and plaintext"

# Member 3 restarted with member 2's peer certificate cannot speak for member 2, nor as itself.
victim=3
[[ $leader == 3 ]] && victim=1
other=$(( victim % N + 1 ))
cp "$TLS_DIR/peer-$victim.pem" "$TLS_DIR/peer-$victim.good.pem"
cp "$TLS_DIR/peer-$victim-key.pem" "$TLS_DIR/peer-$victim-key.good.pem"
cp "$TLS_DIR/peer-$other.pem" "$TLS_DIR/peer-$victim.pem"
cp "$TLS_DIR/peer-$other-key.pem" "$TLS_DIR/peer-$victim-key.pem"
"$CLUSTER" restart "$DIR" "$victim"
wait_until 10 "a member refuses the borrowed certificate" \
    bash -c "cat $DIR/[0-9].log | grep -Eq 'peer_certificate_refused.*bound to member $other|peer_frame_refused.*certificate bound to member $other'"
tok2=$(fctl "${CA[@]}" "${ADMIN[@]}" acquire tls/c --lease 5m) || fail "the cluster stopped serving"
leader=$(wait_leader 10 "$victim") || fail "no leader"
for i in $(seq 1 "$N"); do
    [[ $i == "$victim" ]] && continue
    wait_until 5 "member $i applies tls/c" caught_up "$leader" "$i"
done
applied=$(json_field "$(status_of "$victim")" applied_index)
commit=$(json_field "$(status_of "$leader")" commit_index)
[[ -n "$applied" && "$applied" -lt "$commit" ]] || fail "member $victim (with member $other's certificate) applied $applied of $commit"
cp "$TLS_DIR/peer-$victim.good.pem" "$TLS_DIR/peer-$victim.pem"
cp "$TLS_DIR/peer-$victim-key.good.pem" "$TLS_DIR/peer-$victim-key.pem"
"$CLUSTER" restart "$DIR" "$victim"
wait_until 15 "member $victim catches up with its own certificate" caught_up "$leader" "$victim"
pass "a member certificate used for another member's ID is refused; with its own the member catches up (token $tok2)"
