#!/usr/bin/env bash
# Removing the leader: it hands leadership to another voter, which removes
# it; the old leader stops itself, is never counted again, and the two
# members left elect and serve.
source "$(dirname "$0")/lib.sh"
cluster_start 3
L=$(wait_leader 10) || fail "no leader"
t1=$(fctl acquire k:1 --lease 60s) || fail "acquire k:1"
fctl member remove "$L" >/dev/null || fail "member remove $L (the leader)"
not_listed "$L" || fail "member $L still listed"
wait_until 10 "removed leader $L stops itself" exited "$L"
grep -q "event=removed_from_cluster" "$DIR/$L.log" || fail "member $L did not log its removal"
L2=$(wait_leader 10 "$L") || fail "no leader after removing $L"
[[ "$L2" != "$L" ]] || fail "the removed member still leads"
t2=$(fctl acquire k:2 --lease 5s) || fail "acquire after removing the leader"
((t2 > t1)) || fail "token $t2 is not above $t1"
[[ "$(fctl get k:1 -o json)" == *"\"token\":$t1"* ]] || fail "k:1 lost its holder"
# Of two voters, killing one leaves no quorum: the removed member is not counted.
kill -9 "$(member_pid "$L2")"
if fctl --timeout 2s acquire k:3 --lease 5s >/dev/null 2>&1; then fail "granted with 1 of 2 voters"; fi
pass "leader $L removed; $L2 took over; token $t2 > $t1"
