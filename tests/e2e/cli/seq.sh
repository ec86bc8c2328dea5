#!/usr/bin/env bash
# `fencectl seq` inside `fencectl run`, against a real PostgreSQL with a table
# in pg_fence's sequenced mode: numbers start at 1 per lease and grow; the
# holder's write numbered 2 is accepted and its delayed write numbered 1 is
# then refused (55F01); 8 parallel subshells drawing 5 numbers each get 40
# distinct ones; a job CMD left in the background draws nothing once run has
# ended (exit 4); the sequence file's directory is removed; the next holder (a
# newer token) starts again from 1 and is accepted; outside run, seq exits 2.
# Needs pg_fence installed (make test installs it).
source "$(dirname "$0")/lib.sh"
# shellcheck source=../safety/lib/common.sh
source "$ROOT/tests/e2e/safety/lib/common.sh"
# shellcheck source=../safety/lib/pg.sh
source "$ROOT/tests/e2e/safety/lib/pg.sh"
export FENCECTL_BIN
pre_cleanup() { pg_throwaway_stop "$WORK"; }
pg_throwaway_start "$WORK" || fail "PostgreSQL did not start"
start_cluster 3
psql -X -q -v ON_ERROR_STOP=1 <<'SQL' || fail "schema"
CREATE EXTENSION pg_fence;
CREATE TABLE reports (report_id int PRIMARY KEY, body text,
                      fence bigint NOT NULL DEFAULT 0, fence_seq bigint NOT NULL DEFAULT 0);
INSERT INTO reports (report_id, body) VALUES (7, 'v0');
SELECT fence_protect('reports', mode => 'sequenced');
SQL

# The child: numbers, a write and its delayed predecessor, parallel draws.
cat >"$WORK/child.sh" <<'SH'
set -euo pipefail
fencectl() { "$FENCECTL" "$@"; }  # run's own path, exported to CMD
# write SEQ BODY: one UPDATE with FENCE_TOKEN and SEQ; prints 00000 or the SQLSTATE.
write() {
  local out
  out=$(psql -X -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -c BEGIN -c "SET LOCAL pg_fence.token = $FENCE_TOKEN" \
    -c "SET LOCAL pg_fence.seq = $1" -c "UPDATE reports SET body = '$2' WHERE report_id = 7" -c COMMIT 2>&1) &&
    { echo 00000; return; }
  sed -n 's/^ERROR: *\([0-9A-Z]\{5\}\):.*/\1/p' <<<"$out" | head -n 1
}
echo "$FENCE_SEQ_FILE" >"$OUT/seq_file"
first=$(fencectl seq)
second=$(fencectl seq)
echo "$first $second" >"$OUT/first_two"
write "$second" "second" >"$OUT/second_write"
write "$first" "first, delayed" >"$OUT/first_write"
for i in 1 2 3 4 5 6 7 8; do
  (for j in 1 2 3 4 5; do fencectl seq; done >"$OUT/draws.$i") &
done
wait
cat "$OUT"/draws.* >"$OUT/draws"
echo "$FENCE_TOKEN" >"$OUT/token"
# left running after CMD exits: once run has released the lock (it marks the
# lease ended before it releases) it must not get a number
(for ((i = 0; i < 400; i++)); do fencectl get report:7 >/dev/null 2>&1 || break; sleep 0.05; done
 code=0; fencectl seq >"$OUT/late_seq" 2>&1 || code=$?; echo "$code" >"$OUT/late_code.tmp"
 mv "$OUT/late_code.tmp" "$OUT/late_code") &
SH
export OUT="$WORK/out"
mkdir -p "$OUT"
fencectl run report:7 --lease 2s -- bash "$WORK/child.sh" || fail "run exited $?"
out=$WORK/out
[[ "$(cat "$out/first_two")" == "1 2" ]] || fail "first two numbers of the lease: '$(cat "$out/first_two")', want '1 2'"
[[ "$(cat "$out/second_write")" == 00000 ]] || fail "write (token, 2) refused: $(cat "$out/second_write")"
[[ "$(cat "$out/first_write")" == 55F01 ]] || fail "delayed write (token, 1) after (token, 2): '$(cat "$out/first_write")', want 55F01"
[[ $(wc -l <"$out/draws") == 40 ]] || fail "parallel draws: $(wc -l <"$out/draws") numbers, want 40"
[[ "$(sort -n "$out/draws" | uniq | tr '\n' ' ')" == "$(seq 3 42 | tr '\n' ' ')" ]] ||
  fail "parallel draws are not 3..42, each once: $(sort -n "$out/draws" | tr '\n' ' ')"
[[ ! -e "$(dirname "$(cat "$out/seq_file")")" ]] || fail "sequence directory of $(cat "$out/seq_file") left after run ended"
wait_until 20 "the background job's fencectl seq" test -e "$out/late_code"
[[ "$(cat "$out/late_code")" == 4 ]] || fail "seq after run ended exited $(cat "$out/late_code"), want 4: $(cat "$out/late_seq")"
grep -q "has ended" "$out/late_seq" || fail "seq after run ended said: $(cat "$out/late_seq")"
token1=$(cat "$out/token")
row=$(psql -X -At -c "SELECT body, fence, fence_seq FROM reports WHERE report_id = 7")
[[ "$row" == "second|$token1|2" ]] || fail "row after the first lease: '$row', want 'second|$token1|2'"

# The next holder: a newer token, numbered from 1 again, is accepted.
fencectl run report:7 --lease 2s -- bash -c \
  'psql -X -q -v ON_ERROR_STOP=1 -c BEGIN -c "SET LOCAL pg_fence.token = $FENCE_TOKEN" \
     -c "SET LOCAL pg_fence.seq = $("$FENCECTL" seq)" -c "UPDATE reports SET body = '"'next'"' WHERE report_id = 7" -c COMMIT' ||
  fail "the next holder's write (newer token, seq 1) failed"
row=$(psql -X -At -c "SELECT body, fence > $token1, fence_seq FROM reports WHERE report_id = 7")
[[ "$row" == "next|t|1" ]] || fail "row after the next holder: '$row', want 'next|t|1'"

# Outside run: a usage error that says where seq works.
code=0
err=$(env -u FENCE_SEQ_FILE "$FENCECTL_BIN" seq 2>&1) || code=$?
((code == 2)) || fail "seq outside run exited $code, want 2"
[[ "$err" == *"fencectl run"* ]] || fail "seq outside run said: $err"
echo "PASS [$TEST_NAME]"
