#!/usr/bin/env bash
# Replace a member whose data directory was lost, while a client acquires:
# member 3 dies and its directory is deleted; it is removed, a new member 4 is
# added, started with --join and promoted. The cluster serves throughout
# (two of three voters stay up), member 4 has the whole lock table, a
# restart of member 4 keeps it, and no token ever went backwards.
source "$(dirname "$0")/lib.sh"
cluster_start 3
L=$(wait_leader 10) || fail "no leader"
fctl acquire held:1 --lease 60s >/dev/null || fail "acquire held:1"
start_acquirer
wait_until 10 "the client gets tokens" more_tokens_than 5
V=$((L % 3 + 1))  # a follower
kill -9 "$(member_pid "$V")"
rm -rf "${DIR:?}/$V"
member_remove "$V"
not_listed "$V" || fail "member $V still listed after remove"
# A member that was not added refuses to start.
if "$FENCE_BIN_DIR/fence-coordinator" --id 7 --join "$(all_endpoints)" --data-dir "$DIR/7" \
    --client-addr "127.0.0.1:$(client_port 7)" >"$DIR/refused.out" 2>&1; then
    fail "member 7 started without being added"
fi
grep -q "member 7 is not in the configuration" "$DIR/refused.out" || fail "member 7: $(cat "$DIR/refused.out")"
join_and_promote 4
before=$(tokens_so_far)
wait_until 10 "the client gets tokens after the replacement" more_tokens_than "$((before + 5))"
has_held() { [[ "$(json_field "$(status_of 4)" locks)" -ge 1 ]] && curl -s -m 1 "$(url 4 /v1/status)" | grep -q '"voter":true'; }
wait_until 10 "member 4 votes and holds the lock table" has_held
"$CLUSTER" restart "$DIR" 4
back() { [[ "$(json_field "$(status_of 4)" role)" == follower || "$(json_field "$(status_of 4)" role)" == leader ]]; }
wait_until 15 "member 4 restarts (with --join, from its own data directory)" back
stop_acquirer 20
t=$(fctl acquire after:1 --lease 5s) || fail "acquire after the replacement"
((t > LAST_TOKEN)) || fail "token $t is not above $LAST_TOKEN"
pass "member $V replaced by member 4 while $(tokens_so_far) tokens were granted in order"
