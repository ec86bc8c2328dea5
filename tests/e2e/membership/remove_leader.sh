#!/usr/bin/env bash
# Removing the leader: it hands leadership to another voter, which removes
# it; the old leader stops itself and refuses to start again, and the two
# members left elect and serve. (That a removed member is never counted in a
# quorum is the simulation's check: quorum_checker.h.)
source "$(dirname "$0")/lib.sh"
cluster_start 3
L=$(wait_leader 10) || fail "no leader"
t1=$(fctl acquire k:1 --lease 60s) || fail "acquire k:1"
member_remove "$L"
not_listed "$L" || fail "member $L still listed"
wait_until 10 "removed leader $L stops itself" exited "$L"
grep -q "event=removed_from_cluster" "$DIR/$L.log" || fail "member $L did not log its removal"
# Started again, a removed member refuses to: its removal is in its own log.
"$CLUSTER" restart "$DIR" "$L"
wait_until 10 "restarted removed member $L exits" exited "$L"
grep -q "member $L was removed from the cluster" "$DIR/$L.log" || fail "member $L did not say it was removed"
L2=$(wait_leader 10 "$L") || fail "no leader after removing $L"
[[ "$L2" != "$L" ]] || fail "the removed member still leads"
t2=$(fctl acquire k:2 --lease 5s) || fail "acquire after removing the leader"
((t2 > t1)) || fail "token $t2 is not above $t1"
[[ "$(fctl get k:1 -o json)" == *"\"token\":$t1"* ]] || fail "k:1 lost its holder"
pass "leader $L removed; $L2 took over; token $t2 > $t1"
