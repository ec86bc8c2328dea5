#!/usr/bin/env bash
# A web page's requests, replayed with curl against the default
# configuration (no TLS, no --auth-file): a browser's "simple request" — a
# POST /v1/members/remove with Content-Type text/plain and the page's Origin
# — is refused (403 origin_not_allowed), and the member is still in the
# configuration; without an Origin the text/plain POST is refused 415; a
# GET /v1/snapshot with an Origin is refused. Then a member started without
# --admin-without-auth answers every admin endpoint 403 naming the flag (the
# lock API still serves), and started with it (and --allowed-origin) serves
# them, and the allowed origin's requests.
source "$(dirname "$0")/../coordinator/lib.sh"
FENCECTL=${FENCECTL_BIN:?set FENCECTL_BIN}
EVIL=http://evil.example:8080

# code_of ARGS...: curl's HTTP status; the body in $DIR/body.
code_of() { curl -s -o "$DIR/body" -m 3 -w '%{http_code}' "$@" 2>/dev/null || true; }
body_has() { grep -qF -- "$1" "$DIR/body"; }
members_of() { curl -s -m 3 "$(url "$1" /v1/members)"; }  # the leader's answer
listed() { [[ "$(members_of "$1")" == *"\"id\":$2,"* ]]; }
refused_count() {  # MEMBER ERROR
    curl -s -m 2 "$(url "$1" /metrics)" |
        awk -v m="pgfence_http_refused_total{error=\"$2\"}" '$1 == m && !found {print $2; found = 1}'
}

# --- the default configuration, admin endpoints on (cluster.sh's --admin-without-auth)
cluster_start 3
L=$(wait_leader 10) || fail "no leader"
V=$((L % N + 1))  # the member the page removes
listed "$L" "$V" || fail "member $V is not listed before the attack: $(members_of "$L")"
config_before=$(json_field "$(members_of "$L")" config_index)

# The attack as a browser sends it: text/plain, the page's Origin, to the
# leader (and to the victim itself, which would redirect).
for target in "$L" "$V"; do
    code=$(code_of -X POST -H 'Content-Type: text/plain;charset=UTF-8' -H "Origin: $EVIL" \
        --data-binary "{\"id\":$V}" "$(url "$target" /v1/members/remove)")
    [[ $code == 403 ]] || fail "a page's POST /v1/members/remove to member $target answered $code: $(cat "$DIR/body")"
    body_has '"error":"origin_not_allowed"' && body_has "Origin '$EVIL'" ||
        fail "the refusal does not name the origin: $(cat "$DIR/body")"
done
# The same request without an Origin (what a form, or a client without one,
# sends): not JSON, so 415 naming the content type.
code=$(code_of -X POST -H 'Content-Type: text/plain' --data-binary "{\"id\":$V}" "$(url "$L" /v1/members/remove)")
[[ $code == 415 ]] || fail "a text/plain POST /v1/members/remove answered $code: $(cat "$DIR/body")"
body_has '"error":"unsupported_media_type"' && body_has "Content-Type 'text/plain'" ||
    fail "the 415 does not name the content type: $(cat "$DIR/body")"
code=$(code_of -X POST --data-binary "{\"id\":$V}" "$(url "$L" /v1/members/remove)")  # curl's default: a form
[[ $code == 415 ]] || fail "a form POST /v1/members/remove answered $code"
# Nothing was submitted (a removal is answered once it applied): the
# configuration is the one before, V in it and running.
listed "$L" "$V" || fail "member $V is no longer listed: $(members_of "$L")"
config_after=$(json_field "$(members_of "$L")" config_index)
[[ -n "$config_before" && "$config_after" == "$config_before" ]] ||
    fail "the configuration changed: config_index $config_before -> $config_after"
kill -0 "$(member_pid "$V")" || fail "member $V stopped: it was removed"
pass "a page's text/plain POST /v1/members/remove is refused (403 with Origin, 415 without); member $V stays"

# A page reading a backup, the lock list or the status; a page's acquire.
for path in /v1/snapshot /v1/locks /v1/status /metrics /healthz; do
    code=$(code_of -H "Origin: $EVIL" "$(url "$L" "$path")")
    [[ $code == 403 ]] || fail "GET $path with Origin $EVIL answered $code"
done
code=$(curl -s -o "$DIR/backup" -m 5 -w '%{http_code}' "$(url "$L" /v1/snapshot)" || true)
[[ $code == 200 && -s "$DIR/backup" ]] || fail "GET /v1/snapshot without an Origin answered $code"
code=$(code_of -X POST -H 'Content-Type: application/json' -H "Origin: $EVIL" \
    --data-binary '{"key":"page/1","lease_ms":5000}' "$(url "$L" /v1/acquire)")
[[ $code == 403 ]] || fail "a page's JSON acquire answered $code"
code=$(code_of -X POST -H 'Content-Type: text/plain' --data-binary '{"key":"page/1","lease_ms":5000}' "$(url "$L" /v1/acquire)")
[[ $code == 415 ]] || fail "a text/plain acquire answered $code"
code=$(code_of "$(url "$L" '/v1/locks?key=page/1')")
[[ $code == 404 ]] || fail "page/1 is held after refused acquires ($code: $(cat "$DIR/body"))"
post "$L" /v1/acquire '{"key":"page/1","lease_ms":5000}'
[[ $HTTP_CODE == 200 ]] || fail "a JSON acquire without an Origin answered $HTTP_CODE: $HTTP_BODY"
origin_refusals=$(refused_count "$L" origin_not_allowed)
media_refusals=$(refused_count "$L" unsupported_media_type)
((origin_refusals >= 7 && media_refusals >= 3)) ||
    fail "pgfence_http_refused_total: origin $origin_refusals, media type $media_refusals"
grep -q 'event=http_refused.*error=origin_not_allowed' "$DIR/$L.log" || fail "no http_refused line in $DIR/$L.log"
pass "GETs with an Origin are refused, a backup without one is served; refusals counted ($origin_refusals origin, $media_refusals media type)"

# --- one member, no auth, no --admin-without-auth: admin endpoints are off
"$CLUSTER" stop "$DIR"
N=1
solo() {  # extra flags...
    "$FENCE_BIN_DIR/fence-coordinator" --id 1 --peers "1=127.0.0.1:$((BASE + 1))" --client-addr "127.0.0.1:$(client_port 1)" \
        --data-dir "$DIR/solo" $FAST_FLAGS "$@" >>"$DIR/solo.log" 2>&1 &
    echo $! >"$DIR/1.pid"  # cleanup's cluster.sh stop ends it
}
fctl() { "$FENCECTL" --endpoints "127.0.0.1:$(client_port 1)" --timeout 3s "$@"; }
granted() { fctl acquire "$1" --lease 2s >/dev/null 2>&1; }
solo
wait_until 15 "the solo member grants" granted solo/first
for path in /v1/snapshot /v1/members /v1/status /metrics /v1/version; do
    code=$(code_of "$(url 1 "$path")")
    [[ $code == 403 ]] || fail "GET $path without auth and without --admin-without-auth answered $code"
    body_has '"error":"admin_disabled"' && body_has "--admin-without-auth" ||
        fail "GET $path's refusal does not name the flag: $(cat "$DIR/body")"
done
for path in /v1/members/add /v1/members/promote /v1/members/remove; do
    code=$(code_of -X POST -H 'Content-Type: application/json' --data-binary '{"id":2}' "$(url 1 "$path")")
    [[ $code == 403 ]] && body_has "--admin-without-auth" || fail "POST $path answered $code: $(cat "$DIR/body")"
done
set +e
fctl member list >"$DIR/out" 2>"$DIR/err"
rc=$?
set -e
[[ $rc == 7 ]] && grep -q -- "--admin-without-auth" "$DIR/err" ||
    fail "fencectl member list exited $rc: $(cat "$DIR/err")"
code=$(code_of "$(url 1 /healthz)")
[[ $code == 200 ]] || fail "/healthz answered $code"
pass "without auth and without the flag: admin endpoints 403 naming --admin-without-auth, the lock API serves"

# --- the same member with --admin-without-auth and an allowed origin
solo_pid=$(member_pid 1)
kill "$solo_pid"
wait "$solo_pid" || true  # our child: SIGTERM ends a lone leader at once
OPS=http://ops.example:8080
solo --admin-without-auth --allowed-origin "$OPS"
wait_until 15 "the solo member grants again" granted solo/second
for path in /v1/snapshot /v1/members /v1/status /metrics /v1/version; do
    code=$(code_of "$(url 1 "$path")")
    [[ $code == 200 ]] || fail "GET $path with --admin-without-auth answered $code: $(cat "$DIR/body")"
done
fctl member list >/dev/null || fail "fencectl member list with --admin-without-auth"
code=$(code_of -H "Origin: $OPS" "$(url 1 /v1/status)")
[[ $code == 200 ]] || fail "GET /v1/status from the allowed origin answered $code"
code=$(code_of -X POST -H 'Content-Type: application/json' -H "Origin: $OPS" \
    --data-binary '{"key":"ops/1","lease_ms":5000}' "$(url 1 /v1/acquire)")
[[ $code == 200 ]] || fail "an acquire from the allowed origin answered $code: $(cat "$DIR/body")"
code=$(code_of -H "Origin: $EVIL" "$(url 1 /v1/status)")
[[ $code == 403 ]] || fail "GET /v1/status from another origin answered $code"
pass "with --admin-without-auth the admin endpoints serve; --allowed-origin $OPS is served, $EVIL is not"
