#!/usr/bin/env bash
# `make help` prints the Makefile's opening comment block and nothing else:
# every line of it, without the comment marks, and no line after it (no blank
# line, no line of Makefile code).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
fail() { echo "FAIL: $*" >&2; exit 1; }

# Run as a newcomer would: not inside another make (its flags would add
# "Entering directory" lines).
out=$(cd "$ROOT" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make help) || fail "make help failed"
want=$(awk '!/^#/ { exit } { sub(/^# ?/, ""); print }' "$ROOT/Makefile")
[[ -n "$want" ]] || fail "the Makefile does not open with a comment block"
if [[ "$out" != "$want" ]]; then
    diff <(echo "$want") <(echo "$out") >&2 || true
    fail "make help is not the Makefile's opening comment block (diff: expected, got)"
fi
# $(...) drops trailing newlines: count the lines as printed.
lines=$(cd "$ROOT" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make help | wc -l)
[[ $lines == $(wc -l <<<"$want") ]] || fail "make help printed $lines lines, the comment block has $(wc -l <<<"$want")"
last=$(tail -n 1 <<<"$out")
[[ -n "${last// /}" ]] || fail "make help ends with a blank line"
echo "PASS: make help prints the $lines lines of the Makefile's header; the last: '$last'"
