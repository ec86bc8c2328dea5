#!/usr/bin/env bash
# pg-test.sh: build and install pg_fence for one PostgreSQL major, then run
# its PostgreSQL tests against throwaway servers (pg_virtualenv -t, works as
# root):
#
#   1. preloaded server (shared_preload_libraries = pg_fence, and a small
#      pg_fence.max_tracked and max_tracked_resources so the stats bounds
#      are testable, pg_fence.max_inflight so a full preemption registry
#      is, and pg_fence.rejection_log_size so the ring's wrapping is):
#        make installcheck    pg_regress tests/pg/sql/*.sql except nopreload*,
#                             pg_isolation_regress tests/pg/specs/*.spec
#        dump_restore         pg_dump keeps fence_trusted_keys and require_proof
#   2. preloaded server with pg_fence.rejection_log_size = 0: rejection_log_off
#      (no ring; the counts still count)
#   3. server without preload: make installcheck runs tests/pg/sql/nopreload*.sql
#      (fencing works; fence_stats and fence_rejections say what to configure)
#
# The extension is built from a copy of its sources (in $OUT/src, warnings
# are errors), so builds for several majors never share objects. PG_CONFIG picks the major
# (default: the host's 15); scripts/pg-matrix.sh runs this script for every
# tested major, inside a chroot for those the host does not carry.
# Prints each test's result and ends with "pg: N passed, M failed"; exits
# non-zero on any failure, after printing the regression.diffs.
# Outputs go to build/pg-tests (override with PG_TEST_OUT).
# Usage: bash scripts/pg-test.sh        (from any directory)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=../tests/e2e/safety/lib/pg.sh
source "$ROOT/scripts/lib/pg-common.sh"
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
OUT=${PG_TEST_OUT:-$ROOT/build/pg-tests}
TESTS=$ROOT/tests/pg
# Paths of the PostgreSQL tools (found again after installing them).
find_pg_tools() {
  PGXS_DIR=$(dirname "$("$PG_CONFIG" --pgxs 2>/dev/null || echo /nonexistent/x)")/..
  PG_REGRESS=$PGXS_DIR/test/regress/pg_regress
  PG_ISOLATION_REGRESS=$PGXS_DIR/test/isolation/pg_isolation_regress
  PG_VERSION_MAJOR=$(pg_major_of "$PG_CONFIG")
}
find_pg_tools

# Test names (file names without extension) of one kind, sorted.
list_tests() { # dir ext [nopreload|preload]
  local f name
  for f in "$1"/*."$2"; do
    [[ -e $f ]] || continue
    name=$(basename "$f" ."$2")
    if [[ $name == nopreload* ]]; then
      [[ $3 == nopreload ]] && echo "$name"
    else
      [[ $3 == preload ]] && echo "$name"
    fi
  done
  return 0
}

# pg_dump keeps the trusted keys and require_proof: a resource that needs
# proofs still needs them after a restore into a new database (the restore
# COPYs the row, which fence_resources_guard allows; afterwards it refuses a
# direct UPDATE of require_proof), and the shared vector's proof verifies
# there.  It keeps a resource's sequence number too (1.3): the replay of the
# stored (token, seq) is refused after the restore.  And (1.5) the outbox:
# a restored entry keeps its key (enqueueing it again adds nothing) and the
# id sequence goes on after it (a new entry does not collide with its id).
# Prints a
# pg_regress-style result.
dump_restore_test() {
  local db=regress_fence_dump restored=regress_fence_restored log=$OUT/dump_restore.log
  local proof got="" want refused="" guarded=""
  proof=$(sed -n 's/^proof=//p' "$PG_FENCE_VECTORS/token_proof_v1.txt")
  want=$'21fe31dfa154a261|12345678901234567890\nreport:8|0|t\nt\n42|3\nf\nt\n1|1|pending\nt\nt\n2'
  {
    dropdb --if-exists "$db" && dropdb --if-exists "$restored" &&
    createdb "$db" && createdb "$restored" &&
    psql -X -q -v ON_ERROR_STOP=1 -d "$db" \
      -v pub="$(cat "$PG_FENCE_VECTORS/token_proof_v1.pub")" <<'SQL' &&
CREATE EXTENSION pg_fence;
SELECT fence_trust_key(:'pub', 12345678901234567890);
SELECT fence_require_proof('report:8');
SELECT fence_advance('job:seq', 42, 3);
SELECT fence_enqueue('mail:dump', 5, 'op', 'http://127.0.0.1:9/', '{"a": 1}');
SQL
    pg_dump -d "$db" | psql -X -q -v ON_ERROR_STOP=1 -d "$restored" &&
    got=$(psql -X -At -v ON_ERROR_STOP=1 -d "$restored" -v proof="$proof" <<'SQL'
SELECT key_id, cluster_id FROM fence_trusted_keys;
SELECT resource, fence, require_proof FROM fence_resources WHERE resource = 'report:8';
SELECT fence_advance('report:8', 900, :'proof');
SELECT fence_current('job:seq'), fence_current_seq('job:seq');
SELECT fence_advance('job:seq', 42, 3);
SELECT fence_advance('job:seq', 42, 4);
SELECT count(*), max(id), min(state) FROM fence_outbox;
SELECT fence_enqueue('mail:dump', 5, 'op', 'http://127.0.0.1:9/', '{"a": 1}') = fence_outbox_key('mail:dump', 5, 'op');
SELECT fence_enqueue('mail:dump', 5, 'op2', 'http://127.0.0.1:9/', '{}') IS NOT NULL;
SELECT count(*) FROM fence_outbox;
SQL
    )
    echo "$got"
    # without a proof: refused (55F02)
    refused=$(psql -X -At -d "$restored" -c "SELECT fence_advance('report:8', 950)" 2>&1)
    echo "$refused"
    # a direct UPDATE of require_proof: refused (42501)
    guarded=$(psql -X -At -d "$restored" -c "UPDATE fence_resources SET require_proof = false" 2>&1)
    echo "$guarded"
    dropdb --if-exists "$db" && dropdb --if-exists "$restored"
  } >"$log" 2>&1
  if [[ $got == "$want" && $refused == *"no fencing token proof"* &&
        $guarded == *"only fence_require_proof may change"* ]]; then
    echo "test dump_restore                 ... ok"
  else
    echo "test dump_restore                 ... FAILED (see $log)"
    return 1
  fi
}

# pg_fence.rejection_log_size = 0 (the server of this run): no ring, so
# fence_rejections is empty and its reset clears nothing, while
# fence_rejection_counts still counts.  Prints a pg_regress-style result.
rejection_log_off_test() {
  local db=regress_fence_ringoff log=$OUT/rejection_log_off.log got="" stale=""
  local want=$'0\n0\n0\n1'
  {
    dropdb --if-exists "$db" && createdb "$db" &&
    psql -X -q -v ON_ERROR_STOP=1 -d "$db" <<'SQL' &&
CREATE EXTENSION pg_fence;
CREATE TABLE t (id int PRIMARY KEY, fence bigint NOT NULL DEFAULT 0);
INSERT INTO t VALUES (1, 5);
SELECT fence_protect('t');
SQL
    stale=$(psql -X -At -d "$db" -c "UPDATE t SET fence = 4 WHERE id = 1" 2>&1)
    echo "$stale"
    got=$(psql -X -At -v ON_ERROR_STOP=1 -d "$db" <<'SQL'
SHOW pg_fence.rejection_log_size;
SELECT count(*) FROM fence_rejections;
SELECT fence_rejections_reset();
SELECT rejections FROM fence_rejection_counts() WHERE path = 'guard' AND reason = 'stale';
SQL
    )
    echo "$got"
    dropdb --if-exists "$db"
  } >"$log" 2>&1
  if [[ $got == "$want" && $stale == *"stale fencing token 4"* ]]; then
    echo "test rejection_log_off            ... ok"
  else
    echo "test rejection_log_off            ... FAILED (see $log)"
    return 1
  fi
}

# make in this major's copy of the sources
ext_make() { PG_CONFIG=$PG_CONFIG pg_ext_make "$OUT/src" "$@"; }

# Runs inside pg_virtualenv (PGHOST, PGPORT, PGUSER... are set): the Makefile
# picks the tests that fit the server (preloaded or not).
run_inside() {
  local mode=$1 status=0
  if [[ $mode == preload ]]; then
    # regress and isolation apart: one installcheck stops at the first failure
    ext_make installcheck ISOLATION= || status=1
    ext_make installcheck REGRESS= || status=1
    dump_restore_test || status=1
  elif [[ $mode == ringoff ]]; then
    rejection_log_off_test || status=1
  else
    mkdir -p "$OUT/nopreload"
    ext_make installcheck EXTRA_REGRESS_OPTS="--outputdir=$OUT/nopreload" || status=1
  fi
  return $status
}

if [[ ${1:-} == --inside ]]; then
  run_inside "$2"
  exit $?
fi

# On a fresh machine, install what is missing first (Debian packages only).
missing_tools() {
  local tool
  for tool in "$PG_CONFIG" "$PG_REGRESS" "$PG_ISOLATION_REGRESS"; do
    [[ -x $tool ]] || echo "$tool"
  done
  command -v pg_virtualenv >/dev/null || echo pg_virtualenv
  command -v make >/dev/null || echo make
  return 0
}
if [[ -n $(missing_tools) ]]; then
  echo "== installing dependencies (missing: $(missing_tools | xargs))"
  bash "$ROOT/scripts/install-deps.sh" || true
  find_pg_tools
fi
if [[ -n $(missing_tools) ]]; then
  echo "pg-test: not found: $(missing_tools | xargs); install postgresql-$PG_VERSION_MAJOR and postgresql-server-dev-$PG_VERSION_MAJOR (scripts/install-deps.sh)" >&2
  echo "pg: 0 passed, 1 failed"
  exit 1
fi

rm -rf "$OUT"
pg_ext_stage "$OUT/src" || { echo "pg-test: copying the sources to $OUT/src failed" >&2; echo "pg: 0 passed, 1 failed"; exit 1; }
echo "== building and installing pg_fence for PostgreSQL $PG_VERSION_MAJOR (warnings are errors)"
if ! { ext_make FENCE_CFLAGS=-Werror && ext_make install >/dev/null; }; then
  echo "pg-test: building or installing pg_fence failed (see above)" >&2
  echo "pg: 0 passed, 1 failed"
  exit 1
fi
status=0
export PG_FENCE_VECTORS=$ROOT/tests/vectors

# Full output goes to the logs; the terminal gets it without pg_regress's
# database setup chatter.
quiet() { grep -vE '^(SET|DROP DATABASE|CREATE DATABASE|ALTER DATABASE|=+ (dropping|creating) database .*)$' || true; }

# Each server on a free port: pg_virtualenv's own choice (5432 and up) knows
# only the clusters of this system's /etc/postgresql, not a chroot's
# neighbours or the host's.
echo "== pg_regress + isolation, shared_preload_libraries = pg_fence"
pg_virtualenv -t -v "$PG_VERSION_MAJOR" -c "-p $(pg_free_port)" \
  -o shared_preload_libraries=pg_fence -o pg_fence.max_tracked=16 \
  -o pg_fence.max_tracked_resources=16 -o pg_fence.max_inflight=4 \
  -o pg_fence.rejection_log_size=8 \
  bash "$ROOT/scripts/pg-test.sh" --inside preload 2>&1 | tee "$OUT/preload.log" | quiet || status=1

echo "== pg_fence.rejection_log_size = 0"
pg_virtualenv -t -v "$PG_VERSION_MAJOR" -c "-p $(pg_free_port)" \
  -o shared_preload_libraries=pg_fence -o pg_fence.rejection_log_size=0 \
  bash "$ROOT/scripts/pg-test.sh" --inside ringoff 2>&1 | tee "$OUT/ringoff.log" | quiet || status=1

echo "== pg_regress without shared_preload_libraries"
pg_virtualenv -t -v "$PG_VERSION_MAJOR" -c "-p $(pg_free_port)" \
  bash "$ROOT/scripts/pg-test.sh" --inside nopreload 2>&1 | tee "$OUT/nopreload.log" | quiet || status=1

# pg_regress prints "test NAME ... ok" (or "     NAME ... ok" in groups) up
# to PostgreSQL 15, and TAP ("ok 3 - NAME", "not ok 3 - NAME") from 16 on.
ok_line='^((test +| +)[^ ]+ +\.\.\. ok|ok +[0-9]+ +[-+] )'
failed_line='^((test +| +)[^ ]+ +\.\.\. FAILED|not ok +[0-9]+ +[-+] )'
passed=$(cat "$OUT/preload.log" "$OUT/ringoff.log" "$OUT/nopreload.log" | grep -cE "$ok_line" || true)
failed=$(cat "$OUT/preload.log" "$OUT/ringoff.log" "$OUT/nopreload.log" | grep -cE "$failed_line" || true)
expected=$(( 2 + $(list_tests "$TESTS/sql" sql preload | wc -l) +
             $(list_tests "$TESTS/specs" spec preload | wc -l) +
             $(list_tests "$TESTS/sql" sql nopreload | wc -l) ))
if (( passed + failed != expected )); then
  echo "pg-test: expected $expected test results, saw $((passed + failed)); see $OUT/*.log"
  failed=$(( expected - passed ))
  status=1
fi
(( failed == 0 )) || status=1

if (( status != 0 )); then
  for diffs in $(find "$OUT" -name regression.diffs | sort); do
    [[ -s $diffs ]] || continue
    echo "== $diffs"
    cat "$diffs"
  done
fi
echo "pg: $passed passed, $failed failed"
exit $status
