#!/usr/bin/env bash
# Verifiable tokens end to end: a 3-member cluster that signs its grants
# (--token-signing-key-file) and a real PostgreSQL with pg_fence that trusts
# the cluster's public key. Checks:
#   - fencectl acquire -o json -> proof -> the write is accepted on a
#     verifying table (fence_protect(..., lock_key => 'report:{report_id}'));
#   - a proof for report:8 used on report 7 is refused (55F02);
#   - a forged token without a proof is refused on the verifying table and
#     accepted on a plain one;
#   - the signing key is rotated through SIGHUP while clients write: every
#     write is accepted (both keys trusted), and once the old key is
#     distrusted a proof it signed is refused.
# Needs pg_fence installed (make -C pg_extension install; make test does).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
E2E_ROOT=$(cd "$HERE/../../.." && pwd)
export E2E_ROOT
# shellcheck source=../safety/lib/common.sh
source "$E2E_ROOT/tests/e2e/safety/lib/common.sh"
# shellcheck source=../safety/lib/pg.sh
source "$E2E_ROOT/tests/e2e/safety/lib/pg.sh"
FENCECTL=${FENCECTL_BIN:?set FENCECTL_BIN}
export FENCE_COORDINATOR_BIN=${FENCE_COORDINATOR_BIN:?set FENCE_COORDINATOR_BIN}

W=$(mktemp -d /tmp/pgfence-proof.XXXXXX)
fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "PASS: $*"; }
cleanup() {
  local rc=$?
  bash "$E2E_ROOT/scripts/cluster.sh" stop "$W/cluster" >/dev/null 2>&1 || true
  pg_throwaway_stop "$W"
  if ((rc == 0)); then rm -rf "$W"; else echo "kept: $W" >&2; fi
}
trap cleanup EXIT
fctl() { "$FENCECTL" "$@"; }
sql() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
field() { sed -n "s/.*\"$1\":\"\{0,1\}\([^,\"}]*\).*/\1/p" <<<"$2"; }  # FIELD JSON

# write_row TABLE ID TOKEN PROOF: one UPDATE of row ID with TOKEN (PROOF ""
# sends none). Prints the SQLSTATE of its error, or 00000.
write_row() {
  local out
  out=$(psql -X -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -c BEGIN \
    -c "SET LOCAL pg_fence.proof = '$4'" \
    -c "UPDATE $1 SET body = 'written with $3', fence = $3 WHERE report_id = $2" -c COMMIT 2>&1) && { echo 00000; return; }
  sed -n 's/^ERROR: *\([0-9A-Z]\{5\}\):.*/\1/p' <<<"$out" | head -n 1
}

openssl genpkey -algorithm ed25519 -out "$W/signing.key" 2>/dev/null
chmod 600 "$W/signing.key"
openssl pkey -in "$W/signing.key" -pubout -out "$W/old.pub"
pg_throwaway_start "$W" || fail "PostgreSQL did not start"
mkdir -p "$W/cluster"
FENCE_COORDINATOR_FLAGS="--heartbeat-ms 20 --election-ms 150 --min-lease 500 --token-signing-key-file $W/signing.key" \
  e2e_cluster_start "$W/cluster" 3 || fail "the cluster did not start"
e2e_wait_for 20 fctl acquire proof:warmup --lease 1s --wait 0s >/dev/null || fail "no leader within 20s"
cluster_id=$(fctl member list -o json | sed -n 's/.*"cluster_id":"\([0-9]*\)".*/\1/p')
[[ -n "$cluster_id" ]] || fail "no cluster_id from fencectl member list"

old_kid=$(sql -v pem="$(cat "$W/old.pub")" -v cid="$cluster_id" <<<"
CREATE EXTENSION pg_fence;
CREATE TABLE reports (report_id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0);
CREATE TABLE plain_reports (report_id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0);
SELECT fence_protect('reports', lock_key => 'report:{report_id}');
SELECT fence_protect('plain_reports');
INSERT INTO reports SELECT i, 'empty', 0 FROM generate_series(1, 9) AS i;
INSERT INTO plain_reports SELECT i, 'empty', 0 FROM generate_series(1, 9) AS i;
SELECT fence_trust_key(:'pem', :'cid'::numeric);" | tail -n 1) || fail "setting up the database failed"
[[ "$old_kid" =~ ^[0-9a-f]{16}$ ]] || fail "fence_trust_key returned '$old_kid'"
grep -q "token_signing_kid=$old_kid" "$W/cluster/1.log" || fail "pg_fence's key_id $old_kid is not the members' token_signing_kid"

# 1. acquire -> proof -> accepted.
g=$(fctl acquire report:7 --lease 10s -o json) || fail "acquire report:7: $g"
t7=$(field token "$g") p7=$(field proof "$g")
[[ -n "$p7" ]] || fail "the grant carries no proof: $g"
[[ "$(write_row reports 7 "$t7" "$p7")" == 00000 ]] || fail "report:7's own proof was refused"
[[ "$(sql -c "SELECT fence FROM reports WHERE report_id = 7")" == "$t7" ]] || fail "row 7 does not hold token $t7"
pass "fencectl acquire -o json -> proof -> the write to report 7 is accepted (token $t7)"

# 2. a proof for report:8 used on report 7.
g=$(fctl acquire report:8 --lease 10s -o json) || fail "acquire report:8: $g"
t8=$(field token "$g") p8=$(field proof "$g")
state=$(write_row reports 7 "$t8" "$p8")
[[ "$state" == 55F02 ]] || fail "report:8's proof on report 7: expected 55F02, got $state"
[[ "$(sql -c "SELECT fence FROM reports WHERE report_id = 7")" == "$t7" ]] || fail "row 7 changed"
[[ "$(write_row reports 8 "$t8" "$p8")" == 00000 ]] || fail "report:8's proof on report 8 was refused"
fctl release report:8 "$t8" >/dev/null
fctl release report:7 "$t7" >/dev/null
pass "a proof for report:8 is refused on report 7 (55F02) and accepted on report 8"

# 3. a forged token without a proof.
big=9223372036854775807
state=$(write_row reports 1 "$big" "")
[[ "$state" == 55F02 ]] || fail "a forged token without a proof on the verifying table: expected 55F02, got $state"
[[ "$(write_row plain_reports 1 "$big" "")" == 00000 ]] || fail "the plain table refused a newer token"
pass "a forged token without a proof: refused on the verifying table (55F02), accepted on the plain one"

# 4. rotation under writing clients. A proof signed by the old key is kept
# for the end (report:9's grant, not written).
g=$(fctl acquire report:9 --lease 10s -o json) || fail "acquire report:9: $g"
t9=$(field token "$g") p9=$(field proof "$g")
fctl release report:9 "$t9" >/dev/null
openssl genpkey -algorithm ed25519 -out "$W/new.key" 2>/dev/null
chmod 600 "$W/new.key"
openssl pkey -in "$W/new.key" -pubout -out "$W/new.pub"
new_kid=$(sql -v pem="$(cat "$W/new.pub")" -v cid="$cluster_id" <<<"SELECT fence_trust_key(:'pem', :'cid'::numeric);")
[[ "$new_kid" =~ ^[0-9a-f]{16}$ && "$new_kid" != "$old_kid" ]] || fail "fence_trust_key returned '$new_kid' for the new key"
(
  for i in $(seq 1 60); do
    r=$(( i % 5 + 2 ))
    g=$(fctl acquire "report:$r" --lease 5s --wait 5s -o json 2>"$W/acquire.err") ||
      { echo "acquire $i: $g $(cat "$W/acquire.err")" >>"$W/loop.err"; continue; }
    t=$(field token "$g") p=$(field proof "$g")
    s=$(write_row reports "$r" "$t" "$p")
    [[ "$s" == 00000 ]] || echo "write $i (report $r, token $t, ${p:0:20}): $s" >>"$W/loop.err"
    echo "${p:3:16}" >>"$W/loop.kids"
    fctl release "report:$r" "$t" >/dev/null 2>&1 || echo "release $i failed" >>"$W/loop.err"
  done
) &
loop=$!
kids_at_least() { [[ -s "$W/loop.kids" ]] && (( $(wc -l <"$W/loop.kids") >= $1 )); }
e2e_wait_for 30 kids_at_least 15 || fail "the clients did not get going"
mv "$W/new.key" "$W/signing.key"
for i in 1 2 3; do kill -HUP "$(cat "$W/cluster/$i.pid")"; done
wait "$loop" || true
[[ ! -s "$W/loop.err" ]] || fail "writes failed during the rotation: $(head -5 "$W/loop.err")"
n_old=$(grep -c "^$old_kid$" "$W/loop.kids" || true) n_new=$(grep -c "^$new_kid$" "$W/loop.kids" || true)
(( n_old + n_new == 60 && n_old >= 15 && n_new >= 1 )) || fail "kids seen: $n_old old, $n_new new of 60"
pass "SIGHUP rotated the signing key while 60 writes went through ($n_old signed by the old key, $n_new by the new)"

# 5. the old key distrusted: its proofs are refused, the new key's accepted.
[[ "$(sql -c "SELECT fence_distrust_key('$old_kid')")" == t ]] || fail "fence_distrust_key did not remove $old_kid"
state=$(write_row reports 9 "$t9" "$p9")
[[ "$state" == 55F02 ]] || fail "a proof of the distrusted key: expected 55F02, got $state"
g=$(fctl acquire report:9 --lease 10s -o json) || fail "acquire report:9: $g"
[[ "$(write_row reports 9 "$(field token "$g")" "$(field proof "$g")")" == 00000 ]] || fail "the new key's proof was refused"
pass "after fence_distrust_key the old key's proof is refused (55F02); the new key's is accepted"
