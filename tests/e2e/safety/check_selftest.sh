#!/usr/bin/env bash
# The checker checks: check.sql, fed with audit rows and worker logs that break
# each property on purpose, must report every violation (and none on clean data).
# Needs PostgreSQL with pg_fence installed (a throwaway server is started).
# usage: check_selftest.sh PATH/TO/fence-worker
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib/common.sh"
source "$HERE/lib/pg.sh"
worker=${1:?usage: check_selftest.sh PATH/TO/fence-worker}
WORK=$(mktemp -d /tmp/pgfence-checktest.XXXXXX)
trap 'trap "" INT TERM; pg_throwaway_stop "$WORK"; rm -rf "$WORK"' EXIT
pg_throwaway_start "$WORK" || exit 1
"$worker" --setup >/dev/null || exit 1
passed=0 failed=0

# run_checks: loads $WORK/events.csv and prints check.sql's "check|name|n|..." lines.
run_checks() {
  psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<SQL
SET client_min_messages TO warning;
DROP TABLE IF EXISTS e2e_events;
CREATE TABLE e2e_events (worker text, event text, key text, token bigint, send_ns bigint,
                         ack_ns bigint, path text, outcome text, value bigint);
\copy e2e_events FROM '$WORK/events.csv' WITH (FORMAT csv)
DROP TABLE IF EXISTS e2e_faults;
CREATE TABLE e2e_faults (kind text, target text, start_ns bigint, end_ns bigint);
\copy e2e_faults FROM '$WORK/faults.csv' WITH (FORMAT csv)
SQL
  # Times here are small numbers of "ns": a lease of 1000, rho 5% (usable 950).
  psql -X -v lease_ns=1000 -v rho_ppm=50000 -f "$HERE/check.sql" | grep -E '^(check|figure)\|'
}
touch "$WORK/faults.csv"

# expect_figure NAME FIGURE WANT: a figure line of check.sql has the value WANT.
expect_figure() {
  local got
  got=$(run_checks | awk -F'|' -v c="$2" '$1 == "figure" && $2 == c { print $3 }')
  if [[ "$got" == "$3" ]]; then passed=$((passed + 1)); else
    failed=$((failed + 1)); echo "FAIL $1: figure $2 is '$got', want $3"; fi
}

# expect NAME CHECK WANT: the check's violation count is WANT.
expect() {
  local got
  got=$(run_checks | awk -F'|' -v c="$2" '$1 == "check" && $2 == c { print $3 }')
  if [[ "$got" == "$3" ]]; then passed=$((passed + 1)); else
    failed=$((failed + 1)); echo "FAIL $1: $2 reported '$got' violations, want $3"; fi
}

# A clean history: key a, tokens 10 and 12 through the row fence, both acquired.
psql -X -q -v ON_ERROR_STOP=1 <<'SQL'
INSERT INTO worker_counters (key, n, fence) VALUES ('a', 2, 12);
INSERT INTO worker_ledger_a VALUES ('a', 0);
INSERT INTO worker_ledger_b VALUES ('a', 0);
INSERT INTO worker_audit (id, key, fence, token, worker, value, path) VALUES
  (1, 'a', 'row', 10, 'w0', 1, 'guard'), (2, 'a', 'row', 12, 'w1', 2, 'guard');
SQL
cat >"$WORK/events.csv" <<'CSV'
w0,acquire,a,10,100,200,guard,ok,0
w0,write,a,10,0,0,guard,accepted,1
w0,release,a,10,290,295,,ok,0
w1,acquire,a,12,300,400,guard,ok,0
w1,write,a,12,0,0,guard,accepted,2
CSV
for c in tokens_increase_in_commit_order increments_are_consecutive counter_equals_accepted_increments \
         ledgers_equal_admitted_increments acquired_tokens_grow accepted_tokens_were_granted \
         accepted_writes_are_audited one_holder_at_a_time_within_rho no_delayed_duplicate_accepted \
         no_forged_proof_accepted forged_proofs_refused_with_55F02 fences_hold_granted_tokens \
         granted_proofs_accepted; do
  expect "clean history" "$c" 0
done

# Token 11 committed after 12: ordering broken (and a third increment).
psql -X -q -c "INSERT INTO worker_audit (id, key, fence, token, worker, value, path)
               VALUES (3, 'a', 'row', 11, 'w2', 3, 'guard')"
echo "w2,acquire,a,11,150,250,guard,ok,0" >>"$WORK/events.csv"
expect "token 11 after 12" tokens_increase_in_commit_order 1
expect "counter 2 but 3 increments" counter_equals_accepted_increments 1
# w2 sent at 150 while token 10 was acknowledged at 200: fine; now a token 9
# acknowledged to w3 after token 10 had been acknowledged (ack 200 < send 500).
echo "w3,acquire,b,9,500,600,guard,ok,0" >>"$WORK/events.csv"
expect "token 9 after 10 was acknowledged" acquired_tokens_grow 1
# A lost update: the value 5 where the 4th increment should leave 4.
psql -X -q -c "INSERT INTO worker_audit (id, key, fence, token, worker, value, path)
               VALUES (4, 'a', 'row', 13, 'w9', 5, 'guard')"
expect "value 5 at the 4th increment" increments_are_consecutive 1
expect "w9 never acquired 13" accepted_tokens_were_granted 1
echo "w4,write,a,14,0,0,guard,accepted,6" >>"$WORK/events.csv"
expect "accepted write not in the audit" accepted_writes_are_audited 1
psql -X -q -c "UPDATE worker_ledger_a SET n = 1 WHERE key = 'a'"
expect "ledgers disagree" ledgers_equal_admitted_increments 1
# The same token admitted twice through one resource fence: not strictly increasing.
psql -X -q -c "INSERT INTO worker_audit (id, key, fence, token, worker, value, path)
               VALUES (5, 'a', 'resource', 20, 'w5', 1, 'admit'), (6, 'a', 'resource', 20, 'w6', 2, 'admit')"
expect "token 20 twice on the resource fence (and 11 after 12)" tokens_increase_in_commit_order 2

# The sequenced fence orders (token, seq) pairs: (30, 1), (30, 2), (31, 1) is
# in order, a refused replay is no violation.
psql -X -q -v ON_ERROR_STOP=1 <<'SQL'
INSERT INTO worker_sequenced (key, n, fence, fence_seq) VALUES ('s', 3, 31, 1);
INSERT INTO worker_audit (id, key, fence, token, seq, worker, value, path) VALUES
  (7, 's', 'sequenced', 30, 1, 'w7', 1, 'sequenced'), (8, 's', 'sequenced', 30, 2, 'w7', 2, 'sequenced'),
  (9, 's', 'sequenced', 31, 1, 'w8', 3, 'sequenced');
SQL
echo "w7,replay,s,30,0,0,sequenced,stale,1" >>"$WORK/events.csv"
expect "(30,1) (30,2) (31,1) in order" tokens_increase_in_commit_order 2
expect "a refused replay" no_delayed_duplicate_accepted 0
expect_figure "... is counted" replays_refused 1
expect "the sequenced counter equals its increments" counter_equals_accepted_increments 1
# w8's replay of (31, 1) accepted after (31, 1): the pair did not increase.
psql -X -q -c "INSERT INTO worker_audit (id, key, fence, token, seq, worker, value, path)
               VALUES (10, 's', 'sequenced', 31, 1, 'w8', 4, 'sequenced')"
echo "w8,replay,s,31,0,0,sequenced,accepted,1" >>"$WORK/events.csv"
expect "(31,1) twice on the sequenced fence" tokens_increase_in_commit_order 3
expect "an accepted replay" no_delayed_duplicate_accepted 1
expect "sequenced counter 3 but 4 increments" counter_equals_accepted_increments 2
# A newer seq of an older token is no newer pair: (30, 9) after (31, 1).
psql -X -q -c "INSERT INTO worker_audit (id, key, fence, token, seq, worker, value, path)
               VALUES (11, 's', 'sequenced', 30, 9, 'w7', 5, 'sequenced')"
expect "(30,9) after (31,1)" tokens_increase_in_commit_order 4

# One holder at a time (key c, tokens from 100, times from 10000: the checks
# above see nothing new). A worker holds from its acquire's answer to the
# earlier of its release and last successful send + 950.
# The histories above hold overlaps of their own (w2's token 11 is one): BASE
# of them, counted before key c's are added.
base=$(run_checks | awk -F'|' '$2 == "one_holder_at_a_time_within_rho" { print $3 }')
# (w2's token 11 answered at 250, inside w0's token 10 held from 200 to its
# release at 290; w1's token 12 answered at 400, inside w2's held to 150 + 950)
expect "the histories above hold two overlaps" one_holder_at_a_time_within_rho 2
rho() { expect "$1" one_holder_at_a_time_within_rho $((base + $2)); }
cat >>"$WORK/events.csv" <<'CSV'
w0,acquire,c,100,10000,10010,guard,ok,0
w0,release,c,100,10500,10510,,ok,0
w1,acquire,c,101,10400,10600,guard,ok,0
w1,release,c,101,10700,10710,,ok,0
CSV
rho "the next holder answered after the release" 0
echo "w2,acquire,c,102,11000,11010,guard,ok,0" >>"$WORK/events.csv"
echo "w3,acquire,c,103,11500,11600,guard,ok,0" >>"$WORK/events.csv"
rho "w3 granted while w2 held (no release, 950 not over)" 1
cat >>"$WORK/events.csv" <<'CSV'
w4,acquire,c,104,13000,13010,guard,ok,0
w4,keepalive,c,104,13800,13810,,ok,1000
w4,release,c,104,14800,14810,,ok,0
w5,acquire,c,105,14000,14500,guard,ok,0
CSV
rho "w5 granted inside w4's keepalive-extended lease" 2
cat >>"$WORK/events.csv" <<'CSV'
w6,acquire,c,106,16000,16010,guard,ok,0
w6,keepalive,c,106,16800,16810,,not_held,0
w7,acquire,c,107,17000,17100,guard,ok,0
w8,acquire,c,108,18000,19500,guard,ok,0
w9,acquire,c,109,19000,19100,guard,ok,0
w9,release,c,109,19200,19210,,ok,0
CSV
rho "a failed keepalive extends nothing; an answer after the deadline holds nothing" 2
echo "w10,acquire,c,110,20100,20110,guard,ok,0" >>"$WORK/events.csv"
echo "w11,acquire,c,111,20300,20400,guard,ok,0" >>"$WORK/events.csv"
echo "clock_far,member-1,20000,20500" >"$WORK/faults.csv"
rho "an overlap during the beyond-rho clock fault is no violation" 2
expect_figure "... but is counted apart" lease_overlaps_beyond_rho 1
expect_figure "the two overlaps within rho" lease_overlaps_within_rho $((base + 2))
echo "clock_rate,member-1,20000,20500" >"$WORK/faults.csv"
rho "a clock fault within rho excuses nothing" 3

# Token proofs (key p, tokens from 200). The forger's refusals: 55F02 on
# any path, stale on fenced_update only, an error; none of them a violation.
# The histories above leave fences with tokens nobody acquired (key s): FBASE.
fbase=$(run_checks | awk -F'|' '$2 == "fences_hold_granted_tokens" { print $3 }')
expect "the sequenced fence of s holds token 31, never acquired" fences_hold_granted_tokens 1
psql -X -q -c "INSERT INTO worker_counters (key, n, fence) VALUES ('p', 0, 200)"
cat >>"$WORK/events.csv" <<'CSV'
f0,acquire,p,200,30000,30010,guard,ok,0
f0,forge,p,200,30020,30030,guard:corrupt,bad_proof,0
f0,forge,q,200,30040,30050,fenced_update:other_key,stale,0
f0,forge,p,200,30060,30070,admit:untrusted,error,0
w0,write,p,200,30080,30090,guard,accepted,1
CSV
for c in no_forged_proof_accepted forged_proofs_refused_with_55F02 granted_proofs_accepted; do
  expect "refused forgeries" "$c" 0
done
expect "refused forgeries" fences_hold_granted_tokens "$fbase"
expect_figure "... are counted" forged_sent 3
expect_figure "... by kind" forged_sent_by_kind "corrupt=1 other_key=1 untrusted=1"
expect_figure "... the 55F02 ones" forged_refused 1
# A forgery answered stale on a trigger path was let past the proof check.
echo "f0,forge,p,200,30100,30110,sequenced:missing,stale,0" >>"$WORK/events.csv"
expect "a forgery stale on the sequenced path" forged_proofs_refused_with_55F02 1
# A forgery accepted: seen by the forger only, then also in the audit table
# (still one violation), then a second one only in the audit table.
echo "f0,forge,p,1099511628000,30120,30130,guard:other_token,accepted,1" >>"$WORK/events.csv"
expect "an accepted forgery" no_forged_proof_accepted 1
expect "... is no 55F02 refusal" forged_proofs_refused_with_55F02 2
psql -X -q -c "INSERT INTO worker_audit (id, key, fence, token, worker, value, path)
               VALUES (100, 'p', 'row', 1099511628000, 'f0', 1, 'forge:other_token'),
                      (101, 'p', 'row', 1099511628001, 'f0', 2, 'forge:corrupt')"
expect "the same forgery in the audit, and another" no_forged_proof_accepted 2
# A fence holding a token never granted for its key: a forged other_token,
# and a token granted for another key only (other_key).
psql -X -q -c "UPDATE worker_counters SET fence = 1099511628000 WHERE key = 'p'"
expect "fence 2^40 + ... on p" fences_hold_granted_tokens $((fbase + 1))
psql -X -q -v ON_ERROR_STOP=1 <<'SQL'
INSERT INTO worker_ledger_a VALUES ('r', 0);
INSERT INTO fence_resources (resource, fence) VALUES ('r', 200);
SQL
expect "token 200 (granted for p) on resource r" fences_hold_granted_tokens $((fbase + 2))
# A genuine proof refused.
echo "w0,write,p,200,30140,30150,guard,bad_proof,0" >>"$WORK/events.csv"
expect "a granted proof refused" granted_proofs_accepted 1
echo "check-selftest: $passed passed, $failed failed"
((failed == 0))
