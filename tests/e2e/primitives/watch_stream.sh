#!/usr/bin/env bash
# GET /v1/watch across failures (docs/http-api.md "GET /v1/watch"): a watch on
# a follower and one on the leader, both from rev=1, follow about a hundred
# grant / release / expire events made through a SIGKILL of the leader and a
# graceful restart of the follower. Each watch cut off resumes from the last
# revision it saw (the leader's on the third member, which is not restarted,
# the follower's on the same member once it is back, from its own log). The resumed streams, joined,
# equal a fresh watch from rev=1 (no gap, no duplicate, log order), whose
# grants are exactly the acquires made.
source "$(dirname "$0")/../coordinator/lib.sh"
CHECK="python3 $(dirname "$0")/watch_check.py"
TOKENS="$DIR/tokens"
: >"$TOKENS"

release_anywhere() {  # KEY TOKEN: bounded, following 307s
    local deadline=$((SECONDS + 10)) i out
    while ((SECONDS < deadline)); do
        for ((i = 1; i <= N; i++)); do
            out=$(curl -s -m 2 -L -X POST -H 'Content-Type: application/json' \
                --data-binary "{\"key\":\"$1\",\"token\":$2}" "$(url "$i" /v1/release)" 2>/dev/null || true)
            [[ "$out" == *'"released":true'* ]] && return 0
        done
        sleep 0.05
    done
    fail "release of $1 ($2) not answered"
}
cycle() {  # KEY: acquire and release
    local t
    t=$(acquire_anywhere "$1" 5000) || fail "acquire $1"
    echo "$1:$t" >>"$TOKENS"
    release_anywhere "$1" "$t"
}
expiring() {  # KEY: acquire, left to expire
    local t
    t=$(acquire_anywhere "$1" 500) || fail "acquire $1"
    echo "$1:$t" >>"$TOKENS"
}
drive() {  # PHASE: 12 cycles and 5 expiring leases (34 events)
    local i
    for ((i = 0; i < 12; i++)); do cycle "p$1-c$i"; done
    for ((i = 0; i < 5; i++)); do expiring "p$1-e$i"; done
}
watch_bg() {  # MEMBER REV FILE: a watch in the background; its PID in WATCH_PID
    curl -sN -m 120 "$(url "$1" "/v1/watch?prefix=&rev=$2")" >"$3" 2>/dev/null &
    WATCH_PID=$!
}
started() { [[ -s "$1" ]] && head -1 "$1" | grep -q '"type":"start"'; }
has_line() { grep -q -- "$2" "$1"; }
no_locks() {
    local l
    l=$(wait_leader 5) || return 1
    get "$l" /v1/locks
    [[ "$HTTP_CODE" == 200 && "$HTTP_BODY" == *'"locks":[]'* ]]
}

cluster_start 3
L=$(wait_leader 10) || fail "no leader"
F=$((L % 3 + 1))
T=$((6 - L - F))  # the third member: neither killed nor restarted
watch_bg "$F" 1 "$DIR/f.1"; F_PID=$WATCH_PID
watch_bg "$L" 1 "$DIR/l.1"; L_PID=$WATCH_PID
wait_until 5 "both watches started" bash -c "head -1 '$DIR/f.1' | grep -q start && head -1 '$DIR/l.1' | grep -q start"

drive 1
# The leader dies: its watch is cut off; it resumes on the third member.
wait_until 10 "the leader's watch saw phase 1" has_line "$DIR/l.1" '"key":"p1-c11"'
kill -KILL "$(member_pid "$L")"
wait_until 10 "the leader's watch ended" bash -c "! kill -0 $L_PID 2>/dev/null"
rev=$($CHECK last-rev "$DIR/l.1")
watch_bg "$T" "$rev" "$DIR/l.2"; L_PID=$WATCH_PID
wait_until 5 "the leader's watch resumed" started "$DIR/l.2"
NL=$(wait_leader 10 "$L") || fail "no new leader after the SIGKILL"
drive 2
"$CLUSTER" restart "$DIR" "$L" >/dev/null || fail "the killed member did not restart"

# The follower stops gracefully: its watch ends with shutting_down, and
# resumes on the same member once it is back.
wait_until 10 "the follower's watch saw phase 2" has_line "$DIR/f.1" '"key":"p2-c11"'
"$CLUSTER" restart "$DIR" "$F" >/dev/null || fail "the follower did not restart"
wait_until 10 "the follower's watch ended" bash -c "! kill -0 $F_PID 2>/dev/null"
[[ "$($CHECK last-line "$DIR/f.1")" == "error:shutting_down" ]] ||
    fail "the follower's watch ended with '$($CHECK last-line "$DIR/f.1")', not the shutting_down line"
rev=$($CHECK last-rev "$DIR/f.1")
wait_until 10 "the restarted follower serves" bash -c "curl -s -m 1 '$(url "$F" /healthz)' | grep -q ok"
watch_bg "$F" "$rev" "$DIR/f.2"; F_PID=$WATCH_PID
wait_until 5 "the follower's watch resumed" started "$DIR/f.2"

drive 3
wait_until 20 "every lease expired" no_locks
cycle zz-end
L=$(wait_leader 5) || fail "no leader"
watch_bg "$L" 1 "$DIR/fresh"; FRESH_PID=$WATCH_PID
for f in "$DIR/l.2" "$DIR/f.2" "$DIR/fresh"; do
    wait_until 15 "$f saw the last release" has_line "$f" '"type":"released".*"key":"zz-end"'
done
kill "$F_PID" "$L_PID" "$FRESH_PID" 2>/dev/null || true

events=$($CHECK events "$DIR/fresh" | wc -l)
((events >= 100)) || fail "only $events events in the fresh watch"
$CHECK same "$DIR/l.1" "$DIR/l.2" -- "$DIR/fresh" || fail "the leader's watch, resumed, differs from a fresh one"
$CHECK same "$DIR/f.1" "$DIR/f.2" -- "$DIR/fresh" || fail "the follower's watch, resumed, differs from a fresh one"
$CHECK grants-match "$TOKENS" "$DIR/fresh" || fail "the granted events are not the acquires made"
expired=$($CHECK events "$DIR/fresh" | grep -c '"existed": true' || true)
((expired == 15)) || fail "$expired leases expired, 15 were left to"
pass "$events events streamed without gap or duplicate across a leader SIGKILL and a graceful restart"
