#!/usr/bin/env bash
# fencectl run/acquire --advance against a real 3-member cluster and a real
# PostgreSQL with pg_fence:
#   - the CMD of `run --advance R` finds fence_current(R) = its own token at
#     its very start, before it has written anything, and an older token's
#     fence_admit (55F01) and fence_advance (false) are refused right then;
#   - R already holding a newer fence: run releases the lock (the key is free
#     at once), never starts CMD, exits 10 with a message naming R, the token
#     and the fence; acquire likewise, printing nothing;
#   - a DSN nobody answers at, an invalid DSN (its password not printed), and
#     a database without pg_fence: exit 11, the message names the cause, the
#     lock is released, CMD never starts;
#   - functions named like pg_fence's in a schema before it in search_path
#     are never called (the publish calls pg_fence's schema-qualified);
#   - an older holder paused inside its fence_admit transaction: the publish
#     waits for it no longer than the lease allows (exit 11, a lock timeout,
#     released);
#   - the cluster signs its grants: a resource that requires a proof takes
#     the key's own proof (run, and each key of an acquired set), and refuses
#     a publish under another key's lock (55F02, exit 11, released);
#   - acquire --advance of a set publishes its one token at several resources;
#   - --dsn defaults to the PG* environment; --help documents both flags.
# Needs pg_fence installed (make -C pg_extension install; make test does).
source "$(dirname "$0")/../cli/lib.sh"
source "$(dirname "$0")/advance_lib.sh"
export FENCECTL_BIN

pg_throwaway_start "$WORK" || fail "PostgreSQL did not start"
sql -c "CREATE EXTENSION pg_fence" || fail "CREATE EXTENSION"
sql -c "CREATE DATABASE nofence" || fail "CREATE DATABASE nofence"
openssl genpkey -algorithm ed25519 -out "$WORK/signing.key" 2>/dev/null || fail "openssl genpkey"
chmod 600 "$WORK/signing.key"
openssl pkey -in "$WORK/signing.key" -pubout -out "$WORK/signing.pub" || fail "openssl pkey"
export FENCE_COORDINATOR_FLAGS="$FENCE_COORDINATOR_FLAGS --token-signing-key-file $WORK/signing.key"
start_cluster 3
wait_until 20 "a leader" fencectl acquire warmup --lease 1s --wait 0s
cluster_id=$(fencectl member list -o json | sed -n 's/.*"cluster_id":"\([0-9]*\)".*/\1/p')
[[ -n "$cluster_id" ]] || fail "no cluster_id from fencectl member list"
sql -v pem="$(cat "$WORK/signing.pub")" -v cid="$cluster_id" <<<"SELECT fence_trust_key(:'pem', :'cid'::numeric);
SELECT fence_require_proof(r) FROM unnest(ARRAY['signed:1', 'set:a', 'set:b']) AS r;" >/dev/null ||
  fail "trusting the cluster's key"

# 1. run --advance: CMD sees its own token published, older tokens refused.
old=$(fencectl acquire job:1 --lease 2s --wait 0s) || fail "acquire job:1 (the older holder)"
fencectl release job:1 "$old" || fail "release job:1"
sql -c "SELECT fence_advance('job:1', $old)" >/dev/null || fail "the older holder's own publish"
cat >"$WORK/cmd.sh" <<SH
set -u
psql -X -At -c "SELECT fence_current('job:1')" >"$WORK/seen_fence" 2>&1
echo "\$FENCE_TOKEN" >"$WORK/seen_token"
psql -X -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -c BEGIN -c "SELECT fence_admit('job:1', $old)" -c COMMIT \
  >"$WORK/old_admit" 2>&1
psql -X -At -c "SELECT fence_advance('job:1', $old)" >"$WORK/old_advance" 2>&1
SH
fencectl run job:1 --lease 5s --advance job:1 -- bash "$WORK/cmd.sh" || fail "run --advance exited $?"
token=$(cat "$WORK/seen_token")
((token > old)) || fail "run's token $token is not above the older holder's $old"
[[ "$(cat "$WORK/seen_fence")" == "$token" ]] ||
  fail "CMD's first look at fence_current('job:1'): '$(cat "$WORK/seen_fence")', want its token $token"
grep -q "ERROR: *55F01" "$WORK/old_admit" || fail "the older token's fence_admit was not refused: $(cat "$WORK/old_admit")"
[[ "$(cat "$WORK/old_advance")" == f ]] || fail "the older token's fence_advance: '$(cat "$WORK/old_advance")', want f"
[[ "$(sql -c "SELECT fence_current('job:1')")" == "$token" ]] || fail "job:1's fence is not $token after run"
key_free job:1 || fail "job:1 still held after run"
echo "PASS: run --advance: CMD starts with fence_current = its token $token; token $old refused (55F01, false)"

# 2. A newer fence already there: released, CMD never started, exit 10.
sql -c "SELECT fence_advance('job:2', 9000000000)" >/dev/null || fail "seeding job:2"
expect_code 10 fencectl run job:2 --advance job:2 -- touch "$WORK/started2"
[[ ! -e "$WORK/started2" ]] || fail "CMD started although the publish was stale"
key_free job:2 || fail "job:2 is still held after the stale publish"
grep -Eq "fencectl run: token [0-9]+ not published at resource \"job:2\": its fence is 9000000000 already" \
  "$WORK/last.err" || fail "stale publish message: $(cat "$WORK/last.err")"
grep -q "releasing job:2, CMD not started" "$WORK/last.err" || fail "stale publish message: $(cat "$WORK/last.err")"
expect_code 10 fencectl acquire job:2 --advance job:2
[[ ! -s "$WORK/last.out" ]] || fail "acquire printed '$(cat "$WORK/last.out")' although the publish was stale"
grep -q 'not published at resource "job:2": its fence is 9000000000' "$WORK/last.err" ||
  fail "acquire's stale message: $(cat "$WORK/last.err")"
key_free job:2 || fail "job:2 is still held after acquire's stale publish"
echo "PASS: a newer fence at the resource: exit 10, lock released, CMD never started"

# 3. Database errors: nobody at the DSN; a database without pg_fence.
expect_code 11 fencectl run job:3 --advance job:3 --dsn "host=127.0.0.1 port=14430 connect_timeout=2" \
  -- touch "$WORK/started3"
[[ ! -e "$WORK/started3" ]] || fail "CMD started although the database was unreachable"
key_free job:3 || fail "job:3 is still held after the unreachable DSN"
grep -q 'not published at resource "job:3": cannot connect to PostgreSQL: .*14430' "$WORK/last.err" ||
  fail "unreachable DSN message: $(cat "$WORK/last.err")"
expect_code 11 fencectl run job:3 --advance job:3 --dsn "dbname=nofence" -- touch "$WORK/started3"
[[ ! -e "$WORK/started3" ]] || fail "CMD started although fence_advance does not exist there"
key_free job:3 || fail "job:3 is still held after the SQL error"
grep -q 'not published at resource "job:3": pg_fence is not installed in this database' "$WORK/last.err" ||
  fail "missing pg_fence message: $(cat "$WORK/last.err")"
expect_code 11 fencectl run job:3 --advance job:3 --dsn "postgresql://u:s3cr3t-pw@[::1]x/db" -- touch "$WORK/started3"
[[ ! -e "$WORK/started3" ]] || fail "CMD started although the DSN was invalid"
grep -q 'not published at resource "job:3": cannot connect to PostgreSQL: invalid connection string (not shown' \
  "$WORK/last.err" || fail "invalid DSN message: $(cat "$WORK/last.err")"
! grep -q s3cr3t "$WORK/last.err" || fail "the invalid DSN's password was printed: $(cat "$WORK/last.err")"
key_free job:3 || fail "job:3 is still held after the invalid DSN"
echo "PASS: unreachable DSN, invalid DSN (not echoed) and missing pg_fence: exit 11 naming the cause, lock released, CMD never started"

# 3a. A schema before pg_fence's in the DSN's search_path with functions of
# the same signatures: the publish calls pg_fence's (qualified), never those.
sql <<'SQL' >/dev/null || fail "creating the decoy schema"
CREATE SCHEMA decoy;
CREATE FUNCTION decoy.fence_advance(text, bigint, text) RETURNS boolean LANGUAGE plpgsql
  AS $$BEGIN RAISE EXCEPTION 'decoy fence_advance called'; END$$;
CREATE FUNCTION decoy.fence_current(text) RETURNS bigint LANGUAGE plpgsql
  AS $$BEGIN RAISE EXCEPTION 'decoy fence_current called'; END$$;
SQL
[[ "$(sql -c "SET search_path = decoy, public" -c "SELECT fence_advance('x', 1, NULL)" 2>&1)" == *"decoy fence_advance called"* ]] ||
  fail "the decoy is not what an unqualified fence_advance calls under search_path decoy, public"
fencectl run job:6 --advance job:6 --dsn "options=-csearch_path=decoy,public" -- bash -c 'echo "$FENCE_TOKEN" >"$0"' \
  "$WORK/decoy_token" || fail "run --advance with the decoy first in search_path exited $?"
[[ "$(sql -c "SELECT fence_current('job:6')")" == "$(cat "$WORK/decoy_token")" ]] ||
  fail "job:6 does not hold run's token $(cat "$WORK/decoy_token") (decoy first in search_path)"
sql -c "SELECT fence_advance('job:7', 9000000000)" >/dev/null || fail "seeding job:7"
expect_code 10 fencectl run job:7 --advance job:7 --dsn "options=-csearch_path=decoy,public" -- touch "$WORK/started3a"
[[ ! -e "$WORK/started3a" ]] || fail "CMD started although the publish was stale"
grep -q 'not published at resource "job:7": its fence is 9000000000 already' "$WORK/last.err" ||
  fail "stale publish with the decoy first in search_path: $(cat "$WORK/last.err")"
key_free job:7 || fail "job:7 is still held after the stale publish"
echo "PASS: fence_advance and fence_current of a schema before pg_fence's in search_path are never called"

# 3b. An older holder paused mid-transaction holds the resource's row: the
# publish waits for it within run's SIGTERM time only (2s lease: about 1.2s).
psql -X -q -c "BEGIN" -c "SELECT fence_admit('paused:1', 1)" -c "SELECT pg_sleep(60) /* paused holder */" \
  >/dev/null 2>&1 &
paused=$!
admitted() { [[ "$(sql -c "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%/* paused holder */%' AND state = 'active' AND pid <> pg_backend_pid()")" == 1 ]]; }
wait_until 10 "the paused holder's transaction" admitted
start=$(date +%s%N)
expect_code 11 fencectl run paused:1 --lease 2s --grace 500ms --advance paused:1 -- touch "$WORK/started3b"
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
sql -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE '%/* paused holder */%' AND pid <> pg_backend_pid()" >/dev/null
wait "$paused" 2>/dev/null || true
[[ ! -e "$WORK/started3b" ]] || fail "CMD started although the publish could not take the resource's row"
grep -Eq 'not published at resource "paused:1": fence_advance failed: .*(lock|statement) timeout.*\(SQLSTATE (55P03|57014)\)' "$WORK/last.err" ||
  fail "publish behind a paused holder: $(cat "$WORK/last.err")"
((elapsed_ms < 3000)) || fail "the publish behind a paused holder took ${elapsed_ms}ms, more than the 2s lease"
key_free paused:1 || fail "paused:1 is still held after the timed-out publish"
echo "PASS: a paused older holder's open fence_admit: the publish gave up in ${elapsed_ms}ms (a timeout), exit 11, released"

# 4. Proofs: the key's own is sent; another key's lock gets none, and is refused.
fencectl run signed:1 --advance signed:1 -- bash -c 'echo "$FENCE_TOKEN" >"$0"' "$WORK/signed_token" ||
  fail "run --advance of a resource that requires the key's proof exited $?"
[[ "$(sql -c "SELECT fence_current('signed:1')")" == "$(cat "$WORK/signed_token")" ]] ||
  fail "signed:1 does not hold run's token $(cat "$WORK/signed_token")"
expect_code 11 fencectl run signed:2 --advance signed:1 -- touch "$WORK/started4"
[[ ! -e "$WORK/started4" ]] || fail "CMD started although signed:1 refused a token of another lock"
grep -q 'not published at resource "signed:1": fence_advance failed: no fencing token proof .*(SQLSTATE 55F02)' \
  "$WORK/last.err" || fail "refused proof message: $(cat "$WORK/last.err")"
key_free signed:2 || fail "signed:2 is still held after the refused publish"
echo "PASS: a signing cluster: the key's proof is published with its token; another lock's token is refused (55F02, exit 11)"

# 5. acquire --advance of a set: one token at every resource, then printed.
t=$(fencectl acquire set:a set:b --advance set:a --advance set:b --advance other) || fail "acquire set --advance"
[[ "$(sql -c "SELECT string_agg(fence_current(r)::text, ',' ORDER BY r) FROM unnest(ARRAY['other','set:a','set:b']) r")" == \
   "$t,$t,$t" ]] || fail "the set's token $t is not the fence of every --advance resource"
[[ "$(sqlstate_of "BEGIN; SELECT fence_admit('other', $((t - 1))); COMMIT")" == 55F01 ]] ||
  fail "an older token was admitted at other after acquire --advance"
fencectl release set:a set:b "$t" || fail "release the set"
echo "PASS: acquire --advance of a set: token $t published at 3 resources (2 with their key's proof) before it was printed"

# 6. --help documents the flags.
for cmd in run acquire; do
  fencectl "$cmd" --help >"$WORK/help.txt" || fail "$cmd --help"
  grep -q -- "--advance R" "$WORK/help.txt" || fail "$cmd --help lacks --advance"
  grep -q -- "--dsn DSN .*default: the PG\*" <(tr -s ' \n' ' ' <"$WORK/help.txt") || fail "$cmd --help lacks --dsn's default"
done
fencectl --help >"$WORK/help.txt" || fail "--help"
grep -q -- "--advance R --dsn DSN" "$WORK/help.txt" || fail "--help lacks --advance"
echo "PASS: --help of run and acquire documents --advance and --dsn"
