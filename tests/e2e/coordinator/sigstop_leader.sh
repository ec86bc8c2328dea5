#!/usr/bin/env bash
# SIGSTOP of the leader: a new leader serves; the old leader, resumed long
# after the lease it granted ran out on its own clock, must not expire it.
#
# Assertion design: the old leader A grants "stalled" (3000 ms lease), then is
# stopped for 6 s, twice that lease. The new leader B restarts the lease at its
# full length and we keep it alive through B. When A resumes, every deadline A
# holds has passed; the rule (confirm leadership by a quorum round before
# proposing Expire) must stop it. We check that A logs no expire_proposed and
# no member applies an Expire for the key, and that B still holds the lock with
# the original token after A has rejoined as a follower.
source "$(dirname "$0")/lib.sh"
cluster_start 3
A=$(wait_leader 10) || fail "no leader"
post "$A" /v1/acquire '{"key":"stalled","lease_ms":3000,"owner":"w"}'
[[ $HTTP_CODE == 200 ]] || fail "acquire: $HTTP_CODE $HTTP_BODY"
T=$(json_field "$HTTP_BODY" token)
stopped_at=$SECONDS
kill -STOP "$(member_pid "$A")"
B=$(wait_leader 10 "$A") || { kill -CONT "$(member_pid "$A")"; fail "no new leader while $A is stopped"; }
post "$B" /v1/keepalive "{\"key\":\"stalled\",\"token\":$T}"
[[ $HTTP_CODE == 200 ]] || fail "first keepalive on new leader $B: $HTTP_CODE $HTTP_BODY"
# Keep the lock alive through B every 200 ms (a client doing its job), in the
# background, recording any refusal; bounded to 400 rounds.
(
    for i in $(seq 1 400); do
        [[ -e "$DIR/stop-keepalive" ]] && exit 0
        code=$(curl -s -o /dev/null -w '%{http_code}' -m 1 -X POST -H 'Content-Type: application/json' \
            --data-binary "{\"key\":\"stalled\",\"token\":$T}" "$(url "$B" /v1/keepalive)" || true)
        [[ "$code" == 200 ]] || echo "keepalive answered $code at round $i" >>"$DIR/keepalive-failures"
        sleep 0.2
    done
) &
ka_pid=$!
stopped_long_enough() { ((SECONDS - stopped_at >= 6)); }
wait_until 10 "old leader stopped for 6 s (2x the lease)" stopped_long_enough
acquire_anywhere during-stop 5000 5 >/dev/null || fail "new leader $B does not grant while $A is stopped"
kill -CONT "$(member_pid "$A")"
rejoined() {
    local s
    s=$(status_of "$A")
    [[ "$(json_field "$s" role)" == follower && "$(json_field "$s" leader)" == "$B" ]]
}
wait_until 10 "old leader $A rejoins as follower of $B" rejoined
# Give A several of its own ticks and lease periods as a follower.
wait_until 10 "old leader $A applies the new leader's log" caught_up "$B" "$A"
touch "$DIR/stop-keepalive"
wait "$ka_pid"
[[ ! -e "$DIR/keepalive-failures" ]] || fail "keepalives through $B failed: $(cat "$DIR/keepalive-failures")"
# expire_proposed and expire lines name only an entry's first lock: these
# greps see "stalled" because it runs out alone, the only lock of its entry.
! grep -q "event=expire_proposed key=stalled" "$DIR/$A.log" || fail "old leader $A proposed Expire for the stalled lock"
! grep -q "event=expire key=stalled" "$DIR"/*.log || fail "an Expire for the stalled lock was applied"
get "$B" "/v1/locks?key=stalled"
[[ $HTTP_CODE == 200 && "$(json_field "$HTTP_BODY" token)" == "$T" ]] || fail "lock lost: $HTTP_CODE $HTTP_BODY"
if grep -q "event=expire_not_confirmed key=stalled" "$DIR/$A.log"; then
    echo "old leader $A tried to expire after resuming; its leadership check failed (as it must)"
else
    echo "old leader $A stepped down before its expiry check ran"
fi
pass "old leader $A resumed and expired nothing; $B keeps token $T"
