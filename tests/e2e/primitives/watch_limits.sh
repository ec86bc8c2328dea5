#!/usr/bin/env bash
# GET /v1/watch's limits and refusals (docs/http-api.md "GET /v1/watch"):
# 400 for bad queries, 410 compacted with the oldest revision kept (a small
# --watch-history-events) and a watch from that revision served whole, 503 at
# --max-watchers (a slot freed when a watch's client goes), and a client that
# never reads closed with the watcher_too_slow line while the member's
# memory stays bounded (--watch-buffer-bytes).
source "$(dirname "$0")/../coordinator/lib.sh"

metric() {  # MEMBER NAME -> value (0 when absent)
    curl -s -m 2 "$(url "$1" /metrics)" | awk -v n="$2" '$1 == n { print $2; found = 1 } END { if (!found) print 0 }'
}
metric_at_least() { (($(metric "$1" "$2") >= $3)); }
rss_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$(member_pid "$1")/status"; }
cycle() {  # MEMBER KEY [OWNER]: acquire and release on the leader MEMBER
    post "$1" /v1/acquire "{\"key\":\"$2\",\"lease_ms\":5000,\"owner\":\"${3:-}\"}"
    [[ "$HTTP_CODE" == 200 ]] || fail "acquire $2: $HTTP_CODE $HTTP_BODY"
    post "$1" /v1/release "{\"key\":\"$2\",\"token\":$(json_field "$HTTP_BODY" token)}"
    [[ "$HTTP_CODE" == 200 ]] || fail "release $2: $HTTP_CODE $HTTP_BODY"
}

cluster_start 3 "--watch-history-events 20 --max-watchers 3 --watch-buffer-bytes 4096"
L=$(wait_leader 10) || fail "no leader"
F=$((L % 3 + 1))

# 400: on a follower too (the route is served by every member).
long=$(printf 'k%.0s' {1..600})
for q in "" "rev=1" "key=a&prefix=b" "key=a&rev=0" "key=a&rev=x1" "prefix=a&rev=-1" "key=a&progress=yes" "key=$long" "key=a%01b"; do
    get "$F" "/v1/watch?$q"
    [[ "$HTTP_CODE" == 400 && "$HTTP_BODY" == *'"error":"bad_request"'* ]] || fail "?$q answered $HTTP_CODE $HTTP_BODY, not 400"
done
pass "bad queries are answered 400"

# 410: 40 events, 20 kept.
for ((i = 0; i < 20; i++)); do cycle "$L" "c$i"; done
wait_until 5 "the follower applied them" caught_up "$L" "$F"
get "$F" "/v1/watch?prefix=&rev=1"
[[ "$HTTP_CODE" == 410 && "$HTTP_BODY" == *'"error":"compacted"'* ]] || fail "rev=1 answered $HTTP_CODE $HTTP_BODY, not 410"
oldest=$(json_field "$HTTP_BODY" oldest_revision)
[[ "$oldest" =~ ^[0-9]+$ ]] && ((oldest > 1)) || fail "410 without an oldest_revision: $HTTP_BODY"
curl -sN -m 2 "$(url "$F" "/v1/watch?prefix=&rev=$oldest")" >"$DIR/oldest" || true
events=$(grep -c '"revision"' "$DIR/oldest" || true)
head -1 "$DIR/oldest" | grep -q '"type":"start"' || fail "no start line from rev=$oldest: $(head -c 300 "$DIR/oldest")"
((events == 21)) || fail "rev=$oldest streamed $((events - 1)) events, the 20 kept were expected"
pass "rev=1 is answered 410 compacted with oldest_revision $oldest; from it, the 20 events kept stream"

# 503 at --max-watchers on one member; a watch whose client goes frees its place.
pids=()
for i in 1 2 3; do
    curl -sN -m 60 "$(url "$F" "/v1/watch?key=w$i")" >/dev/null 2>&1 &
    pids+=($!)
done
wait_until 5 "three watches open" metric_at_least "$F" pgfence_watchers 3
get "$F" "/v1/watch?key=w4"
[[ "$HTTP_CODE" == 503 && "$HTTP_BODY" == *'"error":"too_many_watchers"'* ]] || fail "a fourth watch answered $HTTP_CODE $HTTP_BODY"
kill "${pids[0]}"
wait_until 5 "the gone watch is closed" metric_at_least "$F" 'pgfence_watchers_closed_total{reason="client_gone"}' 1
code=$(curl -s -m 1 -o /dev/null -w '%{http_code}' "$(url "$F" "/v1/watch?key=w4")" || true)
[[ "$code" == 200 ]] || fail "a watch after one left answered $code"
kill "${pids[@]:1}" 2>/dev/null || true
pass "a watch past --max-watchers is answered 503 too_many_watchers; a client that leaves frees its place"

# A client that never reads: closed with watcher_too_slow, memory bounded.
python3 "$(dirname "$0")/watch_stall.py" 127.0.0.1 "$(client_port "$L")" "/v1/watch?prefix=big/" "$DIR/go" >"$DIR/stall" &
STALL=$!
wait_until 5 "the stalled watch is open" metric_at_least "$L" pgfence_watchers 1
rss0=$(rss_kb "$L")
key=big/$(printf 'x%.0s' {1..400})
owner=$(printf 'o%.0s' {1..200})
for ((i = 0; i < 300; i++)); do
    cycle "$L" "$key$i" "$owner"
    ((i % 20 == 19)) && metric_at_least "$L" 'pgfence_watchers_closed_total{reason="watcher_too_slow"}' 1 && break
done
metric_at_least "$L" 'pgfence_watchers_closed_total{reason="watcher_too_slow"}' 1 || fail "the stalled watch was not closed after 300 cycles"
rss1=$(rss_kb "$L")
touch "$DIR/go"
wait "$STALL" || true
last=$(cat "$DIR/stall")
[[ "$last" == *'"type":"error"'*'"error":"watcher_too_slow"'* ]] || fail "the stalled watch's last line: '$last'"
((rss1 - rss0 < 20000)) || fail "the member grew by $((rss1 - rss0)) KiB with a stalled watch"
pass "a watch that does not read is closed with watcher_too_slow after $((i + 1)) cycles; RSS grew $((rss1 - rss0)) KiB"
