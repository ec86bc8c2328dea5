#!/usr/bin/env bash
# kill -9 of the leader, twice: acquires keep succeeding through the survivors,
# tokens keep increasing across each leader change, and a lock granted before
# the kill is still held (same token) under the new leader.
source "$(dirname "$0")/lib.sh"
cluster_start 3
L=$(wait_leader 10) || fail "no leader"
post "$L" /v1/acquire '{"key":"before-kill","lease_ms":30000,"owner":"keeper"}'
[[ $HTTP_CODE == 200 ]] || fail "acquire before kill: $HTTP_CODE $HTTP_BODY"
held=$(json_field "$HTTP_BODY" token)
last=$(acquire_anywhere k0 5000 10) || fail "first acquire"
for round in 1 2; do
    L=$(wait_leader 10) || fail "no leader before round $round"
    kill -9 "$(member_pid "$L")"
    start=$(date +%s%N)
    t=$(acquire_anywhere "k$round" 5000 10) || fail "round $round: no acquire succeeded within 10s after killing leader $L"
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    ((t > last)) || fail "round $round: token $t not above $last"
    echo "round $round: killed leader $L, next grant token $t after ${ms} ms"
    last=$t
    NL=$(wait_leader 10 "$L") || fail "no new leader"
    get "$NL" "/v1/locks?key=before-kill"
    [[ $HTTP_CODE == 200 && "$(json_field "$HTTP_BODY" token)" == "$held" ]] || fail "round $round: lock before kill lost: $HTTP_CODE $HTTP_BODY"
    "$CLUSTER" restart "$DIR" "$L"
    wait_until 10 "restarted member $L catches up by log" caught_up "$NL" "$L"
done
pass "two leader kills, tokens increased to $last, held lock kept token $held"
