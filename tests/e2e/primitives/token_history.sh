#!/usr/bin/env bash
# A token's life on every member (docs/http-api.md "GET /v1/tokens/{token}",
# "GET /v1/keys/{key}/history"), against 3 real members: a token kept alive
# and released, one whose lease ran out, one held; what the log decides is
# the same on every member, the keepalives only the leader saw are labelled
# as its; 400 for a malformed token, key or limit, 404 for a token never
# issued (not_applied for one past what the member applied), 410 compacted
# (a small --token-history-events) with the oldest kept; the same lives derived again after a restart, and a grant written with
# --log-wall-time off (the older format) without a wall time.
source "$(dirname "$0")/../coordinator/lib.sh"

# token MEMBER TOKEN -> HTTP_CODE, HTTP_BODY
token() { get "$1" "/v1/tokens/$2"; }
field() { jq -r "$2" <<<"$1"; }  # JSON FILTER
# The token's object without what only the answering member observed.
derived() { jq -S -c 'del(.keepalives, .ended.last_keepalive_wall_ms)' <<<"$1"; }
ended_as() {  # MEMBER TOKEN HOW: the member reports the token ended so
    token "$1" "$2"
    [[ "$HTTP_CODE" == 200 && "$(field "$HTTP_BODY" .ended.how)" == "$3" ]]
}

cluster_start 3 "--token-history-events 20"
L=$(wait_leader 10) || fail "no leader"

# A: acquired, kept alive twice, released; a keepalive after its release is refused.
post "$L" /v1/acquire '{"key":"t/a","lease_ms":5000,"owner":"w-a"}'
[[ "$HTTP_CODE" == 200 ]] || fail "acquire A: $HTTP_CODE $HTTP_BODY"
A=$(json_field "$HTTP_BODY" token)
for i in 1 2; do
    post "$L" /v1/keepalive "{\"key\":\"t/a\",\"token\":$A}"
    [[ "$HTTP_CODE" == 200 ]] || fail "keepalive $i of A: $HTTP_CODE $HTTP_BODY"
done
post "$L" /v1/release "{\"key\":\"t/a\",\"token\":$A}"
[[ "$HTTP_CODE" == 200 ]] || fail "release A: $HTTP_CODE $HTTP_BODY"
post "$L" /v1/keepalive "{\"key\":\"t/a\",\"token\":$A}"
[[ "$HTTP_CODE" == 404 ]] || fail "a keepalive of released A answered $HTTP_CODE $HTTP_BODY"

# B: acquired with a short lease and left to expire.
post "$L" /v1/acquire '{"key":"t/a","lease_ms":600,"owner":"w-b"}'
[[ "$HTTP_CODE" == 200 ]] || fail "acquire B: $HTTP_CODE $HTTP_BODY"
B=$(json_field "$HTTP_BODY" token)
for m in 1 2 3; do wait_until 10 "member $m saw B expire" ended_as "$m" "$B" expired; done

# C: held.
post "$L" /v1/acquire '{"key":"t/a","lease_ms":60000,"owner":"w-c"}'
[[ "$HTTP_CODE" == 200 ]] || fail "acquire C: $HTTP_CODE $HTTP_BODY"
C=$(json_field "$HTTP_BODY" token)
for m in 1 2 3; do wait_until 5 "member $m applied C" ended_as "$m" "$C" held; done

# D: kept alive once, then left to expire: the leader tells its last keepalive's time.
post "$L" /v1/acquire '{"key":"t/d","lease_ms":600,"owner":"w-d"}'
[[ "$HTTP_CODE" == 200 ]] || fail "acquire D: $HTTP_CODE $HTTP_BODY"
D=$(json_field "$HTTP_BODY" token)
post "$L" /v1/keepalive "{\"key\":\"t/d\",\"token\":$D}"
[[ "$HTTP_CODE" == 200 ]] || fail "keepalive of D: $HTTP_CODE $HTTP_BODY"
for m in 1 2 3; do wait_until 10 "member $m saw D expire" ended_as "$m" "$D" expired; done
for m in 1 2 3; do
    token "$m" "$D"
    last=$(field "$HTTP_BODY" .ended.last_keepalive_wall_ms)
    if ((m == L)); then
        [[ "$last" =~ ^[0-9]+$ && "$last" == "$(field "$HTTP_BODY" .keepalives.last_ok_wall_ms)" ]] ||
            fail "the leader does not tell D's last keepalive: $HTTP_BODY"
        (($(field "$HTTP_BODY" .ended.wall_ms) - last >= 600)) || fail "D expired less than its lease after its keepalive: $HTTP_BODY"
    else
        [[ "$last" == null ]] || fail "follower $m tells a keepalive of D it did not see: $HTTP_BODY"
    fi
done
pass "an expired token's last keepalive is told by the leader that answered it"

now_ms=$(($(date +%s%3N)))
for m in 1 2 3; do
    token "$m" "$A"
    [[ "$HTTP_CODE" == 200 ]] || fail "member $m: token $A answered $HTTP_CODE $HTTP_BODY"
    a=$HTTP_BODY
    [[ "$(field "$a" '.key + " " + .owner + " " + (.lease_ms|tostring)')" == "t/a w-a 5000" ]] || fail "member $m: A is $a"
    [[ "$(field "$a" .ended.how)" == released && "$(field "$a" .next_token)" == "$B" ]] || fail "member $m: A is $a"
    granted=$(field "$a" .granted.wall_ms)
    [[ "$granted" =~ ^[0-9]+$ ]] && ((now_ms - granted < 120000 && granted <= now_ms + 1000)) ||
        fail "member $m: A's granted.wall_ms $granted is not the leader's clock near $now_ms"
    [[ "$(field "$a" .granted.index)" =~ ^[0-9]+$ && "$(field "$a" .ended.index)" =~ ^[0-9]+$ ]] || fail "member $m: A is $a"
    [[ "$(field "$a" .keepalives.observed_by)" == "$m" ]] || fail "member $m: A's keepalives are not labelled as its: $a"
    if ((m == L)); then
        [[ "$(field "$a" '[.keepalives.while_leader, .keepalives.ok, .keepalives.refused, .keepalives.last_refused_reason] | map(tostring) | join(" ")')" == "true 2 1 not_held" ]] ||
            fail "the leader's keepalives of A: $a"
        [[ "$(field "$a" .keepalives.last_ok_wall_ms)" =~ ^[0-9]+$ ]] || fail "the leader's keepalives of A: $a"
    else
        [[ "$(field "$a" '[.keepalives.while_leader, .keepalives.ok, .keepalives.refused] | map(tostring) | join(" ")')" == "false 0 0" ]] ||
            fail "follower $m's keepalives of A: $a"
    fi
    token "$m" "$B"
    [[ "$(field "$HTTP_BODY" '.ended.how + " " + (.next_token|tostring)')" == "expired $C" ]] || fail "member $m: B is $HTTP_BODY"
    [[ "$(field "$HTTP_BODY" .ended.wall_ms)" =~ ^[0-9]+$ ]] || fail "member $m: B's end has no wall time: $HTTP_BODY"
    token "$m" "$C"
    [[ "$(field "$HTTP_BODY" '.ended.how + " " + (.next_token|tostring) + " " + (.ended.index|tostring)')" == "held null null" ]] ||
        fail "member $m: C is $HTTP_BODY"
    get "$m" "/v1/keys/t%2Fa/history"
    [[ "$HTTP_CODE" == 200 ]] || fail "member $m: the history of t/a answered $HTTP_CODE $HTTP_BODY"
    [[ "$(field "$HTTP_BODY" '.key + " " + ([.tokens[].token] | map(tostring) | join(","))')" == "t/a $C,$B,$A" ]] ||
        fail "member $m: the history of t/a is $HTTP_BODY"
    get "$m" "/v1/keys/t%2Fa/history?limit=1"
    [[ "$(field "$HTTP_BODY" '[.tokens[].token] | map(tostring) | join(",")')" == "$C" ]] || fail "member $m: limit=1 gave $HTTP_BODY"
done
pass "every member tells A released (next $B), B expired (next $C), C held, and t/a's tokens newest first"

for t in "$A" "$B" "$C"; do
    token 1 "$t"
    one=$(derived "$HTTP_BODY")
    for m in 2 3; do
        token "$m" "$t"
        [[ "$(derived "$HTTP_BODY")" == "$one" ]] || fail "members 1 and $m differ on token $t: $one vs $(derived "$HTTP_BODY")"
    done
done
pass "the three members agree on everything the log decides of A, B and C"

# 400, on a follower too.
F=$((L % 3 + 1))
for t in abc 0 -1 1x 99999999999999999999 9223372036854775808; do
    token "$F" "$t"
    [[ "$HTTP_CODE" == 400 && "$HTTP_BODY" == *'"error":"bad_token"'* && "$HTTP_BODY" == *"'$t'"* ]] ||
        fail "token '$t' answered $HTTP_CODE $HTTP_BODY, not 400 bad_token naming it"
done
for q in "%01/history" "%zz/history" "$(printf 'k%.0s' {1..600})/history" "a/history?limit=0" "a/history?limit=x" "a/history?limit=1001"; do
    get "$F" "/v1/keys/$q"
    [[ "$HTTP_CODE" == 400 && "$HTTP_BODY" == *'"error":"bad_request"'* ]] || fail "/v1/keys/$q answered $HTTP_CODE $HTTP_BODY, not 400"
done
get "$F" "/v1/keys/a/history?limit=0"
[[ "$HTTP_BODY" == *"'limit'"*"'0'"* ]] || fail "limit=0's 400 does not name it: $HTTP_BODY"
get "$F" "/v1/tokens/"
[[ "$HTTP_CODE" == 404 && "$HTTP_BODY" == *'"error":"not_found"'* ]] || fail "/v1/tokens/ answered $HTTP_CODE $HTTP_BODY"
pass "malformed tokens, keys and limits are answered 400 naming them"

# 404: never issued (an index that was no grant: A's release); past what a
# member applied, not_applied with the highest token it could know.
release_index=$(field "$(token "$L" "$A"; echo "$HTTP_BODY")" .ended.index)
for m in 1 2 3; do
    token "$m" "$release_index"
    [[ "$HTTP_CODE" == 404 && "$HTTP_BODY" == *'"error":"unknown_token"'* ]] || fail "member $m: token $release_index answered $HTTP_CODE $HTTP_BODY"
    token "$m" $((C + 100000))
    [[ "$HTTP_CODE" == 404 && "$(field "$HTTP_BODY" .error)" == not_applied ]] || fail "member $m: token $((C + 100000)) answered $HTTP_CODE $HTTP_BODY"
    applied=$(field "$HTTP_BODY" .applied_token)
    ((applied >= C && applied < C + 100000)) || fail "member $m: applied_token $applied is not in [$C, $((C + 100000)))"
done
pass "a token never issued is answered 404 unknown_token, one past the applied log 404 not_applied"

# 410: 20 more tokens push A out of a history of 20.
for ((i = 0; i < 20; i++)); do
    post "$L" /v1/acquire "{\"key\":\"t/c$i\",\"lease_ms\":5000}"
    [[ "$HTTP_CODE" == 200 ]] || fail "acquire t/c$i: $HTTP_CODE $HTTP_BODY"
    last=$(json_field "$HTTP_BODY" token)
    post "$L" /v1/release "{\"key\":\"t/c$i\",\"token\":$last}"
done
for m in 1 2 3; do
    wait_until 5 "member $m applied token $last" ended_as "$m" "$last" released
    token "$m" "$A"
    [[ "$HTTP_CODE" == 410 && "$(field "$HTTP_BODY" .error)" == compacted ]] || fail "member $m: A answered $HTTP_CODE $HTTP_BODY"
    oldest=$(field "$HTTP_BODY" .oldest_token)
    ((oldest > A)) || fail "member $m: oldest_token $oldest is not past A ($A)"
    token "$m" "$oldest"
    [[ "$HTTP_CODE" == 200 || "$HTTP_CODE" == 404 ]] || fail "member $m: the oldest token $oldest answered $HTTP_CODE"
done
pass "a token older than the history kept is answered 410 compacted with oldest_token"

# Every member restarted with --log-wall-time off, one at a time (the upgrade
# rule in reverse): the history is derived again from the log (the newest
# token's life the same, wall times included), and an entry written then, in
# the older format, carries none.
token "$L" "$last"
[[ "$HTTP_CODE" == 200 ]] || fail "the newest token $last answered $HTTP_CODE $HTTP_BODY"
last_before=$(derived "$HTTP_BODY")
sed -i 's/^FLAGS="\(.*\)"$/FLAGS="\1 --log-wall-time off"/' "$DIR/cluster.env"
grep -q -- '--log-wall-time off' "$DIR/cluster.env" || fail "could not add --log-wall-time off to $DIR/cluster.env"
for m in 1 2 3; do
    "$CLUSTER" restart "$DIR" "$m" >/dev/null || fail "member $m did not restart"
    wait_until 10 "member $m tells token $last again" ended_as "$m" "$last" released
done
L=$(wait_leader 10) || fail "no leader after the restarts"
for m in 1 2 3; do
    token "$m" "$last"
    [[ "$(derived "$HTTP_BODY")" == "$last_before" ]] || fail "member $m tells token $last otherwise after its restart: $(derived "$HTTP_BODY") vs $last_before"
done
post "$L" /v1/acquire '{"key":"t/e","lease_ms":5000}'
[[ "$HTTP_CODE" == 200 ]] || fail "acquire E: $HTTP_CODE $HTTP_BODY"
E=$(json_field "$HTTP_BODY" token)
for m in 1 2 3; do
    wait_until 5 "member $m applied E" ended_as "$m" "$E" held
    [[ "$(field "$HTTP_BODY" .granted.wall_ms)" == null && "$(field "$HTTP_BODY" .granted.index)" =~ ^[0-9]+$ ]] ||
        fail "member $m: E, granted under --log-wall-time off, is $HTTP_BODY"
done
pass "after a restart each member derives token $last again from the log; a grant written without the stamp has wall_ms null"
