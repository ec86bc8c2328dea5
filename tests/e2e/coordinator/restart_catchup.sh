#!/usr/bin/env bash
# A member that was down while the log moved past a snapshot catches up by
# InstallSnapshot (leader compacts every 16 entries, keeps none behind), then
# applies the same lock table; a member restarted from its own data directory
# (snapshot + log) comes back with its state.
source "$(dirname "$0")/lib.sh"
cluster_start 3 "--snapshot-every 16 --snapshot-keep 0"
L=$(wait_leader 10) || fail "no leader"
F=$(( L % N + 1 ))
kill -9 "$(member_pid "$F")"
for i in $(seq 1 40); do
    post "$L" /v1/acquire "{\"key\":\"k$i\",\"lease_ms\":60000}"
    [[ $HTTP_CODE == 200 ]] || fail "acquire k$i: $HTTP_CODE $HTTP_BODY"
    if ((i % 2 == 0)); then
        post "$L" /v1/release "{\"key\":\"k$i\",\"token\":$(json_field "$HTTP_BODY" token)}"
        [[ $HTTP_CODE == 200 ]] || fail "release k$i: $HTTP_CODE"
    fi
done
snapshotted() { grep -q "event=snapshot_taken" "$DIR/$L.log"; }
wait_until 10 "leader $L takes a snapshot" snapshotted
"$CLUSTER" restart "$DIR" "$F"
wait_until 15 "member $F catches up" caught_up "$L" "$F"
grep -q "event=snapshot_installed" "$DIR/$F.log" || fail "member $F caught up without installing a snapshot"
[[ "$(json_field "$(status_of "$F")" locks)" == 20 ]] || fail "member $F holds $(json_field "$(status_of "$F")" locks) locks, want 20"
# Restart the caught-up member gracefully: it recovers snapshot + log from disk.
"$CLUSTER" restart "$DIR" "$F"
recovered() { [[ "$(json_field "$(status_of "$F")" locks)" == 20 ]]; }
wait_until 10 "member $F recovers its lock table from disk" recovered
pass "member $F caught up by snapshot and recovered from its data dir"
