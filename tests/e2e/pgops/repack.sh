#!/usr/bin/env bash
# pg_repack rebuilding fenced tables while fenced writes go on, against a
# throwaway PostgreSQL with the pg_repack extension (the client is the
# server's major's: postgresql-15-repack on the host, the chroot's in chroot
# mode). Two fenced tables:
#   reports  fence_protect'ed (strict), 2000 rows
#   signed   fence_protect'ed with lock_key 'report:{report_id}' and mode
#            same_generation: every write needs a token proof (a key trusted
#            with fence_trust_key; proofs signed by tests/pg/sign-proof.sh)
# Two background writers, bounded in count and time, write with increasing
# tokens all along: writer A updates 20 rows of reports (the token in the SET
# list, or pg_fence.token), each accepted write followed now and then by one
# with the same token, which strict mode refuses (55F01); writer B updates
# three rows of signed with a fresh proof each time, now and then followed by
# an older token with its valid proof (55F01) and by a write without a proof
# (55F02). Each accepted write returns whether pg_repack's log trigger was on
# the table when it ran.
#
# pg_repack (1.4 and later: an AFTER trigger, repack_trigger, logs the changes
# made during the copy, as the guard left them; the rebuilt storage is
# swapped under the same table, so its triggers stay) repacks each table in
# turn. A session holding a transaction open from before pg_repack's start
# keeps pg_repack in its log-replay phase (it waits for every older
# transaction) until enough writes went through its log trigger; then that
# transaction ends and pg_repack swaps while the writers go on. Checks:
#   - pg_repack rebuilt each table (its relfilenode changed), exit status 0,
#     and writes were accepted while its log trigger was on the table;
#   - every writer error is the one expected (55F01, 55F02), counted;
#   - every fence is kept: each table equals its rows from before, with the
#     writers' last accepted write per row applied (the last accepted token
#     of each written row is its stored fence);
#   - the guard is still there (same trigger definition, no repack_trigger
#     left) and refuses a stale token (55F01) and a write without a proof
#     (55F02), and newer tokens are accepted;
#   - what pg_repack does not do: a fenced table without a primary key or a
#     NOT NULL unique index is skipped with a WARNING and exit status 0 (not
#     rebuilt); a partitioned table named with -t is refused ("relation does
#     not exist", exit status non-zero); -I (--parent-table) rebuilds its
#     partitions, whose cloned guards stay and refuse a stale token.
# No coordinator: the tokens are literals. Needs pg_fence installed and
# pg_repack (apt-get install postgresql-15-repack, or scripts/install-deps.sh).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

REPACK=$(pg_bindir)/pg_repack
[[ -x $REPACK ]] || fail "pg_repack is not installed next to $(pg_bindir)/pg_ctl (apt-get install postgresql-15-repack, or scripts/install-deps.sh)"
# bounds of the writers
WRITER_S=120            # each writer stops after this many seconds
WRITES_A_MAX=20000      # writer A: writes to reports (10 per psql call)
WRITES_B_MAX=400        # writer B: writes to signed (one proof signed each)
# writes accepted while pg_repack's log trigger is on the table, per table
DURING_A_MIN=30
DURING_B_MIN=5

W=$(pgops_workdir repack)
PIDS=()
cleanup() {
  local rc=$? pid
  touch "$W/stop"
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  pg_throwaway_stop "$W"
  wait 2>/dev/null || true
  if ((rc == 0)); then rm -rf "$W"; else echo "kept: $W" >&2; fi
}
trap cleanup EXIT

pg_throwaway_start "$W" || fail "PostgreSQL did not start"
sql -c 'CREATE EXTENSION pg_repack' >/dev/null 2>"$W/ext.err" ||
  fail "CREATE EXTENSION pg_repack failed (install the server's postgresql-N-repack): $(cat "$W/ext.err")"
openssl genpkey -algorithm ed25519 -out "$W/signing.key" 2>/dev/null
sql >/dev/null <<SQL
CREATE EXTENSION pg_fence;
CREATE TABLE reports (report_id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0);
INSERT INTO reports SELECT g, 'v0', 100 + g % 7 FROM generate_series(1, 2000) g;
SELECT fence_protect('reports');
CREATE TABLE signed (report_id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0);
INSERT INTO signed SELECT g, 'v0', 100 FROM generate_series(1, 300) g;
SELECT fence_protect('signed', mode => 'same_generation', lock_key => 'report:{report_id}');
SELECT fence_trust_key('$(openssl pkey -in "$W/signing.key" -pubout)', 42);
SQL

# sign TOKEN LOCK_KEY: a proof of cluster 42
sign() { bash "$E2E_ROOT/tests/pg/sign-proof.sh" "$W/signing.key" 42 "$1" "$2"; }
# rows TABLE: every row, id|body|fence, in id order
rows() { sql -c "SELECT report_id, body, fence FROM $1 ORDER BY report_id"; }
# guard_def TABLE: the table's own triggers (not PostgreSQL's internal ones)
guard_def() {
  sql -c "SELECT tgname, tgtype, tgenabled, tgfoid::regproc, encode(tgargs, 'escape')
            FROM pg_trigger WHERE tgrelid = '$1'::regclass AND NOT tgisinternal ORDER BY tgname"
}
filenode() { sql -c "SELECT pg_relation_filenode('$1')"; }
# repacking TABLE: an SQL expression, 1 while pg_repack's log trigger is on TABLE
repacking() { echo "(SELECT count(*) FROM pg_trigger WHERE tgrelid = '$1'::regclass AND tgname = 'repack_trigger')"; }

for t in reports signed; do
  rows "$t" >"$W/$t.before"
  guard_def "$t" >"$W/$t.guard.before"
  filenode "$t" >"$W/$t.filenode.before"
done

# Writer A: batches of 10 writes to reports, tokens 1000, 1001, ...; write i
# goes to row 1 + i % 20, with the token in the SET list (even i) or in
# pg_fence.token (odd i); after every fifth, the same token again (stale in
# strict mode). Stops at the stop file or its bounds; writes why to A.end.
writer_a() {
  local i=0 j deadline=$((SECONDS + WRITER_S)) r t
  while [[ ! -e $W/stop ]] && ((i < WRITES_A_MAX && SECONDS < deadline)); do
    : >"$W/a.sql"
    for ((j = 0; j < 10; j++, i++)); do
      r=$((1 + i % 20)) t=$((1000 + i))
      if ((i % 2 == 0)); then
        echo "UPDATE reports SET body = 'a$i', fence = $t WHERE report_id = $r RETURNING 'reports', report_id, body, fence, $(repacking reports);"
      else
        echo "BEGIN; SET LOCAL pg_fence.token = $t; UPDATE reports SET body = 'a$i' WHERE report_id = $r RETURNING 'reports', report_id, body, fence, $(repacking reports); COMMIT;"
      fi
      if ((i % 5 == 0)); then
        echo "UPDATE reports SET body = 'stale a$i', fence = $t WHERE report_id = $r;"
        echo "$i" >>"$W/a.stale_sent"
      fi
    done >>"$W/a.sql"
    psql -X -q -At -v VERBOSITY=verbose -f "$W/a.sql" >>"$W/a.out" 2>>"$W/a.err" || true
  done
  if [[ -e $W/stop ]]; then echo stopped >"$W/A.end"; else echo "bound reached after $i writes" >"$W/A.end"; fi
}

# Writer B: write k to signed, row 1 + k % 3, token 2000 + k, with its
# proof; after every third (k > 3), the token of write k - 3 (same row) with
# its valid proof (stale in same_generation mode); after every fifth, a
# newer token without a proof.
writer_b() {
  local k=0 deadline=$((SECONDS + WRITER_S)) r t
  local -a proof
  while [[ ! -e $W/stop ]] && ((k < WRITES_B_MAX && SECONDS < deadline)); do
    k=$((k + 1)) r=$((1 + k % 3)) t=$((2000 + k))
    proof[k]=$(sign "$t" "report:$r")
    {
      echo "BEGIN; SET LOCAL pg_fence.proof = '${proof[k]}';"
      echo "UPDATE signed SET body = 'b$k', fence = $t WHERE report_id = $r RETURNING 'signed', report_id, body, fence, $(repacking signed); COMMIT;"
      if ((k > 3 && k % 3 == 0)); then
        echo "BEGIN; SET LOCAL pg_fence.proof = '${proof[k - 3]}';"
        echo "UPDATE signed SET body = 'stale b$k', fence = $((t - 3)) WHERE report_id = $r; COMMIT;"
        echo "$k" >>"$W/b.stale_sent"
      fi
      if ((k % 5 == 0)); then
        echo "UPDATE signed SET body = 'no proof b$k', fence = $((t + 1)) WHERE report_id = $r;"
        echo "$k" >>"$W/b.noproof_sent"
      fi
    } >"$W/b.sql"
    psql -X -q -At -v VERBOSITY=verbose -f "$W/b.sql" >>"$W/b.out" 2>>"$W/b.err" || true
  done
  if [[ -e $W/stop ]]; then echo stopped >"$W/B.end"; else echo "bound reached after $k writes" >"$W/B.end"; fi
}

# accepted TABLE [FLAG]: accepted writes to TABLE so far (with FLAG 1: those
# made while pg_repack's log trigger was on it)
accepted() {
  local out=$W/a.out
  [[ $1 == signed ]] && out=$W/b.out
  if [[ -n ${2:-} ]]; then
    grep -c "^$1|.*|$2\$" "$out" 2>/dev/null || true
  else
    grep -c "^$1|" "$out" 2>/dev/null || true
  fi
}
at_least() { (($("${@:2}") >= $1)); }

touch "$W/a.out" "$W/b.out" "$W/a.err" "$W/b.err"
writer_a &
PIDS+=($!)
writer_b &
PIDS+=($!)
e2e_wait_for 30 at_least 20 accepted reports || fail "writer A made no 20 accepted writes within 30 s: $(tail -n 3 "$W/a.err")"
e2e_wait_for 30 at_least 2 accepted signed || fail "writer B made no 2 accepted writes within 30 s: $(tail -n 3 "$W/b.err")"

# The blocker: a session whose transaction, open from before pg_repack
# starts, keeps pg_repack replaying its log until it ends.
blocker_open() {
  rm -f "$W/blocker.in" "$W/blocker.out"
  mkfifo "$W/blocker.in"
  psql -X -q -At <"$W/blocker.in" >"$W/blocker.out" 2>&1 &
  BLOCKER_PID=$!
  PIDS+=("$BLOCKER_PID")
  exec {BLOCKER_FD}>"$W/blocker.in"
  printf 'BEGIN;\nSELECT 1;\n\\echo blocker-open\n' >&"$BLOCKER_FD"
  e2e_wait_for 10 grep -qx blocker-open "$W/blocker.out" || fail "the blocking session did not start: $(cat "$W/blocker.out")"
}
blocker_close() {
  printf 'COMMIT;\n\\q\n' >&"$BLOCKER_FD"
  exec {BLOCKER_FD}>&-
  wait "$BLOCKER_PID" || true
}

# repack_while_writing TABLE MIN: pg_repack -t TABLE, held in its log phase
# (its copy made, replaying its log) until MIN more writes to TABLE were
# accepted through its log trigger
repack_while_writing() {
  local table=$1 min=$2 copied
  blocker_open
  ( cd / && "$REPACK" -h 127.0.0.1 -p "$PGPORT" -U postgres -d postgres -t "$table" \
      >"$W/repack-$table.log" 2>&1; echo $? >"$W/repack-$table.rc" ) &
  PIDS+=($!)
  e2e_wait_for 60 grep -Eq 'Waiting for [0-9]+ transactions? to finish' "$W/repack-$table.log" ||
    fail "pg_repack -t $table did not reach its log replay within 60 s: $(cat "$W/repack-$table.log")"
  copied=$(accepted "$table" 1)
  e2e_wait_for 60 at_least $((copied + min)) accepted "$table" 1 ||
    fail "fewer than $min writes to $table were accepted during pg_repack's log replay within 60 s ($(accepted "$table" 1) - $copied)"
  [[ ! -e $W/repack-$table.rc ]] || fail "pg_repack -t $table ended before its log phase was released"
  blocker_close
  e2e_wait_for 60 test -s "$W/repack-$table.rc" || fail "pg_repack -t $table did not finish within 60 s after the blocking transaction ended"
  [[ $(cat "$W/repack-$table.rc") == 0 ]] || fail "pg_repack -t $table exited with $(cat "$W/repack-$table.rc"): $(cat "$W/repack-$table.log")"
  ! grep -Eq 'WARNING|ERROR' "$W/repack-$table.log" || fail "pg_repack -t $table warned: $(cat "$W/repack-$table.log")"
  [[ $(filenode "$table") != "$(cat "$W/$table.filenode.before")" ]] || fail "pg_repack -t $table did not rebuild it (same relfilenode)"
}

repack_while_writing reports "$DURING_A_MIN"
pass "pg_repack rebuilt reports (relfilenode $(cat "$W/reports.filenode.before") -> $(filenode reports)); $(accepted reports 1) fenced writes accepted while its log trigger was on the table"
repack_while_writing signed "$DURING_B_MIN"
pass "pg_repack rebuilt signed (relfilenode $(cat "$W/signed.filenode.before") -> $(filenode signed)); $(accepted signed 1) proven writes accepted while its log trigger was on the table"

# Writes go on after the swaps, then the writers stop.
after_a=$(($(accepted reports) + 20)) after_b=$(($(accepted signed) + 2))
e2e_wait_for 30 at_least "$after_a" accepted reports || fail "writer A made no 20 writes after pg_repack within 30 s: $(tail -n 3 "$W/a.err")"
e2e_wait_for 30 at_least "$after_b" accepted signed || fail "writer B made no 2 writes after pg_repack within 30 s: $(tail -n 3 "$W/b.err")"
touch "$W/stop"
e2e_wait_for 30 test -s "$W/A.end" -a -s "$W/B.end" || fail "the writers did not stop within 30 s"
[[ $(cat "$W/A.end") == stopped && $(cat "$W/B.end") == stopped ]] ||
  fail "a writer ended before it was stopped: A $(cat "$W/A.end"), B $(cat "$W/B.end")"

# Every writer error is the one expected.
count_lines() { if [[ -e $1 ]]; then wc -l <"$1"; else echo 0; fi; }
others=$(grep 'ERROR:' "$W/a.err" "$W/b.err" | grep -Ev 'ERROR: +55F0[12]:' || true)
[[ -z $others ]] || fail "writers got unexpected errors: $(head -n 5 <<<"$others")"
stale_a=$(grep -c 'ERROR: *55F01:' "$W/a.err" || true)
stale_b=$(grep -c 'ERROR: *55F01:' "$W/b.err" || true)
noproof_b=$(grep -c 'ERROR: *55F02:' "$W/b.err" || true)
[[ $stale_a == "$(count_lines "$W/a.stale_sent")" && $stale_b == "$(count_lines "$W/b.stale_sent")" &&
   $noproof_b == "$(count_lines "$W/b.noproof_sent")" ]] ||
  fail "refusals do not match the stale and proofless writes sent: 55F01 $stale_a/$(count_lines "$W/a.stale_sent") (reports), $stale_b/$(count_lines "$W/b.stale_sent") (signed), 55F02 $noproof_b/$(count_lines "$W/b.noproof_sent")"
pass "writers: $(accepted reports) + $(accepted signed) writes accepted; every same or older token refused with 55F01 ($stale_a on reports, $stale_b on signed), every write without a proof with 55F02 ($noproof_b); no other error"

# expected TABLE OUT: the rows from before, with the last accepted write of
# each row applied; fails unless each row's accepted tokens increase
expected() {
  local out=$W/a.out
  [[ $1 == signed ]] && out=$W/b.out
  awk -F'|' -v table="$1" '
    FNR == NR { row[$1] = $1 "|" $2 "|" $3; next }
    $1 == table {
      if (($2 in last) && $4 + 0 <= last[$2] + 0) { print "token order broken on row " $2 > "/dev/stderr"; exit 1 }
      last[$2] = $4; row[$2] = $2 "|" $3 "|" $4
    }
    END { for (id in row) print row[id] }' "$W/$1.before" "$out" | sort -t'|' -k1,1n
}
for t in reports signed; do
  expected "$t" >"$W/$t.expected" || fail "the accepted tokens of $t do not increase per row"
  rows "$t" >"$W/$t.after"
  diff "$W/$t.expected" "$W/$t.after" >"$W/$t.diff" ||
    fail "fences of $t not kept (expected < > stored): $(head -n 10 "$W/$t.diff")"
done
written_a=$(cut -d'|' -f2 "$W/a.out" | sort -u | wc -l)
written_b=$(cut -d'|' -f2 "$W/b.out" | sort -u | wc -l)
pass "every fence kept: reports ($(wc -l <"$W/reports.after") rows) and signed ($(wc -l <"$W/signed.after") rows) equal their rows from before with the last accepted write applied; the last accepted token of each written row ($written_a + $written_b) is its stored fence"

# The guard is still there and still refuses.
for t in reports signed; do
  [[ $(guard_def "$t") == "$(cat "$W/$t.guard.before")" ]] ||
    fail "the triggers of $t changed: before $(cat "$W/$t.guard.before"), after $(guard_def "$t")"
done
f1=$(sql -c 'SELECT fence FROM reports WHERE report_id = 1')
[[ $(sqlstate sql -c "UPDATE reports SET body = 'stale', fence = $f1 WHERE report_id = 1") == 55F01 ]] ||
  fail "the same token $f1 on reports row 1 was not refused with 55F01 after pg_repack"
[[ $(sqlstate sql -c BEGIN -c "SET LOCAL pg_fence.token = $((f1 - 1))" -c 'DELETE FROM reports WHERE report_id = 1' -c COMMIT) == 55F01 ]] ||
  fail "a DELETE with the older token $((f1 - 1)) was not refused with 55F01 after pg_repack"
[[ $(sqlstate sql -c "UPDATE reports SET body = 'newer', fence = $((f1 + 1)) WHERE report_id = 1") == 00000 ]] ||
  fail "the newer token $((f1 + 1)) on reports row 1 was not accepted after pg_repack"
s1=$(sql -c 'SELECT fence FROM signed WHERE report_id = 1')
older=$(sign $((s1 - 1)) report:1) newer=$(sign $((s1 + 1)) report:1)
[[ $(sqlstate sql -c BEGIN -c "SET LOCAL pg_fence.proof = '$older'" -c "UPDATE signed SET body = 'stale', fence = $((s1 - 1)) WHERE report_id = 1" -c COMMIT) == 55F01 ]] ||
  fail "the older token $((s1 - 1)) with its valid proof on signed row 1 was not refused with 55F01 after pg_repack"
[[ $(sqlstate sql -c "UPDATE signed SET body = 'no proof', fence = $((s1 + 1)) WHERE report_id = 1") == 55F02 ]] ||
  fail "a write without a proof on signed row 1 was not refused with 55F02 after pg_repack"
[[ $(sqlstate sql -c BEGIN -c "SET LOCAL pg_fence.proof = '$newer'" -c "UPDATE signed SET body = 'newer', fence = $((s1 + 1)) WHERE report_id = 1" -c COMMIT) == 00000 ]] ||
  fail "the newer token $((s1 + 1)) with its proof on signed row 1 was not accepted after pg_repack"
[[ $(sql -c "SELECT fence FROM reports WHERE report_id = 1")/$(sql -c "SELECT fence FROM signed WHERE report_id = 1") == "$((f1 + 1))/$((s1 + 1))" ]] ||
  fail "the newer tokens were not stored"
pass "after pg_repack the guards are unchanged (no repack_trigger left) and refuse: reports row 1 (fence $f1) same token and older token 55F01, newer accepted; signed row 1 (fence $s1) older token with a valid proof 55F01, no proof 55F02, newer with its proof accepted"

# What pg_repack does not rebuild.
sql >/dev/null <<'SQL'
CREATE TABLE nokey (id int, body text, fence bigint NOT NULL DEFAULT 0);
INSERT INTO nokey VALUES (1, 'v', 50);
SELECT fence_protect('nokey');
CREATE TABLE parts (id int, region int, body text, fence bigint NOT NULL DEFAULT 0,
                    PRIMARY KEY (id, region)) PARTITION BY LIST (region);
CREATE TABLE parts_1 PARTITION OF parts FOR VALUES IN (1);
INSERT INTO parts VALUES (1, 1, 'v', 50);
SELECT fence_protect('parts');
SQL
repack() { (cd / && "$REPACK" -h 127.0.0.1 -p "$PGPORT" -U postgres -d postgres "$@" 2>&1); }
node=$(filenode nokey)
out=$(repack -t nokey) || fail "pg_repack -t nokey exited non-zero: $out"
grep -q 'WARNING: relation "public.nokey" must have a primary key or not-null unique keys' <<<"$out" ||
  fail "pg_repack -t nokey did not warn about the missing key: $out"
[[ $(filenode nokey) == "$node" ]] || fail "pg_repack rebuilt nokey, which has no key"
[[ $(sqlstate sql -c "UPDATE nokey SET fence = 50") == 55F01 ]] || fail "nokey's guard does not refuse 50 after pg_repack"
pass "pg_repack skips a fenced table without a primary key or NOT NULL unique index: WARNING, exit status 0, not rebuilt, still guarded"

rc=0
out=$(repack -t parts) || rc=$?
((rc != 0)) && grep -q 'relation "parts" does not exist' <<<"$out" ||
  fail "pg_repack -t on the partitioned table parts did not fail with 'does not exist' (exit $rc): $out"
node=$(filenode parts_1)
out=$(repack -I parts) || fail "pg_repack -I parts exited non-zero: $out"
[[ $(filenode parts_1) != "$node" ]] || fail "pg_repack -I parts did not rebuild parts_1: $out"
[[ $(sql -c "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'parts_1'::regclass AND tgname = 'zzz_fence_guard' AND tgparentid <> 0") == 1 ]] ||
  fail "parts_1 lost its cloned guard in pg_repack"
[[ $(sqlstate sql -c "UPDATE parts SET fence = 49 WHERE id = 1") == 55F01 ]] || fail "parts_1's guard does not refuse 49 after pg_repack -I"
pass "pg_repack refuses -t on a partitioned table (exit $rc, \"relation does not exist\"); -I rebuilds its partition parts_1, whose cloned guard stays and refuses a stale token (55F01)"
