#!/usr/bin/env bash
# A client that gives up (disconnects) while its acquire waits in the queue
# leaves no lock behind when the key is freed.
source "$(dirname "$0")/lib.sh"
cluster_start 3
L=$(wait_leader 10) || fail "no leader"
post "$L" /v1/acquire '{"key":"q","lease_ms":30000,"owner":"a"}'
[[ $HTTP_CODE == 200 ]] || fail "acquire: $HTTP_CODE"
T=$(json_field "$HTTP_BODY" token)
# The waiter hangs up after 1 s of its 10 s wait.
code=$(curl -s -o /dev/null -w '%{http_code}' -m 1 -X POST -H 'Content-Type: application/json' --data-binary '{"key":"q","lease_ms":30000,"wait_ms":10000,"owner":"b"}' "$(url "$L" /v1/acquire)" || true)
[[ "$code" == 000 ]] || fail "waiting acquire answered $code before the key was freed"
# A second waiter that stays tells us when the queue has been served.
curl -s -m 10 -X POST -H 'Content-Type: application/json' --data-binary '{"key":"q","lease_ms":30000,"wait_ms":8000,"owner":"c"}' "$(url "$L" /v1/acquire)" >"$DIR/c.out" &
cpid=$!
waiting() { curl -s -m 1 "$(url "$L" /metrics)" | grep -q '^pgfence_waiters [12]$'; }
wait_until 5 "waiter c queued" waiting
post "$L" /v1/release "{\"key\":\"q\",\"token\":$T}"
[[ $HTTP_CODE == 200 ]] || fail "release: $HTTP_CODE"
wait "$cpid" || fail "waiter c curl failed"
owner=$(json_field "$(cat "$DIR/c.out")" owner)
[[ "$owner" == c ]] || fail "the key went to '$owner' ($(cat "$DIR/c.out")), want the waiter still connected (c)"
Tc=$(json_field "$(cat "$DIR/c.out")" token)
post "$L" /v1/release "{\"key\":\"q\",\"token\":$Tc}"
[[ $HTTP_CODE == 200 ]] || fail "release c: $HTTP_CODE"
get "$L" "/v1/locks?key=q"
[[ $HTTP_CODE == 404 ]] || fail "a lock is left on q: $HTTP_BODY"
! grep -q "event=grant key=q token=[0-9]* owner=b" "$DIR"/*.log || fail "the disconnected waiter b was granted"
# Single waiter that disconnects, then the key is freed: nothing left behind.
post "$L" /v1/acquire '{"key":"r","lease_ms":30000,"owner":"a"}'
Tr=$(json_field "$HTTP_BODY" token)
curl -s -o /dev/null -m 1 -X POST -H 'Content-Type: application/json' --data-binary '{"key":"r","lease_ms":30000,"wait_ms":10000,"owner":"b"}' "$(url "$L" /v1/acquire)" || true
post "$L" /v1/release "{\"key\":\"r\",\"token\":$Tr}"
none_left() { get "$L" "/v1/locks?key=r"; [[ $HTTP_CODE == 404 ]] && curl -s -m 1 "$(url "$L" /metrics)" | grep -q '^pgfence_waiters 0$'; }
wait_until 5 "no lock and no waiter left on r" none_left
post "$L" /v1/acquire '{"key":"r","lease_ms":1000,"owner":"d"}'
[[ $HTTP_CODE == 200 ]] || fail "key r not free: $HTTP_CODE $HTTP_BODY"
pass "disconnected waiters leave no lock behind"
