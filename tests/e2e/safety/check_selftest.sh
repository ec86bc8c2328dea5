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
SQL
  psql -X -f "$HERE/check.sql" | grep '^check|'
}

# expect NAME CHECK WANT: the check's violation count is WANT.
expect() {
  local got
  got=$(run_checks | awk -F'|' -v c="$2" '$2 == c { print $3 }')
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
w1,acquire,a,12,300,400,guard,ok,0
w1,write,a,12,0,0,guard,accepted,2
CSV
for c in tokens_increase_in_commit_order increments_are_consecutive counter_equals_accepted_increments \
         ledgers_equal_admitted_increments acquired_tokens_grow accepted_tokens_were_granted \
         accepted_writes_are_audited; do
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
echo "check-selftest: $passed passed, $failed failed"
((failed == 0))
