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
passed=0
failed=0
failed_suites=()

log() { printf '\n==== %s  %s\n' "$(date +%H:%M:%S)" "$*"; }

# add_counts SUITE PASSED FAILED
add_counts() {
  passed=$((passed + $2))
  failed=$((failed + $3))
  ((${3} == 0)) || failed_suites+=("$1")
}

# run_ctest SUITE BUILD_DIR [ctest args...]: parses ctest's own summary line.
run_ctest() {
  local suite=$1 dir=$2
  shift 2
  local out
  out=$(mktemp)
  ctest --test-dir "$dir" --output-on-failure -j "$jobs" --timeout 600 "$@" 2>&1 | tee "$out"
  local line total bad
  line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$out" | tail -n1)
  rm -f "$out"
  if [[ -z "$line" ]]; then
    echo "test.sh: $suite: ctest printed no summary" >&2
    add_counts "$suite" 0 1
    return
  fi
  bad=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$line")
  total=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\2/' <<<"$line")
  add_counts "$suite" $((total - bad)) "$bad"
}

# run_counted SUITE CMD...: a script that ends with "<word>: N passed, N failed".
run_counted() {
  local suite=$1
  shift
  local out rc line
  out=$(mktemp)
  "$@" 2>&1 | tee "$out"
  rc=${PIPESTATUS[0]}
  line=$(grep -E '^([A-Za-z-]+: )?[0-9]+ passed, [0-9]+ failed' "$out" | tail -n1)
  rm -f "$out"
  if [[ -z "$line" ]]; then
    add_counts "$suite" 0 1
    return
  fi
  local p f
  p=$(sed -E 's/^([A-Za-z-]+: )?([0-9]+) passed, ([0-9]+) failed.*/\2/' <<<"$line")
  f=$(sed -E 's/^([A-Za-z-]+: )?([0-9]+) passed, ([0-9]+) failed.*/\3/' <<<"$line")
  if ((rc != 0 && f == 0)); then f=1; fi
  add_counts "$suite" "$p" "$f"
}

start=$(date +%s)
log "coordinator: unit, simulation and end-to-end tests (build/)"
run_ctest coordinator "$root/build"

if [[ -d "$root/build-asan" ]]; then
  log "coordinator: the same unit tests under ASan+UBSan (build-asan/)"
  run_ctest coordinator-asan "$root/build-asan" -LE e2e
fi

if [[ -f "$root/scripts/pg-matrix.sh" ]]; then
  log "pg_fence: the PostgreSQL matrix (15, 17, 18)"
  run_counted pg-matrix env BUILD="$root/build" bash "$root/scripts/pg-matrix.sh"
fi

if [[ -f "$root/scripts/fuzz.sh" ]]; then
  log "fuzz: short libFuzzer runs of the decoders"
  run_counted fuzz bash "$root/scripts/fuzz.sh" "${FUZZ_SECONDS:-15}"
fi

# Last: it installs the Debian packages over the development build's
# extension files, removes them, and installs the development build again.
if [[ -f "$root/tests/packaging/deb.sh" ]]; then
  log "packages: build, install, run and remove the Debian packages"
  run_counted packages env BUILD="$root/build" bash "$root/tests/packaging/deb.sh"
fi

log "finished in $(( $(date +%s) - start ))s"
if ((${#failed_suites[@]} > 0)); then
  echo "failed suites: ${failed_suites[*]}"
fi
echo "$passed passed, $failed failed"
((failed == 0))
