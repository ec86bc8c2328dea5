#!/usr/bin/env bash
# Token proofs (--token-signing-key-file), the coordinator's half: every grant
# carries a proof that openssl verifies with the public key alone over the
# exact version-1 message (cluster, token, key); `fencectl acquire -o json`
# prints it and `fencectl run` exports it as FENCE_PROOF; a SIGHUP switches
# every member to a new signing key while a client loop acquires, without a
# failed acquire; a lease's kid (GET /v1/locks, fencectl get, the metric
# pgfence_leases_by_kid) names the key of its proof, stays across a keepalive
# and moves to the new key with a same-owner re-acquire, after which the old
# kid's count is gone; a key readable by others is refused on reload and the old key stays.
# (pg_fence's half, verification in PostgreSQL: tests/pg/sql/proof.sql and
# tests/e2e/proof.)
source "$(dirname "$0")/lib.sh"

KEY_FILE="$DIR/signing.key"
openssl genpkey -algorithm ed25519 -out "$KEY_FILE" 2>/dev/null
chmod 600 "$KEY_FILE"
openssl pkey -in "$KEY_FILE" -pubout -out "$DIR/old.pub"
tls_cluster_start 3 "--token-signing-key-file $KEY_FILE"
CA=(--cacert "$TLS_DIR/ca.pem")
fctl() { "$FENCECTL" --endpoints "$FENCE_ENDPOINTS" "${CA[@]}" "$@"; }
leader=$(wait_leader 10) || fail "no leader"

# kid_of PUBLIC-PEM: the first 8 bytes of SHA-256 over the raw public key, in hex.
kid_of() { openssl pkey -pubin -in "$1" -outform DER | tail -c 32 | sha256sum | cut -c1-16; }
unhex() { printf "$(sed 's/../\\x&/g')"; }
cluster_id=$(curl -s -L -m 2 "${CURL_TLS[@]}" "$(url "$leader" /v1/members)" | sed -n 's/.*"cluster_id":"\([0-9]*\)".*/\1/p')
[[ -n "$cluster_id" ]] || fail "no cluster_id in /v1/members"

# verify_proof PUBLIC-PEM KEY TOKEN PROOF: the proof is v1.KID.CLUSTER.SIG for
# this cluster and the key's kid, and SIG is an Ed25519 signature of the
# version-1 message by that key (tests/vectors/token_proof_v1.txt).
verify_proof() {
    local pub=$1 key=$2 token=$3 proof=$4 v kid cluster sig
    IFS=. read -r v kid cluster sig <<<"$proof"
    [[ "$v" == v1 && "$kid" == "$(kid_of "$pub")" && "$cluster" == "$cluster_id" ]] || return 1
    { printf 'pgfence token proof v1\0'; printf '%016x%016x%08x' "$cluster" "$token" "${#key}" | unhex; printf '%s' "$key"; } >"$DIR/msg"
    sig=$(tr '_-' '/+' <<<"$sig")
    while (( ${#sig} % 4 )); do sig+='='; done
    base64 -d <<<"$sig" >"$DIR/sig" 2>/dev/null || return 1
    openssl pkeyutl -verify -pubin -inkey "$pub" -rawin -in "$DIR/msg" -sigfile "$DIR/sig" >/dev/null 2>&1
}

out=$(fctl acquire proof/a --lease 5s -o json) || fail "acquire: $out"
token=$(json_field "$out" token)
proof=$(json_field "$out" proof)
verify_proof "$DIR/old.pub" proof/a "$token" "$proof" || fail "the grant's proof does not verify: $out"
verify_proof "$DIR/old.pub" proof/b "$token" "$proof" && fail "the proof of proof/a verifies for proof/b"
verify_proof "$DIR/old.pub" proof/a $((token + 1)) "$proof" && fail "the proof of token $token verifies for token $((token + 1))"
fctl release proof/a "$token" >/dev/null || fail "release proof/a"
pass "acquire -o json carries a proof that verifies for (cluster $cluster_id, proof/a, $token) only"

# A same-owner retry gets its token back: a proof not signed ahead (the
# token is not its entry's), signed on demand, for the same token.
o1=$(fctl acquire proof/owned --lease 5s --owner w1 -o json) || fail "acquire proof/owned: $o1"
o2=$(fctl acquire proof/owned --lease 5s --owner w1 -o json) || fail "acquire proof/owned again: $o2"
[[ "$(json_field "$o2" token)" == "$(json_field "$o1" token)" ]] || fail "the same owner got another token: $o1 / $o2"
verify_proof "$DIR/old.pub" proof/owned "$(json_field "$o2" token)" "$(json_field "$o2" proof)" ||
    fail "the retry's proof does not verify: $o2"
leader=$(wait_leader 10) || fail "no leader"
ahead=$(( $(metric "$leader" 'pgfence_token_proofs_total{signed="ahead"}') + $(metric "$leader" 'pgfence_token_proofs_total{signed="ahead_waited"}') ))
(( ahead >= 2 )) || fail "$ahead proofs were signed ahead (want 2: proof/a and the first proof/owned)"
metric_at_least "$leader" 'pgfence_token_proofs_total{signed="on_demand"}' 1 || fail "the retry's proof was not signed on demand"
pass "grants' proofs are signed while they commit; a same-owner retry's proof is signed on demand and verifies"

fctl run proof/run --lease 5s -- bash -c 'echo "$FENCE_TOKEN $FENCE_PROOF" >"'"$DIR"'/run.env"' || fail "fencectl run failed"
read -r run_token run_proof <"$DIR/run.env"
verify_proof "$DIR/old.pub" proof/run "$run_token" "$run_proof" || fail "FENCE_PROOF does not verify: $(cat "$DIR/run.env")"
pass "fencectl run exports FENCE_PROOF, the grant's proof"

# A lease held across the rotation, signed by the old key.
old_kid=$(kid_of "$DIR/old.pub")
h1=$(fctl acquire proof/held --lease 60s --owner w9 -o json) || fail "acquire proof/held: $h1"
held_token=$(json_field "$h1" token)
kid=$(json_field "$(fctl get proof/held -o json)" kid)
[[ "$kid" == "$old_kid" ]] || fail "fencectl get proof/held reports kid '$kid', want the old key's $old_kid"
leader=$(wait_leader 10) || fail "no leader"
metric_at_least "$leader" "pgfence_leases_by_kid{kid=\"$old_kid\"}" 1 || fail "pgfence_leases_by_kid does not count proof/held under $old_kid"
pass "a lease's kid is the old key's ($old_kid) in fencectl get and pgfence_leases_by_kid"

# Rotation: a client loop acquires and releases 80 keys, one fencectl each,
# while every member is switched to a new key; every proof it got verifies
# under the old or the new key, and once all members reloaded, new grants
# carry the new kid.
(
    for i in $(seq 1 80); do
        o=$(fctl acquire "proof/k$i" --lease 5s -o json 2>"$DIR/acquire.err") ||
            { echo "acquire $i: $o $(cat "$DIR/acquire.err")" >>"$DIR/loop.err"; continue; }
        echo "proof/k$i $(json_field "$o" token) $(json_field "$o" proof)" >>"$DIR/loop.out"
        fctl release "proof/k$i" "$(json_field "$o" token)" >/dev/null 2>&1 || echo "release $i failed" >>"$DIR/loop.err"
        sleep 0.05
    done
) &
loop_pid=$!
lines_at_least() { [[ -s "$DIR/loop.out" ]] && (( $(wc -l <"$DIR/loop.out") >= $1 )); }
wait_until 20 "the clients got 20 grants" lines_at_least 20
openssl genpkey -algorithm ed25519 -out "$DIR/new.key" 2>/dev/null
chmod 600 "$DIR/new.key"
openssl pkey -in "$DIR/new.key" -pubout -out "$DIR/new.pub"
mv "$DIR/new.key" "$KEY_FILE"
for i in 1 2 3; do kill -HUP "$(member_pid "$i")"; done
new_kid=$(kid_of "$DIR/new.pub")
for i in 1 2 3; do
    wait_until 5 "member $i reloads the new signing key" grep -q "event=reloaded.*token_signing_kid=$new_kid" "$DIR/$i.log"
done
wait "$loop_pid" || true
[[ ! -s "$DIR/loop.err" ]] || fail "acquires failed during the rotation: $(head -5 "$DIR/loop.err")"
old=0 new=0
while read -r k t p; do
    if verify_proof "$DIR/old.pub" "$k" "$t" "$p"; then ((++old)); elif verify_proof "$DIR/new.pub" "$k" "$t" "$p"; then ((++new)); else fail "proof of $k $t verifies under neither key: $p"; fi
done <"$DIR/loop.out"
(( old + new == 80 )) || fail "$((old + new)) of 80 grants were checked"
(( old >= 20 && new >= 1 )) || fail "the rotation did not fall inside the clients' run ($old old, $new new)"
out=$(fctl acquire proof/after --lease 5s -o json) || fail "acquire after the rotation: $out"
verify_proof "$DIR/new.pub" proof/after "$(json_field "$out" token)" "$(json_field "$out" proof)" ||
    fail "a grant after the rotation is not signed by the new key: $out"
pass "SIGHUP rotated the signing key during 80 acquires without an error ($old proofs under the old key, $new under the new)"

# The held lease: a keepalive (no proof) keeps the old kid; a same-owner
# re-acquire gets the same token with a new-key proof and moves the kid; the
# old kid's count then goes (proof/owned's 5 s lease ends meanwhile).
fctl keepalive proof/held "$held_token" >/dev/null || fail "keepalive proof/held"
listed=$(curl -s -L -m 3 "${CURL_TLS[@]}" "$(url "$(wait_leader 10)" "/v1/locks?key=proof/held")")
[[ "$(json_field "$listed" kid)" == "$old_kid" ]] || fail "after a keepalive GET /v1/locks shows kid other than $old_kid: $listed"
h2=$(fctl acquire proof/held --lease 60s --owner w9 -o json) || fail "re-acquire proof/held: $h2"
[[ "$(json_field "$h2" token)" == "$held_token" ]] || fail "the same owner got another token: $h1 / $h2"
verify_proof "$DIR/new.pub" proof/held "$held_token" "$(json_field "$h2" proof)" || fail "the re-acquire's proof is not the new key's: $h2"
kid=$(json_field "$(fctl get proof/held -o json)" kid)
[[ "$kid" == "$new_kid" ]] || fail "after the re-acquire proof/held reports kid '$kid', want $new_kid"
old_kid_gone() { [[ -z "$(metric "$(wait_leader 10)" "pgfence_leases_by_kid{kid=\"$old_kid\"}")" ]]; }
wait_until 15 "no lease counted under the old kid $old_kid" old_kid_gone
metric_at_least "$(wait_leader 10)" "pgfence_leases_by_kid{kid=\"$new_kid\"}" 1 || fail "proof/held is not counted under $new_kid"
fctl release proof/held "$held_token" >/dev/null || fail "release proof/held"
pass "a keepalive keeps the old kid; a same-owner re-acquire moves proof/held to $new_kid and the old kid's count goes to none"

# A key readable by others is refused on reload; the loaded key stays.
chmod 644 "$KEY_FILE"
for i in 1 2 3; do kill -HUP "$(member_pid "$i")"; done
for i in 1 2 3; do
    wait_until 5 "member $i refuses a signing key readable by others" grep -q "event=reload_failed.*signing.key.*mode 0644" "$DIR/$i.log"
done
chmod 600 "$KEY_FILE"
out=$(curl -s -L -m 3 "${CURL_TLS[@]}" -X POST -H 'Content-Type: application/json' -d '{"key":"proof/kept","lease_ms":5000}' "$(url "$(wait_leader 10)" /v1/acquire)")
verify_proof "$DIR/new.pub" proof/kept "$(json_field "$out" token)" "$(json_field "$out" proof)" ||
    fail "after a failed reload the grant is not signed by the key loaded before: $out"
pass "a signing key readable by others is refused on reload; the key loaded before keeps signing"
