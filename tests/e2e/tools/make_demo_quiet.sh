#!/usr/bin/env bash
# make demo puts the story first: the steps before it print one line each.
#   1. scripts/quiet.sh: a step that succeeds prints one line and leaves its
#      output in the log; one that fails prints its whole output and exits
#      with its status; V=1 shows the output as it comes.
#   2. The Makefile's demo runs the build and pg_fence's install through
#      quiet.sh: `make -n demo` (a dry run: nothing is built or installed;
#      make runs only the recursive makes, themselves with -n) shows no build
#      command, and the build's commands are in the step's log.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
QUIET="$ROOT/scripts/quiet.sh"
W=$(mktemp -d "${TMPDIR:-/tmp}/make-demo-quiet.XXXXXX")
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "PASS: $*"; }
chatty() { seq 1 500; echo "warning: on stderr" >&2; }  # a build's worth of lines
export -f chatty

# 1a. Success: one line on stdout, nothing on stderr, everything in the log.
V= bash "$QUIET" "$W/logs/ok.log" "step one" bash -c chatty >"$W/ok.out" 2>"$W/ok.err" || fail "a step that succeeds failed"
[[ $(wc -l <"$W/ok.out") == 1 ]] || fail "a step that succeeds printed $(wc -l <"$W/ok.out") lines: $(head -3 "$W/ok.out")"
grep -q '^step one \.\.\. ok (.*output in '"$W/logs/ok.log"')$' "$W/ok.out" || fail "the line is '$(cat "$W/ok.out")'"
[[ ! -s "$W/ok.err" ]] || fail "a step that succeeds wrote to stderr: $(cat "$W/ok.err")"
[[ $(grep -c . "$W/logs/ok.log") == 501 ]] && grep -q "warning: on stderr" "$W/logs/ok.log" ||
    fail "the log does not hold the step's stdout and stderr"
pass "a step that succeeds prints: $(cat "$W/ok.out")"

# 1b. Failure: the whole output is shown (stderr), and the status is the step's.
rc=0
V= bash "$QUIET" "$W/fail.log" "step two" bash -c 'chatty; echo "error: the compiler gave up" >&2; exit 3' \
    >"$W/fail.out" 2>"$W/fail.err" || rc=$?
((rc == 3)) || fail "a step that exits 3 made quiet.sh exit $rc"
grep -q "FAILED (exit 3" "$W/fail.err" || fail "no FAILED line: $(head -3 "$W/fail.err")"
grep -q "^error: the compiler gave up$" "$W/fail.err" && grep -q "^500$" "$W/fail.err" && grep -q "^1$" "$W/fail.err" ||
    fail "the failed step's output is not shown whole"
pass "a step that fails exits 3 and shows its output ($(wc -l <"$W/fail.err") lines on stderr)"

# 1c. V=1: the output as it comes, no log.
rc=0
V=1 bash "$QUIET" "$W/v.log" "step three" bash -c 'chatty; exit 4' >"$W/v.out" 2>"$W/v.err" || rc=$?
((rc == 4)) || fail "with V=1 a step that exits 4 made quiet.sh exit $rc"
[[ $(grep -c '^[0-9]*$' "$W/v.out") == 500 ]] && grep -q "warning: on stderr" "$W/v.err" || fail "V=1 did not show the output"
[[ ! -e "$W/v.log" ]] || fail "V=1 wrote the log"
pass "V=1 shows the step's output and keeps its status"

# 2. The Makefile's demo, dry run, with a build directory of its own.
cd "$ROOT"
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -n demo BUILD="$W/build" >"$W/demo.out" 2>&1 ||
    { cat "$W/demo.out" >&2; fail "make -n demo failed"; }
if grep -nE '^(cmake|gcc|g\+\+|cc|clang|/usr/bin/(install|clang)|make(\[[0-9]+\])?:)|Entering directory' "$W/demo.out" >&2; then
    fail "make -n demo shows build commands (above) before the demo"
fi
grep -q "^make demo: building (JOBS=[0-9]*) \.\.\. ok" "$W/demo.out" || fail "no one-line build step: $(cat "$W/demo.out")"
grep -q "^make demo: installing pg_fence into PostgreSQL \.\.\. ok" "$W/demo.out" || fail "no one-line install step"
grep -q "cmake --build $W/build" "$W/build/make-demo-build.log" || fail "the build's commands are not in its log"
[[ $(tail -n 1 "$W/demo.out") == "bash scripts/demo.sh" ]] || fail "make -n demo does not end with the demo"
pass "make -n demo: $(wc -l <"$W/demo.out") lines before the demo; the build's commands are in make-demo-build.log"
