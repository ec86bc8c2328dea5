#!/usr/bin/env bash
# fencectl explain against a real 3-member cluster, a real PostgreSQL with
# pg_fence (its fence_rejections view) and real fence-worker processes, each
# cause produced for real:
#   paused_holder   worker A is stopped (SIGSTOP) past its lease, B acquires and
#                   writes, A is resumed (SIGCONT) and writes: refused
#   lease_too_short A renews between pieces of work (--renew between), one piece
#                   outlasts the lease, B writes, A's write is refused
#   continued_after_failed_renewal
#                   A's lease is taken away (released with its token by another
#                   process), its next keepalive is refused, it writes anyway
#                   (--no-lease-check): refused
#   contention      B waits for A, A releases, B writes: no rejection
# and: a token never issued (exit 14), explain --key over a window, a DSN with
# a password that never shows. The partitioned holder: partition.sh.
# Ports: cluster 15101..15103 and 15201..15203, PostgreSQL 15400.
# Needs pg_fence installed (make -C pg_extension install; make test does).
source "$(dirname "$0")/../cli/lib.sh"
source "$(dirname "$0")/lib.sh"

pg_free_port() {
  if (exec 3<>"/dev/tcp/127.0.0.1/15400") 2>/dev/null; then
    echo "explain.sh: port 15400 is taken" >&2
    return 1
  fi
  echo 15400
}
PIDS=()
pre_cleanup() {
  local p
  for p in "${PIDS[@]}"; do
    e2e_pid_runs "$p" "$FENCE_WORKER_BIN" && kill -CONT "$p" 2>/dev/null && kill -KILL "$p" 2>/dev/null
  done
  pg_throwaway_stop "$WORK"
}

pg_throwaway_start "$WORK" || fail "PostgreSQL did not start"
EXPLAIN_DSN="host=127.0.0.1 port=$PGPORT user=postgres dbname=postgres"
worker --setup --conninfo "$EXPLAIN_DSN" >/dev/null || fail "fence-worker --setup"
start_cluster 3
granted() { fencectl acquire warmup --lease 1s --wait 0s >/dev/null; }
wait_until 20 "a leader" granted
run_worker() { worker --conninfo "$EXPLAIN_DSN" --quiet "$@"; }
# spawn_worker ARGS... &: the same in the background, with $! the worker's own
# pid (exec: a backgrounded function is a subshell, which a SIGSTOP would miss).
# Only ever call it with &.
spawn_worker() { exec "$FENCE_WORKER_BIN" --conninfo "$EXPLAIN_DSN" --quiet "$@"; }

# 1. Paused holder.
echo "paused_holder: SIGSTOP past the lease"
a=$WORK/pa.csv
spawn_worker --key e:paused --lease 2s --work 4s --no-lease-check --worker-id pa --log "$a" >"$WORK/pa.out" 2>&1 &
pa=$!
PIDS+=("$pa")
wait_until 20 "worker pa's grant" has_token "$a"
kill -STOP "$pa"
ta=$(token_of "$a")
run_worker --key e:paused --lease 10s --wait 15s --worker-id pb --log "$WORK/pb.csv" >"$WORK/pb.out" 2>&1 ||
  fail "worker pb: $(cat "$WORK/pb.out")"
tb=$(token_of "$WORK/pb.csv")
((tb > ta)) || fail "pb's token $tb is not newer than pa's $ta"
kill -CONT "$pa"
code=0
wait "$pa" || code=$?
((code == 10)) || fail "worker pa exited $code, want 10 (stale): $(cat "$WORK/pa.out")"
(($(stale_rejections "$ta") >= 1)) || fail "no stale rejection of token $ta in fence_rejections"
expect_cause paused_holder "$ta" --client-log "$a"
expect_cause paused_holder "$ta"
echo "PASS: paused_holder"

# 2. Lease too short: one piece of work outlasts the lease.
echo "lease_too_short: renewed between pieces, one piece longer than the lease"
a=$WORK/sa.csv
spawn_worker --key e:short --lease 1500ms --renew between --work 200ms,200ms,3s --no-lease-check --worker-id sa \
  --log "$a" >"$WORK/sa.out" 2>&1 &
sa=$!
PIDS+=("$sa")
wait_until 20 "worker sa's grant" has_token "$a"
ta=$(token_of "$a")
run_worker --key e:short --lease 10s --wait 15s --worker-id sb --log "$WORK/sb.csv" >"$WORK/sb.out" 2>&1 ||
  fail "worker sb: $(cat "$WORK/sb.out")"
code=0
wait "$sa" || code=$?
((code == 10)) || fail "worker sa exited $code, want 10 (stale): $(cat "$WORK/sa.out")"
(($(awk -F, -v t="$ta" '$2 == "keepalive" && $4 == t && $8 == "ok"' "$a" | wc -l) >= 2)) ||
  fail "worker sa did not renew before its long piece: $(cat "$a")"
expect_cause lease_too_short "$ta" --client-log "$a"
echo "PASS: lease_too_short"

# 3. Continued after a failed renewal.
echo "continued_after_failed_renewal: the keepalive is refused, the worker writes anyway"
a=$WORK/ca.csv
spawn_worker --key e:renewal --lease 3s --work 4s --no-lease-check --worker-id ca --log "$a" >"$WORK/ca.out" 2>&1 &
ca=$!
PIDS+=("$ca")
wait_until 20 "worker ca's grant" has_token "$a"
ta=$(token_of "$a")
fencectl release e:renewal "$ta" || fail "releasing token $ta"
run_worker --key e:renewal --lease 10s --wait 15s --worker-id cb --log "$WORK/cb.csv" >"$WORK/cb.out" 2>&1 ||
  fail "worker cb: $(cat "$WORK/cb.out")"
code=0
wait "$ca" || code=$?
((code == 10)) || fail "worker ca exited $code, want 10 (stale): $(cat "$WORK/ca.out")"
grep -q "^ca,keepalive,e:renewal,$ta,.*,not_held," "$a" || fail "no refused keepalive in ca's log: $(cat "$a")"
expect_cause continued_after_failed_renewal "$ta" --client-log "$a"
echo "PASS: continued_after_failed_renewal"

# 4. Contention: a waiter, no rejection.
echo "contention: B waits for A"
a=$WORK/na.csv
spawn_worker --key e:wait --lease 2s --work 1s --worker-id na --log "$a" >"$WORK/na.out" 2>&1 &
na=$!
PIDS+=("$na")
wait_until 20 "worker na's grant" has_token "$a"
ta=$(token_of "$a")
run_worker --key e:wait --lease 10s --wait 15s --worker-id nb --log "$WORK/nb.csv" >"$WORK/nb.out" 2>&1 ||
  fail "worker nb: $(cat "$WORK/nb.out")"
wait "$na" || fail "worker na exited $?: $(cat "$WORK/na.out")"
(($(stale_rejections "$ta") == 0)) || fail "token $ta was refused"
expect_cause contention "$ta" --client-log "$a"
echo "PASS: contention"

# 5. What explain says when there is nothing to say, or it cannot.
expect_code 14 fencectl explain 999999999 --dsn "$EXPLAIN_DSN"
grep -q "no such token was issued: 999999999" "$WORK/last.err" || fail "token never issued: $(cat "$WORK/last.err")"
expect_code 11 fencectl explain "$ta" --dsn "host=127.0.0.1 port=1 user=postgres password=sekrit-pw connect_timeout=2"
grep -q sekrit-pw "$WORK/last.err" && fail "the DSN's password is in the message: $(cat "$WORK/last.err")"
expect_code 11 fencectl explain "$ta" --dsn "postgresql://u:pa/ss@127.0.0.1/db"
grep -q "pa/ss" "$WORK/last.err" && fail "the DSN is in the message: $(cat "$WORK/last.err")"
expect_code 2 fencectl explain "$ta" --client-log "$WORK/no-such-file.csv" --dsn "$EXPLAIN_DSN"
echo "PASS: no such token (14), database errors without the DSN (11), an unreadable --client-log (2)"

# 6. By key over a window: every token of e:paused granted in the last 10 minutes.
fencectl explain --key e:paused --since 10m --dsn "$EXPLAIN_DSN" -o json >"$WORK/key.json" ||
  fail "explain --key: $(cat "$WORK/key.json")"
/usr/bin/python3 - "$WORK/key.json" <<'PY' || fail "explain --key: $(cat "$WORK/key.json")"
import json, sys
d = json.load(open(sys.argv[1]))
causes = {t["token"]: t["cause"] for t in d["tokens"]}
assert d["key"] == "e:paused" and len(causes) == 2, causes
assert sorted(causes.values()) == ["paused_holder", "undetermined"], causes
PY
fencectl explain --key e:paused --since 10m --dsn "$EXPLAIN_DSN" | grep -q "^cause: paused_holder" ||
  fail "explain --key's human output names no cause"
echo "PASS: explain --key K --since 10m"
echo "explain: every cause produced and named"
