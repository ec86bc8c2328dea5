#!/usr/bin/env bash
# make demo: the seed scenario with real processes.
#
#   t0  worker A acquires report:7, token 41     t3  worker B acquires, token 42
#   t1  worker A pauses (GC, SIGSTOP, suspend)   t4  B writes the report with 42  -> accepted
#   t2  A's lease expires                        t5  A wakes, writes with 41      -> REJECTED
#
# Starts a 3-member coordinator cluster (scripts/cluster.sh) and a throwaway
# PostgreSQL with pg_fence preloaded, then plays the timeline with two worker
# processes that use only `fencectl` and `psql`; an epilogue replays it with
# fence-worker (coordinator/worker), the whole pattern in one program. Scene 2
# turns on verifiable tokens (the members sign every grant; the table checks
# each write's proof against the cluster's public key and the row's lock):
# a token without a proof and a proof for another lock are refused (55F02),
# then the race is played again and ends as in scene 1. Scene 3 plays it
# with a side effect: each worker sends its e-mail through pg_fence's outbox
# (fence_enqueue), a relay (python3 -m pgfence.relay) delivers the outbox to
# a small mail receiver (tests/e2e/lastmile/receiver.py, port DEMO_MAIL_PORT),
# and the paused worker's e-mail is refused at enqueue (55F01) and never sent.
# Everything it starts is stopped on exit, also on Ctrl-C. Exit status 0 only
# if, in both scenes, PostgreSQL refused the stale write (SQLSTATE 55F01) and
# the row holds B's report; scene 1: fence_stats counted one stale rejection
# and fence-worker A stopped (exit 10, stale); scene 2: the two writes without a valid
# proof were refused (55F02) and counted; scene 3 (when it runs): A's e-mail
# was refused at enqueue (55F01), the receiver got exactly one request, B's,
# and B's entry is the outbox's only one, delivered.
#
# Environment: BUILD (build directory, default build) or E2E_BUILD_DIR, or the
# binaries themselves: FENCE_COORDINATOR_BIN, FENCECTL_BIN, FENCE_WORKER_BIN;
# DEMO_LEASE (worker A's lease, default 3s); DEMO_MAIL_PORT (scene 3's mail
# receiver, default 14390; scene 3 needs /usr/bin/python3 with
# python3-psycopg2, and is skipped without it); DEMO_KEEP=1 keeps the temporary
# directory (it is always kept when the demo fails).
# Until the coordinator is built, falls back to scripts/demo-sql.sh (the SQL half).
set -euo pipefail
E2E_ROOT=$(cd "$(dirname "$0")/.." && pwd)
export E2E_ROOT
# shellcheck source=../tests/e2e/safety/lib/common.sh
source "$E2E_ROOT/tests/e2e/safety/lib/common.sh"
# shellcheck source=../tests/e2e/safety/lib/pg.sh
source "$E2E_ROOT/tests/e2e/safety/lib/pg.sh"

KEY=report:7
LEASE=${DEMO_LEASE:-3s}
WAIT_EXPIRY_S=60   # bound on waiting for A's lease to expire on the coordinator

bold=$'\e[1m' red=$'\e[31m' green=$'\e[32m' off=$'\e[0m'
[[ -t 1 ]] || { bold='' red='' green='' off=''; }

step() { printf '\n%s[%s] %s%s\n' "$bold" "$(e2e_now)" "$*" "$off"; }
note() { printf '           %s\n' "$*"; }
show() { grep -vE '^(SCHEMA NAME|TABLE NAME|COLUMN NAME|LOCATION):' | sed 's/^/           | /'; }
fail() { printf '\n%s[%s] DEMO FAILED: %s%s\n' "$red" "$(e2e_now)" "$*" "$off" >&2; exit 1; }

# --- Fallback while the coordinator is not built yet --------------------------
COORD=$(e2e_find_bin fence-coordinator FENCE_COORDINATOR_BIN || true)
FENCECTL=$(e2e_find_bin fencectl FENCECTL_BIN || true)
if [[ -z "$COORD" || -z "$FENCECTL" || ! -f "${FENCE_CLUSTER_SH:-$E2E_ROOT/scripts/cluster.sh}" ]]; then
  echo "demo: the coordinator is not built yet (fence-coordinator: ${COORD:-missing}," \
       "fencectl: ${FENCECTL:-missing}); playing the SQL half only." >&2
  if [[ -f "$E2E_ROOT/scripts/demo-sql.sh" ]]; then
    exec bash "$E2E_ROOT/scripts/demo-sql.sh"
  fi
  echo "demo: scripts/demo-sql.sh is missing too; nothing to show." >&2
  exit 1
fi
export FENCE_COORDINATOR_BIN=$COORD FENCECTL_BIN=$FENCECTL
WORKER_BIN=$(e2e_find_bin fence-worker FENCE_WORKER_BIN || true)
fencectl() { "$FENCECTL" "$@"; }

# --- Cleanup: everything started here is stopped here -------------------------
WORK=$(mktemp -d /tmp/pgfence-demo.XXXXXX)
A_PID="" W_PID="" MAIL_PIDS=()
cleanup() {
  local rc=$?
  trap "" INT TERM   # a second Ctrl-C must not cut the cleanup short
  trap - EXIT
  set +e   # cleanup goes on whatever fails
  if [[ -n "$A_PID" ]] && kill -0 "$A_PID" 2>/dev/null; then
    kill -CONT -- "-$A_PID" 2>/dev/null || true
    kill -TERM -- "-$A_PID" 2>/dev/null || true
  fi
  if [[ -n "$W_PID" ]]; then
    kill -CONT "$W_PID" 2>/dev/null
    kill -TERM "$W_PID" 2>/dev/null   # it finishes its iteration (a few seconds), then exits
    e2e_wait_for 5 bash -c "! kill -0 $W_PID" || kill -KILL "$W_PID" 2>/dev/null
  fi
  local pid
  for pid in "${MAIL_PIDS[@]}"; do kill -CONT "$pid" 2>/dev/null; kill -TERM "$pid" 2>/dev/null; done
  for pid in "${MAIL_PIDS[@]}"; do wait "$pid" 2>/dev/null; done
  bash "${FENCE_CLUSTER_SH:-$E2E_ROOT/scripts/cluster.sh}" stop "$WORK/cluster" >/dev/null 2>&1 || true
  pg_throwaway_stop "$WORK"
  if [[ "${DEMO_KEEP:-0}" == 1 || $rc -eq 1 ]]; then   # keep logs of a failed demo, not of a Ctrl-C
    echo "demo: logs kept in $WORK" >&2
  else
    rm -rf "$WORK"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'echo; echo "demo: interrupted, cleaning up" >&2; exit 130' INT TERM

sql() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }

# --- The stage -----------------------------------------------------------------
cat <<EOF
${bold}pgfence demo: a paused lock holder can never overwrite a newer holder's work${off}

Two workers want to write report 7. They take turns through a lock (key
"$KEY") held by a 3-member coordinator cluster. Every grant comes with a
fencing token that only grows. PostgreSQL stores the token of the last
accepted write in the row (column "fence") and refuses an older one.
EOF

step "Starting a throwaway PostgreSQL with pg_fence preloaded"
pg_throwaway_start "$WORK" || fail "PostgreSQL did not start"
note "listening on 127.0.0.1:$PGPORT (data in $WORK/pg, removed at the end)"

step "Creating the table 'reports' and protecting it with fence_protect"
sql >/dev/null <<'SQL'
CREATE EXTENSION pg_fence;
CREATE TABLE reports (report_id int PRIMARY KEY, body text NOT NULL,
                      fence bigint NOT NULL DEFAULT 0);
SELECT fence_protect('reports');
INSERT INTO reports VALUES (7, 'empty report', 0);
SQL
note "CREATE TABLE reports (report_id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0);"
note "SELECT fence_protect('reports');   -- UPDATEs must now carry a newer token"

step "Starting a 3-member coordinator cluster (scripts/cluster.sh)"
mkdir -p "$WORK/cluster"
# The members sign every grant (scene 2 lets PostgreSQL verify the signatures).
openssl genpkey -algorithm ed25519 -out "$WORK/signing.key" 2>/dev/null || fail "openssl cannot make an Ed25519 key"
chmod 600 "$WORK/signing.key"
FENCE_COORDINATOR_FLAGS="--token-signing-key-file $WORK/signing.key" e2e_cluster_start "$WORK/cluster" 3 ||
  fail "the cluster did not start"
note "FENCE_ENDPOINTS=$FENCE_ENDPOINTS"
note "every member signs its grants with $WORK/signing.key (--token-signing-key-file; scene 2)"
note "binaries: $COORD, $FENCECTL"
e2e_wait_for 30 fencectl acquire demo:warmup --lease 1s --wait 0s ||
  fail "the cluster elected no leader within 30s"
note "\$ fencectl status"
fencectl status 2>&1 | show

# --- The two workers: plain shell scripts using fencectl and psql ---------------
# Worker A: acquire, prepare the report for 3 s, write with its token. (The
# demo freezes A within those 3 s; it stays frozen longer than its 3 s lease,
# so once it wakes the rest of this sleep has already run out.)
# In scene 2 (VERIFY=1) a worker also passes the grant's proof to PostgreSQL.
cat >"$WORK/acquire.sh" <<'WORKER'
# acquire.sh LEASE: acquires $KEY; prints "TOKEN" and, with VERIFY=1, the
# statement that hands the grant's proof to PostgreSQL, on a second line.
if [[ "${VERIFY:-0}" == 1 ]]; then
  json=$("$FENCECTL_BIN" acquire "$KEY" --lease "$1" --wait 0s -o json) || exit   # fencectl's own exit code
  sed -n 's/.*"token":\([0-9]*\).*/\1/p' <<<"$json"
  echo "SET LOCAL pg_fence.proof = '$(sed -n 's/.*"proof":"\([^"]*\)".*/\1/p' <<<"$json")';"
else
  "$FENCECTL_BIN" acquire "$KEY" --lease "$1" --wait 0s || exit   # fencectl's own exit code
fi
WORKER
cat >"$WORK/worker-a.sh" <<'WORKER'
grant=$(bash "$WORK/acquire.sh" "$LEASE") || exit   # fencectl's own exit code
token=$(head -n 1 <<<"$grant") proof=$(sed -n 2p <<<"$grant")
echo "$token" >"$SCENE/a.token.tmp" && mv "$SCENE/a.token.tmp" "$SCENE/a.token"
sleep 3   # preparing the report
psql -X -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -c "BEGIN" -c "$proof" -c \
  "UPDATE reports SET body = 'report by worker A (token $token)', fence = $token WHERE report_id = 7" -c "COMMIT" \
  >"$SCENE/a.psql" 2>&1
echo $? >"$SCENE/a.rc"
WORKER
# Worker B: acquire, write with its token, release.
cat >"$WORK/worker-b.sh" <<'WORKER'
grant=$(bash "$WORK/acquire.sh" 10s) || exit   # fencectl's own exit code
token=$(head -n 1 <<<"$grant") proof=$(sed -n 2p <<<"$grant")
echo "$token" >"$SCENE/b.token"
psql -X -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -c "BEGIN" -c "$proof" -c \
  "UPDATE reports SET body = 'report by worker B (token $token)', fence = $token WHERE report_id = 7" -c "COMMIT" \
  >"$SCENE/b.psql" 2>&1
rc=$?
"$FENCECTL_BIN" release "$KEY" "$token" >/dev/null 2>&1
exit $rc
WORKER
export WORK KEY LEASE

# start_worker_a SCRIPT: starts worker A ($WORK/SCRIPT, a process group of
# its own) and waits for its token; sets A_PID and A_TOKEN.
start_worker_a() {
  setsid bash "$WORK/$1" >"$SCENE/a.out" 2>&1 &
  A_PID=$!
  e2e_wait_for 30 test -s "$SCENE/a.token" || fail "worker A got no token within 30s: $(cat "$SCENE/a.out")"
  A_TOKEN=$(cat "$SCENE/a.token")
}

# wait_lease_expired KEY: until the coordinator no longer holds KEY.
wait_lease_expired() {
  e2e_wait_for "$WAIT_EXPIRY_S" bash -c "! \"$FENCECTL\" get \"$1\" >/dev/null 2>&1" ||
    fail "the coordinator did not expire A's lease within ${WAIT_EXPIRY_S}s"
}

# play_race: the timeline t0..t5 in $SCENE (a directory of its own), with the
# proof passed along when VERIFY=1. Sets A_TOKEN, B_TOKEN and REFUSED (1 if
# PostgreSQL refused A's write as stale, SQLSTATE 55F01).
play_race() {
  mkdir -p "$SCENE"
  export SCENE VERIFY
  local how=""
  if ((VERIFY == 1)); then how=" -o json"; fi

  step "t0  worker A starts and acquires $KEY with a $LEASE lease"
  start_worker_a worker-a.sh
  note "worker A (pid $A_PID): \$ fencectl acquire $KEY --lease $LEASE$how   ->  token ${bold}$A_TOKEN${off}"
  note "(the token is the index of the Raft log entry that granted the lock: it only grows)"
  note "A now prepares its report (3 s of work) before writing it with token $A_TOKEN."

  step "t1  worker A pauses: we send it SIGSTOP (think: a long GC pause, a suspended VM)"
  kill -STOP -- "-$A_PID"
  [[ -f "$SCENE/a.rc" ]] && fail "worker A wrote before it could be paused (machine too slow?)"
  e2e_wait_for 5 bash -c "[[ \$(awk '{print \$3}' /proc/$A_PID/stat) == T ]]" ||
    fail "worker A did not stop"
  note "A is frozen. It cannot renew its lease, and it does not know time is passing."
  note "\$ fencectl get $KEY"
  fencectl get "$KEY" 2>&1 | show

  step "t2  A's lease expires on the coordinator (waiting, at most ${WAIT_EXPIRY_S}s)"
  t_start=$(e2e_ms)
  wait_lease_expired "$KEY"
  note "after $(( ($(e2e_ms) - t_start) ))ms: the leader proposed Expire{$KEY, $A_TOKEN}; the cluster committed it."
  note "\$ fencectl get $KEY   ->  not held"

  step "t3  worker B acquires $KEY"
  set +e
  bash "$WORK/worker-b.sh" >"$SCENE/b.out" 2>&1
  B_RC=$?
  set -e
  [[ -s "$SCENE/b.token" ]] || fail "worker B got no token: $(cat "$SCENE/b.out")"
  B_TOKEN=$(cat "$SCENE/b.token")
  note "worker B: \$ fencectl acquire $KEY   ->  token ${bold}$B_TOKEN${off}   (larger than $A_TOKEN: tokens only grow)"
  ((B_TOKEN > A_TOKEN)) || fail "B's token $B_TOKEN is not larger than A's $A_TOKEN"

  step "t4  worker B writes the report with token $B_TOKEN"
  if ((VERIFY == 1)); then note "SET LOCAL pg_fence.proof = '<the proof of B's grant>';"; fi
  note "UPDATE reports SET body = 'report by worker B (token $B_TOKEN)', fence = $B_TOKEN WHERE report_id = 7;"
  show <"$SCENE/b.psql"
  ((B_RC == 0)) || fail "worker B's write failed"
  note "${green}accepted${off}: the row's fence is now $B_TOKEN. B releases the lock."

  step "t5  worker A wakes up (SIGCONT) and, still believing it holds the lock, writes with token $A_TOKEN"
  kill -CONT -- "-$A_PID"
  e2e_wait_for 30 test -s "$SCENE/a.rc" || fail "worker A did not finish its write within 30s"
  A_RC=$(cat "$SCENE/a.rc")
  if ((VERIFY == 1)); then note "SET LOCAL pg_fence.proof = '<A's proof: genuine, for report:7 and token $A_TOKEN>';"; fi
  note "UPDATE reports SET body = 'report by worker A (token $A_TOKEN)', fence = $A_TOKEN WHERE report_id = 7;"
  show <"$SCENE/a.psql"
  if [[ "$A_RC" != 0 ]] && grep -q 55F01 "$SCENE/a.psql"; then
    note "${red}REJECTED${off} with SQLSTATE 55F01: the database already accepted token $B_TOKEN."
    REFUSED=1
  else
    REFUSED=0
  fi
}

SCENE=$WORK/scene1 VERIFY=0 play_race

step "The row after the race"
sql -c "SELECT report_id, body, fence FROM reports WHERE report_id = 7" | show
BODY=$(sql -At -c "SELECT body FROM reports WHERE report_id = 7")

step "fence_stats: what pg_fence counted"
sql -c "SELECT relation, accepted, rejected_stale, last_accepted_token, last_rejected_token
          FROM fence_stats WHERE relation = 'reports'::regclass" | show
STALE=$(sql -At -c "SELECT coalesce(sum(rejected_stale), 0) FROM fence_stats
                     WHERE relation = 'reports'::regclass")

step "fencectl status: the cluster"
fencectl status 2>&1 | show

# --- Epilogue: the same timeline with fence-worker, the pattern in one program --
# Returns 0 if worker A stopped on the stale token (exit 10) after B wrote.
worker_epilogue() {
  local key=report:8 a_rc=0
  step "Epilogue: the same story with fence-worker (coordinator/worker), the whole pattern in one program"
  note "acquire -> keepalive thread (lease/3) -> write carrying the token -> stop on 55F01 -> release"
  "$WORKER_BIN" --setup >/dev/null || return 1
  "$WORKER_BIN" --key "$key" --mode guard --lease 2s --work 3s --no-lease-check \
    --worker-id worker-A --log "$WORK/wa.csv" >"$WORK/wa.out" 2>&1 &
  W_PID=$!
  e2e_wait_for 30 grep -q ',acquire,.*,ok,' "$WORK/wa.csv" || return 1
  kill -STOP "$W_PID"
  note "worker-A acquired $key, started its 3 s of work and was frozen (SIGSTOP);"
  note "--no-lease-check: it will write even if its keepalive noticed the loss, as if"
  note "the pause had come right after its last check."
  e2e_wait_for "$WAIT_EXPIRY_S" bash -c "! \"$FENCECTL\" get \"$key\" >/dev/null 2>&1" || return 1
  note "worker-A's lease expired on the coordinator. Now worker-B, a second fence-worker process:"
  "$WORKER_BIN" --key "$key" --mode guard --lease 2s --worker-id worker-B 2>&1 | show
  note "worker-A is woken up (SIGCONT); its own narration, from its acquire on:"
  kill -CONT "$W_PID"
  wait "$W_PID" || a_rc=$?
  W_PID=""
  show <"$WORK/wa.out"
  note "worker-A exit status $a_rc (10 = stale token refused: a newer holder wrote)"
  ((a_rc == 10))
}
EPILOGUE=skipped
if [[ -n "$WORKER_BIN" ]]; then
  if worker_epilogue; then EPILOGUE=ok; else EPILOGUE=failed; fi
else
  note "(fence-worker is not built: epilogue skipped)"
fi

SCENE1_OK=0
if ((REFUSED == 1)) && [[ "$BODY" == "report by worker B (token $B_TOKEN)" ]] && ((STALE == 1)) &&
   [[ "$EPILOGUE" != failed ]]; then
  SCENE1_OK=1
  printf '\n%s[%s] Scene 1 PASS: the stale write (token %s) was refused; the report holds B'"'"'s work (token %s).%s\n' \
    "$green" "$(e2e_now)" "$A_TOKEN" "$B_TOKEN" "$off"
fi
((SCENE1_OK == 1)) ||
  fail "expected A's write refused (refused=$REFUSED), B's body in the row (body='$BODY'), one stale rejection (fence_stats: $STALE), fence-worker epilogue ok ($EPILOGUE)"

# --- Scene 2: verifiable tokens ----------------------------------------------
# try_write LABEL SQL...: runs the statements in one transaction, shows what
# PostgreSQL answered and sets WROTE_STATE (the error's SQLSTATE, or 00000).
try_write() {
  local label=$1 stmt
  shift
  local args=(-c BEGIN)
  for stmt in "$@"; do args+=(-c "$stmt"); note "$stmt"; done
  args+=(-c COMMIT)
  set +e
  psql -X -v ON_ERROR_STOP=1 -v VERBOSITY=verbose "${args[@]}" >"$WORK/$label.psql" 2>&1
  set -e
  show <"$WORK/$label.psql"
  WROTE_STATE=$(sed -n 's/^ERROR: *\([0-9A-Z]\{5\}\):.*/\1/p' "$WORK/$label.psql" | head -n 1)
  WROTE_STATE=${WROTE_STATE:-00000}
}

step "Scene 2: the same race, with verifiable tokens"
note "Scene 1 trusted every worker not to invent a token. Now PostgreSQL checks"
note "that each token was really issued, by this cluster, for this row's lock:"
note "every grant carries a proof (an Ed25519 signature over cluster, key and"
note "token), and the database holds the cluster's public key."
PUB=$(openssl pkey -in "$WORK/signing.key" -pubout)
CLUSTER_ID=$(fencectl member list -o json | sed -n 's/.*"cluster_id":"\([0-9]*\)".*/\1/p')
[[ -n "$CLUSTER_ID" ]] || fail "fencectl member list printed no cluster_id"
note "SELECT fence_trust_key('<public key PEM>', $CLUSTER_ID);   -- the key, for this cluster only"
KID=$(sql -At -v pem="$PUB" -v cid="$CLUSTER_ID" <<<"SELECT fence_trust_key(:'pem', :'cid'::numeric);") ||
  fail "fence_trust_key failed"
note "  -> key_id $KID (the members logged token_signing_kid=$KID)"
note "SELECT fence_protect('reports', lock_key => 'report:{report_id}');   -- row 7 belongs to lock report:7"
sql >/dev/null <<'SQL'
SELECT fence_protect('reports', lock_key => 'report:{report_id}');
INSERT INTO reports VALUES (8, 'empty report', 0);
SQL

step "A writer with UPDATE privilege tries to take row 7 for good: the largest token, no proof"
try_write rogue "UPDATE reports SET body = 'rogue', fence = 9223372036854775807 WHERE report_id = 7"
[[ "$WROTE_STATE" == 55F02 ]] || fail "the rogue write was not refused with 55F02 (got $WROTE_STATE)"
note "${red}REJECTED${off} with SQLSTATE 55F02: no proof. (Scene 1's table would have accepted it.)"

step "A worker holding report:8 writes report 7 by mistake, with report:8's genuine proof"
GRANT8=$(fencectl acquire report:8 --lease 10s --wait 5s -o json) || fail "acquire report:8 failed"
T8=$(sed -n 's/.*"token":\([0-9]*\).*/\1/p' <<<"$GRANT8")
P8=$(sed -n 's/.*"proof":"\([^"]*\)".*/\1/p' <<<"$GRANT8")
note "\$ fencectl acquire report:8 -o json   ->  token $T8, proof ${P8:0:40}..."
try_write wrongkey "SET LOCAL pg_fence.proof = '$P8'" \
  "UPDATE reports SET body = 'report 8 written into 7', fence = $T8 WHERE report_id = 7"
fencectl release report:8 "$T8" >/dev/null 2>&1 || true
[[ "$WROTE_STATE" == 55F02 ]] || fail "report:8's proof was accepted for report 7 (got $WROTE_STATE)"
note "${red}REJECTED${off} with SQLSTATE 55F02: the proof was issued for report:8, not report:7."

step "The seed's race again; each worker passes its grant's proof (SET LOCAL pg_fence.proof)"
SCENE=$WORK/scene2 VERIFY=1 play_race
BODY=$(sql -At -c "SELECT body FROM reports WHERE report_id = 7")
PROOF_REJECTS=$(sql -At -c "SELECT coalesce(sum(rejected_proof), 0) FROM fence_stats
                             WHERE relation = 'reports'::regclass")
step "fence_stats after scene 2"
sql -c "SELECT relation, accepted, rejected_stale, rejected_proof FROM fence_stats
          WHERE relation = 'reports'::regclass" | show

((REFUSED == 1)) && [[ "$BODY" == "report by worker B (token $B_TOKEN)" ]] && ((PROOF_REJECTS == 2)) ||
  fail "scene 2: expected A's write refused as stale (refused=$REFUSED), B's body in row 7 (body='$BODY'), two proof rejections (fence_stats: $PROOF_REJECTS)"
SCENE2_B_TOKEN=$B_TOKEN

# --- Scene 3: a side effect, through the fenced outbox ---------------------------
MAIL_KEY=mail:report:7
MAIL_PORT=${DEMO_MAIL_PORT:-14390}
MAIL_URL=http://127.0.0.1:$MAIL_PORT/send
# mail_count FIELD: the receiver's count of applied (e-mails sent) or received (POSTs)
mail_count() { curl -s --max-time 2 "http://127.0.0.1:$MAIL_PORT/count" | sed -n "s/.*\"$1\": \([0-9]*\).*/\1/p"; }
# Worker A of scene 3: acquire, write the e-mail for 3 s, enqueue it under its token.
cat >"$WORK/mailer-a.sh" <<'WORKER'
token=$("$FENCECTL_BIN" acquire "$MAIL_KEY" --lease "$LEASE" --wait 0s) || exit
echo "$token" >"$SCENE/a.token.tmp" && mv "$SCENE/a.token.tmp" "$SCENE/a.token"
sleep 3   # writing the e-mail
psql -X -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -c "SELECT fence_enqueue('$MAIL_KEY', $token, 'report-7-mail', '$MAIL_URL',
  jsonb_build_object('to', 'boss@example.org', 'text', 'report 7, by worker A (token $token)'))" >"$SCENE/a.psql" 2>&1
echo $? >"$SCENE/a.rc"
WORKER
export MAIL_KEY MAIL_URL

scene3() {
  SCENE=$WORK/scene3
  mkdir -p "$SCENE"
  export SCENE
  step "Scene 3: a side effect. The report goes out by e-mail, which PostgreSQL cannot take back"
  note "Each worker records its e-mail in pg_fence's outbox, in its transaction and under its"
  note "token: SELECT fence_enqueue('$MAIL_KEY', token, 'report-7-mail', '$MAIL_URL', '{...}')."
  note "A relay (python3 -m pgfence.relay) delivers the outbox, each e-mail with an"
  note "Idempotency-Key; the mail receiver sends each key once."
  /usr/bin/python3 "$E2E_ROOT/tests/e2e/lastmile/receiver.py" "$MAIL_PORT" >"$SCENE/receiver.log" 2>&1 &
  MAIL_PIDS+=($!)
  e2e_wait_for 10 bash -c "curl -s --max-time 1 http://127.0.0.1:$MAIL_PORT/count >/dev/null" ||
    fail "the mail receiver did not start on port $MAIL_PORT: $(cat "$SCENE/receiver.log")"
  PYTHONPATH="$E2E_ROOT/clients/python" /usr/bin/python3 -m pgfence.relay --idle 100ms --log-every 1s \
    >"$SCENE/relay.log" 2>&1 &
  MAIL_PIDS+=($!)
  note "receiver on 127.0.0.1:$MAIL_PORT, relay pid $!"

  step "t0  worker A acquires $MAIL_KEY with a $LEASE lease and writes the e-mail (3 s)"
  start_worker_a mailer-a.sh
  note "worker A: token ${bold}$A_TOKEN${off}"
  step "t1  worker A pauses (SIGSTOP) before it enqueues its e-mail; t2  its lease expires"
  kill -STOP -- "-$A_PID"
  [[ -f "$SCENE/a.rc" ]] && fail "worker A enqueued before it could be paused (machine too slow?)"
  wait_lease_expired "$MAIL_KEY"
  step "t3  worker B acquires $MAIL_KEY and enqueues its e-mail under its token"
  B_TOKEN=$(fencectl acquire "$MAIL_KEY" --lease 10s --wait 5s) || fail "worker B got no token"
  note "worker B: token ${bold}$B_TOKEN${off}"
  sql -At -c "SELECT fence_enqueue('$MAIL_KEY', $B_TOKEN, 'report-7-mail', '$MAIL_URL',
    jsonb_build_object('to', 'boss@example.org', 'text', 'report 7, by worker B (token $B_TOKEN)'))" |
    sed 's/^/           idempotency key: /'
  fencectl release "$MAIL_KEY" "$B_TOKEN" >/dev/null 2>&1 || true
  e2e_wait_for 15 bash -c "[[ \$(curl -s --max-time 1 http://127.0.0.1:$MAIL_PORT/count) == *'\"applied\": 1'* ]]" ||
    fail "the relay did not deliver B's e-mail within 15s: $(tail -5 "$SCENE/relay.log")"
  note "${green}sent${off}: the relay delivered B's e-mail; the receiver applied it."

  step "t5  worker A wakes up (SIGCONT) and enqueues its e-mail with token $A_TOKEN"
  kill -CONT -- "-$A_PID"
  e2e_wait_for 30 test -s "$SCENE/a.rc" || fail "worker A did not finish within 30s"
  show <"$SCENE/a.psql"
  MAIL_REFUSED=0
  if [[ $(cat "$SCENE/a.rc") != 0 ]] && grep -q 55F01 "$SCENE/a.psql"; then
    MAIL_REFUSED=1
    note "${red}REJECTED${off} with SQLSTATE 55F01: A's e-mail is not in the outbox, so it is never sent."
  fi
  step "The outbox and the receiver"
  sql -c "SELECT token, operation_id, state, attempts, last_status FROM fence_outbox ORDER BY id" | show
  sql -c "SELECT state, entries FROM fence_outbox_backlog" | show
  MAIL_SENT=$(mail_count applied) MAIL_POSTS=$(mail_count received)
  note "receiver: $MAIL_SENT e-mail(s) sent, $MAIL_POSTS request(s) received"
  MAIL_OK=0
  if ((MAIL_REFUSED == 1)) && [[ $MAIL_SENT == 1 && $MAIL_POSTS == 1 ]] &&
     [[ $(sql -At -c "SELECT string_agg(token || ':' || state, ',') FROM fence_outbox") == "$B_TOKEN:delivered" ]]; then
    MAIL_OK=1
  fi
}

SCENE3=skipped
if /usr/bin/python3 -c 'import psycopg2' 2>/dev/null && command -v curl >/dev/null; then
  scene3
  ((MAIL_OK == 1)) ||
    fail "scene 3: expected A's enqueue refused (refused=$MAIL_REFUSED), one e-mail sent and one request received (sent=$MAIL_SENT, received=$MAIL_POSTS), B's entry delivered"
  SCENE3=ok
else
  note "(scene 3 needs /usr/bin/python3 with python3-psycopg2, and curl: skipped)"
fi

echo
printf '%s[%s] PASS: scene 1 refused the stale write; scene 2 refused a token without a proof and a\n' \
  "$green" "$(e2e_now)"
printf '           proof for another lock (55F02), kept B'"'"'s verified write (token %s) and refused A'"'"'s stale one (55F01)' \
  "$SCENE2_B_TOKEN"
if [[ $SCENE3 == ok ]]; then
  printf ';\n           scene 3 refused the paused worker'"'"'s e-mail (55F01) and sent B'"'"'s once.%s\n' "$off"
else
  printf '.%s\n' "$off"
fi
exit 0
