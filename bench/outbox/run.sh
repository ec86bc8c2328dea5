#!/usr/bin/env bash
# bench/outbox/run.sh: how many outbox entries per second fence-relay
# delivers to a local receiver (make bench-relay).
#
# A throwaway PostgreSQL with pg_fence (tests/e2e/safety/lib/pg.sh, port
# 14320) gets BENCH_OUTBOX_ENTRIES entries (fence_enqueue under 100 targets,
# one statement; its rate is printed too). Then the receiver
# (tests/e2e/lastmile/receiver.py, port 14310: applies each Idempotency-Key
# once, counts POSTs) and BENCH_OUTBOX_RELAYS relays (python3 -m
# pgfence.relay --batch BENCH_OUTBOX_BATCH --concurrency
# BENCH_OUTBOX_CONCURRENCY) start together; the time runs from their start
# until the receiver has applied every entry, read from the receiver itself
# (GET /count, every 20 ms): the receiver's count is the truth, not the
# relays' logs. Afterwards it checks that no key was received twice and that
# every entry is marked delivered in fence_outbox.
#
# Prints "relay: N entries in S s = R entries/s (goal: at least 2000)" with
# PASS or FAIL; a benchmark: exits 0 either way, non-zero only when a run or
# a check fails. Settings (environment, defaults): BENCH_OUTBOX_ENTRIES
# (20000), BENCH_OUTBOX_RELAYS (1), BENCH_OUTBOX_CONCURRENCY (4),
# BENCH_OUTBOX_BATCH (100; the relay's defaults), BENCH_OUTBOX_OUT (build/bench-outbox: logs).
# Needs pg_fence installed (make -C pg_extension install) and Debian's
# python3 with python3-psycopg2.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
N=${BENCH_OUTBOX_ENTRIES:-20000}
RELAYS=${BENCH_OUTBOX_RELAYS:-1}
CONCURRENCY=${BENCH_OUTBOX_CONCURRENCY:-4}
BATCH=${BENCH_OUTBOX_BATCH:-100}
OUT=${BENCH_OUTBOX_OUT:-$ROOT/build/bench-outbox}
PYTHON=/usr/bin/python3
RECEIVER_PORT=14310
PG_PORT=14320
GOAL=2000

[[ ${1:-} == -h || ${1:-} == --help ]] && { sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
for v in N RELAYS CONCURRENCY BATCH; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: BENCH_OUTBOX_$v must be a positive integer, not '${!v}'" >&2; exit 2; }
done

rm -rf "$OUT"
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/pgfence-bench-outbox.XXXXXX)
chmod 711 "$WORK"
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  pg_throwaway_stop "$WORK" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# shellcheck source=../../tests/e2e/safety/lib/pg.sh
source "$ROOT/tests/e2e/safety/lib/pg.sh"
pg_free_port() { echo "$PG_PORT"; }   # this benchmark's port, not a random one
pg_throwaway_start "$WORK" max_connections=100 >"$OUT/pg.log" 2>&1 ||
  { echo "run.sh: PostgreSQL did not start, see $OUT/pg.log and $WORK/pg/server.log" >&2; exit 1; }
psql -X -q -v ON_ERROR_STOP=1 -c 'CREATE EXTENSION pg_fence'

now() { date +%s.%N; }
t0=$(now)
psql -X -q -v ON_ERROR_STOP=1 -c "SELECT count(fence_enqueue('bench:' || (n % 100), 1, 'op-' || n,
  'http://127.0.0.1:$RECEIVER_PORT/hook', jsonb_build_object('n', n, 'body', repeat('x', 100))))
  FROM generate_series(1, $N) AS n" >/dev/null
t1=$(now)
psql -X -q -c 'VACUUM ANALYZE fence_outbox' >/dev/null

"$PYTHON" "$ROOT/tests/e2e/lastmile/receiver.py" "$RECEIVER_PORT" >"$OUT/receiver.log" 2>&1 &
pids+=($!)
count() { curl -s --max-time 2 "http://127.0.0.1:$RECEIVER_PORT/count" || true; }
for _ in $(seq 100); do [[ -n $(count) ]] && break; sleep 0.05; done
[[ -n $(count) ]] || { echo "run.sh: the receiver did not start, see $OUT/receiver.log" >&2; exit 1; }

start=$(now)
for i in $(seq "$RELAYS"); do
  PYTHONPATH="$ROOT/clients/python" "$PYTHON" -m pgfence.relay --batch "$BATCH" \
    --concurrency "$CONCURRENCY" --idle 10ms --log-every 1s >"$OUT/relay-$i.log" 2>&1 &
  pids+=($!)
done
applied=0
deadline=$(( $(date +%s) + 600 ))
while :; do
  applied=$(count | sed -nE 's/.*"applied": ([0-9]+).*/\1/p')
  [[ ${applied:-0} -ge $N ]] && break
  if (( $(date +%s) > deadline )); then
    echo "run.sh: the receiver applied ${applied:-0} of $N entries in 600 s; logs in $OUT" >&2
    exit 1
  fi
  sleep 0.02
done
end=$(now)
received=$(count | sed -nE 's/.*"received": ([0-9]+).*/\1/p')
# the relays mark their last round; then every entry is delivered
for _ in $(seq 250); do
  delivered=$(psql -X -At -c "SELECT count(*) FROM fence_outbox WHERE state = 'delivered'")
  [[ $delivered == "$N" ]] && break
  sleep 0.02
done
if [[ $received != "$N" || $delivered != "$N" ]]; then
  echo "run.sh: the receiver got $received POSTs for $N entries, fence_outbox says $delivered delivered" >&2
  exit 1
fi

awk -v n="$N" -v t0="$t0" -v t1="$t1" -v s="$start" -v e="$end" -v goal="$GOAL" \
    -v relays="$RELAYS" -v conc="$CONCURRENCY" -v batch="$BATCH" 'BEGIN {
  printf "fence_enqueue: %d entries in one statement in %.2f s = %.0f entries/s\n", n, t1 - t0, n / (t1 - t0)
  rate = n / (e - s)
  printf "relay: %d entries in %.2f s = %.0f entries/s, %d relay(s) x concurrency %d, batch %d, by the receiver'\''s count (goal: at least %d) %s\n",
    n, e - s, rate, relays, conc, batch, goal, (rate >= goal ? "PASS" : "FAIL")
}' | tee "$OUT/result.txt"
