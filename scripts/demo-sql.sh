#!/usr/bin/env bash
# demo-sql.sh: the SQL half of pgfence's seed scenario, narrated, on a
# throwaway PostgreSQL server (pg_virtualenv -t; works as root).
#
#   t0  worker A acquires report:7, token 41   t3  worker B acquires, token 42
#   t1  worker A pauses                        t4  B writes with 42  -> accepted
#   t2  A's lease expires                      t5  A wakes, writes with 41 -> REJECTED
#
# Until the coordinator exists the tokens are typed in; the database side is
# the real thing.  Assumes pg_fence is installed (make -C pg_extension install).
# Exits 0 only if the stale write was refused with SQLSTATE 55F01, the row
# still holds B's data and fence_stats counted the rejection.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}

say() { printf '%-4s [%s] %s\n' "$1" "$(date +%H:%M:%S.%3N)" "$2"; }
show() { sed 's/^/       | /'; }
sql() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }

run_inside() {
  say "" "throwaway server ready (PostgreSQL $PGVERSION, port $PGPORT, shared_preload_libraries = pg_fence)"
  say "" "DBA: install the extension and protect the reports table"
  local setup="CREATE EXTENSION pg_fence;
CREATE TABLE reports (report_id int PRIMARY KEY, body text NOT NULL);
INSERT INTO reports VALUES (7, 'draft');
ALTER TABLE reports ADD COLUMN fence bigint NOT NULL DEFAULT 0;
SELECT fence_protect('reports');  -- adds the guard trigger zzz_fence_guard"
  printf '%s\n' "$setup" | show
  printf '%s\n' "$setup" | sql >/dev/null

  say t0 "worker A acquires lock report:7 from the coordinator -> token 41"
  say t1 "worker A pauses (GC pause, SIGSTOP, laptop lid) before writing"
  say t2 "A's lease expires; A does not know"
  say t3 "worker B acquires lock report:7 -> token 42 (tokens only grow)"
  say t4 "worker B writes the report with token 42"
  local write_b="UPDATE reports SET body = 'report by B', fence = 42 WHERE report_id = 7;"
  echo "$write_b" | show
  psql -X -v ON_ERROR_STOP=1 -c "$write_b" 2>&1 | show
  say "" "  -> accepted (stored fence 0 < 42); the row now carries fence 42"

  say t5 "worker A wakes up and writes its stale report with token 41"
  local write_a="UPDATE reports SET body = 'stale report by A', fence = 41 WHERE report_id = 7;"
  local out
  echo "$write_a" | show
  out=$(psql -X -q \
    -c "SET client_min_messages = log" \
    -c "$write_a" \
    -c '\echo SQLSTATE :SQLSTATE' 2>&1 || true)
  printf '%s\n' "$out" | show
  if ! grep -q '^SQLSTATE 55F01$' <<<"$out"; then
    say "" "FAIL: the stale write was not refused with 55F01"
    return 1
  fi
  say "" "  -> REJECTED with SQLSTATE 55F01 (the LOG line is what the DBA sees in the server log)"

  say "" "the row still holds B's data:"
  sql -c "SELECT report_id, body, fence FROM reports" 2>&1 | show
  if [[ $(sql -At -c "SELECT body || '/' || fence FROM reports WHERE report_id = 7") != "report by B/42" ]]; then
    say "" "FAIL: the row does not hold B's write"
    return 1
  fi

  say "" "fence_stats counted the rejection:"
  sql -c "SELECT relation, accepted, rejected_stale, last_accepted_token, last_rejected_token FROM fence_stats" 2>&1 | show
  if [[ $(sql -At -c "SELECT rejected_stale FROM fence_stats WHERE relation = 'reports'::regclass") != 1 ]]; then
    say "" "FAIL: fence_stats does not show exactly 1 rejection"
    return 1
  fi
  say "" "demo passed: the paused worker's late write was refused by PostgreSQL itself"
}

if [[ ${1:-} == --inside ]]; then
  run_inside
  exit $?
fi

if [[ ! -e $("$PG_CONFIG" --sharedir)/extension/pg_fence.control ]]; then
  echo "demo-sql: pg_fence is not installed; run: make -C $ROOT/pg_extension install" >&2
  exit 1
fi
PG_VERSION_MAJOR=$("$PG_CONFIG" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
exec pg_virtualenv -t -v "$PG_VERSION_MAJOR" -o shared_preload_libraries=pg_fence \
  bash "$ROOT/scripts/demo-sql.sh" --inside
