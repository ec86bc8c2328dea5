#!/usr/bin/env bash
# SIGTERM of the leader: it hands leadership to a follower first (logged
# leadership_transfer naming the target, who becomes leader), exits within the
# bound without needing SIGKILL, and restarts from its data directory with
# its lock table intact.
source "$(dirname "$0")/lib.sh"
cluster_start 3
L=$(wait_leader 10) || fail "no leader"
post "$L" /v1/acquire '{"key":"kept","lease_ms":30000}'
[[ $HTTP_CODE == 200 ]] || fail "acquire: $HTTP_CODE"
T=$(json_field "$HTTP_BODY" token)
pid=$(member_pid "$L")
kill -TERM "$pid"
gone() { ! kill -0 "$pid" 2>/dev/null || [[ "$(ps -o stat= -p "$pid" 2>/dev/null)" == Z* ]]; }
wait_until 5 "leader $L exits after SIGTERM" gone
line=$(grep "event=leadership_transfer" "$DIR/$L.log" || true)
[[ -n "$line" ]] || fail "leader $L exited without transferring leadership"
target=$(sed -n 's/.*event=leadership_transfer target=\([0-9]*\).*/\1/p' <<<"$line")
grep -q "event=became_leader" "$DIR/$target.log" || fail "transfer target $target did not become leader"
NL=$(wait_leader 5 "$L") || fail "no leader after the transfer"
get "$NL" "/v1/locks?key=kept"
[[ $HTTP_CODE == 200 && "$(json_field "$HTTP_BODY" token)" == "$T" ]] || fail "lock lost across transfer: $HTTP_BODY"
"$CLUSTER" restart "$DIR" "$L"
back() { [[ "$(json_field "$(status_of "$L")" locks)" == 1 && "$(json_field "$(status_of "$L")" role)" == follower ]]; }
wait_until 10 "member $L back as follower with its lock table" back
pass "leader $L transferred to $target on SIGTERM and came back"
