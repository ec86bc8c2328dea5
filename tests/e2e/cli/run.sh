#!/usr/bin/env bash
# `fencectl run`: exports FENCE_KEY and FENCE_TOKEN to the child, holds the
# lock while it runs (keepalives past the lease), releases on exit, exits with
# the child's status; held -> 3 without starting the child.
source "$(dirname "$0")/lib.sh"
start_cluster 3

env_file="$WORK/env"
# The child outlives two leases (lease 1s, runs 2.5s): keepalives must work.
code=0
fencectl run job --lease 1s -- sh -c "echo \"\$FENCE_KEY \$FENCE_TOKEN\" > '$env_file'; \
    '$FENCECTL_BIN' get job -o json > '$WORK/during'; sleep 2.5; '$FENCECTL_BIN' get job -o json > '$WORK/late'; exit 7" || code=$?
((code == 7)) || fail "run exited $code, expected the child's 7"
read -r key token <"$env_file"
[[ "$key" == job ]] || fail "FENCE_KEY='$key'"
[[ "$token" =~ ^[0-9]+$ ]] || fail "FENCE_TOKEN='$token'"
grep -q "\"token\":$token" "$WORK/during" || fail "lock not held with $token while the child ran: $(cat "$WORK/during")"
grep -q "\"token\":$token" "$WORK/late" || fail "lock lost after 2.5s with a 1s lease: $(cat "$WORK/late")"
expect_code 6 fencectl get job  # released on exit

# Signal exit: 128+N.
code=0
fencectl run job --lease 1s -- sh -c 'kill -TERM $$' || code=$?
((code == 143)) || fail "child killed by SIGTERM: run exited $code, expected 143"

# Held: exit 3, the child never starts.
holder=$(fencectl acquire job --lease 5s --wait 0s)
expect_code 3 fencectl run job --wait 0s -- touch "$WORK/started"
[[ ! -e "$WORK/started" ]] || fail "child started although the lock was held"
fencectl release job "$holder"

# Missing command: 127, lock released.
expect_code 127 fencectl run job -- /nonexistent/fencectl-e2e-cmd
expect_code 6 fencectl get job
echo "PASS [$TEST_NAME]"
