#!/usr/bin/env bash
# Recover from the loss of quorum (docs/operations.md, as written): two of
# three members are lost for good; the survivor is started with
# --force-new-cluster and serves alone, tokens above everything issued before
# (its whole log applied, plus the headroom); a new member joins it.
source "$(dirname "$0")/lib.sh"
cluster_start 3
L=$(wait_leader 10) || fail "no leader"
start_acquirer
wait_until 10 "the client gets tokens" more_tokens_than 10
S=$((L % 3 + 1))  # the survivor: a follower
for i in 1 2 3; do [[ $i == "$S" ]] || kill -9 "$(member_pid "$i")"; done
stop_acquirer 10
if fctl --timeout 2s acquire k:lost --lease 5s >/dev/null 2>&1; then fail "granted without a quorum"; fi
"$CLUSTER" stop "$DIR"
for i in 1 2 3; do [[ $i == "$S" ]] || rm -rf "${DIR:?}/$i" "$DIR/$i.pid"; done
old_cluster=$(grep -o 'cluster_id=[0-9]*' "$DIR/$S.log" | head -1 | cut -d= -f2)
# The survivor alone: a new one-member cluster from its own data directory.
FLAGS_FORCED="--force-new-cluster"
"$FENCE_BIN_DIR/fence-coordinator" --id "$S" --client-addr "127.0.0.1:$(client_port "$S")" --data-dir "$DIR/$S" \
    --admin-without-auth $FAST_FLAGS $FLAGS_FORCED >>"$DIR/$S.log" 2>&1 &
echo $! >"$DIR/$S.pid"
L2=$(wait_leader 10) || fail "the survivor does not lead alone"
[[ "$L2" == "$S" ]] || fail "member $L2 leads, not the survivor $S"
[[ -d "$DIR/$S.before-force-new-cluster" ]] || fail "the old directory was not kept aside"
[[ "$(json_field "$(status_of "$S")" cluster_id)" != "$old_cluster" ]] || fail "the forced cluster kept the old ID"
t=$(fctl acquire after:force --lease 5s) || fail "acquire in the forced cluster"
((t > LAST_TOKEN)) || fail "token $t is not above $LAST_TOKEN"
# A voter alone times its commits (its own write is the quorum), none unobserved.
metric_of() { curl -s -m 2 "$(url "$S" /metrics)" | awk -v n="$1" '$1 == n {print $2}'; }
timed=$(metric_of 'pgfence_commit_phase_seconds_count{phase="total"}')
((${timed:-0} >= 1)) || fail "the member alone timed no commit (total count '${timed}')"
unobserved=$(metric_of pgfence_commit_phase_unobserved_total)
[[ "$unobserved" == 0 ]] || fail "the member alone left $unobserved commits unobserved"
# Started again with the flag, it refuses rather than force twice.
kill "$(member_pid "$S")"
wait_until 10 "the survivor stops" exited "$S"
if "$FENCE_BIN_DIR/fence-coordinator" --id "$S" --client-addr "127.0.0.1:$(client_port "$S")" --data-dir "$DIR/$S" \
    --force-new-cluster >"$DIR/twice.out" 2>&1; then fail "forced a second time"; fi
grep -q "forced into a new cluster before" "$DIR/twice.out" || fail "second force: $(cat "$DIR/twice.out")"
"$FENCE_BIN_DIR/fence-coordinator" --id "$S" --client-addr "127.0.0.1:$(client_port "$S")" --data-dir "$DIR/$S" \
    --admin-without-auth $FAST_FLAGS >>"$DIR/$S.log" 2>&1 &
echo $! >"$DIR/$S.pid"
wait_leader 10 >/dev/null || fail "the survivor does not restart"
# Grow it back with a new member.
join_and_promote 4
t2=$(fctl acquire after:grow --lease 5s) || fail "acquire with 2 voters"
((t2 > t)) || fail "token $t2 after $t"
pass "member $S forced a new cluster: token $t > $LAST_TOKEN; member 4 joined"
