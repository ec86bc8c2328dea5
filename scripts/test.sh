#!/usr/bin/env bash
# Runs every pgfence test suite and ends with one line "N passed, N failed".
# Called by `make test` after `make deps build`. Exit status non-zero on any failure.
#
#   suites: ctest in build/ (unit, simulation, end-to-end), ctest in build-asan/
#   (ASan+UBSan build of the unit tests and a shorter simulation), the
#   PostgreSQL matrix (pg_regress + isolation on throwaway servers of 15, 17
#   and 18, the last two in Debian chroots, and the end-to-end suites next to
#   17; scripts/pg-matrix.sh), a short libFuzzer run of every decoder, and
#   last the Debian packages (built, installed, run and removed, one
#   extension package per major; tests/packaging/deb.sh).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=${JOBS:-2}
# shellcheck source=lib/pg-common.sh
source "$root/scripts/lib/pg-common.sh"   # ctest_counts
passed=0
failed=0
skipped=0
failed_suites=()
# The lines that say what failed, repeated at the end of the run: a suite's
# output can be long, and the end of a log is what a reader sees first.
failure_lines=$(mktemp)
trap 'rm -f "$failure_lines"' EXIT

log() { printf '\n==== %s  %s\n' "$(date +%H:%M:%S)" "$*"; }

# add_counts SUITE PASSED FAILED [SKIPPED]
add_counts() {
  passed=$((passed + $2))
  failed=$((failed + $3))
  skipped=$((skipped + ${4:-0}))
  ((${3} == 0)) || failed_suites+=("$1")
}

# keep_failures SUITE FILE: FILE's lines that name a failure (a Boost.Test
# check, a test ctest marks failed, timed out or not run, a script's FAIL
# line, a sanitizer's or libFuzzer's report), at most 40 of at most 400
# characters, into failure_lines.
keep_failures() {
  grep -aE 'error: in "|\*\*\*(Failed|Timeout|Exception|Not Run)|^ *(FAIL|FAILED|not ok)\b| FAILED\b|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:' "$2" |
    cut -c1-400 | head -n 40 | sed -E "s/\x1b\\[[0-9;]*m//g; s|^|$1: |" >>"$failure_lines"
}

# run_ctest SUITE BUILD_DIR [ctest args...]: counts from ctest's own output
# (a skipped test counts as skipped, not passed).
run_ctest() {
  local suite=$1 dir=$2
  shift 2
  local out counts
  out=$(mktemp)
  ctest --test-dir "$dir" --output-on-failure -j "$jobs" --timeout 600 "$@" 2>&1 | tee "$out"
  counts=$(ctest_counts "$out")
  keep_failures "$suite" "$out"
  rm -f "$out"
  if [[ -z "$counts" ]]; then
    echo "test.sh: $suite: ctest printed no summary" >&2
    add_counts "$suite" 0 1
    return
  fi
  # shellcheck disable=SC2086
  add_counts "$suite" $counts
}

# run_counted SUITE CMD...: a script that ends with "<word>: N passed, N failed"
# (and ", N skipped" perhaps).
run_counted() {
  local suite=$1
  shift
  local out rc line
  out=$(mktemp)
  "$@" 2>&1 | tee "$out"
  rc=${PIPESTATUS[0]}
  line=$(grep -E '^([A-Za-z-]+: )?[0-9]+ passed, [0-9]+ failed' "$out" | tail -n1)
  keep_failures "$suite" "$out"
  rm -f "$out"
  if [[ -z "$line" ]]; then
    add_counts "$suite" 0 1
    return
  fi
  local p f s
  p=$(sed -E 's/^([A-Za-z-]+: )?([0-9]+) passed, ([0-9]+) failed.*/\2/' <<<"$line")
  f=$(sed -E 's/^([A-Za-z-]+: )?([0-9]+) passed, ([0-9]+) failed.*/\3/' <<<"$line")
  s=$(sed -nE 's/.* failed, ([0-9]+) skipped.*/\1/p' <<<"$line")
  if ((rc != 0 && f == 0)); then f=1; fi
  add_counts "$suite" "$p" "$f" "${s:-0}"
}

# require SUITE PATH: PATH exists, or SUITE counts as failed. make test makes
# every build directory and the repository holds every script, so a missing
# one is a renamed or lost suite, never a reason to skip it.
require() {
  [[ -e $2 ]] && return 0
  echo "test.sh: $1: $2 is missing" >&2
  add_counts "$1" 0 1
  return 1
}

# modules: build/ builds every module, and so every module's tests
# (PGFENCE_MODULES_LEFT_OUT, written by the top-level CMakeLists.txt).
check_modules() {
  local line
  line=$(grep '^PGFENCE_MODULES_LEFT_OUT:INTERNAL=' "$root/build/CMakeCache.txt")
  if [[ -z $line ]]; then
    echo "test.sh: modules: build/CMakeCache.txt does not say which modules it leaves out" >&2
    add_counts modules 0 1
  elif [[ -n ${line#*=} ]]; then
    echo "test.sh: modules: build/ leaves out ${line#*=}; reconfigure it with -DPGFENCE_MODULES=all" >&2
    add_counts modules 0 1
  fi
}

start=$(date +%s)
log "coordinator: unit, simulation and end-to-end tests (build/)"
if require coordinator "$root/build/CMakeCache.txt"; then
  check_modules
  run_ctest coordinator "$root/build"
fi

log "coordinator: the same unit tests under ASan+UBSan (build-asan/)"
if require coordinator-asan "$root/build-asan/CMakeCache.txt"; then
  run_ctest coordinator-asan "$root/build-asan" -LE e2e
fi

log "pg_fence: the PostgreSQL matrix (15, 17, 18)"
if require pg-matrix "$root/scripts/pg-matrix.sh"; then
  run_counted pg-matrix env BUILD="$root/build" bash "$root/scripts/pg-matrix.sh"
fi

log "fuzz: short libFuzzer runs of the decoders"
if require fuzz "$root/scripts/fuzz.sh"; then
  run_counted fuzz bash "$root/scripts/fuzz.sh" "${FUZZ_SECONDS:-15}"
fi

# Last: it installs the Debian packages over the development build's
# extension files, removes them, and installs the development build again.
log "packages: build, install, run and remove the Debian packages"
if require packages "$root/tests/packaging/deb.sh"; then
  run_counted packages env BUILD="$root/build" PGFENCE_REQUIRE_CHROOTS=1 bash "$root/tests/packaging/deb.sh"
fi

log "finished in $(( $(date +%s) - start ))s"
if ((${#failed_suites[@]} > 0)); then
  echo "failed suites: ${failed_suites[*]}"
  if [[ -s $failure_lines ]]; then
    echo "what failed (the lines above that name a failure):"
    cat "$failure_lines"
  fi
fi
echo "$passed passed, $failed failed, $skipped skipped"
((failed == 0))
