#!/usr/bin/env bash
# Bad input gets 400 {"error":"bad_request","message":...} naming the field,
# and the member keeps serving.
source "$(dirname "$0")/lib.sh"
cluster_start 3
L=$(wait_leader 10) || fail "no leader"
check() {  # PATH BODY EXPECTED-SUBSTRING-OF-MESSAGE
    post "$L" "$1" "$2"
    [[ $HTTP_CODE == 400 ]] || fail "$1 ${2:0:60}: status $HTTP_CODE, want 400 ($HTTP_BODY)"
    [[ "$(json_field "$HTTP_BODY" error)" == bad_request ]] || fail "error field: $HTTP_BODY"
    [[ "$(json_field "$HTTP_BODY" message)" == *"$3"* ]] || fail "message for ${2:0:60} lacks '$3': $HTTP_BODY"
}
check /v1/acquire '{"key":"a",' "not valid JSON"
check /v1/acquire 'not json at all' "not valid JSON"
check /v1/acquire '["key"]' "JSON object"
check /v1/acquire '{"lease_ms":1000}' "'key'"
check /v1/acquire '{"key":"a"}' "'lease_ms'"
check /v1/acquire '{"key":7,"lease_ms":1000}' "'key'"
check /v1/acquire '{"key":"a","lease_ms":"1000"}' "'lease_ms'"
check /v1/acquire '{"key":"a","lease_ms":1000,"wait_ms":"x"}' "'wait_ms'"
check /v1/acquire '{"key":"a","lease_ms":1000,"owner":[]}' "'owner'"
check /v1/acquire '{"key":"a","lease_ms":10}' "'lease_ms' is 10"
check /v1/acquire '{"key":"a","lease_ms":999999999}' "'lease_ms' is 999999999"
check /v1/acquire "{\"key\":\"$(head -c 600 /dev/zero | tr '\0' k)\",\"lease_ms\":1000}" "'key'"
check /v1/acquire '{"key":"","lease_ms":1000}' "'key'"
check /v1/acquire '{"key":"a\u0001b","lease_ms":1000}' "'key' is invalid"
check /v1/acquire '{"key":"a","lease_ms":1000,"owner":"x\ny"}' "'owner' is invalid"
check /v1/release '{"key":"a"}' "'token'"
check /v1/release '{"key":"a","token":-4}' "'token'"
check /v1/keepalive '{"token":4}' "'key'"
check /v1/acquire "{\"key\":\"big\",\"lease_ms\":1000,\"owner\":\"$(head -c 100000 /dev/zero | tr '\0' o)\"}" "body exceeds"
get "$L" "/v1/locks?key=%zz"
[[ $HTTP_CODE == 400 ]] || fail "bad query escape: $HTTP_CODE"
get "$L" /healthz
[[ $HTTP_CODE == 200 ]] || fail "healthz after bad input: $HTTP_CODE"
post "$L" /v1/acquire '{"key":"still-serving","lease_ms":1000}'
[[ $HTTP_CODE == 200 ]] || fail "member stopped serving: $HTTP_CODE $HTTP_BODY"
kill -0 "$(member_pid "$L")" || fail "leader process died"
pass "every bad request answered 400 naming the field; member $L keeps serving"
