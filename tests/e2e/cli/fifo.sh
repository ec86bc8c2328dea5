#!/usr/bin/env bash
# `--wait` queues FIFO: three waiters that arrive in order A, B, C get the lock
# in that order, with increasing tokens, once the holder releases. Each waiter
# is `fencectl run`, so this also checks that run releases on exit (else the
# next waiter would never get the lock).
source "$(dirname "$0")/lib.sh"
start_cluster 3

holder=$(fencectl acquire queue --lease 10s --wait 0s)
order="$WORK/order"
pids=()
n=0
for name in A B C; do
    fencectl run queue --lease 5s --wait 30s -- sh -c "echo $name \$FENCE_TOKEN >> '$order'" &
    pids+=($!)
    n=$((n + 1))
    # The next waiter starts only once this one is queued on the leader.
    wait_until 10 "waiter $name queued" waiters_at_least "$n"
done
[[ ! -e "$order" ]] || fail "a waiter ran while the holder still held the lock: $(cat "$order")"

fencectl release queue "$holder" || fail "holder release failed"
for pid in "${pids[@]}"; do
    code=0
    timeout 30 tail --pid="$pid" -f /dev/null || fail "waiter pid $pid still running after 30s"
    wait "$pid" || code=$?
    ((code == 0)) || fail "waiter pid $pid exited $code"
done

names=$(awk '{printf "%s", $1}' "$order")
[[ "$names" == "ABC" ]] || fail "lock order was '$names', expected ABC: $(cat "$order")"
prev=$holder
while read -r name tok; do
    ((tok > prev)) || fail "waiter $name got token $tok, not above $prev"
    prev=$tok
done <"$order"
expect_code 6 fencectl get queue
echo "PASS [$TEST_NAME]"
