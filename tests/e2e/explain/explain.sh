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
# and: a token never issued (exit 14), one past every member's log (5), explain --key over a window (and a
# --limit that cuts it), a DSN with a password that never shows, a ring reset
# after the token (no longer contention: undetermined). The partitioned
# holder: partition.sh.
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

# start_holder ID KEY ARGS...: worker ID holds KEY (ARGS: lease, work...) in
# the background; sets HOLDER (its pid), LOG (its log) and TA (its token) once
# it has acquired.
start_holder() {
  local id=$1 key=$2
  shift 2
  LOG=$WORK/$id.csv
  spawn_worker --key "$key" --worker-id "$id" --log "$LOG" "$@" >"$WORK/$id.out" 2>&1 &
  HOLDER=$!
  PIDS+=("$HOLDER")
  wait_until 20 "worker $id's grant" has_token "$LOG"
  TA=$(token_of "$LOG")
}
# run_waiter ID KEY: worker ID waits for KEY, then acquires, writes, releases.
run_waiter() {
  run_worker --key "$2" --lease 10s --wait 15s --worker-id "$1" --log "$WORK/$1.csv" >"$WORK/$1.out" 2>&1 ||
    fail "worker $1: $(cat "$WORK/$1.out")"
  (($(token_of "$WORK/$1.csv") > TA)) || fail "$1's token is not newer than the holder's $TA"
}
# holder_exits CODE: the holder ends with CODE (10: its write was refused as stale).
holder_exits() {
  local code=0
  wait "$HOLDER" || code=$?
  ((code == $1)) || fail "the holder exited $code, want $1: $(cat "${LOG%.csv}.out")"
}

# 1. Paused holder.
echo "paused_holder: SIGSTOP past the lease"
start_holder pa e:paused --lease 2s --work 4s --no-lease-check
kill -STOP "$HOLDER"
run_waiter pb e:paused
kill -CONT "$HOLDER"
holder_exits 10
(($(stale_rejections "$TA") >= 1)) || fail "no stale rejection of token $TA in fence_rejections"
expect_cause paused_holder "$TA" --client-log "$LOG"
expect_cause paused_holder "$TA"
echo "PASS: paused_holder"

# 2. Lease too short: renewed between pieces, one piece outlasts the lease.
echo "lease_too_short: renewed between pieces, one piece longer than the lease"
start_holder sa e:short --lease 1500ms --renew between --work 200ms,200ms,8s --no-lease-check
run_waiter sb e:short
holder_exits 10
(($(awk -F, -v t="$TA" '$2 == "keepalive" && $4 == t && $8 == "ok"' "$LOG" | wc -l) >= 2)) ||
  fail "worker sa did not renew before its long piece: $(cat "$LOG")"
expect_cause lease_too_short "$TA" --client-log "$LOG"
echo "PASS: lease_too_short"

# 3. Continued after a failed renewal: the lease is taken away (released
# with its token by another process), the next keepalive is refused.
echo "continued_after_failed_renewal: the keepalive is refused, the worker writes anyway"
start_holder ca e:renewal --lease 3s --work 4s --no-lease-check
fencectl release e:renewal "$TA" || fail "releasing token $TA"
run_waiter cb e:renewal
holder_exits 10
grep -q "^ca,keepalive,e:renewal,$TA,.*,not_held," "$LOG" || fail "no refused keepalive in ca's log: $(cat "$LOG")"
expect_cause continued_after_failed_renewal "$TA" --client-log "$LOG"
echo "PASS: continued_after_failed_renewal"

# 4. Contention: a waiter, no rejection.
echo "contention: B waits for A"
start_holder na e:wait --lease 2s --work 1s
run_waiter nb e:wait
holder_exits 0
(($(stale_rejections "$TA") == 0)) || fail "token $TA was refused"
expect_cause contention "$TA" --client-log "$LOG"
echo "PASS: contention"

ta=$TA
# 5. What explain says when there is nothing to say, or it cannot.
# A token past every member's applied log may yet be issued (exit 5); one
# below it that no grant took (a release's index) was never issued (exit 14).
expect_code 5 fencectl explain 999999999 --dsn "$EXPLAIN_DSN"
grep -q "not applied yet" "$WORK/last.err" || fail "token past the log: $(cat "$WORK/last.err")"
never=""
for ((t = 2; t < ta; t++)); do
  code=0
  fencectl explain "$t" >/dev/null 2>"$WORK/never.err" || code=$?
  if ((code == 14)); then never=$t; break; fi
done
[[ -n "$never" ]] || fail "no token below $ta answered exit 14 (never issued)"
grep -q "no such token was issued: $never" "$WORK/never.err" || fail "token never issued: $(cat "$WORK/never.err")"
expect_code 11 fencectl explain "$ta" --dsn "host=127.0.0.1 port=1 user=postgres password=sekrit-pw connect_timeout=2"
grep -q sekrit-pw "$WORK/last.err" && fail "the DSN's password is in the message: $(cat "$WORK/last.err")"
expect_code 11 fencectl explain "$ta" --dsn "postgresql://u:pa/ss@127.0.0.1/db"
grep -q "pa/ss" "$WORK/last.err" && fail "the DSN is in the message: $(cat "$WORK/last.err")"
expect_code 2 fencectl explain "$ta" --client-log "$WORK/no-such-file.csv" --dsn "$EXPLAIN_DSN"
echo "PASS: no such token (14), one past the log (5), database errors without the DSN (11), an unreadable --client-log (2)"

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
fencectl explain --key e:paused --since 10m --limit 1 --dsn "$EXPLAIN_DSN" -o json >"$WORK/key1.json" ||
  fail "explain --key --limit 1: $(cat "$WORK/key1.json")"
/usr/bin/python3 - "$WORK/key1.json" <<'PY' || fail "explain --key --limit 1: $(cat "$WORK/key1.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert len(d["tokens"]) == 1 and d["more_tokens"] is True, d
PY
fencectl explain --key e:paused --since 10m --limit 1 --dsn "$EXPLAIN_DSN" | grep -q "older ones may be in the window" ||
  fail "explain --key --limit 1 does not say the limit cut the window"
echo "PASS: --limit cutting the window is said"

# 7. A missing row means no refusal only while the ring covers the token:
# once it is reset (emptied), the contention token is undetermined.
[[ "$(psql -X -At -c "SELECT fence_rejections_reset() > 0")" == t ]] || fail "fence_rejections_reset cleared nothing"
expect_cause undetermined "$ta"
grep -q "the rejection ring no longer covers the token (the ring is empty" "$WORK/explain-$ta-undetermined.json" ||
  fail "the uncovered token does not say so: $(cat "$WORK/explain-$ta-undetermined.json")"
echo "PASS: contention needs the ring to cover the token"
echo "explain: every cause produced and named"
