#!/usr/bin/env bash
# pg-matrix.sh: pg_fence's PostgreSQL tests on every major it is tested on.
#
#   15  the host's server (Debian 12): scripts/pg-test.sh
#   17  Debian 13 "trixie" in a chroot: scripts/pg-test.sh there, then the
#       end-to-end suites that run PostgreSQL next to the coordinator
#       (PgBouncer, logical replication, failover, pg_repack, the 15 -> 17
#       upgrade, token proofs, the demo, the Python worker) with the chroot's
#       server and programs
#   18  Debian "sid" in a chroot: scripts/pg-test.sh there
#
# The chroots are made once by scripts/pg-chroot.sh (in /var/cache/pgfence;
# a few minutes each the first time) and every mount they need lives only
# while a run does (tests/pgmatrix/chroot_selftest.sh checks that, and that a
# half-made chroot is never used, after the first chroot's pg-test). A chroot
# that cannot be made is a failure, not a skip.
#
#   PG_MATRIX="15 17 18"    the majors to test (default: all three)
#   PG_MATRIX_E2E="17"      the majors whose end-to-end suites run (after
#                           their pg-test; 15's run in make test's ctest)
#   BUILD=build             the coordinator's build tree (for the e2e suites)
#
# Each part prints its results; the last line is "pg-matrix: N passed, M failed".
# Outputs: build/pg-tests-MAJOR. Needs root for the chroots.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MAJORS=${PG_MATRIX:-15 17 18}
E2E_MAJORS=${PG_MATRIX_E2E-17}
BUILD=${BUILD:-build}
[[ $BUILD = /* ]] || BUILD="$ROOT/$BUILD"
# the end-to-end suites of pg_fence next to a server (ctest names)
E2E_TESTS='^(e2e_pgops_.*|e2e_proof_pg|e2e_demo|e2e_python_worker)$'

# shellcheck source=lib/pg-common.sh
source "$ROOT/scripts/lib/pg-common.sh"
passed=0
failed=0
skipped=0
summary=()

log() { printf '\n==== %s  %s\n' "$(date +%H:%M:%S)" "$*"; }

suite_of() {
  case $1 in
    15) echo host ;;
    17) echo trixie ;;
    18) echo sid ;;
    *) echo "pg-matrix: PostgreSQL $1 is not tested here (tested: 15, 17, 18)" >&2; return 1 ;;
  esac
}

# count PART PASSED FAILED SECONDS [SKIPPED]
count() {
  passed=$((passed + $2))
  failed=$((failed + $3))
  skipped=$((skipped + ${5:-0}))
  summary+=("$(printf '%-22s %3d passed, %d failed, %d skipped  (%d s)' "$1" "$2" "$3" "${5:-0}" "$4")")
}

# last_counts FILE REGEX: "P F" from the last "N passed, M failed" line
# matching REGEX in FILE, or nothing
last_counts() {
  grep -E "$2" "$1" | tail -n1 | sed -E 's/^(.*[^0-9])?([0-9]+) passed, ([0-9]+) failed.*$/\2 \3/'
}

# pg_test MAJOR: scripts/pg-test.sh for MAJOR, on the host or in its chroot
pg_test() {
  local major=$1 suite start out rc counts
  suite=$(suite_of "$major") || { count "pg $major" 0 1 0; return; }
  start=$(date +%s)
  out=$(mktemp)
  log "pg_fence on PostgreSQL $major ($suite)"
  if [[ $suite == host ]]; then
    PG_CONFIG=/usr/lib/postgresql/$major/bin/pg_config PG_TEST_OUT=$ROOT/build/pg-tests-$major \
      bash "$ROOT/scripts/pg-test.sh" 2>&1 | tee "$out"
    rc=${PIPESTATUS[0]}
  elif ! bash "$ROOT/scripts/pg-chroot.sh" ensure "$suite" >/dev/null; then
    echo "pg-matrix: the $suite chroot for PostgreSQL $major could not be made (above)" | tee "$out"
    rc=1
  else
    bash "$ROOT/scripts/pg-chroot.sh" run "$suite" PG_CONFIG=/usr/lib/postgresql/$major/bin/pg_config \
      PG_TEST_OUT=$ROOT/build/pg-tests-$major bash "$ROOT/scripts/pg-test.sh" 2>&1 | tee "$out"
    rc=${PIPESTATUS[0]}
  fi
  counts=$(last_counts "$out" '^pg: [0-9]+ passed, [0-9]+ failed')
  rm -f "$out"
  [[ -n $counts ]] || counts="0 1"
  set -- $counts
  if ((rc != 0 && $2 == 0)); then set -- "$1" 1; fi
  count "pg $major" "$1" "$2" $(( $(date +%s) - start ))
}

# selftest SUITE: scripts/pg-chroot.sh's promises (tests/pgmatrix/chroot_selftest.sh)
selftest() {
  local suite=$1 start out counts
  start=$(date +%s)
  out=$(mktemp)
  log "the chroots' mechanics ($suite)"
  bash "$ROOT/tests/pgmatrix/chroot_selftest.sh" "$suite" 2>&1 | tee "$out"
  counts=$(last_counts "$out" '^chroot: [0-9]+ passed, [0-9]+ failed')
  rm -f "$out"
  [[ -n $counts ]] || counts="0 1"
  set -- $counts
  count "chroot mechanics" "$1" "$2" $(( $(date +%s) - start ))
}

# e2e MAJOR: the end-to-end suites with MAJOR's server (from its chroot)
e2e() {
  local major=$1 suite start out counts
  suite=$(suite_of "$major") || { count "e2e $major" 0 1 0; return; }
  start=$(date +%s)
  log "end-to-end suites next to PostgreSQL $major ($suite)"
  if [[ $suite == host ]]; then
    echo "pg-matrix: the host's end-to-end suites run in make test's ctest" >&2
    return
  fi
  [[ -f $BUILD/CTestTestfile.cmake ]] || { echo "pg-matrix: no build in $BUILD (make build)" >&2; count "e2e $major" 0 1 0; return; }
  out=$(mktemp)
  # pg_fence as pg-test built it for this major, installed in this run's view
  # of the chroot, then the suites
  bash "$ROOT/scripts/pg-chroot.sh" with "$suite" bash -c '
    chroot "$PG_CHROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
      make -s -C "$1/pg_extension" PG_CONFIG="$2" install >/dev/null || exit 1
    shift 2
    exec ctest "$@"' _ "$ROOT/build/pg-tests-$major/src" "/usr/lib/postgresql/$major/bin/pg_config" \
    --test-dir "$BUILD" --output-on-failure --timeout 300 -R "$E2E_TESTS" 2>&1 | tee "$out"
  counts=$(ctest_counts "$out")
  rm -f "$out"
  if [[ -z $counts ]]; then count "e2e $major" 0 1 $(( $(date +%s) - start )); return; fi
  set -- $counts
  count "e2e $major" "$1" "$2" $(( $(date +%s) - start )) "$3"
}

selftest_done=0
for major in $MAJORS; do
  pg_test "$major"
  suite=$(suite_of "$major" 2>/dev/null) || suite=host
  if [[ $suite != host ]] && ((selftest_done == 0)) && bash "$ROOT/scripts/pg-chroot.sh" ready "$suite"; then
    selftest "$suite"
    selftest_done=1
  fi
  if [[ " $E2E_MAJORS " == *" $major "* ]]; then e2e "$major"; fi
done

log "PostgreSQL matrix"
printf '%s\n' "${summary[@]}"
echo "pg-matrix: $passed passed, $failed failed, $skipped skipped"
((failed == 0))
