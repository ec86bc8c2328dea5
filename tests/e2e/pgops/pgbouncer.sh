#!/usr/bin/env bash
# pg_fence through PgBouncer in transaction pooling mode (pool_mode =
# transaction, one server connection for the database: max_db_connections
# = 1), against a throwaway PostgreSQL. Checks, through the pooler:
#   - the guard with SET LOCAL pg_fence.token: a newer token is accepted,
#     a stale one refused (55F01);
#   - fenced_update: applied for a newer token, stale for an old one;
#   - fence_admit: admitted with a newer token, 55F01 with an old one;
#   - a verifying table with SET LOCAL pg_fence.proof, and with the proof
#     argument of fenced_update: accepted; a write without a proof is
#     refused (55F02);
#   - SET LOCAL does not leak: after one client's transaction with SET LOCAL
#     pg_fence.token, another client's tokenless UPDATE on the same server
#     connection is refused (55000);
#   - a session-level SET pg_fence.token does leak: client A runs SET
#     pg_fence.token = 100 and stays connected; client B, on the same (only)
#     server connection, runs an UPDATE without any token, and it is
#     accepted with A's token 100 (connected directly, the same UPDATE is
#     refused with 55000). This is why docs/sql.md forbids session-level SET
#     under transaction pooling.
# No coordinator: the tokens are literals. Needs pg_fence installed
# (make -C pg_extension install) and pgbouncer (scripts/install-deps.sh).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

PGBOUNCER=$(command -v pgbouncer || echo /usr/sbin/pgbouncer)
[[ -x $PGBOUNCER ]] || fail "pgbouncer is not installed (apt-get install pgbouncer, or scripts/install-deps.sh)"

W=$(pgops_workdir pgbouncer)
A_PID=""
cleanup() {
  local rc=$?
  [[ -n $A_PID ]] && kill "$A_PID" 2>/dev/null
  [[ -f $W/bouncer/pgbouncer.pid ]] && kill "$(cat "$W/bouncer/pgbouncer.pid")" 2>/dev/null
  pg_throwaway_stop "$W"
  if ((rc == 0)); then rm -rf "$W"; else echo "kept: $W" >&2; fi
}
trap cleanup EXIT

pg_throwaway_start "$W" || fail "PostgreSQL did not start"
openssl genpkey -algorithm ed25519 -out "$W/signing.key" 2>/dev/null
sql >/dev/null <<SQL
CREATE EXTENSION pg_fence;
CREATE TABLE reports (report_id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0);
INSERT INTO reports VALUES (7, 'v0'), (8, 'v0'), (9, 'v0');
SELECT fence_protect('reports');
CREATE TABLE signed (report_id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0);
INSERT INTO signed VALUES (7, 'v0');
SELECT fence_protect('signed', lock_key => 'report:{report_id}');
SELECT fence_trust_key('$(openssl pkey -in "$W/signing.key" -pubout)', 42);
SQL

# PgBouncer refuses to run as root: it runs as the server's owner, with its
# own ini and auth file, on a free loopback port, without a Unix socket.
# Another test may take the port between the check and the bind, and
# pgbouncer -d exits 0 even then: it counts as started once its log says it
# listens on the port; else it is started again on another (3 tries).
mkdir -p "$W/bouncer"
echo '"postgres" ""' >"$W/bouncer/userlist.txt"
# bouncer_state: listening, failed (it logged that it cannot listen, or it
# exited), or nothing yet
bouncer_state() {
  if grep -q "listening on 127.0.0.1:$bport" "$W/bouncer/pgbouncer.log" 2>/dev/null; then
    echo listening
  elif grep -q 'FATAL' "$W/bouncer/pgbouncer.log" 2>/dev/null ||
       { [[ -f $W/bouncer/pgbouncer.pid ]] && ! kill -0 "$(cat "$W/bouncer/pgbouncer.pid")" 2>/dev/null; }; then
    echo failed
  fi
}
bouncer_settled() { [[ -n $(bouncer_state) ]]; }
for try in 1 2 3; do
  bport=$(pg_free_port) || fail "no free port for pgbouncer"
  rm -f "$W/bouncer/pgbouncer.log" "$W/bouncer/pgbouncer.pid"
  cat >"$W/bouncer/pgbouncer.ini" <<INI
[databases]
fenced = host=127.0.0.1 port=$PGPORT dbname=postgres user=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $bport
unix_socket_dir =
auth_type = trust
auth_file = $W/bouncer/userlist.txt
pool_mode = transaction
default_pool_size = 1
max_db_connections = 1
max_client_conn = 20
logfile = $W/bouncer/pgbouncer.log
pidfile = $W/bouncer/pgbouncer.pid
INI
  pg_give_to_owner "$W/bouncer"
  (cd / && pg_as_owner "$PGBOUNCER" -d "$W/bouncer/pgbouncer.ini") ||
    fail "pgbouncer did not start: $(tail -n 5 "$W/bouncer/pgbouncer.log" 2>/dev/null)"
  e2e_wait_for 10 bouncer_settled || fail "pgbouncer neither listens nor failed within 10 s"
  [[ $(bouncer_state) == listening ]] && break
  echo "pgbouncer could not listen on port $bport (try $try): $(grep FATAL "$W/bouncer/pgbouncer.log" | tail -n 1)" >&2
  [[ -f $W/bouncer/pgbouncer.pid ]] && kill "$(cat "$W/bouncer/pgbouncer.pid")" 2>/dev/null
  ((try < 3)) || fail "pgbouncer could not listen on a free port (3 tries)"
done
e2e_wait_for 10 psql -X -h 127.0.0.1 -p "$bport" -d fenced -c 'SELECT 1' ||
  fail "pgbouncer does not answer on port $bport: $(tail -n 5 "$W/bouncer/pgbouncer.log")"

# pooled ARGS...: psql through the pooler; direct ARGS...: to the server itself
pooled() { sql -h 127.0.0.1 -p "$bport" -d fenced "$@"; }
direct() { sql "$@"; }

# The guard with SET LOCAL pg_fence.token
[[ $(sqlstate pooled -c BEGIN -c 'SET LOCAL pg_fence.token = 42' \
       -c "UPDATE reports SET body = 'v42' WHERE report_id = 7" -c COMMIT) == 00000 ]] ||
  fail "SET LOCAL pg_fence.token = 42 through pgbouncer was not accepted"
[[ $(sqlstate pooled -c BEGIN -c 'SET LOCAL pg_fence.token = 41' \
       -c "UPDATE reports SET body = 'v41' WHERE report_id = 7" -c COMMIT) == 55F01 ]] ||
  fail "a stale SET LOCAL pg_fence.token = 41 through pgbouncer was not refused with 55F01"
[[ $(direct -c 'SELECT body, fence FROM reports WHERE report_id = 7') == 'v42|42' ]] ||
  fail "row 7 is not v42|42 after the guard's writes"
pass "guard + SET LOCAL pg_fence.token through pgbouncer: 42 accepted, 41 refused (55F01)"

# fenced_update
[[ $(pooled -c "SELECT fenced_update('reports', '{\"report_id\": 7}', '{\"body\": \"v43\"}', 43)") == applied ]] ||
  fail "fenced_update with 43 through pgbouncer was not applied"
[[ $(pooled -c "SELECT fenced_update('reports', '{\"report_id\": 7}', '{\"body\": \"old\"}', 42)") == stale ]] ||
  fail "fenced_update with 42 through pgbouncer was not stale"
pass "fenced_update through pgbouncer: 43 applied, 42 stale"

# fence_admit
[[ $(sqlstate pooled -c BEGIN -c "SELECT fence_admit('report:7', 50)" \
       -c "UPDATE reports SET body = 'admitted 50', fence = 50 WHERE report_id = 7" -c COMMIT) == 00000 ]] ||
  fail "fence_admit with 50 through pgbouncer was not admitted"
[[ $(sqlstate pooled -c BEGIN -c "SELECT fence_admit('report:7', 49)" -c COMMIT) == 55F01 ]] ||
  fail "fence_admit with 49 through pgbouncer was not refused with 55F01"
[[ $(direct -c "SELECT fence_current('report:7')") == 50 ]] || fail "resource report:7 is not at fence 50"
pass "fence_admit through pgbouncer: 50 admitted, 49 refused (55F01)"

# Token proofs: SET LOCAL pg_fence.proof and the proof argument
proof60=$(bash "$E2E_ROOT/tests/pg/sign-proof.sh" "$W/signing.key" 42 60 report:7)
proof61=$(bash "$E2E_ROOT/tests/pg/sign-proof.sh" "$W/signing.key" 42 61 report:7)
[[ $(sqlstate pooled -c BEGIN -c "SET LOCAL pg_fence.proof = '$proof60'" \
       -c "UPDATE signed SET body = 'v60', fence = 60 WHERE report_id = 7" -c COMMIT) == 00000 ]] ||
  fail "SET LOCAL pg_fence.proof through pgbouncer was not accepted"
[[ $(sqlstate pooled -c "UPDATE signed SET body = 'no proof', fence = 61 WHERE report_id = 7") == 55F02 ]] ||
  fail "a write without a proof through pgbouncer (after another transaction's SET LOCAL pg_fence.proof) was not refused with 55F02"
[[ $(pooled -c "SELECT fenced_update('signed', '{\"report_id\": 7}', '{\"body\": \"v61\"}', 61, proof => '$proof61')") == applied ]] ||
  fail "fenced_update with its proof argument through pgbouncer was not applied"
pass "token proofs through pgbouncer: SET LOCAL pg_fence.proof and the proof argument accepted, no proof refused (55F02)"

# Client A: one psql session through the pooler, kept open, fed line by line.
mkfifo "$W/a.in"
psql -X -q -At -h 127.0.0.1 -p "$bport" -d fenced <"$W/a.in" >"$W/a.out" 2>&1 &
A_PID=$!
exec {A_FD}>"$W/a.in"
# a_run MARKER SQL: run SQL in client A and wait for it to finish
a_run() {
  printf '%s\n\\echo %s\n' "$2" "$1" >&"$A_FD"
  e2e_wait_for 10 grep -qx "$1" "$W/a.out" || fail "client A did not finish: $(cat "$W/a.out")"
}

# SET LOCAL stays in its transaction
a_run a-local "BEGIN; SET LOCAL pg_fence.token = 70; UPDATE reports SET body = 'A 70' WHERE report_id = 9; COMMIT;"
[[ $(sqlstate pooled -c "UPDATE reports SET body = 'B, no token' WHERE report_id = 8") == 55000 ]] ||
  fail "client B's tokenless UPDATE after A's SET LOCAL was not refused with 55000"
pass "SET LOCAL pg_fence.token does not leak to another client (55000 for B's tokenless UPDATE)"

# A session-level SET leaks into the next client's transaction
a_run a-set "SET pg_fence.token = 100; SELECT 'A backend ' || pg_backend_pid();"
a_backend=$(sed -n 's/^A backend //p' "$W/a.out")
b_backend=$(pooled -c 'SELECT pg_backend_pid()')
[[ -n $a_backend && $a_backend == "$b_backend" ]] ||
  fail "clients A and B did not share the one server connection ($a_backend, $b_backend)"
[[ $(sqlstate direct -c "UPDATE reports SET body = 'direct, no token' WHERE report_id = 8") == 55000 ]] ||
  fail "a tokenless UPDATE on a direct connection was not refused with 55000"
[[ $(sqlstate pooled -c "UPDATE reports SET body = 'B, no token' WHERE report_id = 8") == 00000 ]] ||
  fail "client B's tokenless UPDATE was refused: A's session-level SET did not leak (expected it to)"
[[ $(direct -c 'SELECT body, fence FROM reports WHERE report_id = 8') == 'B, no token|100' ]] ||
  fail "row 8 does not carry A's leaked token 100: $(direct -c 'SELECT body, fence FROM reports WHERE report_id = 8')"
pass "session-level SET pg_fence.token leaks: A's SET 100 made B's tokenless UPDATE write fence 100 (server pid $a_backend)"
a_run a-reset "RESET pg_fence.token;"
