#!/usr/bin/env bash
# --auth-file with bearer tokens over TLS: 401 without (or with unknown)
# credentials, 403 outside a user's prefixes — on a follower too, before any
# redirect — with the lock table unchanged; a list shows only readable keys,
# and so does a token's life or a key's history (403 without read);
# /healthz stays open; refusals are counted and logged without the secret; a
# token removed from the file is refused after SIGHUP.
source "$(dirname "$0")/lib.sh"

secret() { openssl rand -base64 32 | tr '+/' '-_' | tr -d '='; }
hash_of() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }
W1=$(secret) W2=$(secret) OPS=$(secret) BOTH=$(secret)
for u in W1 W2 OPS BOTH; do printf '%s\n' "${!u}" >"$DIR/$u.bearer"; done
write_auth() {  # the file, with w1's token unless "revoked"
    {
        echo "role reporter read:report/ lock:report/"
        echo "role jobs lock:job/ read:job/"
        echo "role ops admin read:"
        if [[ ${1:-} == revoked ]]; then echo "user w1 reporter"; else echo "user w1 reporter token:sha256:$(hash_of "$W1")"; fi
        echo "user w2 jobs token:sha256:$(hash_of "$W2")"
        echo "user ops ops token:sha256:$(hash_of "$OPS")"
        echo "user both reporter,jobs token:sha256:$(hash_of "$BOTH")"
    } >"$DIR/auth.txt.new"
    mv "$DIR/auth.txt.new" "$DIR/auth.txt"
}
write_auth
export FENCE_STATUS_BEARER_FILE="$DIR/OPS.bearer"  # cluster.sh's leader poll
tls_cluster_start 3 "--auth-file $DIR/auth.txt"
(umask 077 && printf 'Authorization: Bearer %s\n' "$OPS" >"$DIR/ops.header")
STATUS_AUTH=(-H "@$DIR/ops.header")  # from a file: ps shows no secret
ADMIN_FLAGS=(--bearer-file "$DIR/OPS.bearer")
as() {  # USER fencectl-args...: fencectl as USER (none: no credentials)
    local user=$1
    shift
    local creds=()
    [[ $user == none ]] || creds=(--bearer-file "$DIR/$user.bearer")
    "$FENCECTL" --endpoints "$FENCE_ENDPOINTS" --timeout 3s --cacert "$TLS_DIR/ca.pem" "${creds[@]}" "$@"
}
exit_of() { set +e; "$@" >"$DIR/out" 2>"$DIR/err"; echo $?; set -e; }

leader=$(wait_leader 10) || fail "no leader"
follower=$(( leader % N + 1 ))

r7=$(as W1 acquire report/7 --lease 5m) || fail "w1 cannot lock report/7"
j1=$(as W2 acquire job/1 --lease 5m) || fail "w2 cannot lock job/1"
locks_are "job/1 report/7" || fail "lock table after the grants"
pass "bearer tokens: w1 locks report/7 (token $r7), w2 locks job/1 (token $j1)"

# ---- 401 ----
[[ $(exit_of as none acquire report/8 --lease 5s --wait 0ms) == 7 ]] || fail "no credentials: exit $(exit_of as none acquire report/8 --lease 5s --wait 0ms)"
grep -q "not authenticated: credentials required" "$DIR/err" || fail "401 does not say why: $(cat "$DIR/err")"
printf 'short\n' >"$DIR/bad.bearer"
[[ $(exit_of "$FENCECTL" --endpoints "$FENCE_ENDPOINTS" --cacert "$TLS_DIR/ca.pem" --bearer-file "$DIR/bad.bearer" list) == 7 ]] ||
    fail "a malformed bearer secret was not refused"
[[ $(curl_code "${CURL_TLS[@]}" -H "Authorization: Bearer $(secret)" "$(url "$leader" /v1/locks)") == 401 ]] ||
    fail "an unknown bearer secret was not answered 401"
[[ $(curl_code "${CURL_TLS[@]}" -H "Authorization: Basic dXNlcjpwYXNz" "$(url "$leader" /v1/locks)") == 401 ]] ||
    fail "a Basic credential was not answered 401"
[[ $(curl_code "${CURL_TLS[@]}" "$(url "$follower" /healthz)") == 200 ]] || fail "/healthz is not open"
pass "401 without credentials, with a malformed, unknown or non-bearer one (exit 7); /healthz stays open"

# ---- 403, with nothing changed ----
[[ $(exit_of as W1 acquire job/2 --lease 5s --wait 0ms) == 7 ]] || fail "w1 locked outside its prefix"
grep -q "user 'w1' has no lock permission on key 'job/2'" "$DIR/err" || fail "403 does not say why: $(cat "$DIR/err")"
[[ $(exit_of as W2 release report/7 "$r7") == 7 ]] || fail "w2 released w1's lock with the right token"
[[ $(exit_of as W2 keepalive report/7 "$r7") == 7 ]] || fail "w2 kept w1's lock alive"
[[ $(exit_of as W1 get job/1) == 7 ]] || fail "w1 read a job/ lock"
[[ $(exit_of as W1 status) == 7 ]] || fail "fencectl status as w1: exit $(exit_of as W1 status), want 7"
[[ $(curl_code "${CURL_TLS[@]}" -H "Authorization: Bearer $W1" "$(url "$leader" /v1/status)") == 403 ]] || fail "w1 got /v1/status"
[[ $(curl_code "${CURL_TLS[@]}" -H "Authorization: Bearer $W1" "$(url "$leader" /metrics)") == 403 ]] || fail "w1 got /metrics"
# On every member the answer is 403, not a redirect; a permitted read is redirected by a follower.
for i in 1 2 3; do
    [[ $(curl_code "${CURL_TLS[@]}" -H "Authorization: Bearer $W1" -X POST -H 'Content-Type: application/json' --data-binary '{"key":"job/3","lease_ms":5000}' \
        "$(url "$i" /v1/acquire)") == 403 ]] || fail "member $i did not refuse a forbidden acquire with 403"
done
redirected() {  # a follower (found just now) answers w1's permitted read with 307
    local l f
    l=$(wait_leader 5) || return 1
    f=$(( l % N + 1 ))
    [[ $(curl_code "${CURL_TLS[@]}" -H "Authorization: Bearer $W1" "$(url "$f" "/v1/locks?key=report/7")") == 307 ]]
}
wait_until 5 "a follower redirects a permitted request" redirected
# Membership and backups are admin's: w1 may neither list, change nor back up.
[[ $(exit_of as W1 member list) == 7 ]] || fail "w1 listed the members"
[[ $(exit_of as W1 member remove "$follower") == 7 ]] || fail "w1 removed a member"
[[ $(exit_of as W1 snapshot save "$DIR/w1.bak") == 7 ]] || fail "w1 took a backup"
[[ ! -e "$DIR/w1.bak" ]] || fail "a refused backup wrote a file"
[[ $(as OPS member list | grep -c ' voter') == 3 ]] || fail "ops cannot list the members"
as OPS snapshot save "$DIR/ops.bak" >/dev/null || fail "ops cannot take a backup"
# A joining member asks without credentials, and learns only whether it was added.
[[ $(curl_code "${CURL_TLS[@]}" -L "$(url "$follower" "/v1/members/join?id=9")") == 404 ]] ||
    fail "/v1/members/join is not open, or answered for a member not added"
join_body=$(curl -s -m 3 "${CURL_TLS[@]}" -L "$(url "$follower" "/v1/members/join?id=$follower")" || true)
[[ $join_body == *'"peer_addr"'* && $join_body != *match_index* && $join_body != *'"leader"'* ]] ||
    fail "/v1/members/join told more than the addresses (or nothing): $join_body"

# GET /v1/version is admin's, answered by every member itself (no redirect):
# the version /metrics reports as pgfence_build_info.
ops_get() { curl -s -m 3 "${CURL_TLS[@]}" -H "Authorization: Bearer $OPS" "$(url "$follower" "$1")" || true; }
build_version=$(ops_get /metrics | sed -n 's/^pgfence_build_info{version="\([^"]*\)"} 1$/\1/p')
[[ -n $build_version && $(ops_get /v1/version) == "{\"version\":\"$build_version\"}" ]] ||
    fail "/v1/version on a follower as ops: '$(ops_get /v1/version)', want version '$build_version'"
[[ $(curl_code "${CURL_TLS[@]}" -H "Authorization: Bearer $W1" "$(url "$follower" /v1/version)") == 403 ]] ||
    fail "w1 got /v1/version"
[[ $(curl_code "${CURL_TLS[@]}" "$(url "$follower" /v1/version)") == 401 ]] || fail "/v1/version without credentials"
[[ $(curl_code "${CURL_TLS[@]}" -H "Authorization: Bearer $OPS" -X POST "$(url "$follower" /v1/version)") == 405 ]] ||
    fail "POST /v1/version was not answered 405"
locks_are "job/1 report/7" || fail "refused requests changed the lock table"
[[ $(as W1 get report/7 -o json) == *"\"token\":$r7"* ]] || fail "w1's lock changed"
pass "403 outside the prefixes (acquire, release and keepalive with the right token, get, status, metrics, version, members, snapshot), on a follower before its redirect; nothing changed"

# ---- a list shows only what the caller may read ----
[[ "$(as W2 list -o json)" == *job/1* && "$(as W2 list -o json)" != *report/7* ]] || fail "w2's list: $(as W2 list -o json)"
[[ "$(as W1 list -o json)" == *report/7* && "$(as W1 list -o json)" != *job/1* ]] || fail "w1's list: $(as W1 list -o json)"
# Paged by hand, a page of one: neither a page nor its "next" names a key outside
# the caller's read prefixes (w1 reads report/ only; job/1 sorts before report/7).
page=$(curl -s -m 3 "${CURL_TLS[@]}" -L -H "Authorization: Bearer $W1" "$(url "$leader" "/v1/locks?limit=1")")
[[ $page == *report/7* && $page != *job/* ]] || fail "w1's page of one: $page"
page=$(curl -s -m 3 "${CURL_TLS[@]}" -L -H "Authorization: Bearer $W1" "$(url "$leader" "/v1/locks?prefix=job%2F&limit=1")")
[[ $page == '{"locks":[]}' ]] || fail "w1's page of job/ (nothing readable) is not empty and final: $page"
pass "a list shows only the keys the caller may read (pages and their cursors too)"

# ---- token history: only the keys the caller may read ----
as_get() {  # SECRET MEMBER PATH -> HTTP_CODE, HTTP_BODY
    HTTP_BODY=$(curl -s -m 3 "${CURL_TLS[@]}" -H "Authorization: Bearer $1" -w '\n%{http_code}' "$(url "$2" "$3")" || true)
    HTTP_CODE=${HTTP_BODY##*$'\n'}
    HTTP_BODY=${HTTP_BODY%$'\n'*}
}
set_body=$(curl -s -m 3 "${CURL_TLS[@]}" -L -H "Authorization: Bearer $BOTH" -X POST -H 'Content-Type: application/json' \
    --data-binary '{"keys":["job/s","report/s"],"lease_ms":300000}' "$(url "$leader" /v1/acquire)") || fail "both: acquire the set"
ts=$(jq -r .token <<<"$set_body")
applied_set() { as_get "$BOTH" "$1" "/v1/tokens/$ts"; [[ "$HTTP_CODE" == 200 ]]; }
[[ "$ts" =~ ^[0-9]+$ ]] || fail "both: the set's acquire answered $set_body"
for m in "$leader" "$follower"; do
    wait_until 5 "member $m applied the set" applied_set "$m"
    as_get "$W1" "$m" "/v1/tokens/$ts"
    [[ "$HTTP_CODE" == 200 && "$(jq -c .keys <<<"$HTTP_BODY")" == '["report/s"]' && "$(jq -r .key <<<"$HTTP_BODY")" == report/s &&
        "$(jq -r .hidden_keys <<<"$HTTP_BODY")" == 1 && "$HTTP_BODY" != *job/* ]] ||
        fail "member $m: w1's view of the set $ts: $HTTP_CODE $HTTP_BODY"
    as_get "$W1" "$m" "/v1/keys/report%2Fs/history"
    [[ "$HTTP_CODE" == 200 && "$HTTP_BODY" == *'"hidden_keys":1'* && "$HTTP_BODY" != *job/* ]] || fail "member $m: w1's history of report/s: $HTTP_CODE $HTTP_BODY"
    as_get "$W1" "$m" "/v1/tokens/$j1"
    [[ "$HTTP_CODE" == 403 && "$HTTP_BODY" != *job/* ]] || fail "member $m: w1 read token $j1 of job/1: $HTTP_CODE $HTTP_BODY"
    as_get "$W1" "$m" "/v1/keys/job%2F1/history"
    [[ "$HTTP_CODE" == 403 ]] || fail "member $m: w1 read job/1's history: $HTTP_CODE $HTTP_BODY"
    as_get "$BOTH" "$m" "/v1/tokens/$ts"
    [[ "$HTTP_CODE" == 200 && "$(jq -c .keys <<<"$HTTP_BODY")" == '["job/s","report/s"]' ]] || fail "member $m: both's view of $ts: $HTTP_CODE $HTTP_BODY"
done
pass "token history: a set's keys the caller may not read are left out (hidden_keys), a token or key history without read is 403"

# ---- counted, logged, never the secret ----
metric_at_least "$leader" 'pgfence_auth_denied_total{status="401"}' 1 || fail "401s are not counted"
metric_at_least "$leader" 'pgfence_auth_denied_total{status="403"}' 1 || fail "403s are not counted"
grep -q "event=auth_forbidden user=w1 path=/v1/acquire key=job/2" "$DIR"/[0-9].log || fail "the 403 is not logged with user, path and key"
for s in "$W1" "$W2" "$OPS"; do
    ! grep -qF "$s" "$DIR"/[0-9].log || fail "a bearer secret appears in a member's log"
done
pass "refusals are counted in /metrics and logged with user, path and key, never the secret"

# A flood of denials is counted in full and logged at most 20 lines a second;
# the next line logged says how many were left out.
flood_member=$follower
denied_401() { metric "$flood_member" 'pgfence_auth_denied_total{status="401"}'; }
log_lines() { grep -c "event=auth_unauthenticated" "$DIR/$flood_member.log" || true; }
n_before=$(denied_401) lines_before=$(log_lines)
flood=()
for _ in $(seq 200); do flood+=("$(url "$flood_member" /v1/status)"); done
t0=$(date +%s%N)
curl -s -m 20 "${CURL_TLS[@]}" "${flood[@]}" >/dev/null || fail "the flood of 200 requests did not complete"
elapsed_s=$(( ($(date +%s%N) - t0) / 1000000000 ))
n_after=$(denied_401) lines_after=$(log_lines)
(( n_after - n_before == 200 )) || fail "200 denials counted as $(( n_after - n_before ))"
(( lines_after - lines_before <= 20 * (elapsed_s + 2) )) ||
    fail "$(( lines_after - lines_before )) denial lines logged in ${elapsed_s}s"
one_more_denial() {
    curl_code "${CURL_TLS[@]}" "$(url "$flood_member" /v1/status)" >/dev/null
    grep -q "event=auth_unauthenticated .*suppressed_before=[1-9]" "$DIR/$flood_member.log"
}
wait_until 5 "a later denial line says how many were left out" one_more_denial
pass "a flood of 200 denials: all counted, $(( lines_after - lines_before )) logged in ${elapsed_s}s, the rest reported as suppressed_before"

# ---- revocation ----
digest_of() { json_field "$(status_of "$1")" auth_file_digest; }
old=$(digest_of "$leader")
write_auth revoked
new=$(sha256sum "$DIR/auth.txt" | cut -d' ' -f1)
for i in 1 2 3; do kill -HUP "$(member_pid "$i")"; done
digest_is() { [[ "$(digest_of "$1")" == "$2" ]]; }
for i in 1 2 3; do wait_until 5 "member $i loads the new auth file" digest_is "$i" "$new"; done
[[ "$old" != "$new" ]] || fail "the digest did not change"
[[ $(exit_of as W1 keepalive report/7 "$r7") == 7 ]] || fail "a revoked token kept its lock alive"
grep -q "not authenticated: the bearer secret is not known" "$DIR/err" || fail "revoked: $(cat "$DIR/err")"
[[ $(exit_of as W1 acquire report/8 --lease 5s --wait 0ms) == 7 ]] || fail "a revoked token acquired"
[[ $(as W2 get job/1 -o json) == *"\"token\":$j1"* ]] || fail "w2 lost access after w1's revocation"
pass "a token removed from the file is refused after SIGHUP on every member (digest $old -> $new)"

# A broken file keeps the one loaded before.
echo "role broken" >>"$DIR/auth.txt"
kill -HUP "$(member_pid "$leader")"
wait_until 5 "the leader reports the failed reload" grep -q "event=reload_failed" "$DIR/$leader.log"
[[ $(digest_of "$leader") == "$new" ]] || fail "a broken auth file replaced the good one"
[[ $(as W2 get job/1 -o json) == *job/1* ]] || fail "w2 lost access after a failed reload"
pass "an auth file that does not parse keeps the one loaded before (reload_failed logged)"
