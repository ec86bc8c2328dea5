#!/usr/bin/env bash
# Leases that keep their time across a leader change (docs/guarantees.md
# "Checkpoints"): a holder of a 12 s lease dies (never renews) and the leader
# is SIGKILLed 6.5 s after the holder's send; how long until a waiting
# acquire gets the key, with --lease-checkpoints off (cluster at
# FENCE_BASE_PORT) and on (at FENCE_BASE_PORT + 10). Neither may grant before
# the holder's deadline (send + 12 s x 0.95, checked by checkpoint_run.sh).
# Off, the new leader restarts the lease at its full 12 s x 1.05 from its
# election: the key frees at least 6.5 + 12.6 = 19.1 s after the send. On, it
# restarts from the checkpoint taken at the half (about 12 - 6/1.05 = 6.3 s
# left): about 6.5 + election + 6.6 s. Their difference is (12 - 6.3) x 1.05
# = 6 s less the difference of the two elections: on must be at least 3 s
# sooner.
set -euo pipefail
here=$(dirname "$0")
: "${FENCE_BASE_PORT:?set FENCE_BASE_PORT}"
off=$(FENCE_BASE_PORT=$FENCE_BASE_PORT bash "$here/checkpoint_run.sh" off | tee /dev/stderr | grep '^result ') ||
    { echo "FAIL: the run with --lease-checkpoints off failed" >&2; exit 1; }
on=$(FENCE_BASE_PORT=$((FENCE_BASE_PORT + 10)) bash "$here/checkpoint_run.sh" on | tee /dev/stderr | grep '^result ') ||
    { echo "FAIL: the run with --lease-checkpoints on failed" >&2; exit 1; }
off_ms=${off#*got_ms=}; off_ms=${off_ms%% *}
on_ms=${on#*got_ms=}; on_ms=${on_ms%% *}
echo "dead holder's key granted again: checkpoints off ${off_ms} ms, on ${on_ms} ms after the holder's send"
((off_ms >= 19100)) || { echo "FAIL: off granted at ${off_ms} ms, before kill + a full lease x 1.05 (19100 ms)" >&2; exit 1; }
((on_ms + 3000 <= off_ms)) || { echo "FAIL: on (${on_ms} ms) is not 3 s sooner than off (${off_ms} ms)" >&2; exit 1; }
echo "PASS: checkpointed lease freed $((off_ms - on_ms)) ms sooner (off ${off_ms} ms, on ${on_ms} ms)"
