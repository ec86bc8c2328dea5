#!/usr/bin/env bash
# fencectl explain names a partitioned holder, produced for real as the fault
# harness does it (tests/e2e/safety/lib/netns.sh): a coordinator member (m1),
# PostgreSQL (pg), two workers (w0, w1) and the prober (ctl) each in a network
# namespace of its own on one bridge. Worker A (w0) acquires; an nftables cut
# then drops everything between w0 and m1 (PostgreSQL stays reachable), so A's
# keepalives are sent and never arrive; the lease expires, B (w1) acquires and
# writes, A writes after its work (--no-lease-check) and is refused. explain
# with A's log says partitioned_holder; without it, what the coordinator alone
# can say (paused_holder, with the note that a cut looks the same).
# Needs root, ip and nft (exit 1 naming what is missing otherwise), and
# pg_fence installed. Ports: the member's 15101 (peers) and 15201 (HTTP), inside
# its namespace.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
E2E_ROOT=$(cd "$HERE/../../.." && pwd)
export E2E_ROOT
ROOT=$E2E_ROOT
source "$E2E_ROOT/tests/e2e/safety/lib/netns.sh"
fail() { echo "FAIL [partition]: $*" >&2; exit 1; }
: "${FENCECTL_BIN:?set FENCECTL_BIN}" "${FENCE_WORKER_BIN:?set FENCE_WORKER_BIN}"
: "${FENCE_COORDINATOR_BIN:?set FENCE_COORDINATOR_BIN}"
# token_of, has_token, expect_cause (and common.sh, pg.sh).
source "$HERE/lib.sh"
WORK=$(mktemp -d /tmp/pgfence-explain-ns.XXXXXX)
chmod 755 "$WORK"
PA=""
cleanup() {
  local rc=$?
  [[ -n "$PA" ]] && kill -KILL "$PA" 2>/dev/null
  [[ -n "${M1:-}" ]] && kill -TERM "$M1" 2>/dev/null && wait "$M1" 2>/dev/null
  pg_throwaway_stop "$WORK"
  ns_teardown
  if ((rc != 0)); then tail -n 20 "$WORK"/m1.log "$WORK"/*.out >&2 2>/dev/null; fi
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT

ns_preflight || fail "network namespaces are unusable here (see above): the partitioned holder cannot be produced"
ns_lock || fail "could not take the namespace lock"
ns_setup ctl pg m1 w0 w1 || fail "could not create the network namespaces"
PG_NETNS=$(ns_name pg) PG_LISTEN=$(ns_addr pg) PG_TRUST_NET=$NS_NET.0/24 pg_throwaway_start "$WORK" ||
  fail "PostgreSQL did not start"
DSN="host=$PG_TCP_HOST port=$PGPORT user=postgres dbname=postgres"
EXPLAIN_DSN=$DSN
EP="$(ns_addr m1):15201"
ns_spawn m1 "$FENCE_COORDINATOR_BIN" --id 1 --peers "1=$(ns_addr m1):15101" --client-addr "$EP" \
  --data-dir "$WORK/m1" --heartbeat-ms 20 --election-ms 150 --min-lease 500 >"$WORK/m1.log" 2>&1 &
M1=$!
ctl() { ns_exec ctl "$FENCECTL_BIN" --endpoints "$EP" "$@"; }
explain_run() { ctl "$@"; }
e2e_wait_for 30 ctl acquire warmup --lease 1s --wait 0s || fail "the member granted nothing within 30 s"
ns_exec w0 "$FENCE_WORKER_BIN" --setup --conninfo "$DSN" >/dev/null || fail "fence-worker --setup"

a=$WORK/pa.csv
ns_spawn w0 "$FENCE_WORKER_BIN" --endpoints "$EP" --conninfo "$DSN" --quiet --key e:cut --lease 2s --work 5s \
  --no-lease-check --worker-id pa --log "$a" >"$WORK/pa.out" 2>&1 &
PA=$!
e2e_wait_for 20 has_token "$a" || fail "worker pa acquired nothing: $(cat "$WORK/pa.out")"
ta=$(token_of "$a")
ns_cut holder both w0 m1 || fail "nft cut"
ns_exec w1 "$FENCE_WORKER_BIN" --endpoints "$EP" --conninfo "$DSN" --quiet --key e:cut --lease 10s --wait 15s \
  --worker-id pb --log "$WORK/pb.csv" >"$WORK/pb.out" 2>&1 || fail "worker pb: $(cat "$WORK/pb.out")"
code=0
wait "$PA" || code=$?
PA=""
((code == 10)) || fail "worker pa exited $code, want 10 (stale): $(cat "$WORK/pa.out")"
dropped=$(ns_cut_dropped holder)
((dropped > 0)) || fail "the cut dropped no packet"
grep -q "^pa,keepalive,e:cut,$ta,[0-9]*,0,,error,0$" "$a" || fail "no unanswered keepalive in pa's log: $(cat "$a")"
ns_heal
expect_cause partitioned_holder "$ta" --client-log "$a"
echo "PASS: partitioned_holder (nft cut w0 <-> m1, $dropped packets dropped)"
expect_cause paused_holder "$ta"
grep -q "network cut" "$WORK/explain-$ta-paused_holder.json" ||
  fail "without the log, explain does not say a cut looks the same"
echo "PASS: without the holder's log the coordinator alone says paused_holder, and that a cut looks the same"
