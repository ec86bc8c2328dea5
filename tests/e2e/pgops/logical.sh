#!/usr/bin/env bash
# A fenced table (fence_protect) under logical replication: two throwaway
# servers, a publisher (wal_level = logical) and a subscriber, both with
# pg_fence and the table protected. Checks:
#   - accepted writes on the publisher arrive on the subscriber with their
#     fences (UPDATE with the token in the SET list, UPDATE with SET LOCAL
#     pg_fence.token, DELETE with pg_fence.token);
#   - the apply worker does not run the guard (session_replication_role =
#     replica): the replicated DELETE carries no pg_fence.token, which the
#     guard would refuse (55000), and the subscriber's fence_stats counts no
#     write of the table;
#   - a write refused on the publisher (55F01) never arrives;
#   - a direct stale write on the subscriber is refused (55F01);
#   - the subscription keeps flowing after all of it: a later write arrives
#     and the apply worker is running.
# No coordinator: the tokens are literals. Needs pg_fence installed.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

W=$(pgops_workdir logical)
mkdir -p "$W/pub" "$W/sub"
cleanup() {
  local rc=$?
  pg_throwaway_stop "$W/sub"
  pg_throwaway_stop "$W/pub"
  if ((rc == 0)); then rm -rf "$W"; else echo "kept: $W" >&2; fi
}
trap cleanup EXIT

pg_throwaway_start "$W/pub" wal_level=logical || fail "the publisher did not start"
pg_throwaway_start "$W/sub" || fail "the subscriber did not start"
pub() { on "$W/pub" sql "$@"; }
sub() { on "$W/sub" sql "$@"; }

schema="CREATE EXTENSION pg_fence;
CREATE TABLE reports (report_id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0);
SELECT fence_protect('reports');"
pub >/dev/null <<<"$schema"
sub >/dev/null <<<"$schema"
pub <<'SQL'
INSERT INTO reports VALUES (1, 'v0'), (2, 'v0'), (3, 'v0');
CREATE PUBLICATION fenced FOR TABLE reports;
SQL
sub -c 'SET client_min_messages = warning' -c "CREATE SUBSCRIPTION fenced CONNECTION 'host=127.0.0.1 port=$(cat "$W/pub/pg/port") dbname=postgres user=postgres' PUBLICATION fenced"

# row_is DIR ID BODY|FENCE: the subscriber's row ID is exactly that
row_is() { [[ $(sub -c "SELECT body || '|' || fence FROM reports WHERE report_id = $1") == "$2" ]]; }
# arrives ID BODY|FENCE WHAT: wait (bounded) for a row state on the subscriber
arrives() {
  e2e_wait_for 20 row_is "$1" "$2" ||
    fail "$3 did not arrive on the subscriber within 20 s (row $1: $(sub -c "SELECT body, fence FROM reports WHERE report_id = $1"))"
}

# The table's copy is done once its state is s (synchronized) or r (ready).
e2e_wait_for 20 prints 0 sub -c "SELECT count(*) FROM pg_subscription_rel WHERE srsubstate NOT IN ('s', 'r')" ||
  fail "the initial table sync did not finish within 20 s"
arrives 1 'v0|0' "the initial copy"
sub -c 'SELECT fence_stats_reset()' >/dev/null

# Accepted writes arrive with their fences
pub -c "UPDATE reports SET body = 'v10', fence = 10 WHERE report_id = 1"
pub -c BEGIN -c 'SET LOCAL pg_fence.token = 11' -c "UPDATE reports SET body = 'v11' WHERE report_id = 2" -c COMMIT
arrives 1 'v10|10' "the accepted write with token 10 (SET list)"
arrives 2 'v11|11' "the accepted write with SET LOCAL pg_fence.token = 11"
pass "accepted writes arrive with their fences (row 1: 10, row 2: 11)"

# A refused write never arrives: later writes do, it does not
[[ $(sqlstate pub -c "UPDATE reports SET body = 'stale 9', fence = 9 WHERE report_id = 1") == 55F01 ]] ||
  fail "the stale write with token 9 was not refused on the publisher"
pub -c "UPDATE reports SET body = 'v12', fence = 12 WHERE report_id = 3"
arrives 3 'v12|12' "the write with token 12 made after the refused one"
row_is 1 'v10|10' || fail "row 1 changed on the subscriber after a refused write: $(sub -c 'SELECT body, fence FROM reports WHERE report_id = 1')"
pass "a write refused on the publisher (55F01) never reaches the subscriber"

# The apply worker does not run the guard: a DELETE with pg_fence.token on
# the publisher is applied without any token on the subscriber
pub -c BEGIN -c 'SET LOCAL pg_fence.token = 13' -c 'DELETE FROM reports WHERE report_id = 2' -c COMMIT
e2e_wait_for 20 prints 0 sub -c 'SELECT count(*) FROM reports WHERE report_id = 2' ||
  fail "the fenced DELETE of row 2 did not arrive on the subscriber within 20 s"
[[ $(sub -c "SELECT coalesce(sum(accepted + rejected_stale), 0) FROM fence_stats WHERE relation = 'reports'::regclass") == 0 ]] ||
  fail "the subscriber's guard counted replicated writes: $(sub -c 'SELECT * FROM fence_stats')"
pass "the apply worker does not fire the guard (tokenless DELETE applied, no fence_stats counts)"

# A direct stale write on the subscriber is refused by its guard
[[ $(sqlstate sub -c "UPDATE reports SET body = 'direct 5', fence = 5 WHERE report_id = 1") == 55F01 ]] ||
  fail "a direct stale write on the subscriber was not refused with 55F01"
[[ $(sqlstate sub -c "DELETE FROM reports WHERE report_id = 1") == 55000 ]] ||
  fail "a direct tokenless DELETE on the subscriber was not refused with 55000"
row_is 1 'v10|10' || fail "row 1 changed on the subscriber after refused direct writes"
pass "direct writes on the subscriber are guarded (stale: 55F01, no token: 55000)"

# The subscription keeps flowing
pub -c "UPDATE reports SET body = 'v20', fence = 20 WHERE report_id = 1"
arrives 1 'v20|20' "the write with token 20 after the refusals"
[[ $(sub -c "SELECT count(*) FROM pg_stat_subscription WHERE subname = 'fenced' AND pid IS NOT NULL") == 1 ]] ||
  fail "the subscription's apply worker is not running"
# the apply worker and the table sync never failed
[[ $(sub -c "SELECT apply_error_count + sync_error_count FROM pg_stat_subscription_stats WHERE subname = 'fenced'") == 0 ]] ||
  fail "the subscription had apply or sync errors: $(sub -c "SELECT * FROM pg_stat_subscription_stats")"
pass "the subscription keeps flowing (token 20 arrived, apply worker running, no apply errors)"
