#!/usr/bin/env bash
# fencectl acquire / release / keepalive / get / list / status against a real
# 3-member cluster, table and JSON output, and every documented exit code.
source "$(dirname "$0")/lib.sh"
start_cluster 3

# acquire prints only the token.
token=$(fencectl acquire job --lease 5s --wait 0s --owner w1)
[[ "$token" =~ ^[0-9]+$ ]] || fail "acquire printed '$token', not a bare token"

# Held: a second acquire fails with 3; the same owner gets its token back.
expect_code 3 fencectl acquire job --lease 5s --wait 0s
again=$(fencectl acquire job --lease 5s --wait 0s --owner w1)
[[ "$again" == "$token" ]] || fail "same owner got token $again, expected $token"

# get / list, table and JSON.
fencectl get job | grep -Eq "^job +$token +w1 +5s " || fail "get table: $(fencectl get job)"
fencectl get job -o json | grep -q "\"key\":\"job\",\"token\":$token,\"owner\":\"w1\",\"lease_ms\":5000" ||
    fail "get json: $(fencectl get job -o json)"
fencectl list | grep -Eq "^job +$token " || fail "list: $(fencectl list)"
fencectl list -o json | grep -q "{\"locks\":\[{\"key\":\"job\",\"token\":$token" || fail "list json: $(fencectl list -o json)"
# --prefix: only the keys that start with it (fencectl follows the leader's pages).
fencectl acquire jobs/a >/dev/null || fail "acquire jobs/a"
[[ $(fencectl list --prefix jobs/ | grep -c '^jobs/a ') == 1 && $(fencectl list --prefix jobs/) != *"job "* ]] ||
    fail "list --prefix jobs/: $(fencectl list --prefix jobs/)"
expect_code 2 fencectl get job --prefix j

# keepalive prints the ttl and keeps the lease.
ttl=$(fencectl keepalive job "$token")
((ttl > 4000 && ttl <= 5000)) || fail "keepalive ttl $ttl not in (4000, 5000]"
fencectl keepalive job "$token" -o json | grep -q "\"token\":$token" || fail "keepalive json"

# A stale token can neither keep alive (4) nor release (6) the lock.
expect_code 4 fencectl keepalive job $((token + 1000))
expect_code 6 fencectl release job $((token + 1000))

# status: one row per member, exactly one leader; JSON has every member.
status=$(fencectl status)
[[ $(grep -c -E '^[0-9]+ +(leader|follower) ' <<<"$status") == 3 ]] || fail "status rows: $status"
[[ $(grep -c -E '^[0-9]+ +leader ' <<<"$status") == 1 ]] || fail "status leaders: $status"
head -1 <<<"$status" | grep -q "ID  ROLE  *TERM  *LEADER  *COMMIT  *APPLIED" || fail "status header: $status"
[[ $(fencectl status -o json | grep -o '"endpoint"' | wc -l) == 3 ]] || fail "status json: $(fencectl status -o json)"

# release, then it is gone: get -> 6, release again -> 6.
fencectl release job "$token" || fail "release failed"
expect_code 6 fencectl get job
expect_code 6 fencectl release job "$token"

# Tokens only grow.
next=$(fencectl acquire job --lease 5s --wait 0s)
((next > token)) || fail "token $next after $token did not grow"
fencectl release job "$next"

# Usage errors (2) name the bad value; the server's 400 is also 2.
expect_code 2 fencectl acquire job --lease 10x
grep -q "'10x'" "$WORK/last.err" || fail "usage error does not name '10x': $(cat "$WORK/last.err")"
expect_code 2 fencectl acquire job --lease 100ms --wait 0s
grep -q "^fencectl acquire: --lease 100ms is shorter than the cluster allows" "$WORK/last.err" ||
  fail "the server's 400 is not said in --lease's terms: $(cat "$WORK/last.err")"
expect_code 2 fencectl frobnicate
# Into a file first: `grep -q` stops reading at its match, and a --help longer
# than one write would then die of SIGPIPE under pipefail.
fencectl --help >"$WORK/help.txt" || fail "--help failed"
grep -q "exit codes" "$WORK/help.txt" || fail "--help lacks exit codes"

# Endpoints: a dead member first in the list is skipped; only dead members -> 5.
dead="127.0.0.1:$((FENCE_BASE_PORT + 99))"
fencectl --endpoints "$dead,$FENCE_ENDPOINTS" list >/dev/null || fail "dead first endpoint not skipped"
expect_code 5 fencectl --endpoints "$dead" --timeout 1s list
FENCE_ENDPOINTS="$dead" expect_code 5 fencectl --timeout 1s list

# A follower alone in --endpoints redirects to the leader.
follower=$(fencectl status | awk '$2 == "follower" {print $7; exit}')
t=$(fencectl --endpoints "$follower" acquire viafollower --lease 5s --wait 0s) || fail "acquire via follower $follower"
fencectl --endpoints "$follower" release viafollower "$t" || fail "release via follower"
# A SIGSTOPped member first in the list (it accepts TCP, never answers) is left
# after the 300ms /healthz probe, not the 3s attempt timeout, and never gets
# the acquire.
paused_id=$(fencectl status | awk '$2 == "follower" {print $1; exit}')
paused_ep=$(fencectl status | awk '$2 == "follower" {print $7; exit}')
paused_pid=$(cat "$WORK/cluster/$paused_id.pid")
pre_cleanup() { kill -CONT "$paused_pid" 2>/dev/null || true; }
kill -STOP "$paused_pid"
start_ns=$(date +%s%N)
t=$(fencectl --endpoints "$paused_ep,$FENCE_ENDPOINTS" acquire paused-first --lease 5s --wait 0s) ||
    fail "acquire with SIGSTOPped $paused_ep first in the list"
took_ms=$((($(date +%s%N) - start_ns) / 1000000))
((took_ms < 2000)) || fail "acquire took ${took_ms}ms with a SIGSTOPped first endpoint (probe is 300ms)"
fencectl release paused-first "$t"
kill -CONT "$paused_pid"
pre_cleanup() { :; }
echo "[$TEST_NAME] SIGSTOPped first endpoint cost ${took_ms}ms"

# A dead member shows as unreachable; status still exits 0 and a leader serves.
victim=$(fencectl status | awk '$2 == "follower" {print $1; exit}')
kill -KILL "$(cat "$WORK/cluster/$victim.pid")"
status=$(fencectl --timeout 2s status) || fail "status with one member down exited non-zero"
[[ $(grep -c unreachable <<<"$status") == 1 ]] || fail "dead member $victim not shown unreachable: $status"
t=$(fencectl acquire after-kill --lease 5s --wait 0s) || fail "acquire with one member down"
fencectl release after-kill "$t"

# A lease the cluster refuses is named by the flag the user typed.
expect_code 2 fencectl acquire too-long --lease 1h --wait 0s
grep -q "^fencectl acquire: --lease 1h is longer than the cluster allows: it grants leases from " "$WORK/last.err" ||
  fail "--lease 1h refused as: $(cat "$WORK/last.err")"
echo "PASS [$TEST_NAME]"
