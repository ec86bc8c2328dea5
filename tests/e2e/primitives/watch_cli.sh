#!/usr/bin/env bash
# fencectl watch across a leader SIGKILL: a `watch --prefix w: --rev 1` served
# by the leader goes on at another member when the leader dies, and prints
# every event exactly once: the granted/released pairs of the acquires and
# releases made before and after the kill, in order, and the same lines as a
# fresh `watch --rev 1` started afterwards. SIGTERM ends a watch with exit 0.
source "$(dirname "$0")/../cli/lib.sh"

CYCLES_BEFORE=5
CYCLES_AFTER=5
watch_pid="" fresh_pid=""
# A failed run leaves no watch behind.
pre_cleanup() { for pid in $watch_pid $fresh_pid; do kill "$pid" 2>/dev/null || true; done; }
start_cluster 3

# cycle KEY: acquire + release; appends "granted KEY TOKEN" and "released KEY TOKEN" to made.txt.
cycle() {
    local token
    token=$(fencectl acquire "$1" --lease 5s --wait 0s) || fail "acquire $1"
    fencectl release "$1" "$token" || fail "release $1 $token"
    printf 'granted %s %s\nreleased %s %s\n' "$1" "$token" "$1" "$token" >>"$WORK/made.txt"
}

# events FILE: "TYPE KEY TOKEN" of every JSON line of FILE.
events() { jq -r '"\(.type) \(.key) \(.token)"' "$1"; }
# lines_at_least FILE N: FILE has N complete lines or more.
lines_at_least() { (($(wc -l <"$1") >= $2)); }

# leader_endpoint: HOST:PORT of the member that says it leads ("" when none does).
leader_endpoint() {
    fencectl status -o json 2>/dev/null | jq -r '.members[] | select(.role == "leader") | .endpoint' | head -n 1
}

for i in $(seq 1 "$CYCLES_BEFORE"); do cycle "w:$i"; done
has_leader() { [[ -n "$(leader_endpoint)" ]]; }
wait_until 10 "a leader" has_leader
leader_ep=$(leader_endpoint)
leader_id=$(( ${leader_ep##*:} - FENCE_BASE_PORT - 100 ))
leader_pid=$(cat "$WORK/cluster/$leader_id.pid")

# The leader first: it serves the watch, so its death breaks the stream.
"$FENCECTL_BIN" --endpoints "$leader_ep,$FENCE_ENDPOINTS" watch --prefix w: --rev 1 \
    >"$WORK/watch.out" 2>"$WORK/watch.err" &
watch_pid=$!
want=$((2 * CYCLES_BEFORE))
wait_until 15 "the watch printed the $want events made before the kill" lines_at_least "$WORK/watch.out" "$want"

kill -KILL "$leader_pid"
for i in $(seq $((CYCLES_BEFORE + 1)) $((CYCLES_BEFORE + CYCLES_AFTER))); do cycle "w:$i"; done
want=$((2 * (CYCLES_BEFORE + CYCLES_AFTER)))
wait_until 20 "the watch printed $want events" lines_at_least "$WORK/watch.out" "$want"
kill -0 "$watch_pid" 2>/dev/null || fail "the watch ended by itself: $(cat "$WORK/watch.err")"
kill -TERM "$watch_pid"
rc=0
wait "$watch_pid" || rc=$?
((rc == 0)) || fail "watch exited $rc on SIGTERM (want 0): $(cat "$WORK/watch.err")"
grep -q "resuming from revision" "$WORK/watch.err" || fail "the watch did not say it resumed: $(cat "$WORK/watch.err")"

# Exactly once, in order: what was made, no more (a duplicate would show as an
# extra line or a shifted one).
events "$WORK/watch.out" >"$WORK/seen.txt"
diff "$WORK/made.txt" "$WORK/seen.txt" >&2 || fail "the watch across the kill did not print each event once, in order"
jq -e -s 'map(.revision) | . == sort' "$WORK/watch.out" >/dev/null || fail "revisions not in order"

# A fresh watch from revision 1 on the survivors prints the same lines.
"$FENCECTL_BIN" watch --prefix w: --rev 1 >"$WORK/fresh.out" 2>"$WORK/fresh.err" &
fresh_pid=$!
wait_until 15 "the fresh watch printed $want events" lines_at_least "$WORK/fresh.out" "$want"
kill -TERM "$fresh_pid"
wait "$fresh_pid" || fail "fresh watch exited $? on SIGTERM"
jq -c '{type, revision, key, token}' "$WORK/watch.out" >"$WORK/a.txt"
jq -c '{type, revision, key, token}' "$WORK/fresh.out" >"$WORK/b.txt"
diff "$WORK/a.txt" "$WORK/b.txt" >&2 || fail "the watch across the kill differs from a fresh watch from revision 1"

echo "PASS [$TEST_NAME]: $want events once each across a SIGKILL of leader $leader_id; $(grep -c resuming "$WORK/watch.err") resume(s)"
