# shellcheck shell=bash
# Helpers of the pg operations tests (tests/e2e/pgops/*.sh; sourced):
# throwaway servers from tests/e2e/safety/lib/pg.sh, bounded waits from
# tests/e2e/safety/lib/common.sh, and a few psql wrappers.
#
#   pgops_workdir NAME     a fresh work directory under /tmp (mode 711)
#   on DIR CMD...          CMD with PGPORT of the throwaway server in DIR
#   sql ARGS...            psql, quiet, unaligned, stop on the first error
#   sqlstate CMD ARGS...   run a psql wrapper (sql, on DIR sql, ...) and print
#                          the SQLSTATE of its first error, 00000 if none
#   prints EXPECTED CMD... CMD prints exactly EXPECTED (run anew each time, for
#                          e2e_wait_for: e2e_wait_for 20 prints 0 sub -c ...)
#   fail MSG / pass MSG    one line of the test's verdict; fail exits 1

E2E_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
export E2E_ROOT
# shellcheck source=../safety/lib/common.sh
source "$E2E_ROOT/tests/e2e/safety/lib/common.sh"
# shellcheck source=../safety/lib/pg.sh
source "$E2E_ROOT/tests/e2e/safety/lib/pg.sh"

fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "PASS: $*"; }

# (mode 711: the servers' owner, postgres, must reach the data directories below)
pgops_workdir() {
  local dir
  dir=$(mktemp -d "/tmp/pgfence-pgops-$1.XXXXXX") && chmod 711 "$dir" && echo "$dir"
}

on() {
  local dir=$1
  shift
  PGPORT=$(cat "$dir/pg/port") "$@"
}

sql() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }

prints() {
  local expected=$1
  shift
  [[ $("$@" 2>/dev/null) == "$expected" ]]
}

sqlstate() {
  local out
  out=$("$@" -v VERBOSITY=verbose 2>&1) && { echo 00000; return 0; }
  out=$(sed -n 's/^ERROR: *\([0-9A-Z]\{5\}\):.*/\1/p' <<<"$out" | head -n 1)
  echo "${out:-none}"
}
