#!/usr/bin/env bash
# Grow 3 -> 5 and shrink 5 -> 3 while a client acquires: members 4 and 5
# join as learners and are promoted; then 1 and 2 are removed (the leader
# among them hands over first) and stop themselves. Tokens never go
# backwards, and the 3 members left keep a quorum of their own.
source "$(dirname "$0")/lib.sh"
cluster_start 3
wait_leader 10 >/dev/null || fail "no leader"
start_acquirer
wait_until 10 "the client gets tokens" more_tokens_than 5
join_and_promote 4
join_and_promote 5
voters=$(fctl member list | grep -c ' voter')
((voters == 5)) || fail "$voters voters after growing, want 5"
before=$(tokens_so_far)
wait_until 10 "the client gets tokens with 5 voters" more_tokens_than "$((before + 5))"
for id in 1 2; do
    member_remove "$id"
    not_listed "$id" || fail "member $id still listed"
    wait_until 10 "removed member $id stops itself" exited "$id"
done
voters=$(fctl member list | grep -c ' voter')
((voters == 3)) || fail "$voters voters after shrinking, want 3"
before=$(tokens_so_far)
wait_until 10 "the client gets tokens with members 3, 4, 5" more_tokens_than "$((before + 5))"
# Members 3, 4 and 5 are the whole cluster now: losing one keeps a quorum.
L=$(N=5 wait_leader 10 "1 2") || fail "no leader among 3, 4, 5"
kill -9 "$(member_pid "$L")"
before=$(tokens_so_far)
wait_until 15 "the client gets tokens after leader $L died" more_tokens_than "$((before + 3))"
stop_acquirer 30
pass "grew to 5 and shrank to 3 while the client got $(wc -l <"$DIR/tokens") tokens in order"
