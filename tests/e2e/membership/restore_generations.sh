#!/usr/bin/env bash
# Every restore a new generation (docs/guarantees.md): the same backup
# restored twice into two 3-member clusters (the first lost before the
# second) gives two cluster IDs, on which every member of each agrees
# though each ran --restore on its own; the second grants above every token
# the first issued, and a proof of the first does not verify for the
# second's cluster ID. And two new clusters with the same --peers and no
# --initial-cluster-token get different IDs.
source "$(dirname "$0")/lib.sh"

KEY_FILE="$DIR/signing.key"
openssl genpkey -algorithm ed25519 -out "$KEY_FILE" 2>/dev/null
chmod 600 "$KEY_FILE"
openssl pkey -in "$KEY_FILE" -pubout -out "$DIR/signing.pub"
SIGN="--token-signing-key-file $KEY_FILE"

# cluster_of ID: member ID's cluster ID as its /v1/status says.
cluster_of() { json_field "$(status_of "$1")" cluster_id; }
# agreed: every member answers, with one cluster ID; prints it.
agreed() {
    local c1 c2 c3
    c1=$(cluster_of 1) c2=$(cluster_of 2) c3=$(cluster_of 3)
    [[ -n "$c1" && "$c1" == "$c2" && "$c1" == "$c3" ]] || return 1
    echo "$c1"
}
agreed_quiet() { agreed >/dev/null; }
# new_cluster [FLAGS]: starts 3 members on empty directories; sets CLUSTER_ID.
new_cluster() {
    rm -rf "${DIR:?}/1" "${DIR:?}/2" "${DIR:?}/3"
    cluster_start 3 "$SIGN ${1:-}"
    wait_leader 10 >/dev/null || fail "no leader"
    wait_until 10 "every member reports the same cluster ID" agreed_quiet
    CLUSTER_ID=$(agreed)
}

# Two new clusters, same --peers, no token.
new_cluster
fresh1=$CLUSTER_ID
held=$(fctl acquire held:1 --lease 60s) || fail "acquire held:1"
for i in 1 2 3 4 5; do fctl acquire "before:$i" --lease 60s >/dev/null || fail "acquire before:$i"; done
fctl snapshot save "$DIR/backup.bak" >/dev/null || fail "snapshot save"
status=$(fctl snapshot status "$DIR/backup.bak" -o json) || fail "snapshot status"
[[ "$(json_field "$status" cluster_id)" == "$fresh1" ]] || fail "the backup names cluster $(json_field "$status" cluster_id)"
"$CLUSTER" stop "$DIR"
new_cluster
fresh2=$CLUSTER_ID
[[ "$fresh1" != "$fresh2" ]] || fail "two clusters with the same --peers and no token have one ID, $fresh1"
grep -q "event=seed_answered.*cluster_id=$fresh2" "$DIR/2.log" || fail "member 2 did not take the ID from its seed"
"$CLUSTER" stop "$DIR"
pass "two new clusters with the same --peers: IDs $fresh1 and $fresh2"

# verify_proof CLUSTER KEY TOKEN PROOF: SIG of the proof v1.KID.C.SIG is an
# Ed25519 signature of the version-1 message for (CLUSTER, KEY, TOKEN)
# (tests/vectors/token_proof_v1.txt), whatever cluster the proof names.
unhex() { printf "$(sed 's/../\\x&/g')"; }
verify_proof() {
    local cluster=$1 key=$2 token=$3 proof=$4 v kid named sig
    IFS=. read -r v kid named sig <<<"$proof"
    { printf 'pgfence token proof v1\0'; printf '%016x%016x%08x' "$cluster" "$token" "${#key}" | unhex; printf '%s' "$key"; } >"$DIR/msg"
    sig=$(tr '_-' '/+' <<<"$sig")
    while (( ${#sig} % 4 )); do sig+='='; done
    base64 -d <<<"$sig" >"$DIR/sig" 2>/dev/null || return 1
    openssl pkeyutl -verify -pubin -inkey "$DIR/signing.pub" -rawin -in "$DIR/msg" -sigfile "$DIR/sig" >/dev/null 2>&1
}

# The first restore: grants, then it is lost.
new_cluster "--restore $DIR/backup.bak"
restored1=$CLUSTER_ID
[[ "$restored1" != "$fresh1" ]] || fail "the restore kept the backup's cluster ID"
[[ "$(fctl get held:1 -o json)" == *"\"token\":$held"* ]] || fail "held:1 is not in the first restored cluster"
floor() { grep -o 'event=restored.* token_floor=[0-9]*' "$DIR/$1.log" | tail -n 1 | sed 's/.*token_floor=//'; }
f1=$(floor 1)
[[ -n "$f1" && "$(floor 2)" == "$f1" && "$(floor 3)" == "$f1" ]] || fail "the members restored with floors '$f1' '$(floor 2)' '$(floor 3)'"
max1=0
for i in $(seq 1 20); do
    out=$(fctl acquire "r1:$i" --lease 60s -o json) || fail "acquire r1:$i"
    t=$(json_field "$out" token)
    ((t > f1)) || fail "token $t of the first restore is not above its floor $f1"
    ((t > max1)) && max1=$t
    ((i == 1)) && { proof1=$(json_field "$out" proof); token1=$t; }
done
verify_proof "$restored1" r1:1 "$token1" "$proof1" || fail "the first restore's proof does not verify for its own cluster"
"$CLUSTER" stop "$DIR"

# The second restore of the same file.
new_cluster "--restore $DIR/backup.bak"
restored2=$CLUSTER_ID
[[ "$restored2" != "$restored1" && "$restored2" != "$fresh1" ]] ||
    fail "the second restore has ID $restored2 (first restore $restored1, backup $fresh1)"
f2=$(floor 1)
((f2 > f1)) || fail "the second restore's floor $f2 is not above the first's $f1"
out=$(fctl acquire r2:1 --lease 60s -o json) || fail "acquire r2:1"
t2=$(json_field "$out" token)
((t2 > max1)) || fail "the second restore's first token $t2 is not above $max1, the first restore's last"
if verify_proof "$restored2" r1:1 "$token1" "$proof1"; then
    fail "a proof of the first restore verifies for the second's cluster $restored2"
fi
pass "restores $restored1 (floor $f1, tokens up to $max1) and $restored2 (floor $f2, first token $t2) of one backup"
