#!/usr/bin/env bash
# A follower behind the leader's snapshot catches up by InstallSnapshot sent
# in chunks over the real transport (--snapshot-chunk-bytes 1024: a table of
# a few hundred locks goes as dozens of chunks), including a member added
# afterwards; both end with the leader's whole lock table. Every member
# reports the same config_index for the configuration in force, wherever it
# learnt it from: 0 for the first one (--peers), also from the leader's
# snapshot; the index of the entry that added member 4 after a member
# restarts from its own snapshot taken after that entry and after another
# installs the leader's.
source "$(dirname "$0")/lib.sh"

config_index_of() { json_field "$(status_of "$1")" config_index; }
config_indexes() {
    local m out=""
    for m in "$@"; do out+="member $m: $(config_index_of "$m"); "; done
    echo "$out"
}
same_config_index() {  # WANT MEMBER...
    local want=$1 m
    shift
    for m in "$@"; do [[ "$(config_index_of "$m")" == "$want" ]] || return 1; done
}
# expect_config_index SECONDS WANT MEMBER...: waits until every MEMBER reports WANT.
expect_config_index() {
    local limit=$1 want=$2 deadline=$((SECONDS + $1))
    shift 2
    while ((SECONDS < deadline)); do
        same_config_index "$want" "$@" && { echo "config_index $want on members $*"; return 0; }
        sleep 0.05
    done
    fail "config_index is not $want on every member after ${limit}s: $(config_indexes "$@")"
}
last_snapshot_index() { grep "event=snapshot_taken" "$DIR/$1.log" | tail -1 | grep -o 'index=[0-9]*' | cut -d= -f2; }
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
expect_config_index 10 0 1 2 3
member_add 4
"$CLUSTER" join "$DIR" 4 || fail "cluster.sh join 4"
wait_until 20 "learner 4 catches up by snapshot" holds_all 4
grep -q "event=snapshot_installed" "$DIR/4.log" || fail "member 4 caught up without installing a snapshot"
ADDED=$(config_index_of "$L")
[[ $ADDED =~ ^[1-9][0-9]*$ ]] || fail "leader $L reports config_index '$ADDED' after adding member 4"
expect_config_index 10 "$ADDED" 1 2 3 4
# G misses what follows; F snapshots past the entry that added 4, then
# restarts from that snapshot; G comes back behind the leader's snapshot.
G=$((6 - L - F))
kill -9 "$(member_pid "$G")"
for i in $(seq 1 40); do
    post "$L" /v1/acquire "{\"key\":\"late:$i\",\"lease_ms\":120000}"
    [[ $HTTP_CODE == 200 ]] || fail "acquire late:$i: $HTTP_CODE $HTTP_BODY"
done
past_the_entry() { local s; s=$(last_snapshot_index "$1"); [[ -n $s ]] && ((s > ADDED)); }
wait_until 10 "member $F snapshots past index $ADDED" past_the_entry "$F"
wait_until 10 "leader $L snapshots past index $ADDED" past_the_entry "$L"
installs_before=$(grep -c "event=snapshot_installed" "$DIR/$G.log" || true)
"$CLUSTER" restart "$DIR" "$F"
"$CLUSTER" restart "$DIR" "$G"
holds_late() { [[ "$(json_field "$(status_of "$1")" locks)" == 340 ]]; }
wait_until 20 "members $F and $G catch up" holds_late "$G"
wait_until 20 "member $F catches up" holds_late "$F"
(($(grep -c "event=snapshot_installed" "$DIR/$G.log") > installs_before)) ||
    fail "member $G caught up without installing the leader's snapshot"
echo "member $F restarted from its snapshot at $(last_snapshot_index "$F"), member $G installed the leader's at" \
    "$(last_snapshot_index "$L") or later; the configuration's entry: $ADDED"
expect_config_index 10 "$ADDED" 1 2 3 4
pass "members $F and 4 installed a chunked snapshot of 300 locks; config_index 0, then $ADDED, on every member"
