#!/usr/bin/env bash
# fence-worker --advance against a real 3-member cluster and a real
# PostgreSQL with pg_fence:
#   - while the worker pauses in its --work (before it writes), its token is
#     already the resource's fence (an "advance" event with outcome published
#     precedes the pause), an older token's fence_admit is refused (55F01),
#     and the worker's own write then goes through;
#   - a resource that already holds a newer fence: exit 10, nothing written,
#     the lock released, a message naming the resource, the token and the fence;
#   - a resource that requires a proof, without one: exit 11 (55F02), nothing
#     written, the lock released.
# Needs pg_fence installed (make -C pg_extension install; make test does).
source "$(dirname "$0")/../cli/lib.sh"
source "$(dirname "$0")/advance_lib.sh"
: "${FENCE_WORKER_BIN:?set FENCE_WORKER_BIN to the fence-worker binary}"
export FENCECTL_BIN
worker() { "$FENCE_WORKER_BIN" "$@"; }

pg_throwaway_start "$WORK" || fail "PostgreSQL did not start"
worker --setup >/dev/null || fail "fence-worker --setup"
start_cluster 3
wait_until 20 "a leader" fencectl acquire warmup --lease 1s --wait 0s

# 1. Published before the work: checked during the worker's --work pause.
log=$WORK/w1.csv
worker --key w:1 --mode admit --advance job:w1 --advance ledger:w:1 --lease 2s --work 1500ms \
  --log "$log" --worker-id w1 >"$WORK/w1.out" 2>&1 &
pid=$!
published() { grep -q '^w1,advance,w:1,[0-9]*,[0-9]*,[0-9]*,,published,2$' "$log" 2>/dev/null; }
wait_until 20 "the worker's advance event" published
token=$(awk -F, '$2 == "advance" {print $4}' "$log")
grep -q ',write,' "$log" && fail "the worker wrote before the checks (its --work pause is too short)"
for r in job:w1 ledger:w:1; do
  [[ "$(sql -c "SELECT fence_current('$r')")" == "$token" ]] || fail "fence of $r during the work is not token $token"
done
[[ "$(sqlstate_of "BEGIN; SELECT fence_admit('job:w1', $((token - 1))); COMMIT")" == 55F01 ]] ||
  fail "an older token was admitted at job:w1 after the worker published $token"
wait "$pid" || fail "the worker exited $? ($(cat "$WORK/w1.out"))"
grep -q "^w1,write,w:1,$token,.*,admit,accepted," "$log" || fail "the worker's write is not accepted: $(cat "$log")"
echo "PASS: fence-worker --advance: token $token is the fence before the work; an older token is refused"

# 2. A newer fence already there: exit 10, nothing written, released.
sql -c "SELECT fence_advance('job:w2', 9000000000)" >/dev/null || fail "seeding job:w2"
code=0
worker --key w:2 --advance job:w2 --worker-id w2 --log "$WORK/w2.csv" >"$WORK/w2.out" 2>"$WORK/w2.err" || code=$?
((code == 10)) || fail "stale publish: exit $code, want 10 ($(cat "$WORK/w2.err"))"
grep -Eq "^fence-worker: token [0-9]+ not published at resource \"job:w2\": its fence is 9000000000 already.*; not writing, releasing w:2$" \
  "$WORK/w2.err" || fail "stale publish message: $(cat "$WORK/w2.err")"
grep -q ',advance,w:2,.*,stale,1$' "$WORK/w2.csv" || fail "no stale advance event: $(cat "$WORK/w2.csv")"
grep -q ',write,' "$WORK/w2.csv" && fail "the worker wrote after a stale publish"
[[ "$(sql -c "SELECT n FROM worker_counters WHERE key = 'w:2'")" == 0 ]] || fail "w:2's counter changed"
key_free w:2 || fail "w:2 is still held after the stale publish"
echo "PASS: fence-worker --advance with a newer fence there: exit 10, nothing written, lock released"

# 3. A proof required and none sent: a database error.
sql -c "SELECT fence_require_proof('job:w3')" >/dev/null || fail "fence_require_proof"
code=0
worker --key w:3 --advance job:w3 --worker-id w3 >"$WORK/w3.out" 2>"$WORK/w3.err" || code=$?
((code == 11)) || fail "publish refused for its proof: exit $code, want 11 ($(cat "$WORK/w3.err"))"
grep -q 'not published at resource "job:w3": fence_advance failed: .*(SQLSTATE 55F02)' "$WORK/w3.err" ||
  fail "proof refusal message: $(cat "$WORK/w3.err")"
[[ "$(sql -c "SELECT n FROM worker_counters WHERE key = 'w:3'")" == 0 ]] || fail "w:3's counter changed"
key_free w:3 || fail "w:3 is still held after the refused publish"
echo "PASS: fence-worker --advance refused by the database (55F02): exit 11, nothing written, lock released"
