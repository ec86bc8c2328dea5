#!/usr/bin/env bash
# A follower behind the leader's snapshot catches up by InstallSnapshot sent
# in chunks over the real transport (--snapshot-chunk-bytes 1024: a table of
# a few hundred locks goes as dozens of chunks), including a member added
# afterwards; both end with the leader's whole lock table.
source "$(dirname "$0")/lib.sh"
cluster_start 3 "--snapshot-every 16 --snapshot-log-percent 0 --snapshot-keep 0 --snapshot-chunk-bytes 1024"
L=$(wait_leader 10) || fail "no leader"
F=$((L % 3 + 1))
kill -9 "$(member_pid "$F")"
owner=$(printf 'worker-%0100d' 0)
for i in $(seq 1 300); do
    post "$L" /v1/acquire "{\"key\":\"big:$i\",\"lease_ms\":120000,\"owner\":\"$owner\"}"
    [[ $HTTP_CODE == 200 ]] || fail "acquire big:$i: $HTTP_CODE $HTTP_BODY"
done
snapshotted() { grep -q "event=snapshot_taken" "$DIR/$L.log"; }
wait_until 10 "leader $L takes a snapshot" snapshotted
"$CLUSTER" restart "$DIR" "$F"
holds_all() { [[ "$(json_field "$(status_of "$1")" locks)" == 300 ]]; }
wait_until 20 "member $F catches up by snapshot" holds_all "$F"
grep -q "event=snapshot_installed" "$DIR/$F.log" || fail "member $F caught up without installing a snapshot"
member_add 4
"$CLUSTER" join "$DIR" 4 || fail "cluster.sh join 4"
wait_until 20 "learner 4 catches up by snapshot" holds_all 4
grep -q "event=snapshot_installed" "$DIR/4.log" || fail "member 4 caught up without installing a snapshot"
pass "members $F and 4 installed a chunked snapshot of 300 locks"
