#!/usr/bin/env bash
# Leader election end to end: `fencectl elect` contenders against a real
# 3-member cluster and a throwaway PostgreSQL with pg_fence.
#  1. FIFO, proclaim, resign: A leads election "jobs"; B, then C campaign and
#     wait; `fencectl proclaim` changes the value `fencectl leader` shows; A's
#     CMD exits, A resigns and B (not C) leads at once (well inside A's 10s
#     lease); B's CMD exits, C leads.
#  2. Fencing: P leads election "writer" (2s lease) and writes with its token
#     from a writer it started in its own session; Q campaigns. P's fencectl,
#     its CMD and its writer are SIGSTOPped; Q becomes leader (fencectl leader
#     shows it, with a newer token) and writes with it; P is SIGCONTed: its
#     next write, with the old token, is refused by pg_fence with SQLSTATE
#     55F01, and its fencectl exits 4 (the leadership was lost).
# Needs pg_fence installed (make test installs it).
source "$(dirname "$0")/../cli/lib.sh"
# shellcheck source=../safety/lib/common.sh
source "$ROOT/tests/e2e/safety/lib/common.sh"
# shellcheck source=../safety/lib/pg.sh
source "$ROOT/tests/e2e/safety/lib/pg.sh"
export FENCECTL_BIN

OUT="$WORK/out"
mkdir -p "$OUT"
export OUT
STOPPED=()
pre_cleanup() {
  local pid
  for pid in "${STOPPED[@]}"; do kill -CONT -- "$pid" 2>/dev/null || true; done
  for pid in $(cat "$OUT"/*.pid 2>/dev/null); do kill "$pid" 2>/dev/null || true; done
  pg_throwaway_stop "$WORK"
}
pg_throwaway_start "$WORK" || fail "PostgreSQL did not start"
start_cluster 3
psql -X -q -v ON_ERROR_STOP=1 <<'SQL' || fail "schema"
CREATE EXTENSION pg_fence;
CREATE TABLE reports (report_id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0);
INSERT INTO reports (report_id, body) VALUES (1, 'v0'), (2, 'v0');
-- A leader writes many times with its one token: equal tokens pass, older ones do not.
SELECT fence_protect('reports', mode => 'same_generation');
SQL

# leader_field NAME FIELD: the field of `fencectl leader NAME -o json` ("" when none).
leader_field() { fencectl leader "$1" -o json 2>/dev/null | jq -r ".$2" 2>/dev/null || true; }
leader_is() { [[ "$(leader_field "$1" value)" == "$2" ]]; }
no_leader() {
  local code=0
  fencectl leader "$1" >/dev/null 2>&1 || code=$?
  ((code == 6))
}

# ---- 1. FIFO, proclaim, resign ----------------------------------------------
# The contender's CMD: records its token, then runs until its "done" file exists.
cat >"$WORK/contender.sh" <<'SH'
set -eu
echo "$FENCE_TOKEN" >"$OUT/$1.token"
psql -X -q -v ON_ERROR_STOP=1 -c "UPDATE reports SET body = '$1', fence = $FENCE_TOKEN WHERE report_id = 1"
for _ in $(seq 1 1200); do [ -e "$OUT/$1.done" ] && exit 0; sleep 0.05; done
exit 1
SH
contend() {  # contend WHO: fencectl elect jobs --value WHO in the background
  "$FENCECTL_BIN" elect jobs --value "$1" --lease 10s -- sh "$WORK/contender.sh" "$1" \
    >"$OUT/$1.out" 2>"$OUT/$1.err" &
  echo $! >"$OUT/$1.pid"
}
expect_code 6 fencectl leader jobs
grep -q "has no leader" "$WORK/last.err" || fail "leader of an empty election: $(cat "$WORK/last.err")"
contend a
wait_until 10 "a leads jobs" leader_is jobs a
wait_until 10 "a's CMD wrote" test -s "$OUT/a.token"
token_a=$(cat "$OUT/a.token")
[[ "$(leader_field jobs token)" == "$token_a" ]] || fail "leader token $(leader_field jobs token), a's CMD got $token_a"
[[ "$(leader_field jobs key)" == "election/jobs" ]] || fail "election key $(leader_field jobs key)"
contend b
wait_until 10 "b waits" waiters_at_least 1
contend c
wait_until 10 "c waits" waiters_at_least 2
leader_is jobs a || fail "a lost leadership to a waiting campaigner"

# Proclaim: the value changes, the leader and token do not.
fencectl proclaim jobs "$token_a" "a-moved" || fail "proclaim by the leader"
[[ "$(leader_field jobs value)" == "a-moved" && "$(leader_field jobs token)" == "$token_a" ]] ||
  fail "after proclaim: $(fencectl leader jobs -o json)"
expect_code 6 fencectl proclaim jobs "$((token_a + 1000))" "not-the-leader"
[[ "$(leader_field jobs value)" == "a-moved" ]] || fail "a proclaim with another token changed the value"

# Resign: A's CMD exits; B leads at once, long before A's 10s lease would end.
start_ns=$(date +%s%N)
touch "$OUT/a.done"
wait_until 5 "b leads after a resigned" leader_is jobs b
elapsed_ms=$((($(date +%s%N) - start_ns) / 1000000))
((elapsed_ms < 3000)) || fail "b led ${elapsed_ms}ms after a's CMD exited: no resign"
wait "$(cat "$OUT/a.pid")" || fail "a's fencectl elect exited $? (CMD exited 0)"
token_b=$(leader_field jobs token)
((token_b > token_a)) || fail "b's token $token_b is not above a's $token_a"
leader_is jobs c && fail "c led before b"
touch "$OUT/b.done"
wait_until 5 "c leads after b resigned" leader_is jobs c
touch "$OUT/c.done"
wait_until 5 "nobody leads jobs" no_leader jobs
echo "fifo, proclaim, resign: ok (b led ${elapsed_ms}ms after a's CMD exited)"

# ---- 2. Fencing: a deposed leader's write is refused --------------------------
# The leader's CMD starts a writer in a session of its own (so that it outlives
# what run kills): every 50ms one UPDATE with the leader's token, logging
# "TOKEN SQLSTATE"; it stops at the first refusal.
cat >"$WORK/writer.sh" <<'SH'
who=$1 token=$2
for _ in $(seq 1 2000); do
  out=$(psql -X -v ON_ERROR_STOP=1 -v VERBOSITY=verbose \
          -c "UPDATE reports SET body = '$who', fence = $token WHERE report_id = 2" 2>&1) && state=00000 ||
    state=$(sed -n 's/^ERROR: *\([0-9A-Z]\{5\}\):.*/\1/p' <<<"$out" | head -n 1)
  echo "$token ${state:-unknown}" >>"$OUT/$who.writes"
  [ "$state" = 00000 ] || exit 0
  sleep 0.05
done
SH
cat >"$WORK/leader.sh" <<'SH'
setsid bash "$WORK/writer.sh" "$1" "$FENCE_TOKEN" </dev/null >/dev/null 2>&1 &
echo $! >"$OUT/$1-writer.pid"
exec sleep 600
SH
export WORK
lead() {  # lead WHO: fencectl elect writer --value WHO in the background
  # The binary itself, not the fencectl function: $! must be fencectl's own
  # pid (a function runs in a subshell whose child fencectl would be), so that
  # SIGSTOP stops its keepalives and pgrep -P finds its CMD.
  "$FENCECTL_BIN" elect writer --value "$1" --lease 2s --grace 200ms -- bash "$WORK/leader.sh" "$1" \
    >"$OUT/$1.out" 2>"$OUT/$1.err" &
  echo $! >"$OUT/$1.pid"
}
accepted() { grep -q " 00000$" "$OUT/$1.writes" 2>/dev/null; }
lead p
wait_until 10 "p leads writer" leader_is writer p
wait_until 10 "p's writer wrote" accepted p
token_p=$(leader_field writer token)
lead q
wait_until 10 "q waits" waiters_at_least 1
# Stop everything of P: fencectl, its CMD's process group, the writer's session.
p_pid=$(cat "$OUT/p.pid")
p_writer=$(cat "$OUT/p-writer.pid")
p_cmd=$(pgrep -P "$p_pid" | head -n 1)
[[ -n "$p_cmd" ]] || fail "p's CMD is not running"
STOPPED=("$p_pid" "-$p_cmd" "-$p_writer")
kill -STOP -- "$p_pid" "-$p_cmd" "-$p_writer" || fail "SIGSTOP p ($p_pid, group $p_cmd, group $p_writer)"
wait_until 20 "q leads writer after p stopped" leader_is writer q
token_q=$(leader_field writer token)
((token_q > token_p)) || fail "q's token $token_q is not above p's $token_p"
wait_until 10 "q's writer wrote" accepted q
kill -CONT -- "$p_pid" "-$p_cmd" "-$p_writer"
STOPPED=()
wait_until 10 "p's stale write refused" grep -q "^$token_p 55F01$" "$OUT/p.writes"
row=$(psql -X -At -c "SELECT body, fence FROM reports WHERE report_id = 2")
[[ "$row" == "q|$token_q" ]] || fail "row 2 is '$row', want q's write with $token_q"
leader_is writer q || fail "q lost leadership when p woke"
code=0
wait "$p_pid" || code=$?
((code == 4)) || fail "p's fencectl elect exited $code, want 4 (leadership lost): $(cat "$OUT/p.err")"
echo "fencing: ok (p token $token_p refused 55F01 after q token $token_q wrote)"
echo "PASS [$TEST_NAME]"
