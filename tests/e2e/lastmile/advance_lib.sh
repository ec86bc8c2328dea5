# shellcheck shell=bash
# Shared by the publish-first tests of this suite (sourced after
# tests/e2e/cli/lib.sh, which sets ROOT, WORK, fail and the EXIT trap): a
# throwaway PostgreSQL with pg_fence on a fixed port of this suite's range
# (ADVANCE_PG_PORT), and psql helpers. Ports of the publish-first tests:
# 14400..14799 (each script: a cluster at FENCE_BASE_PORT, i.e. BASE+1..3 and
# BASE+101..103, and its PostgreSQL at ADVANCE_PG_PORT).
# shellcheck source=../safety/lib/common.sh
source "$ROOT/tests/e2e/safety/lib/common.sh"
# shellcheck source=../safety/lib/pg.sh
source "$ROOT/tests/e2e/safety/lib/pg.sh"
: "${ADVANCE_PG_PORT:?set ADVANCE_PG_PORT, the PostgreSQL port of this test (14400..14799)}"

# pg.sh picks a random free port; these tests keep to their own range.
pg_free_port() {
  if (exec 3<>"/dev/tcp/127.0.0.1/$ADVANCE_PG_PORT") 2>/dev/null; then
    echo "advance_lib.sh: port $ADVANCE_PG_PORT is taken" >&2
    return 1
  fi
  echo "$ADVANCE_PG_PORT"
}

pre_cleanup() { pg_throwaway_stop "$WORK"; }

sql() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }

# sqlstate_of SQL: runs SQL (psql -c), prints 00000 or the SQLSTATE of its error.
sqlstate_of() {
  local out
  out=$(psql -X -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -c "$1" 2>&1) && { echo 00000; return; }
  sed -n 's/^ERROR: *\([0-9A-Z]\{5\}\):.*/\1/p' <<<"$out" | head -n 1
}

# key_free KEY: nobody holds KEY (fencectl get exits 6).
key_free() {
  local code=0
  "$FENCECTL_BIN" get "$1" >/dev/null 2>&1 || code=$?
  ((code == 6))
}
