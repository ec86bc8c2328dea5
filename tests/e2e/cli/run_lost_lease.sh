#!/usr/bin/env bash
# `fencectl run` terminates its child when the lease is lost: the whole cluster
# is SIGSTOPped past the lease, so no keepalive can succeed; BEFORE the local
# deadline (send time of the last successful keepalive + lease x (1 - rho),
# rho 5% by default) fencectl must
# SIGTERM the child, SIGKILL it, and exit 4. The child writes a timestamp every
# 50ms. Every keepalive the leader processed was processed before the SIGSTOP,
# so the leader's lease ends before stop + lease: the last tick must come
# before that, and the file must stop growing before the cluster resumes.
source "$(dirname "$0")/lib.sh"
start_cluster 3

lease_ms=2000
grace_ms=500
ticks="$WORK/ticks"
stopped=0
resume() {
    if ((stopped)); then kill -CONT $(member_pids) 2>/dev/null || true; fi
    stopped=0
}
pre_cleanup() { resume; }

# The child ignores SIGTERM: fencectl must follow up with SIGKILL (after the
# grace, cut short so that the SIGKILL still lands before the deadline).
fencectl run job --lease "${lease_ms}ms" --grace "${grace_ms}ms" -- \
    sh -c "trap '' TERM; while :; do date +%s%N >> '$ticks'; sleep 0.05; done" 2>"$WORK/run.err" &
run_pid=$!
wait_until 10 "child writing ticks" test -s "$ticks"

stop_ns=$(date +%s%N)
kill -STOP $(member_pids)
stopped=1

# Bounded wait for fencectl: lease + grace + release attempt (1s) + slack.
deadline_s=$(((lease_ms + grace_ms + 1000) / 1000 + 10))
timeout "$deadline_s" tail --pid="$run_pid" -f /dev/null || fail "fencectl run still running ${deadline_s}s after SIGSTOP"
code=0
wait "$run_pid" || code=$?
exited_ns=$(date +%s%N)
((code == 4)) || fail "fencectl run exited $code, expected 4 (lost lease); stderr: $(cat "$WORK/run.err")"
grep -q "lost" "$WORK/run.err" || fail "no 'lost' message: $(cat "$WORK/run.err")"

# The child is gone while the cluster is still stopped: no tick after fencectl exited.
last_tick=$(tail -n 1 "$ticks")
((last_tick < exited_ns)) || fail "child wrote at $last_tick, after fencectl exited at $exited_ns"
# ... and it was dead before the lease could have run out on the stopped leader.
((last_tick - stop_ns < lease_ms * 1000000)) ||
    fail "child still wrote $(((last_tick - stop_ns) / 1000000))ms after the cluster stopped (lease ${lease_ms}ms)"
size=$(stat -c %s "$ticks")
resume
# Bounded check that nothing is still writing (3 x 100ms after resuming).
for _ in 1 2 3; do
    sleep 0.1
    [[ $(stat -c %s "$ticks") == "$size" ]] || fail "ticks file still growing: the child survived"
done
echo "PASS [$TEST_NAME] child stopped $(((last_tick - stop_ns) / 1000000))ms after SIGSTOP of the cluster"
