#!/usr/bin/env bash
# A database using pg_fence upgraded from PostgreSQL 15 to a newer major by
# dump and restore, with the newer major's programs run against the old
# server, two ways, each into a new server with pg_fence of the new major:
#   1. by hand, the documented way across majors: pg_dumpall --globals-only
#      and pg_dump -Fc, then pg_restore --create;
#   2. the steps of Debian's pg_upgradecluster -m dump (its default method):
#      pg_dumpall -s (every database's schema, guards included) into the new
#      server, then pg_dump -Fc | pg_restore --data-only --disable-triggers
#      --no-data-for-failed-tables per database. With the guards there before
#      the data, --disable-triggers is what lets the verifying table's rows in:
#      without it the guard refuses the COPY of a row with a fence (55F02),
#      which the test shows first.
# docs/operations.md ("Upgrading PostgreSQL to a new major") is the runbook.
#
# Runs only in chroot mode (scripts/pg-chroot.sh with trixie ..., as
# scripts/pg-matrix.sh runs the e2e suites next to 17): the new servers and
# every PostgreSQL program are the chroot's (17 in trixie), the old server is
# the host's PostgreSQL 15 (/usr/lib/postgresql/15/bin, with the host's
# pg_fence build installed). On the host alone there is no newer major: it
# prints why and exits 77, which ctest counts as skipped (SKIP_RETURN_CODE).
#
# The old database holds: a strict table; a verifying same_generation table
# (lock_key 'report:{report_id}'); a partitioned table fenced on a column
# named epoch, whose partitions carry cloned guards; resource fences, one
# with require_proof; two trusted keys (the test vector's, bound to its
# cluster, and one for any cluster); a role with UPDATE on a fenced table.
# Checks, on the new major, after each way:
#   - the inventory (every row of the fenced tables, every trigger with its
#     mode, fence column, lock key template and enabled state, clones
#     included, every resource with require_proof, every trusted key, the
#     extension version, the role's privilege) equals the old one;
#   - the guards enforce: stale tokens refused (55F01, on the partitions
#     too), a write without a proof refused (55F02), newer tokens accepted,
#     one with a proof signed by the trusted vector key;
#   - the resources enforce: fence_admit with an old token 55F01,
#     fence_advance on the require_proof resource without a proof 55F02,
#     with the vector's proof (report:8, 900) accepted.
# No coordinator: the tokens are literals.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

OLD_MAJOR=15
OLD_BINDIR=/usr/lib/postgresql/$OLD_MAJOR/bin
if [[ -z ${PG_CHROOT_BIN:-} ]]; then
  echo "SKIP: the upgrade from PostgreSQL $OLD_MAJOR needs a newer major, which only a chroot carries here;" \
       "run: bash scripts/pg-chroot.sh with trixie bash tests/e2e/pgops/upgrade.sh (scripts/pg-matrix.sh does)"
  exit 77
fi
NEW_MAJOR=${PG_CHROOT_MAJOR:?PG_CHROOT_MAJOR is not set by pg-chroot.sh}
[[ -x $OLD_BINDIR/pg_ctl ]] || fail "the host has no PostgreSQL $OLD_MAJOR server in $OLD_BINDIR (scripts/install-deps.sh)"
VECTORS=$E2E_ROOT/tests/vectors
VECTOR_CLUSTER=12345678901234567890
export PGHOST=127.0.0.1 PGUSER=postgres

# host_pg CMD...: CMD with the host's PostgreSQL 15 instead of the chroot's
# (pg.sh takes the server, pg_config and programs from PATH then)
host_pg() {
  (
    PATH=$OLD_BINDIR:${PATH//"$PG_CHROOT_BIN:"/}
    unset PG_CHROOT PG_CHROOT_BIN PG_CHROOT_MAJOR
    "$@"
  )
}

W=$(pgops_workdir upgrade)
mkdir -p "$W/old" "$W/new" "$W/cluster"
cleanup() {
  local rc=$?
  host_pg pg_throwaway_stop "$W/old"
  pg_throwaway_stop "$W/new"
  pg_throwaway_stop "$W/cluster"
  if ((rc == 0)); then rm -rf "$W"; else echo "kept: $W" >&2; fi
}
trap cleanup EXIT

host_pg pg_throwaway_start "$W/old" || fail "the PostgreSQL $OLD_MAJOR server (host) did not start"
pg_throwaway_start "$W/new" || fail "the PostgreSQL $NEW_MAJOR server (chroot) did not start"
pg_throwaway_start "$W/cluster" || fail "the second PostgreSQL $NEW_MAJOR server (chroot) did not start"
# (pg_throwaway_start exported PGDATABASE=postgres; the upgraded one is app)
export PGDATABASE=app
old() { on "$W/old" sql "$@"; }
[[ $(old -d postgres -c 'SHOW server_version_num') == "${OLD_MAJOR}"* &&
   $(on "$W/new" sql -d postgres -c 'SHOW server_version_num') == "${NEW_MAJOR}"* ]] ||
  fail "the servers are not PostgreSQL $OLD_MAJOR and $NEW_MAJOR: $(old -d postgres -c 'SHOW server_version'), $(on "$W/new" sql -d postgres -c 'SHOW server_version')"

# sign TOKEN LOCK_KEY: a proof signed with the vector's key, for its cluster
sign() { bash "$E2E_ROOT/tests/pg/sign-proof.sh" "$VECTORS/token_proof_v1.key" "$VECTOR_CLUSTER" "$1" "$2"; }
openssl genpkey -algorithm ed25519 -out "$W/other.key" 2>/dev/null
p7_500=$(sign 500 report:7)

old -d postgres -c 'CREATE DATABASE app' -c 'CREATE ROLE app_writer' >/dev/null
old -v pub="$(cat "$VECTORS/token_proof_v1.pub")" -v other="$(openssl pkey -in "$W/other.key" -pubout)" \
    -v p7_500="$p7_500" >/dev/null <<'SQL'
CREATE EXTENSION pg_fence;
SELECT fence_trust_key(:'pub', 12345678901234567890);
SELECT fence_trust_key(:'other');
CREATE TABLE reports (report_id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0);
INSERT INTO reports SELECT g, 'r' || g, 1000 + g FROM generate_series(1, 200) g;
SELECT fence_protect('reports');
GRANT SELECT, UPDATE ON reports TO app_writer;
CREATE TABLE signed (report_id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0);
INSERT INTO signed SELECT g, 's' || g, 0 FROM generate_series(1, 9) g;
SELECT fence_protect('signed', mode => 'same_generation', lock_key => 'report:{report_id}');
BEGIN;
SET LOCAL pg_fence.proof = :'p7_500';
UPDATE signed SET body = 's7 at 500', fence = 500 WHERE report_id = 7;
COMMIT;
CREATE TABLE events (id int, region int, body text, epoch bigint NOT NULL DEFAULT 0,
                     PRIMARY KEY (id, region)) PARTITION BY LIST (region);
CREATE TABLE events_eu PARTITION OF events FOR VALUES IN (1);
CREATE TABLE events_us PARTITION OF events FOR VALUES IN (2);
INSERT INTO events VALUES (1, 1, 'eu', 30), (2, 2, 'us', 40);
SELECT fence_protect('events', fence_column => 'epoch');
SELECT fence_advance('job:1', 42);
SELECT fence_advance('report:8', 800);
SELECT fence_require_proof('report:8');
SQL

# inventory DIR: what the upgrade must keep, as text
inventory() {
  on "$1" sql <<'SQL'
SELECT 'extension', extversion FROM pg_extension WHERE extname = 'pg_fence';
SELECT 'reports', * FROM reports ORDER BY report_id;
SELECT 'signed', * FROM signed ORDER BY report_id;
SELECT 'events', tableoid::regclass, * FROM events ORDER BY id;
SELECT 'trigger', c.relname, t.tgname, t.tgtype, t.tgenabled, t.tgparentid <> 0 AS cloned,
       t.tgfoid::regprocedure, encode(t.tgargs, 'escape')
  FROM pg_trigger AS t JOIN pg_class AS c ON c.oid = t.tgrelid
 WHERE NOT t.tgisinternal ORDER BY c.relname, t.tgname;
SELECT 'resource', resource, fence, require_proof FROM fence_resources ORDER BY resource;
SELECT 'trusted key', key_id, cluster_id, public_key FROM fence_trusted_keys ORDER BY key_id;
SELECT 'grant', has_table_privilege('app_writer', 'reports', 'UPDATE');
SQL
}
inventory "$W/old" >"$W/old.inventory"
grep -q '^trigger|events_us|zzz_fence_guard|.*|t|' "$W/old.inventory" ||
  fail "the old database has no cloned guard on events_us: $(grep '^trigger' "$W/old.inventory")"

# The new major's programs against the old server (as pg_upgradecluster
# runs them: get_program_path of the new version)
from_old() { (cd / && "$@" -h 127.0.0.1 -p "$(cat "$W/old/pg/port")" -U postgres); }

# upgrade_by_dump DIR: the documented way across majors by hand: the newer
# pg_dumpall --globals-only and pg_dump -Fc, pg_restore --create
upgrade_by_dump() {
  local dir=$1
  from_old pg_dumpall --globals-only -f "$W/globals.sql" ||
    fail "pg_dumpall --globals-only ($NEW_MAJOR) from the $OLD_MAJOR server failed"
  from_old pg_dump -Fc -f "$W/app.dump" app || fail "pg_dump -Fc ($NEW_MAJOR) from the $OLD_MAJOR server failed"
  # the new server has its bootstrap role postgres already: that one
  # CREATE ROLE fails, nothing else may
  on "$dir" sql -d postgres -v ON_ERROR_STOP=0 -f "$W/globals.sql" >/dev/null 2>"$W/globals.err" || true
  [[ $(grep -c 'ERROR' "$W/globals.err") == 1 ]] && grep -q 'role "postgres" already exists' "$W/globals.err" ||
    fail "restoring the globals failed otherwise than on the existing role postgres: $(cat "$W/globals.err")"
  (cd / && pg_restore -h 127.0.0.1 -p "$(cat "$dir/pg/port")" -U postgres --create --exit-on-error      -d postgres "$W/app.dump") 2>"$W/restore.err" || fail "pg_restore ($NEW_MAJOR) failed: $(cat "$W/restore.err")"
}

# upgrade_like_pg_upgradecluster DIR: what pg_upgradecluster -m dump runs:
# the schema of every database (pg_dumpall -s, without the CREATE ROLE of the
# bootstrap superuser) into the new cluster, then each database's data
# (pg_dump -Fc | pg_restore --data-only --disable-triggers
# --no-data-for-failed-tables). The guards exist before the data comes:
# without --disable-triggers, the verifying table's guard refuses the COPY
# of a row with a fence and no proof (55F02), shown first.
upgrade_like_pg_upgradecluster() {
  local dir=$1 port
  port=$(cat "$dir/pg/port")
  from_old pg_dumpall -s --quote-all-identifiers -f "$W/schema.sql" ||
    fail "pg_dumpall -s ($NEW_MAJOR) from the $OLD_MAJOR server failed"
  sed -i -E '/^CREATE (ROLE|USER) "postgres";$/d' "$W/schema.sql"
  on "$dir" sql -d postgres -f "$W/schema.sql" >/dev/null 2>"$W/schema.err" ||
    fail "the schema of pg_dumpall -s did not restore: $(cat "$W/schema.err")"
  from_old pg_dump -Fc --quote-all-identifiers -f "$W/app-data.dump" app ||
    fail "pg_dump -Fc ($NEW_MAJOR) from the $OLD_MAJOR server failed"
  ! (cd / && pg_restore -h 127.0.0.1 -p "$port" -U postgres --data-only --single-transaction \
       --exit-on-error -d app "$W/app-data.dump") 2>"$W/data-with-triggers.err" &&
    grep -q 'ERROR: *no fencing token proof for lock key "report:7" and token 500' "$W/data-with-triggers.err" ||
    fail "a data-only restore with the guards enabled was not refused on signed's row 7 (fence 500, no proof): $(cat "$W/data-with-triggers.err")"
  (cd / && pg_restore -h 127.0.0.1 -p "$port" -U postgres --data-only --disable-triggers \
     --no-data-for-failed-tables --exit-on-error -d app "$W/app-data.dump") 2>"$W/data.err" ||
    fail "pg_restore --data-only --disable-triggers ($NEW_MAJOR) failed: $(cat "$W/data.err")"
}

# verify DIR: the new server keeps and enforces what the old one had
verify() {
  local dir=$1 p7_499 p7_600 vector_proof
  new() { on "$dir" sql "$@"; }
  inventory "$dir" >"$dir.inventory"
  diff "$W/old.inventory" "$dir.inventory" >"$dir.inventory.diff" ||
    fail "the upgrade changed what pg_fence keeps (< $OLD_MAJOR, > $NEW_MAJOR): $(head -n 20 "$dir.inventory.diff")"
  pass "kept on $NEW_MAJOR: $(grep -c '^reports|\|^signed|\|^events|' "$dir.inventory") fenced rows, $(grep -c '^trigger|' "$dir.inventory") triggers (guards with mode, fence column and lock key, $(grep -c '^trigger|.*|t|[^|]*|[^|]*$' "$dir.inventory") clones; all enabled), $(grep -c '^resource|' "$dir.inventory") resources ($(grep -c '^resource|.*|t$' "$dir.inventory") with require_proof), $(grep -c '^trusted key|' "$dir.inventory") trusted keys, extension $(sed -n 's/^extension|//p' "$dir.inventory"), app_writer's UPDATE"

  [[ $(sqlstate new -c "UPDATE reports SET body = 'stale', fence = 1007 WHERE report_id = 7") == 55F01 ]] ||
    fail "the same token 1007 on reports (strict) was not refused with 55F01 on $NEW_MAJOR"
  [[ $(sqlstate new -c "UPDATE reports SET body = 'newer', fence = 1008 WHERE report_id = 7") == 00000 ]] ||
    fail "the newer token 1008 on reports was not accepted on $NEW_MAJOR"
  [[ $(sqlstate new -c "UPDATE events SET body = 'stale', epoch = 39 WHERE id = 2") == 55F01 ]] ||
    fail "the stale epoch 39 on events_us was not refused with 55F01 on $NEW_MAJOR"
  [[ $(sqlstate new -c BEGIN -c 'SET LOCAL pg_fence.token = 31' -c "UPDATE events SET body = 'newer' WHERE id = 1" -c COMMIT) == 00000 ]] ||
    fail "pg_fence.token 31 on events_eu was not accepted on $NEW_MAJOR"
  [[ $(new -c 'SELECT epoch FROM events WHERE id = 1') == 31 ]] || fail "the token 31 was not stamped into events_eu's epoch"
  pass "guards enforce on $NEW_MAJOR: reports same token 55F01, newer accepted; events (fence column epoch) stale 55F01 on partition events_us, pg_fence.token stamped on events_eu"

  p7_499=$(sign 499 report:7) p7_600=$(sign 600 report:7)
  [[ $(sqlstate new -c "UPDATE signed SET body = 'no proof', fence = 600 WHERE report_id = 7") == 55F02 ]] ||
    fail "a write without a proof on signed was not refused with 55F02 on $NEW_MAJOR"
  [[ $(sqlstate new -c BEGIN -c "SET LOCAL pg_fence.proof = '$p7_499'" -c "UPDATE signed SET body = 'stale', fence = 499 WHERE report_id = 7" -c COMMIT) == 55F01 ]] ||
    fail "the stale token 499 with a valid proof on signed was not refused with 55F01 on $NEW_MAJOR"
  [[ $(sqlstate new -c BEGIN -c "SET LOCAL pg_fence.proof = '$p7_600'" -c "UPDATE signed SET body = 'newer', fence = 600 WHERE report_id = 7" -c COMMIT) == 00000 ]] ||
    fail "the token 600 with a proof signed by the trusted vector key was not accepted on $NEW_MAJOR"
  pass "the verifying table enforces on $NEW_MAJOR: no proof 55F02, stale token with a valid proof 55F01, token 600 with a proof signed by the trusted key accepted"

  vector_proof=$(sed -n 's/^proof=//p' "$VECTORS/token_proof_v1.txt")
  [[ $(sqlstate new -c "SELECT fence_admit('job:1', 41)") == 55F01 ]] ||
    fail "fence_admit('job:1', 41) below the resource fence 42 was not refused with 55F01 on $NEW_MAJOR"
  [[ $(sqlstate new -c "SELECT fence_advance('report:8', 900)") == 55F02 ]] ||
    fail "fence_advance on the require_proof resource report:8 without a proof was not refused with 55F02 on $NEW_MAJOR"
  [[ $(new -c "SELECT fence_advance('report:8', 900, '$vector_proof')") == t ]] ||
    fail "fence_advance('report:8', 900) with the vector's proof was not accepted on $NEW_MAJOR"
  pass "resources enforce on $NEW_MAJOR: job:1 token 41 55F01; report:8 (require_proof) without a proof 55F02, with the vector's proof for 900 accepted"
}

upgrade_by_dump "$W/new"
pass "PostgreSQL $OLD_MAJOR -> $NEW_MAJOR by hand: pg_dumpall --globals-only and pg_dump -Fc of $NEW_MAJOR from the $OLD_MAJOR server, pg_restore --create into $NEW_MAJOR"
verify "$W/new"
upgrade_like_pg_upgradecluster "$W/cluster"
pass "PostgreSQL $OLD_MAJOR -> $NEW_MAJOR with the steps of pg_upgradecluster -m dump: pg_dumpall -s into $NEW_MAJOR, then pg_dump -Fc | pg_restore --data-only --disable-triggers (without --disable-triggers the verifying table's guard refuses the COPY of a fenced row, 55F02)"
verify "$W/cluster"
