#!/usr/bin/env bash
# The HTTP lock API on a 3-member cluster through curl: acquire, conflict,
# idempotent re-acquire, keepalive, get, list, release, follower 307,
# status, metrics, healthz.
source "$(dirname "$0")/lib.sh"
cluster_start 3
L=$(wait_leader 10) || fail "no leader"
F=$(( L % N + 1 ))

post "$L" /v1/acquire '{"key":"report:7","lease_ms":10000,"owner":"worker-a"}'
[[ $HTTP_CODE == 200 ]] || fail "acquire: $HTTP_CODE $HTTP_BODY"
T=$(json_field "$HTTP_BODY" token)
[[ "$(json_field "$HTTP_BODY" key)" == report:7 && "$(json_field "$HTTP_BODY" owner)" == worker-a && "$(json_field "$HTTP_BODY" lease_ms)" == 10000 ]] || fail "acquire body $HTTP_BODY"

# A key and owner with a quote, a backslash and non-ASCII text come back
# escaped as JSON (the answer is written without a JSON library).
post "$L" /v1/acquire '{"key":"q\"uote\\d","lease_ms":10000,"owner":"Ωmega \"w\""}'
[[ $HTTP_CODE == 200 && $HTTP_BODY == '{"key":"q\"uote\\d","token":'*',"lease_ms":10000,"owner":"Ωmega \"w\""}' ]] ||
    fail "acquire with escaped key/owner: $HTTP_CODE $HTTP_BODY"
post "$L" /v1/release "{\"key\":\"q\\\"uote\\\\d\",\"token\":$(json_field "$HTTP_BODY" token)}"
[[ $HTTP_CODE == 200 && $HTTP_BODY == '{"released":true}' ]] || fail "release of the escaped key: $HTTP_CODE $HTTP_BODY"

post "$L" /v1/acquire '{"key":"report:7","lease_ms":10000,"owner":"worker-b"}'
[[ $HTTP_CODE == 409 && "$(json_field "$HTTP_BODY" error)" == held ]] || fail "conflicting acquire: $HTTP_CODE $HTTP_BODY"

post "$L" /v1/acquire '{"key":"report:7","lease_ms":10000,"owner":"worker-a"}'
[[ $HTTP_CODE == 200 && "$(json_field "$HTTP_BODY" token)" == "$T" ]] || fail "same-owner re-acquire: $HTTP_CODE $HTTP_BODY"

post "$L" /v1/keepalive "{\"key\":\"report:7\",\"token\":$T}"
[[ $HTTP_CODE == 200 && "$(json_field "$HTTP_BODY" ttl_ms)" == 10000 ]] || fail "keepalive: $HTTP_CODE $HTTP_BODY"
post "$L" /v1/keepalive "{\"key\":\"report:7\",\"token\":$((T + 1000))}"
[[ $HTTP_CODE == 404 && "$(json_field "$HTTP_BODY" error)" == not_held ]] || fail "keepalive wrong token: $HTTP_CODE $HTTP_BODY"

get "$L" "/v1/locks?key=report%3A7"
[[ $HTTP_CODE == 200 && "$(json_field "$HTTP_BODY" token)" == "$T" && "$(json_field "$HTTP_BODY" owner)" == worker-a ]] || fail "get: $HTTP_CODE $HTTP_BODY"
ttl=$(json_field "$HTTP_BODY" ttl_ms)
((ttl > 0 && ttl <= 10000)) || fail "get ttl_ms $ttl"

post "$L" /v1/acquire '{"key":"other","lease_ms":10000}'
[[ $HTTP_CODE == 200 ]] || fail "second acquire: $HTTP_CODE"
T2=$(json_field "$HTTP_BODY" token)
((T2 > T)) || fail "token $T2 not above $T"
get "$L" /v1/locks
[[ $HTTP_CODE == 200 && "$HTTP_BODY" == *'"key":"other"'* && "$HTTP_BODY" == *'"key":"report:7"'* ]] || fail "list: $HTTP_BODY"
# Pages: by prefix, after a key, limited; "next" names the last key when more follow.
for k in job/1 job/2 job/3; do
    post "$L" /v1/acquire "{\"key\":\"$k\",\"lease_ms\":10000}"
    [[ $HTTP_CODE == 200 ]] || fail "acquire $k: $HTTP_CODE"
done
get "$L" "/v1/locks?prefix=job%2F&limit=2"
[[ $HTTP_CODE == 200 && "$HTTP_BODY" == *'"key":"job/1"'*'"key":"job/2"'* && "$HTTP_BODY" != *job/3* &&
   "$(json_field "$HTTP_BODY" next)" == job/2 ]] || fail "first page: $HTTP_BODY"
get "$L" "/v1/locks?prefix=job%2F&after=job%2F2&limit=2"
[[ $HTTP_CODE == 200 && "$HTTP_BODY" == *'"key":"job/3"'* && "$HTTP_BODY" != *next* && "$HTTP_BODY" != *other* ]] ||
    fail "last page: $HTTP_BODY"
get "$L" "/v1/locks?limit=0"
[[ $HTTP_CODE == 400 && "$HTTP_BODY" == *limit* ]] || fail "limit=0: $HTTP_CODE $HTTP_BODY"

hdr=$(curl -s -m 5 -o /dev/null -D - -X POST -H 'Content-Type: application/json' --data-binary '{"key":"x","lease_ms":1000}' "$(url "$F" /v1/acquire)")
[[ "$hdr" == *" 307"* ]] || fail "follower did not answer 307: $hdr"
[[ "$hdr" == *"ocation: http://127.0.0.1:$(client_port "$L")/v1/acquire"* ]] || fail "follower Location: $hdr"
get "$F" "/v1/locks?key=other"
[[ $HTTP_CODE == 307 ]] || fail "follower GET /v1/locks: $HTTP_CODE"

post "$L" /v1/release "{\"key\":\"report:7\",\"token\":$T}"
[[ $HTTP_CODE == 200 && "$(json_field "$HTTP_BODY" released)" == true ]] || fail "release: $HTTP_CODE $HTTP_BODY"
# Every lock event's log line names key, token and owner (docs/operations.md, "Logs").
release_logged() { grep -q "event=release key=report:7 token=$T released=true owner=worker-a" "$DIR/$L.log"; }
wait_until 5 "the leader logs the release with its owner" release_logged
post "$L" /v1/release "{\"key\":\"report:7\",\"token\":$T}"
[[ $HTTP_CODE == 404 && "$(json_field "$HTTP_BODY" error)" == not_held ]] || fail "second release: $HTTP_CODE $HTTP_BODY"
get "$L" "/v1/locks?key=report%3A7"
[[ $HTTP_CODE == 404 ]] || fail "get after release: $HTTP_CODE"
post "$L" /v1/keepalive "{\"key\":\"report:7\",\"token\":$T}"
[[ $HTTP_CODE == 404 ]] || fail "keepalive after release: $HTTP_CODE"

get "$L" /metrics
for m in pgfence_grants_total pgfence_releases_total 'pgfence_expiries_total{existed="true"}' pgfence_grant_conflicts_total \
         pgfence_keepalives_total pgfence_waiters pgfence_locks_held pgfence_term 'pgfence_is_leader 1' pgfence_leader_changes_total \
         pgfence_commit_index pgfence_applied_index pgfence_fsync_seconds_bucket pgfence_proposal_commit_seconds_bucket; do
    [[ "$HTTP_BODY" == *"$m"* ]] || fail "metrics lack $m"
done
[[ "$HTTP_BODY" == *"pgfence_grant_conflicts_total 1"* ]] || fail "grant conflict not counted"
get "$F" /healthz
[[ $HTTP_CODE == 200 ]] || fail "healthz $HTTP_CODE"
# Followers apply the same commands: their status shows the same lock count eventually ("other", job/1..3).
same_locks() { [[ "$(json_field "$(status_of "$F")" locks)" == 4 ]]; }
wait_until 5 "follower $F applies the release" same_locks
pass "lock API on leader $L, follower $F redirects"
