#!/usr/bin/env bash
# check-debian13.sh (make check-debian13): the two commands on Debian 13
# (trixie), inside the trixie chroot of scripts/pg-chroot.sh (made once, in
# /var/cache, when missing or broken). Needs root.
#
# On a copy of this checkout in build-debian13/src (the files git tracks or
# would track, as they are in the working tree; the host's build/ and
# pg_extension/ objects are untouched), as root in the chroot:
#   1. deps    scripts/install-deps.sh: its Debian 13 list, what the chroot
#              lacks installed into this run's view of it (which the run's
#              end discards: under a minute each time)
#   2. build   make build WERROR=ON: the coordinator with g++ 14 and Boost 1.83,
#              warnings as errors, and pg_fence for PostgreSQL 17
#   3. demo    make demo: installs pg_fence into the chroot's PostgreSQL 17 and
#              plays the demo (a 3-member cluster on loopback, a throwaway server)
#   4. unit    ctest -LE e2e: the unit tests and the simulation
# Each step needs the ones before it: after a failure the rest do not run.
# Prints each step's result and seconds, then "check-debian13: N passed,
# N failed, N not run" (the steps) and the total time; exit status 0 only if
# every step passed. The copy's build is kept, so a later run rebuilds only
# what changed (make clean removes it). On this 2-core machine: about 15
# minutes the first time (the full build is 13 of them, 22 while another
# build runs; the packages under one; a missing chroot adds about 3), about
# 2 once the build exists (the demo 17 s, the unit tests 90 s).
#
#   check-debian13.sh            the check, from the host
#   check-debian13.sh --inside   steps 1-4 (run by the above inside the chroot)
# Environment: JOBS (default 2).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
JOBS=${JOBS:-2}
COPY=$ROOT/build-debian13
UNIT_TIMEOUT_S=600   # per ctest test, as scripts/test.sh

die() { echo "check-debian13: $*" >&2; exit 2; }
now() { date +%s; }

# copy_checkout: $ROOT's files into $COPY/src with their times (so make
# rebuilds only what changed); a file gone from the checkout goes from the
# copy too (the previous run's list is in $COPY/files).
copy_checkout() {
  local list=$COPY/files.new
  mkdir -p "$COPY/src"
  git -C "$ROOT" ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do
      if [[ -f $ROOT/$f || -L $ROOT/$f ]]; then printf '%s\0' "$f"; fi   # not a deleted tracked file
    done >"$list"
  [[ -s $list ]] || die "git lists no file in $ROOT"
  if [[ -f $COPY/files ]]; then
    comm -z -23 <(sort -z "$COPY/files") <(sort -z "$list") |
      (cd "$COPY/src" && xargs -0 -r rm -f --)
  fi
  tar -C "$ROOT" --null -T "$list" --format=posix -cf - | tar -C "$COPY/src" -xf -
  mv "$list" "$COPY/files"
}

# --- inside the chroot ---------------------------------------------------------
readonly STEPS=(deps build demo unit)
declare -a step_lines=()
steps_passed=0
steps_failed=0

# run_step NAME: runs step NAME, records its result and time.
run_step() {
  local name=$1 start rc
  printf '\n==== check-debian13: %s\n' "$name"
  start=$(now)
  set +e
  case $name in
    deps) bash scripts/install-deps.sh ;;
    build) make build JOBS="$JOBS" WERROR=ON ;;
    demo) make demo JOBS="$JOBS" ;;
    unit) unit_tests ;;
  esac
  rc=$?
  set -e
  if ((rc == 0)); then
    steps_passed=$((steps_passed + 1))
    step_lines+=("$(printf '  %-6s passed  %5d s' "$name" $(($(now) - start)))")
  else
    steps_failed=$((steps_failed + 1))
    step_lines+=("$(printf '  %-6s FAILED  %5d s  (exit %d)' "$name" $(($(now) - start)) "$rc")")
  fi
  return "$rc"
}

# unit_tests: ctest without the e2e label, and its own count line.
unit_tests() {
  local out rc
  out=$(mktemp)
  ctest --test-dir build -LE e2e -j "$JOBS" --timeout "$UNIT_TIMEOUT_S" --output-on-failure 2>&1 | tee "$out"
  rc=${PIPESTATUS[0]}
  unit_summary=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$out" | tail -n1 || true)
  rm -f "$out"
  [[ -n $unit_summary ]] || { echo "check-debian13: ctest printed no summary" >&2; return 1; }
  return "$rc"
}

inside() {
  local codename
  # shellcheck source=/dev/null
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  [[ $codename == trixie ]] || die "--inside runs in the Debian 13 chroot, not on '$codename'"
  cd "$(dirname "${BASH_SOURCE[0]}")/.."
  unit_summary=""
  local name
  # each step needs the ones before it: after a failure the rest do not run
  for name in "${STEPS[@]}"; do
    if ((steps_failed > 0)); then
      step_lines+=("$(printf '  %-6s not run' "$name")")
    else
      run_step "$name" || true
    fi
  done
  printf '\n==== check-debian13: Debian 13 (trixie), %s, %s\n' \
    "$(g++ --version | head -n1)" "$(pg_config --version)"
  printf '%s\n' "${step_lines[@]}"
  [[ -z $unit_summary ]] || echo "  unit tests: $unit_summary"
  echo "check-debian13: $steps_passed passed, $steps_failed failed, $((${#STEPS[@]} - steps_passed - steps_failed)) not run"
  ((steps_passed == ${#STEPS[@]}))
}

# --- on the host ---------------------------------------------------------------
outside() {
  local start rc
  [[ $(id -u) -eq 0 ]] || die "needs root (the chroot: debootstrap, mounts, apt)"
  command -v git >/dev/null || die "needs git (to list the checkout's files)"
  start=$(now)
  echo "check-debian13: copying the checkout to $COPY/src"
  copy_checkout
  set +e
  bash "$ROOT/scripts/pg-chroot.sh" run trixie TERM="${TERM:-dumb}" JOBS="$JOBS" \
    bash "$COPY/src/scripts/check-debian13.sh" --inside
  rc=$?
  set -e
  echo "check-debian13: $( ((rc == 0)) && echo PASSED || echo "FAILED (exit $rc)") in $(($(now) - start)) s"
  return "$rc"
}

case ${1:-} in
  "") outside ;;
  --inside) inside ;;
  -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" ;;
  *) die "unknown argument '$1' (none, --inside, --help)" ;;
esac
