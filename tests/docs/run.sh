#!/usr/bin/env bash
# Docs that run: the examples of README.md, docs/*.md and clients/python/README.md
# are executed against a real cluster and PostgreSQL, in order, and what they
# print is checked where the doc shows it. An example that cannot run as
# written fails the test. ctest runs it as e2e_docs (make test); by hand:
#
#   FENCECTL_BIN=build/coordinator/cli/fencectl \
#   FENCE_COORDINATOR_BIN=build/coordinator/server/fence-coordinator \
#     bash tests/docs/run.sh [FILE...]        # default: every file above
#
# It starts a throwaway PostgreSQL with pg_fence (tests/e2e/safety/lib/pg.sh;
# make test installs the extension) and a 3-member cluster on free ports, puts
# fencectl, fence-coordinator and fence-worker (FENCE_WORKER_BIN) first in
# PATH (but not for README.md, whose quick start must put fencectl on PATH
# itself, as a newcomer's shell has it nowhere), exports PGHOST, PGPORT, PGUSER, FENCE_ENDPOINTS and FENCE_BIN_DIR,
# runs the runner's self-test (below), then tests/docs/docrun.py on the
# files. It prints PASS or FAIL with file:line per block (a failure with what
# the block printed and what was expected) and ends with "N passed, N
# failed" (hidden blocks count too); exit 1 on any failure. About 20 seconds.
#
# Marking an example: an HTML comment, invisible on the rendered page, on the
# line before the block's opening fence (indented like it or not):
#
#   <!-- doctest: sh -->       the block runs in the file's bash session
#   <!-- doctest: sql -->      the block runs in psql, on the file's database
#   <!-- doctest: python -->   the block runs in the file's Python session
#   <!-- doctest: output -->   this block is what the sh or python block just
#                              before it prints (stdout and stderr together;
#                              trailing spaces and blank lines aside): a line
#                              "..." matches any number of lines, "..." inside
#                              a line any text (a token, a time, a port)
#   <!-- doctest: skip REASON -->  this block is not run, for REASON
#   <!-- doctest: sh           a hidden block: the lines up to a line "-->"
#   CODE                       run like a block of that language (sh, sql,
#   -->                        python): what the example assumes the reader
#                              has already, e.g. a table; not a place to fix
#                              an example up
#
# Every fenced block tagged sh, bash, shell, console, sql, python or py must be
# marked to run or to be skipped; an unmarked one fails its file. Untagged
# blocks (usage synopses, outputs, formats, diagrams) are not looked at.
#
# Per file, blocks run in document order:
#   - sh: one bash for the file, so variables, functions and the directory
#     carry from block to block. A block fails at its first failing command,
#     as under set -e (also inside functions and $(...)). A block that exits
#     its shell fails, and the next sh block gets a new one. What the shell
#     exports (FENCE_ENDPOINTS, PATH, PYTHONPATH, ...) is the environment of
#     the file's later python and sql blocks and of a new shell, as in one
#     terminal. The directory is a stand-in for the repository's top made of
#     symbolic links (scripts/cluster.sh, clients/python/... work as
#     written, and files an example makes stay out of the checkout); its
#     build/ is the build tree of the fencectl under test. TMPDIR is the
#     run's own.
#   - python: one interpreter for the file ($DOCTEST_PYTHON, else
#     /usr/bin/python3, which has psycopg2), started at the file's first
#     python block; every block runs in the same globals and fails on an
#     exception (its traceback gives the doc's line numbers).
#   - sql: one psql per block (psql -X -q -At), on the database
#     doctest_<file> made for the file, so tables carry from block to block;
#     the file's sh and python blocks get it as PGDATABASE. Every statement
#     must succeed, except one whose line ends with a comment
#     "-- ERROR 55F01" (any SQLSTATE): it must fail with that SQLSTATE. A
#     comment line "-- ERROR:  message" right after a statement must be in
#     its error. A statement whose line ends with "-- → VALUE" must print
#     VALUE (psql's unaligned form: fields joined by |; "..." as above).
#   - In the examples, scripts/cluster.sh is tests/docs/cluster.sh: a DIR
#     under /tmp/ goes to the run's directory, start picks free ports and
#     prints `export FENCE_ENDPOINTS=...`. Clusters an example starts are
#     stopped after its file.
#   - A block gets 60 s (docrun.py --timeout); its session is then killed.
#
# Self-test: tests/docs/selftest/*.md hold blocks that must pass and blocks
# that must fail (each check above); the runner's verdicts on them must be
# selftest/verdicts.txt, else the test fails before the docs run.
#
# What is not run (each such block carries a skip marker saying why):
#   - make demo, make test, make install, make -C pg_extension install: they
#     build the tree or install into the host; make test is what runs this.
#   - Operator runbooks on real hosts: fence-coordinator on 10.0.0.x
#     addresses, systemd units, apt, pg_upgradecluster, pg_repack, backups to
#     /backups, keys under /etc/pgfence (tests/e2e/membership,
#     tests/packaging and tests/e2e/pgops cover those paths).
#   - Verifiable tokens with a real cluster's key and proof in place of the
#     placeholders (tests/e2e/proof/pg_proof.sh runs that path).
#   - SQL that shows what a function runs, with placeholders in it.
#   - Test suites' own command lines (tests/e2e/python/...): ctest runs them.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
E2E_ROOT=$(cd "$HERE/../.." && pwd)
export E2E_ROOT
# shellcheck source=../e2e/safety/lib/common.sh
source "$E2E_ROOT/tests/e2e/safety/lib/common.sh"
# shellcheck source=../e2e/safety/lib/pg.sh
source "$E2E_ROOT/tests/e2e/safety/lib/pg.sh"

FILES=("$@")
if ((${#FILES[@]} == 0)); then
  FILES=(README.md)
  for f in "$E2E_ROOT"/docs/*.md; do FILES+=("docs/${f##*/}"); done
  FILES+=(clients/python/README.md)
fi

FENCECTL=$(e2e_find_bin fencectl FENCECTL_BIN) || { echo "docs: fencectl not found: set FENCECTL_BIN" >&2; exit 2; }
COORDINATOR=$(e2e_find_bin fence-coordinator FENCE_COORDINATOR_BIN) ||
  { echo "docs: fence-coordinator not found: set FENCE_COORDINATOR_BIN" >&2; exit 2; }
WORKER=$(e2e_find_bin fence-worker FENCE_WORKER_BIN || true)

W=$(mktemp -d /tmp/pgfence-docs.XXXXXX)
cleanup() {
  local rc=$? d
  while IFS= read -r d; do
    bash "$E2E_ROOT/scripts/cluster.sh" stop "$d" >/dev/null 2>&1 || true
  done < <(find "$W" -name cluster.env -printf '%h\n' 2>/dev/null)
  pg_throwaway_stop "$W"
  if ((rc == 0)); then rm -rf "$W"; else echo "docs: kept $W" >&2; fi
}
trap cleanup EXIT

mkdir -p "$W/bin"
ln -s "$(readlink -f "$FENCECTL")" "$W/bin/fencectl"
ln -s "$(readlink -f "$COORDINATOR")" "$W/bin/fence-coordinator"
[[ -n $WORKER ]] && ln -s "$(readlink -f "$WORKER")" "$W/bin/fence-worker"
export PATH="$W/bin:$PATH" DOCTEST_BIN="$W/bin"
FENCE_BIN_DIR=$(dirname "$(readlink -f "$COORDINATOR")")
export FENCE_BIN_DIR
# build/ in the examples: the build tree this fencectl comes from.
fencectl_build=""
case $(readlink -f "$FENCECTL") in
  */coordinator/cli/fencectl) fencectl_build=$(readlink -f "$FENCECTL"); fencectl_build=${fencectl_build%/coordinator/cli/fencectl} ;;
esac

pg_throwaway_start "$W" >/dev/null || { echo "docs: PostgreSQL did not start" >&2; exit 1; }
endpoints=$(DOCTEST_TMP=$W bash "$HERE/cluster.sh" start "$W/cluster" 3) ||
  { echo "docs: the cluster did not start" >&2; exit 1; }
eval "$endpoints"
export FENCE_ENDPOINTS
e2e_wait_for 20 fencectl acquire docs:warmup --lease 1s --wait 0s || { echo "docs: no leader within 20s" >&2; exit 1; }

export DOCTEST_PYTHON=${DOCTEST_PYTHON:-/usr/bin/python3}
cd "$E2E_ROOT"

# The runner's own test first: on selftest/*.md its verdicts must be those
# of selftest/verdicts.txt, failures included (every check shown able to fail).
/usr/bin/python3 "$HERE/docrun.py" --root "$E2E_ROOT" --work "$W/selftest" \
  tests/docs/selftest/blocks.md tests/docs/selftest/unmarked.md >"$W/selftest.out" 2>&1 || true
if ! diff <(grep -E '^(PASS|FAIL) ' "$W/selftest.out") "$HERE/selftest/verdicts.txt" >"$W/selftest.diff"; then
  echo "docs: the runner's self-test gave other verdicts than tests/docs/selftest/verdicts.txt (< got, > expected):" >&2
  cat "$W/selftest.diff" >&2
  echo "docs: its whole output: $W/selftest.out" >&2
  exit 1
fi
echo "docs: the runner's self-test: $(wc -l <"$HERE/selftest/verdicts.txt") verdicts as expected"

/usr/bin/python3 "$HERE/docrun.py" --root "$E2E_ROOT" --work "$W/files" \
  --fencectl-build "$fencectl_build" "${FILES[@]}"
