#!/usr/bin/env bash
# fence-worker with token proofs, end to end: a 3-member cluster that signs
# its grants (--token-signing-key-file) and a real PostgreSQL with pg_fence
# that trusts the cluster's key. Checks:
#   - fence-worker --setup --proof makes the worker tables verify proofs and
#     the keys' resources require them;
#   - fence-worker --proof writes through all four paths (guard, fenced_update,
#     admit, sequenced) and every write is accepted;
#   - without --proof every path is refused with 55F02 (exit 11);
#   - fence-worker --forge sends every forgery (corrupt, other_key,
#     other_token, untrusted, missing) on every path, and PostgreSQL refuses
#     each with 55F02; the fences hold only granted tokens;
#   - once the tables and resources no longer verify, the same adversary's
#     forgeries are accepted and it exits 1: the check can fail;
#   - --proof against a cluster that does not sign ends with exit 2 naming the flag.
# Ports: the clusters on FENCE_BASE_PORT 14800 and 14850 (peers BASE+i, HTTP BASE+100+i).
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
WORKER=${FENCE_WORKER_BIN:?set FENCE_WORKER_BIN}
export FENCE_COORDINATOR_BIN=${FENCE_COORDINATOR_BIN:?set FENCE_COORDINATOR_BIN}

W=$(mktemp -d /tmp/pgfence-worker-proof.XXXXXX)
fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "PASS: $*"; }
cleanup() {
  local rc=$?
  bash "$E2E_ROOT/scripts/cluster.sh" stop "$W/cluster" >/dev/null 2>&1 || true
  bash "$E2E_ROOT/scripts/cluster.sh" stop "$W/unsigned" >/dev/null 2>&1 || true
  pg_throwaway_stop "$W"
  if ((rc == 0)); then rm -rf "$W"; else echo "kept: $W" >&2; fi
}
trap cleanup EXIT
sql() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
worker() { "$WORKER" --lease 5s --wait 5s --quiet "$@"; }
KEYS=wp:a,wp:b
PATHS=(guard fenced_update admit sequenced)

openssl genpkey -algorithm ed25519 -out "$W/signing.key" 2>/dev/null
openssl genpkey -algorithm ed25519 -out "$W/forger.key" 2>/dev/null
chmod 600 "$W/signing.key" "$W/forger.key"
openssl pkey -in "$W/signing.key" -pubout -out "$W/signing.pub"
pg_throwaway_start "$W" || fail "PostgreSQL did not start"
mkdir -p "$W/cluster"
FENCE_BASE_PORT=14800 FENCE_COORDINATOR_FLAGS="--heartbeat-ms 20 --election-ms 150 --min-lease 500 --token-signing-key-file $W/signing.key" \
  e2e_cluster_start "$W/cluster" 3 || fail "the cluster did not start"
e2e_wait_for 20 "$FENCECTL" acquire wp:warmup --lease 1s --wait 0s >/dev/null || fail "no leader within 20s"
cluster_id=$("$FENCECTL" member list -o json | sed -n 's/.*"cluster_id":"\([0-9]*\)".*/\1/p')
[[ -n "$cluster_id" ]] || fail "no cluster_id from fencectl member list"
sql -v pem="$(cat "$W/signing.pub")" -v cid="$cluster_id" \
  <<<"CREATE EXTENSION pg_fence; SELECT fence_trust_key(:'pem', :'cid'::numeric);" >/dev/null ||
  fail "fence_trust_key failed"

# 1. --setup --proof: the tables verify, the resources require proofs.
worker --setup --proof --key "$KEYS" >"$W/setup.out" 2>&1 || fail "fence-worker --setup --proof: $(cat "$W/setup.out")"
[[ "$(sql -c "SELECT fence_lock_key('worker_counters', c) FROM worker_counters c WHERE key = 'wp:a'")" == wp:a ]] ||
  fail "worker_counters does not verify proofs under the row's key"
[[ "$(sql -c "SELECT fence_lock_key('worker_sequenced', s) FROM worker_sequenced s WHERE key = 'wp:b'")" == wp:b ]] ||
  fail "worker_sequenced does not verify proofs under the row's key"
[[ "$(sql -c "SELECT string_agg(resource, ',' ORDER BY resource) FROM fence_resources WHERE require_proof")" == "$KEYS" ]] ||
  fail "the resources $KEYS do not require proofs"
worker --setup --proof --key "$KEYS" >"$W/setup2.out" 2>&1 || fail "a second --setup --proof failed: $(cat "$W/setup2.out")"
pass "--setup --proof: worker_counters and worker_sequenced verify proofs (lock key = key), resources $KEYS require them"

# 2. honest writers with --proof, every path.
for p in "${PATHS[@]}"; do
  worker --proof --key wp:a --mode "$p" --iterations 3 --worker-id "honest-$p" >"$W/honest-$p.out" 2>&1 ||
    fail "fence-worker --proof --mode $p exited $?: $(cat "$W/honest-$p.out")"
  grep -q " 0 stale, .* 0 db_errors, .* 0 proofs refused" "$W/honest-$p.out" || fail "--mode $p: $(cat "$W/honest-$p.out")"
done
n=$(sql -c "SELECT count(*) FROM worker_audit WHERE worker LIKE 'honest-%'")
# 3 iterations per path; the sequenced path writes twice per lease
((n == 15)) || fail "expected 15 accepted writes from the honest workers, found $n"
pass "fence-worker --proof: every path's writes accepted ($n writes)"

# 3. without --proof: refused with 55F02 on every path.
for p in "${PATHS[@]}"; do
  rc=0
  worker --key wp:a --mode "$p" --worker-id "noproof-$p" >"$W/noproof-$p.out" 2>&1 || rc=$?
  ((rc == 11)) && grep -q " 1 proofs refused" "$W/noproof-$p.out" ||
    fail "fence-worker without --proof, --mode $p: exit $rc (want 11): $(cat "$W/noproof-$p.out")"
done
pass "without --proof every path is refused with 55F02 (exit 11)"

# 4. the adversary: every forgery on every path refused with 55F02.
for p in "${PATHS[@]}"; do
  worker --forge "$W/forger.key" --key "$KEYS" --mode "$p" --iterations 2 --worker-id "forger-$p" \
    --log "$W/forge.csv" >"$W/forge-$p.out" 2>&1 || fail "fence-worker --forge --mode $p exited $?: $(cat "$W/forge-$p.out")"
  grep -q "forged proofs: 10 sent, 10 refused (55F02), 0 refused as stale, 0 accepted, 0 errors" "$W/forge-$p.out" ||
    fail "--forge --mode $p: $(cat "$W/forge-$p.out")"
done
for kind in corrupt other_key other_token untrusted missing; do
  n=$(grep -c ",forge,.*:$kind,bad_proof," "$W/forge.csv" || true)
  ((n == 8)) || fail "$n forge events of kind $kind refused with 55F02 in the log, want 8"
done
((n = $(sql -c "SELECT count(*) FROM worker_audit WHERE path LIKE 'forge:%'"), n == 0)) || fail "$n forged writes in worker_audit"
big=$(sql -c "SELECT count(*) FROM (SELECT fence FROM worker_counters UNION ALL SELECT fence FROM worker_sequenced
                                    UNION ALL SELECT fence FROM fence_resources) f WHERE fence >= 1099511627776")
((big == 0)) || fail "$big fences at or above 2^40"
pass "fence-worker --forge: 40 forged and misdirected proofs (5 kinds x 4 paths x 2), every one refused with 55F02"

# 5. tables and resources that do not verify: the adversary gets through and says so.
sql <<"SQL" >/dev/null
SELECT fence_protect('worker_counters');
SELECT fence_protect('worker_sequenced', mode => 'sequenced');
SELECT fence_require_proof('wp:a', false), fence_require_proof('wp:b', false);
SQL
rc=0
worker --forge "$W/forger.key" --key "$KEYS" --mode guard --worker-id forger-unverified >"$W/forge-unverified.out" 2>&1 || rc=$?
((rc == 1)) && grep -q "BUG: forged guard:corrupt on wp:.* was accepted" "$W/forge-unverified.out" &&
  grep -q "forged proofs: 1 sent, 0 refused (55F02), 0 refused as stale, 1 accepted" "$W/forge-unverified.out" ||
  fail "the adversary against tables that do not verify: exit $rc (want 1): $(cat "$W/forge-unverified.out")"
pass "on tables that do not verify, the adversary's forgery is accepted and it exits 1"

# 6. --proof against a cluster that does not sign.
mkdir -p "$W/unsigned"
FENCE_BASE_PORT=14850 FENCE_COORDINATOR_FLAGS="--heartbeat-ms 20 --election-ms 150 --min-lease 500" \
  e2e_cluster_start "$W/unsigned" 1 || fail "the unsigned cluster did not start"
rc=0
"$WORKER" --proof --key wp:a --lease 5s --wait 5s --endpoints "$FENCE_ENDPOINTS" >"$W/unsigned.out" 2>&1 || rc=$?
((rc == 2)) && grep -q "fence-worker: --proof: the grant of key 'wp:a' (token [0-9]*) carries no token proof" "$W/unsigned.out" ||
  fail "--proof without a signing cluster: exit $rc (want 2): $(cat "$W/unsigned.out")"
pass "--proof against a cluster that does not sign: exit 2, naming --proof"
