#!/usr/bin/env bash
# quiet.sh LOG LABEL CMD...: runs CMD with its output out of sight, for the
# steps `make demo` takes before the demo itself.
#
# Prints "LABEL ... " and, once CMD succeeds, "ok (Ns; output in LOG)" on the
# same line; CMD's stdout and stderr go to LOG (made anew each run). When CMD
# fails, "FAILED" and then the whole of LOG go to stderr, and quiet.sh exits
# with CMD's status: a failing step always shows its output. With V=1 in the
# environment CMD runs as it is, its output shown as it comes, and LOG is not
# written. CMD keeps the terminal as stdin (a sudo password prompt still works).
set -uo pipefail

if (($# < 3)); then
    echo "usage: quiet.sh LOG LABEL CMD..." >&2
    exit 2
fi
log=$1 label=$2
shift 2

if [[ "${V:-}" == 1 ]]; then
    echo "$label (V=1: its output follows)"
    exec "$@"
fi

mkdir -p "$(dirname "$log")" || exit 2
printf '%s ... ' "$label"
start=$SECONDS
rc=0
"$@" >"$log" 2>&1 || rc=$?
if ((rc != 0)); then
    echo "FAILED (exit $rc after $((SECONDS - start))s); its output, from $log:" >&2
    cat "$log" >&2
    exit "$rc"
fi
echo "ok ($((SECONDS - start))s; output in $log)"
