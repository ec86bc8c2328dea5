#!/usr/bin/env bash
# pg-test.sh: build and install pg_fence, then run its PostgreSQL tests
# against throwaway servers (pg_virtualenv -t, works as root):
#
#   1. preloaded server (shared_preload_libraries = pg_fence, and a small
#      pg_fence.max_tracked so the stats bound is testable):
#        pg_regress           tests/pg/sql/*.sql except nopreload*.sql
#        pg_isolation_regress tests/pg/specs/*.spec
#        dump_restore         pg_dump keeps fence_trusted_keys and require_proof
#   2. server without preload: pg_regress tests/pg/sql/nopreload*.sql
#      (fencing works; fence_stats says what to configure)
#
# Prints each test's result and ends with "pg: N passed, M failed"; exits
# non-zero on any failure, after printing the regression.diffs.
# Outputs go to build/pg-tests (override with PG_TEST_OUT).
# Usage: bash scripts/pg-test.sh        (from any directory)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
OUT=${PG_TEST_OUT:-$ROOT/build/pg-tests}
TESTS=$ROOT/tests/pg
# Paths of the PostgreSQL tools (found again after installing them).
find_pg_tools() {
  PGXS_DIR=$(dirname "$("$PG_CONFIG" --pgxs 2>/dev/null || echo /nonexistent/x)")/..
  PG_REGRESS=$PGXS_DIR/test/regress/pg_regress
  PG_ISOLATION_REGRESS=$PGXS_DIR/test/isolation/pg_isolation_regress
  PG_VERSION_MAJOR=$("$PG_CONFIG" --version 2>/dev/null | sed -E 's/^PostgreSQL ([0-9]+).*/\1/' || true)
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
# there.  Prints a pg_regress-style result.
dump_restore_test() {
  local db=regress_fence_dump restored=regress_fence_restored log=$OUT/dump_restore.log
  local proof got="" want refused="" guarded=""
  proof=$(sed -n 's/^proof=//p' "$PG_FENCE_VECTORS/token_proof_v1.txt")
  want=$'21fe31dfa154a261|12345678901234567890\nreport:8|0|t\nt'
  {
    dropdb --if-exists "$db" && dropdb --if-exists "$restored" &&
    createdb "$db" && createdb "$restored" &&
    psql -X -q -v ON_ERROR_STOP=1 -d "$db" \
      -v pub="$(cat "$PG_FENCE_VECTORS/token_proof_v1.pub")" <<'SQL' &&
CREATE EXTENSION pg_fence;
SELECT fence_trust_key(:'pub', 12345678901234567890);
SELECT fence_require_proof('report:8');
SQL
    pg_dump -d "$db" | psql -X -q -v ON_ERROR_STOP=1 -d "$restored" &&
    got=$(psql -X -At -v ON_ERROR_STOP=1 -d "$restored" -v proof="$proof" <<'SQL'
SELECT key_id, cluster_id FROM fence_trusted_keys;
SELECT resource, fence, require_proof FROM fence_resources;
SELECT fence_advance('report:8', 900, :'proof');
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

# Runs inside pg_virtualenv (PGHOST, PGPORT, PGUSER... are set).
run_inside() {
  local mode=$1 status=0
  if [[ $mode == preload ]]; then
    # shellcheck disable=SC2046
    "$PG_REGRESS" --inputdir="$TESTS" --outputdir="$OUT/regress" \
      --dbname=contrib_regression $(list_tests "$TESTS/sql" sql preload) || status=1
    # trust_concurrent.spec gets the shared vector's public key (the PEM's
    # one base64 line) and proof from these settings: the server cannot be
    # relied on to read files of the checkout (its user may not enter it).
    local pub_b64 proof
    pub_b64=$(grep -v '^-----' "$PG_FENCE_VECTORS/token_proof_v1.pub" | tr -d '\n')
    proof=$(sed -n 's/^proof=//p' "$PG_FENCE_VECTORS/token_proof_v1.txt")
    # shellcheck disable=SC2046
    PGOPTIONS="-c pg_fence_test.pub_b64=$pub_b64 -c pg_fence_test.proof=$proof" \
    "$PG_ISOLATION_REGRESS" --inputdir="$TESTS" --outputdir="$OUT/isolation" \
      --dbname=isolation_regression $(list_tests "$TESTS/specs" spec preload) || status=1
    dump_restore_test || status=1
  else
    # shellcheck disable=SC2046
    "$PG_REGRESS" --inputdir="$TESTS" --outputdir="$OUT/nopreload" \
      --dbname=contrib_regression $(list_tests "$TESTS/sql" sql nopreload) || status=1
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
  echo "pg-test: not found: $(missing_tools | xargs); install postgresql-15 and postgresql-server-dev-15 (scripts/install-deps.sh)" >&2
  echo "pg: 0 passed, 1 failed"
  exit 1
fi

echo "== building and installing pg_fence (warnings are errors)"
# clean first: objects built earlier without -Werror would not be rebuilt
if ! { make -s -C "$ROOT/pg_extension" PG_CONFIG="$PG_CONFIG" clean &&
       make -s -C "$ROOT/pg_extension" PG_CONFIG="$PG_CONFIG" FENCE_CFLAGS=-Werror &&
       make -s -C "$ROOT/pg_extension" PG_CONFIG="$PG_CONFIG" install >/dev/null; }; then
  echo "pg-test: building or installing pg_fence failed (see above)" >&2
  echo "pg: 0 passed, 1 failed"
  exit 1
fi

rm -rf "$OUT"
mkdir -p "$OUT"
status=0

# Token proofs (tests/pg/sql/proof.sql, upgrade.sql): the shared test vector
# is read from tests/vectors; more proofs are signed with its private key
# by tests/pg/sign-proof.sh; a second key pair, for key rotation, is RFC
# 8032's test 2 key (fixed, so its key id in the expected output is too).
mkdir -p "$OUT/keys" "$OUT/tmp"
perl -e 'print pack("H*", $ARGV[0])' \
  302e020100300506032b6570042204204ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb |
  openssl pkey -inform DER -out "$OUT/keys/second.key"
export PG_FENCE_VECTORS=$ROOT/tests/vectors
export PG_FENCE_SIGN=$TESTS/sign-proof.sh
export PG_FENCE_KEYS=$OUT/keys
export PG_FENCE_TMP=$OUT/tmp

# Full output goes to the logs; the terminal gets it without pg_regress's
# database setup chatter.
quiet() { grep -vE '^(SET|DROP DATABASE|CREATE DATABASE|ALTER DATABASE|=+ (dropping|creating) database .*)$' || true; }

echo "== pg_regress + isolation, shared_preload_libraries = pg_fence"
pg_virtualenv -t -v "$PG_VERSION_MAJOR" \
  -o shared_preload_libraries=pg_fence -o pg_fence.max_tracked=16 \
  bash "$ROOT/scripts/pg-test.sh" --inside preload 2>&1 | tee "$OUT/preload.log" | quiet || status=1

echo "== pg_regress without shared_preload_libraries"
pg_virtualenv -t -v "$PG_VERSION_MAJOR" \
  bash "$ROOT/scripts/pg-test.sh" --inside nopreload 2>&1 | tee "$OUT/nopreload.log" | quiet || status=1

# pg_regress prints "test NAME ... ok" (or "     NAME ... ok" in groups).
passed=$(cat "$OUT/preload.log" "$OUT/nopreload.log" | grep -cE '^(test +| +)[^ ]+ +\.\.\. ok' || true)
failed=$(cat "$OUT/preload.log" "$OUT/nopreload.log" | grep -cE '^(test +| +)[^ ]+ +\.\.\. FAILED' || true)
expected=$(( 1 + $(list_tests "$TESTS/sql" sql preload | wc -l) +
             $(list_tests "$TESTS/specs" spec preload | wc -l) +
             $(list_tests "$TESTS/sql" sql nopreload | wc -l) ))
if (( passed + failed != expected )); then
  echo "pg-test: expected $expected test results, saw $((passed + failed)); see $OUT/*.log"
  failed=$(( expected - passed ))
  status=1
fi
(( failed == 0 )) || status=1

if (( status != 0 )); then
  for diffs in "$OUT"/*/regression.diffs; do
    [[ -s $diffs ]] || continue
    echo "== $diffs"
    cat "$diffs"
  done
fi
echo "pg: $passed passed, $failed failed"
exit $status
