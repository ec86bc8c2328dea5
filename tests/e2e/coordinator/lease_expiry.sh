#!/usr/bin/env bash
# Two lease paths the other tests do not reach:
#  1. Expiry check with a failed leadership round: the leader's deadline passes
#     while both followers are SIGSTOPped (but before CheckQuorum deposes it).
#     Its quorum round cannot complete, so it must log expire_not_confirmed and
#     propose nothing; after the followers resume, the (new) leader restarts
#     the lease at full length and, with no keepalive, expires it normally.
#  2. Phantom lock: a client gives up while its acquire is being committed
#     (followers stopped, so the Grant cannot commit yet); when the Grant
#     applies the leader finds the connection gone and proposes Release itself.
#
# Timing: heartbeat 50 ms, election 1000 ms (CheckQuorum deposes a leader
# between 1 and 2 s after it last heard from a quorum), lease 3000 ms (the
# minimum, 1.5 x the 2000 ms maximum election timeout), so the leader
# considers Expire 3150 ms after the grant (lease x (1 + 5%), the default
# --max-clock-drift-ppm). Each attempt checks
# that its sleeps landed inside the window it needs, and retries (bounded) if
# the loaded machine made them late.
source "$(dirname "$0")/lib.sh"
cluster_start 3 "--heartbeat-ms 50 --election-ms 1000 --min-lease 3000"

now_ms() { echo $(($(date +%s%N) / 1000000)); }
followers_of() { local i; for ((i = 1; i <= N; i++)); do [[ $i == "$1" ]] || echo -n "$(member_pid "$i") "; done; }
STOPPED=""
resume() { [[ -z "$STOPPED" ]] || kill -CONT $STOPPED 2>/dev/null || true; STOPPED=""; }
trap 'rc=$?; set +e; resume; (exit $rc); cleanup' EXIT

# ---- 1. failed leadership round at expiry -------------------------------------
done1=""
for attempt in 1 2 3; do
    L=$(wait_leader 10) || fail "no leader"
    key="exp$attempt"
    post "$L" /v1/acquire "{\"key\":\"$key\",\"lease_ms\":3000,\"owner\":\"w\"}"
    [[ $HTTP_CODE == 200 ]] || fail "acquire $key: $HTTP_CODE $HTTP_BODY"
    T=$(json_field "$HTTP_BODY" token)
    granted=$(now_ms)
    # Stop both followers 2.45 s after the grant: the expiry point (<= granted
    # + 3150) passes before CheckQuorum can depose the leader (>= stop + 1000).
    sleep 2.45
    STOPPED=$(followers_of "$L")
    kill -STOP $STOPPED
    stopped=$(now_ms)
    if ((stopped - granted > 2950)); then
        resume
        echo "attempt $attempt: followers stopped $((stopped - granted)) ms after the grant (too late); retrying"
        continue
    fi
    saw_not_confirmed() { grep -q "event=expire_not_confirmed key=$key token=$T" "$DIR/$L.log"; }
    wait_until 10 "leader $L logs expire_not_confirmed for $key" saw_not_confirmed
    # expire_proposed and expire lines name only an entry's first lock: these
    # greps see $key because it runs out alone, the only lock of its entry.
    ! grep -q "event=expire_proposed key=$key" "$DIR/$L.log" || { resume; fail "leader $L proposed Expire without a quorum"; }
    ! grep -q "event=expire key=$key" "$DIR"/*.log || { resume; fail "an Expire for $key applied while the followers were stopped"; }
    resume
    # The lock survived; the next leader restarts it at full length and, with
    # no keepalive, expires it (existed=true) and frees the key.
    expired() { grep -q "event=expire key=$key token=$T existed=true" "$DIR"/*.log; }
    wait_until 20 "lock $key expires normally after the followers resume" expired
    L2=$(wait_leader 10) || fail "no leader after resume"
    freed() { get "$L2" "/v1/locks?key=$key"; [[ $HTTP_CODE == 404 ]]; }
    wait_until 5 "$key is free on leader $L2" freed
    post "$L2" /v1/acquire "{\"key\":\"$key\",\"lease_ms\":3000,\"owner\":\"w2\"}"
    [[ $HTTP_CODE == 200 ]] || fail "re-acquire $key after expiry: $HTTP_CODE $HTTP_BODY"
    (($(json_field "$HTTP_BODY" token) > T)) || fail "token after expiry not above $T: $HTTP_BODY"
    done1=yes
    break
done
[[ -n "$done1" ]] || fail "could not stop the followers inside the lease window in 3 attempts (machine too slow)"
pass "a leader whose confirmation round fails does not expire; the lease expires after recovery"

# ---- 2. phantom lock: the client is gone when its Grant applies ----------------
done2=""
for attempt in 1 2 3; do
    L=$(wait_leader 10) || fail "no leader"
    key="ph$attempt"
    STOPPED=$(followers_of "$L")
    kill -STOP $STOPPED
    stopped=$(now_ms)
    code=$(curl -s -o /dev/null -w '%{http_code}' -m 0.4 -X POST -H 'Content-Type: application/json' \
        --data-binary "{\"key\":\"$key\",\"lease_ms\":60000,\"owner\":\"gone\"}" "$(url "$L" /v1/acquire)" || true)
    resumed_after=$(($(now_ms) - stopped))
    resume
    [[ "$code" == 000 ]] || fail "acquire without a quorum answered $code"
    if ((resumed_after > 800)); then
        echo "attempt $attempt: followers resumed ${resumed_after} ms after the stop (leader may be deposed); retrying"
        continue
    fi
    released() { grep -q "event=phantom_release key=$key .*expiring=true" "$DIR/$L.log"; }
    wait_until 10 "leader $L proposes a phantom release for $key" released
    free() {
        local ld
        ld=$(wait_leader 5) || return 1
        get "$ld" "/v1/locks?key=$key"
        [[ $HTTP_CODE == 404 ]]
    }
    wait_until 10 "no lock left on $key" free
    t=$(acquire_anywhere "$key" 3000 10) || fail "$key not acquirable after the phantom release"
    done2=yes
    break
done
[[ -n "$done2" ]] || fail "could not resume the followers within 800 ms in 3 attempts (machine too slow)"
pass "a client gone when its Grant applies leaves no lock (token $t granted to the next client)"
