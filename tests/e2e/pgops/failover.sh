#!/usr/bin/env bash
# Physical failover of a database with fenced tables: a primary and a
# pg_basebackup standby (throwaway servers), failed over deterministically:
# stop the standby, make an accepted fenced write with token 10 on the
# primary, stop the primary (immediate), start the standby (it cannot reach
# the primary) and promote it.
#   1. asynchronous replication: the fence 10 is lost on the promoted
#      standby (row and resource), and a paused old holder's token 9 is
#      accepted there -- the hazard;
#   2. the remedy, re-fencing: fence_raise and fence_raise_resources with
#      the coordinator's last issued token (10) raise the fences (counts
#      checked); afterwards every token issued before the failover is
#      refused (55F01) and the next holder's token 11 is accepted;
#   3. the other remedy, synchronous replication (synchronous_standby_names,
#      synchronous_commit = on): with the standby stopped, the write with
#      token 10 waits for it (SyncRep) instead of returning; once the standby
#      is back it returns, and the same failover keeps the fence 10: token 9
#      is refused without re-fencing.
# No coordinator: the tokens are literals. Needs pg_fence installed.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

W=$(pgops_workdir failover)
cleanup() {
  local rc=$? d
  for d in "$W"/*/; do pg_throwaway_stop "${d%/}"; done
  if ((rc == 0)); then rm -rf "$W"; else echo "kept: $W" >&2; fi
}
trap cleanup EXIT

# new_primary DIR: a primary with a fenced table and resource at fence 5
new_primary() {
  local dir=$1
  mkdir -p "$dir"
  pg_throwaway_start "$dir" || fail "the primary in $dir did not start"
  on "$dir" sql >/dev/null <<'SQL'
CREATE EXTENSION pg_fence;
CREATE TABLE reports (report_id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0);
INSERT INTO reports VALUES (7, 'v0'), (8, 'v0');
SELECT fence_protect('reports');
UPDATE reports SET body = 'v5', fence = 5;
SELECT fence_advance('report:7', 5);
SQL
}

# new_standby DIR PRIMARY_DIR: pg_basebackup of the primary, started as a
# streaming standby; waits (bounded) until it streams
new_standby() {
  local dir=$1 primary=$2
  mkdir -p "$dir/pg"
  chmod 711 "$dir"
  pg_give_to_owner "$dir/pg"
  (cd / && pg_as_owner "$(pg_bindir)/pg_basebackup" -h 127.0.0.1 -p "$(cat "$primary/pg/port")" -U postgres \
    -D "$dir/pg/data" -R -X stream --checkpoint=fast --no-sync) >"$dir/pg/basebackup.log" 2>&1 ||
    fail "pg_basebackup failed: $(tail -n 5 "$dir/pg/basebackup.log")"
  pg_throwaway_launch "$dir" || fail "the standby in $dir did not start"
  e2e_wait_for 20 prints streaming on "$dir" sql -c 'SELECT status FROM pg_stat_wal_receiver' ||
    fail "the standby in $dir does not stream from the primary within 20 s"
}

# fail_over PRIMARY STANDBY: stop the primary (immediate), start the standby
# if it is stopped, promote it
fail_over() {
  pg_throwaway_stop "$1"
  if [[ ! -f $2/pg/data/postmaster.pid ]]; then
    pg_throwaway_launch "$2" || fail "the standby in $2 did not start again"
  fi
  (cd / && pg_as_owner "$(pg_bindir)/pg_ctl" -D "$2/pg/data" -w -t 30 promote) >/dev/null ||
    fail "the standby in $2 was not promoted"
  [[ $(on "$2" sql -c 'SELECT pg_is_in_recovery()') == f ]] || fail "the promoted server is still in recovery"
}

# write_10 PRIMARY: the accepted write with token 10, row and resource
write_10() {
  on "$1" sql -c BEGIN -c "SELECT fence_admit('report:7', 10)" \
    -c "UPDATE reports SET body = 'v10', fence = 10 WHERE report_id = 7" -c COMMIT >/dev/null ||
    fail "the write with token 10 was not accepted on the primary"
}

state() { on "$1" sql -c "SELECT string_agg(report_id || ':' || fence, ',' ORDER BY report_id) FROM reports" \
            -c "SELECT fence_current('report:7')" | paste -sd' '; }

# 1. Asynchronous replication loses the last fence ----------------------------
new_primary "$W/a-primary"
new_standby "$W/a-standby" "$W/a-primary"
e2e_wait_for 20 prints '7:5,8:5 5' state "$W/a-standby" || fail "the standby did not replay fence 5"
pg_throwaway_stop "$W/a-standby"
write_10 "$W/a-primary"
[[ $(state "$W/a-primary") == '7:10,8:5 10' ]] || fail "the primary does not hold fence 10: $(state "$W/a-primary")"
fail_over "$W/a-primary" "$W/a-standby"
promoted="$W/a-standby"
[[ $(state "$promoted") == '7:5,8:5 5' ]] ||
  fail "expected the promoted standby to have lost fence 10 (7:5,8:5 5), got: $(state "$promoted")"
[[ $(sqlstate on "$promoted" sql -c "UPDATE reports SET body = 'old holder 9', fence = 9 WHERE report_id = 7") == 00000 ]] ||
  fail "the hazard did not show: token 9 was refused on the promoted standby"
[[ $(sqlstate on "$promoted" sql -c BEGIN -c "SELECT fence_admit('report:7', 9)" -c COMMIT) == 00000 ]] ||
  fail "the hazard did not show: fence_admit with token 9 was refused on the promoted standby"
pass "asynchronous failover lost fence 10, and the old holder's token 9 was accepted (row and resource)"

# 2. Re-fencing with the coordinator's last issued token ----------------------
[[ $(on "$promoted" sql -c "SELECT fence_raise('reports', 10)") == 2 ]] ||
  fail "fence_raise('reports', 10) did not raise the 2 rows"
[[ $(on "$promoted" sql -c "SELECT fence_raise_resources(10)") == 1 ]] ||
  fail "fence_raise_resources(10) did not raise the 1 resource"
[[ $(state "$promoted") == '7:10,8:10 10' ]] || fail "after re-fencing: $(state "$promoted")"
for token in 9 10; do
  [[ $(sqlstate on "$promoted" sql -c "UPDATE reports SET body = 'old $token', fence = $token WHERE report_id = 7") == 55F01 ]] ||
    fail "after re-fencing, token $token was not refused (55F01) on the table"
done
[[ $(sqlstate on "$promoted" sql -c BEGIN -c "SELECT fence_admit('report:7', 9)" -c COMMIT) == 55F01 ]] ||
  fail "after re-fencing, fence_admit with token 9 was not refused (55F01)"
[[ $(sqlstate on "$promoted" sql -c BEGIN -c "SELECT fence_admit('report:7', 11)" \
       -c "UPDATE reports SET body = 'v11', fence = 11 WHERE report_id = 7" -c COMMIT) == 00000 ]] ||
  fail "after re-fencing, the next holder's token 11 was not accepted"
[[ $(state "$promoted") == '7:11,8:10 11' ]] || fail "after the next holder's write: $(state "$promoted")"
pass "re-fencing with token 10 (2 rows, 1 resource): tokens 9 and 10 refused (55F01), the next holder's 11 accepted"

# 3. Synchronous replication keeps the fence -----------------------------------
# synchronous once the standby streams (before, every commit would wait)
new_primary "$W/s-primary"
new_standby "$W/s-standby" "$W/s-primary"
on "$W/s-primary" sql -c "ALTER SYSTEM SET synchronous_standby_names = '*'" \
  -c 'ALTER SYSTEM SET synchronous_commit = on' -c 'SELECT pg_reload_conf()' >/dev/null
e2e_wait_for 20 prints sync on "$W/s-primary" sql -c 'SELECT sync_state FROM pg_stat_replication' ||
  fail "the standby did not become synchronous within 20 s"
# With the standby stopped the commit waits for it (it would return at once,
# and be lost by the failover, under asynchronous replication).
pg_throwaway_stop "$W/s-standby"
timeout 60 bash -c "$(declare -f on sql fail write_10); write_10 '$W/s-primary'" &
writer=$!
e2e_wait_for 20 prints 1 on "$W/s-primary" sql -c "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'" ||
  fail "the write with token 10 did not wait for the stopped synchronous standby (no SyncRep wait)"
kill -0 "$writer" 2>/dev/null || fail "the write with token 10 returned while the synchronous standby was stopped"
pg_throwaway_launch "$W/s-standby" || fail "the synchronous standby did not start again"
wait "$writer" || fail "the synchronous write with token 10 did not commit once the standby was back"
pass "a synchronous commit waited for the stopped standby (SyncRep) and returned once it was back"
fail_over "$W/s-primary" "$W/s-standby"
[[ $(state "$W/s-standby") == '7:10,8:5 10' ]] ||
  fail "the promoted synchronous standby does not hold fence 10: $(state "$W/s-standby")"
[[ $(sqlstate on "$W/s-standby" sql -c "UPDATE reports SET body = 'old holder 9', fence = 9 WHERE report_id = 7") == 55F01 ]] ||
  fail "token 9 was not refused (55F01) on the promoted synchronous standby"
[[ $(sqlstate on "$W/s-standby" sql -c BEGIN -c "SELECT fence_admit('report:7', 9)" -c COMMIT) == 55F01 ]] ||
  fail "fence_admit with token 9 was not refused (55F01) on the promoted synchronous standby"
pass "synchronous failover kept fence 10: token 9 refused (55F01) without re-fencing"
