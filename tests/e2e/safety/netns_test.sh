#!/usr/bin/env bash
# The fault harness's own machinery, checked against the real kernel:
#   - a run interrupted (SIGTERM; run.sh traps INT and TERM alike, and a
#     background child here cannot receive SIGINT, which bash ignores in
#     asynchronous commands) removes every namespace it made and every process
#     it started in them;
#   - namespaces left by a run that was killed with -9 are removed, with their
#     processes, by the next run's ns_sweep_stale;
#   - a cut (nftables in the bridge namespace) stops a TCP connection, counts the
#     packets it dropped, leaves the other direction's rule out for a one-way
#     cut, and the heal lets the connection through again;
#   - the nemesis schedule comes from the seed alone: the same seed gives the
#     same schedule, another seed another, and every cycle holds every fault kind.
# Needs root (namespaces) and nft. Ends with "netns: N passed, N failed".
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
E2E_ROOT=$(cd "$HERE/../../.." && pwd)
export E2E_ROOT
source "$HERE/lib/common.sh"
source "$HERE/lib/netns.sh"
passed=0 failed=0
ok() { if eval "$2"; then passed=$((passed + 1)); echo "  PASS  $1"; else failed=$((failed + 1)); echo "  FAIL  $1 ($2)"; fi; }
trap 'ns_teardown' EXIT

ns_preflight || { echo "netns: 0 passed, 1 failed"; exit 1; }
ns_lock || { echo "netns: 0 passed, 1 failed"; exit 1; }
COORD=$(e2e_find_bin fence-coordinator FENCE_COORDINATOR_BIN) || { echo "netns: fence-coordinator is not built"; echo "netns: 0 passed, 1 failed"; exit 1; }
tmp=$(mktemp -d /tmp/pgfence-netns.XXXXXX)

# child: a stand-in run that makes namespaces with a process in one, then
# waits to be interrupted (its trap tears down) or killed with -9.
child() {
  bash -c '
    source "$1/lib/netns.sh"
    trap "ns_teardown; exit 130" INT TERM
    ns_setup m1 m2 || exit 1
    ns_spawn m1 sleep 300 &
    echo "$!" >"$2/sleep.pid"
    echo ready >"$2/ready"
    wait' _ "$HERE" "$tmp" 2>/dev/null &
  CHILD=$!
  e2e_wait_for 10 test -f "$tmp/ready"
}
gone() { ! kill -0 "$1" 2>/dev/null; }
ours() { ip netns list | awk '{ print $1 }' | grep -c "^pgf$1-" || true; }

rm -f "$tmp/ready"; child
made=$(ours "$CHILD"); sleeper=$(cat "$tmp/sleep.pid")
kill -TERM "$CHILD"; wait "$CHILD" 2>/dev/null
ok "interrupted run had made its namespaces" "((made == 3))"
ok "interrupted run removed every namespace" "(($(ours "$CHILD") == 0))"
ok "interrupted run left no process behind" "! kill -0 $sleeper 2>/dev/null"

rm -f "$tmp/ready"; child
sleeper=$(cat "$tmp/sleep.pid")
kill -KILL "$CHILD"; wait "$CHILD" 2>/dev/null
ok "a run killed with -9 leaves its namespaces" "(($(ours "$CHILD") == 3))"
ns_sweep_stale 2>/dev/null
ok "the next run sweeps them away" "(($(ours "$CHILD") == 0))"
ok "with the processes inside them" "e2e_wait_for 5 gone $sleeper"

ns_setup ctl m1 m2 || { echo "netns: ns_setup failed"; }
ok "the root namespace has no address of the test range after setup" "! ip -4 -o addr show | grep -q ' 198\.18\.'"
ns_spawn m2 "$COORD" --id 1 --peers "1=$(ns_addr m2):7401" --client-addr "$(ns_addr m2):7501" --data-dir "$tmp/m2" \
  >"$tmp/m2.log" 2>&1 &
member=$!
ok "a process in a namespace is reachable from another one" "e2e_wait_for 10 ns_reachable m1 m2 7501"
ns_cut t1 one m1 m2
ok "a one-way cut m1 -> m2 stops m1's connection" "! ns_reachable m1 m2 7501"
ok "and counts the packets it dropped" "(($(ns_cut_dropped t1) > 0))"
ok "a one-way cut adds one rule" "(($(ns_nft list chain bridge pgfence forward | grep -c 'comment \"t1\"') == 1))"
ok "ctl, not in the cut, still connects" "ns_reachable ctl m2 7501"
ns_heal
ok "after the heal m1 connects again" "e2e_wait_for 5 ns_reachable m1 m2 7501"
ns_cut t2 both m1,ctl m2
ok "a two-way cut adds two rules" "(($(ns_nft list chain bridge pgfence forward | grep -c 'comment \"t2\"') == 2))"
ok "and stops both hosts of its side" "! ns_reachable ctl m2 7501 && ! ns_reachable m1 m2 7501"
ns_heal
kill -KILL "$member" 2>/dev/null; wait "$member" 2>/dev/null

plan() { bash "$HERE/run.sh" --plan-only --seed "$1" --seconds 120; }
ok "the same seed gives the same schedule" "[[ \"\$(plan 11)\" == \"\$(plan 11)\" ]]"
ok "another seed gives another" "[[ \"\$(plan 11)\" != \"\$(plan 12)\" ]]"
kinds=$(bash -c "source '$HERE/lib/nemesis.sh'; echo \${#NEM_KINDS[@]}")
ok "every cycle of the schedule holds every fault kind once" \
  "(($(plan 11 | head -n "$kinds" | awk '{ print $1 }' | sort -u | wc -l) == kinds))"
ns_teardown
ok "teardown leaves no namespace of this run" "(($(ours $$) == 0))"
rm -rf "$tmp"
echo "netns: $passed passed, $failed failed"
((failed == 0))
