#!/usr/bin/env bash
# Safety under faults, end to end, as Jepsen applies them: a 3-member
# fence-coordinator cluster, a real PostgreSQL with pg_fence and several
# fence-worker processes, each in a network namespace of its own on a bridge
# (lib/netns.sh), and a nemesis (lib/nemesis.sh) whose schedule comes from the
# seed: kills (one member, the leader, all), pauses, partitions (nftables in
# the bridge: isolate, majority/minority, bridge, one-way, leader cut from
# clients, worker cut from the cluster), clock faults (libfaketime: a rate within
# rho, a leader 4x fast, wall-clock jumps), disk faults (libfiu: fdatasync EIO,
# pwrite ENOSPC) and worker pauses. Every fault proves it took effect; all are
# healed before the end, then a liveness phase.
#
# The workers loop over a few keys with 1 s leases through all four write
# paths (fence_guard trigger, fenced_update(), fence_admit over two tables, and
# a sequenced table written twice per lease, then sent its first write again as
# a delayed duplicate),
# keep their leases alive, and keep writing after losing them (--no-lease-check),
# as a paused holder does. Their logs are the history: every acquire, keepalive,
# release and write with CLOCK_MONOTONIC send/answer times taken by the workers
# (never by a member, whose clock may be faked). check.sql checks it:
#   (a) per key and fence, accepted tokens (on the sequenced table: (token,
#       seq) pairs) strictly increase in commit order, no holder's delayed
#       duplicate was accepted, and nothing accepted was lost (counters equal
#       the accepted increments);
#   (b) every acknowledged acquire got a token larger than every token
#       acknowledged before it was sent; the database accepted only granted tokens;
#   (c) within rho, no two workers held a key at once ("held": from the
#       acquire's answer to the send time of its last successful acquire or
#       keepalive + lease x (1 - rho), or its release); overlaps caused by the
#       beyond-rho clock fault are counted and reported, not failed;
#   (d) after the heal a fresh acquire succeeds within a bound, every member
#       applied every acknowledged grant, and writes are accepted again.
#   (e) token proofs: the cluster signs every grant (--token-signing-key-file),
#       PostgreSQL trusts its key for its cluster ID (fence_trust_key), the
#       worker tables verify proofs under the lock key = the row's key and the
#       keys' resources require them (fence-worker --setup --proof), and every
#       worker sends its grant's proof (--proof). Alongside, an adversary
#       (fence-worker --forge, in namespace wf) takes real grants and sends
#       forged and misdirected proofs on every path: a corrupted signature, the
#       proof on another key, with another token, one signed by a key
#       PostgreSQL does not trust, none. Each must be refused with 55F02, no
#       fence may hold a token not granted for its key, and no genuine proof
#       may be refused.
# Besides the random worker pauses, the seed scenario is forced once per write
# path (nem_forced_stale): those four workers must exit 10 (stale).
#
# usage: run.sh [--seconds N] [--seed S] [--workers W] [--keys K] [--plan-only] [--break reissue]
#   --plan-only prints the seed's fault schedule and exits (no root needed).
#   --break KIND runs a broken system, to show that the checkers catch it (no
#     scheduled faults; the worker pauses and forced stale writers still run):
#     reissue: the final power cut also wipes every member's data directory,
#       as an operator who rebuilds a cluster without --token-floor does:
#       tokens start again from the bottom. acquired_tokens_grow must fail.
#     early: every member's clocks run 2 x real time while members and
#       workers assume rho = 0 (--max-clock-drift-ppm 0): the leader expires
#       leases early. one_holder_at_a_time_within_rho must fail.
#     Either way the fences (a) must still hold.
#     unfenced: the guard trigger of worker_counters is disabled, so the
#       guard path writes without a fence: tokens_increase_in_commit_order
#       must fail, while the coordinator's checks (b) hold.
#     unverified: the worker tables and resources do not verify proofs (set up
#       without --proof; the workers still send theirs): the adversary's
#       forgeries get through, so no_forged_proof_accepted must fail.
#   env: SAFETY_SECONDS (default 40), SAFETY_SEED, SAFETY_WORKERS (6),
#        SAFETY_KEYS (3), SAFETY_KEEP=1 keeps the logs; FAULT_REPORT_ROOT (the
#        report directory's parent, default build/fault-reports);
#        FENCE_WORKER_BIN, FENCECTL_BIN, FENCE_COORDINATOR_BIN, BUILD, E2E_BUILD_DIR
#        say where the binaries are (else they are searched under build*/).
# Needs root (namespaces), ip, nft, faketime, fiu-run, gnuplot (make deps installs them).
# Every stale rejection of the run is then explained (lib/explain.sh: fencectl
# explain per refused token, with its worker's log; bounded) and listed with
# its cause in the summary.
# Ends with "safety: N passed, N failed", then
#   "faults: seed=S seconds=T ops=N accepted=N refused=N faults=N violations=N forged=N forged_accepted=N"
# and the report directory; exit status 0 only if every check passed.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
E2E_ROOT=$(cd "$HERE/../../.." && pwd)
export E2E_ROOT
source "$HERE/lib/common.sh"
source "$HERE/lib/pg.sh"
source "$HERE/lib/netns.sh"
source "$HERE/lib/members.sh"
source "$HERE/lib/nemesis.sh"
source "$HERE/lib/explain.sh"

RUN_S=${SAFETY_SECONDS:-40}
SEED=${SAFETY_SEED:-$(((RANDOM << 15 | RANDOM) % 1000000000))}
NWORKERS=${SAFETY_WORKERS:-6}
NKEYS=${SAFETY_KEYS:-3}
NMEMBERS=3
MEMBER_IDS=(1 2 3)
LEASE_MS=1000
RHO_PPM=50000    # rho, the clock-rate bound of docs/guarantees.md (the members' and workers' default)
PLAN_ONLY=0
BREAK=""         # --break reissue|early|unfenced|unverified: the checkers' self-test against a broken system
LIVE_WRITES=20   # after the heal, the workers must get this many writes accepted...
LIVE_S=30        # ...within this many seconds; then they are told to stop (SIGTERM)
while (($# > 0)); do
  case $1 in
    --seconds) RUN_S=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --workers) NWORKERS=$2; shift 2 ;;
    --keys) NKEYS=$2; shift 2 ;;
    --plan-only) PLAN_ONLY=1; shift ;;
    --break) BREAK=$2; shift 2 ;;
    -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
# whole NAME VALUE: exits 2 unless VALUE is a whole number.
whole() { [[ "$2" =~ ^[0-9]+$ ]] || { echo "run.sh: $1 must be a whole number, got '$2'" >&2; exit 2; }; }
whole "--seconds/SAFETY_SECONDS" "$RUN_S"
whole "--seed/SAFETY_SEED" "$SEED"
whole "--workers/SAFETY_WORKERS" "$NWORKERS"
whole "--keys/SAFETY_KEYS" "$NKEYS"
((RUN_S >= 5 && RUN_S <= 86400)) || { echo "run.sh: --seconds must be 5..86400, got $RUN_S" >&2; exit 2; }
((NWORKERS >= 2 && NWORKERS <= 32)) || { echo "run.sh: --workers must be 2..32, got $NWORKERS" >&2; exit 2; }
((NKEYS >= 1 && NKEYS <= 16)) || { echo "run.sh: --keys must be 1..16, got $NKEYS" >&2; exit 2; }
case $BREAK in
  "" | reissue) ;;
  early) RHO_PPM=0 MEM_DEFAULT_RATE=2 MEM_FLAGS="--max-clock-drift-ppm 0" ;;
  unfenced | unverified) ;;
  *) echo "run.sh: --break takes 'reissue', 'early', 'unfenced' or 'unverified', got '$BREAK'" >&2; exit 2 ;;
esac
RANDOM=$SEED
if ((PLAN_ONLY)); then
  nem_plan $((RUN_S / 40 + 2))
  exit 0
fi

log() { echo "[$(e2e_now)] safety: $*"; }
die() { log "ERROR: $*" >&2; exit 1; }

WORKER=$(e2e_find_bin fence-worker FENCE_WORKER_BIN) || die "fence-worker is not built"
FENCECTL=$(e2e_find_bin fencectl FENCECTL_BIN) || die "fencectl is not built"
COORD=$(e2e_find_bin fence-coordinator FENCE_COORDINATOR_BIN) || die "fence-coordinator is not built"
export FENCE_COORDINATOR_BIN=$COORD FENCECTL_BIN=$FENCECTL FENCE_WORKER_BIN=$WORKER
for tool in faketime fiu-run gnuplot cc openssl; do
  command -v "$tool" >/dev/null || die "$tool is not installed (make deps installs it)"
done
[[ -f "$MEM_FAKETIME_LIB" ]] || die "libfaketime is not at $MEM_FAKETIME_LIB (package faketime)"
ns_preflight || die "pre-flight failed"
ns_lock || die "could not take the namespace lock"
ns_sweep_stale

WORK=$(mktemp -d /tmp/pgfence-safety.XXXXXX)
CLUSTER_DIR=$WORK/cluster
REPORT_DIR=${FAULT_REPORT_ROOT:-$E2E_ROOT/${BUILD:-build}/fault-reports}/$(date +%Y%m%d-%H%M%S)-seed$SEED
WORKER_PIDS=()
FORGER_PID=""
WORKER_ENV=()
PASSED=0
FAILED=0

cleanup() {
  local rc=$? pid i
  trap "" INT TERM   # a second Ctrl-C must not cut the cleanup short
  trap - EXIT
  set +e   # cleanup goes on whatever fails
  [[ -n "$NEM_WORKER_LOOP_PID" ]] && kill -KILL "$NEM_WORKER_LOOP_PID" 2>/dev/null
  # Workers get SIGTERM first (they finish their line of the log); whatever
  # still runs in a namespace of this run is killed by ns_teardown below. Only
  # pids that are still a fence-worker are signalled: pids are reused.
  for pid in "${WORKER_PIDS[@]}" $FORGER_PID; do
    e2e_pid_runs "$pid" "$WORKER" || continue
    kill -CONT "$pid" 2>/dev/null
    kill -TERM "$pid" 2>/dev/null
  done
  for id in "${MEMBER_IDS[@]}"; do mem_kill "$id"; done
  for ((i = 0; i < 50; i++)); do
    jobs -pr | grep -q . || break
    sleep 0.1
  done
  pg_throwaway_stop "$WORK"
  ns_teardown   # kills whatever still runs in a namespace of this run, then deletes them
  if [[ "${SAFETY_KEEP:-0}" == 1 || $rc -ne 0 ]]; then
    echo "safety: logs kept in $WORK" >&2
  else
    rm -rf "$WORK"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT TERM

# check NAME CONDITION DETAIL: one named assertion of the run; CONDITION is
# a bash arithmetic expression (non-zero = pass).
check() {
  if (($2)); then
    PASSED=$((PASSED + 1))
    printf '  PASS  %-40s %s\n' "$1" "$3" | tee -a "$WORK/checks.txt"
  else
    FAILED=$((FAILED + 1))
    printf '  FAIL  %-40s %s\n' "$1" "$3" | tee -a "$WORK/checks.txt"
  fi
}

WORK_MS=(50 250 450 1500)
KEYS=""
for ((k = 1; k <= NKEYS; k++)); do KEYS+="${KEYS:+,}safety:k$k"; done
start_workers() {
  local i keys=$KEYS
  for ((i = 0; i < NWORKERS; i++)); do
    # --work 50/250/450/1500 ms: the last two outlive lease/3 and send keepalives;
    # a 1500 ms worker cut from the cluster (worker_cut) writes after its lease.
    ns_spawn "w$i" env "${WORKER_ENV[@]}" "$WORKER" --key "$keys" --mode mixed --lease 1s --wait 2s \
      --work "${WORK_MS[$((i % 4))]}ms" --iterations 10000000 --duration "$((RUN_S + 300))s" --keep-going \
      --no-lease-check --max-clock-drift-ppm "$RHO_PPM" --worker-id "w$i" --log "$WORK/w$i.csv" \
      --seed "$((SEED * 64 + i + 1))" --proof --quiet >"$WORK/w$i.out" 2>&1 &
    WORKER_PIDS+=($!)
  done
}

# start_forger: the adversary (fence-worker --forge) in namespace wf: every
# 200 ms a real grant of one key, then its proof forged and misdirected on one
# write path (five forgeries, each must be refused with 55F02).
start_forger() {
  ns_spawn wf env "${WORKER_ENV[@]}" "$WORKER" --forge "$WORK/forger.key" --key "$KEYS" --mode mixed \
    --lease 1s --wait 2s --pause 200ms --iterations 10000000 --duration "$((RUN_S + 300))s" --keep-going \
    --max-clock-drift-ppm "$RHO_PPM" --worker-id forger --log "$WORK/forger.csv" --seed "$((SEED * 64))" \
    --quiet >"$WORK/forger.out" 2>&1 &
  FORGER_PID=$!
}

# wait_workers BOUND_S: waits for every worker (and the forger) to exit;
# echoes how many did not.
wait_workers() {
  local deadline=$(($(e2e_ms) + $1 * 1000)) pid left=0
  for pid in "${WORKER_PIDS[@]}" $FORGER_PID; do
    while kill -0 "$pid" 2>/dev/null && (($(e2e_ms) < deadline)); do sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && left=$((left + 1))
  done
  echo "$left"
}

# stats LABEL NUMBERS...: "LABEL: n=.. min=.. median=.. max=.. ms" (numbers only).
stats() {
  local label=$1
  shift
  local sorted=() v
  for v in "$@"; do [[ "$v" =~ ^[0-9]+$ ]] && sorted+=("$v"); done
  if ((${#sorted[@]} == 0)); then
    printf '  %-36s none\n' "$label"
    return
  fi
  mapfile -t sorted < <(printf '%s\n' "${sorted[@]}" | sort -n)
  printf '  %-36s n=%d min=%dms median=%dms max=%dms\n' "$label" "${#sorted[@]}" \
    "${sorted[0]}" "${sorted[$((${#sorted[@]} / 2))]}" "${sorted[-1]}"
}

member_applied() {
  local json
  json=$(nem_status "$1") || return 1
  e2e_json_field "${json%%\"members\"*}" applied_index
}
member_caught_up() { local a; a=$(member_applied "$1") && ((a >= $2)); }

# mono_offset_ns: wall-clock ns minus the workers' CLOCK_MONOTONIC ns, so that
# the nemesis's wall-clock times (e2e_ms) go onto the history's time line.
mono_offset_ns() {
  local w m
  w=$(date +%s%N)
  m=$("$WORKER" --clock) || return 1
  echo $((w - m))
}

HOSTS=(ctl pg wf)
for id in "${MEMBER_IDS[@]}"; do HOSTS+=("m$id"); done
for ((i = 0; i < NWORKERS; i++)); do HOSTS+=("w$i"); done
mkdir -p "$REPORT_DIR" || die "cannot create the report directory $REPORT_DIR"
nem_plan $((RUN_S / 40 + 2)) >"$WORK/schedule.txt"
cp "$WORK/schedule.txt" "$REPORT_DIR/schedule.txt"
log "seed $SEED (the same seed gives the same schedule: SAFETY_SEED=$SEED), ${RUN_S}s of faults," \
    "$NWORKERS workers, $NKEYS keys, lease ${LEASE_MS}ms, rho ${RHO_PPM}ppm; logs in $WORK"
log "first cycle of the schedule: $(head -n ${#NEM_KINDS[@]} "$WORK/schedule.txt" | awk '{ printf "%s ", $1 }')"
ns_setup "${HOSTS[@]}" || die "could not create the network namespaces"
log "namespaces ${NS_TAG}-{br,${HOSTS[*]// /,}} on 198.18.0.0/24 (bridge ${NS_TAG}-br)"
# (rejection_log_size: fence_rejections keeps the run's refusals for explain)
PG_NETNS=$(ns_name pg) PG_LISTEN=$(ns_addr pg) PG_TRUST_NET=$NS_NET.0/24 \
  pg_throwaway_start "$WORK" pg_fence.rejection_log_size=16384 || die "PostgreSQL did not start"
# Token proofs: the members sign with signing.key; forger.key is the
# adversary's, which PostgreSQL never trusts.
for k in signing forger; do
  { openssl genpkey -algorithm ed25519 -out "$WORK/$k.key" 2>/dev/null && chmod 600 "$WORK/$k.key"; } ||
    die "could not make the Ed25519 key $WORK/$k.key (openssl)"
done
openssl pkey -in "$WORK/signing.key" -pubout -out "$WORK/signing.pub" || die "could not write the public key"
MEM_FLAGS="${MEM_FLAGS:-} --token-signing-key-file $WORK/signing.key"
SETUP_PROOF=(--proof) VERIFYING="the worker tables and resources verify proofs"
[[ "$BREAK" == unverified ]] && SETUP_PROOF=() VERIFYING="nothing verifies proofs: --break unverified"
"$WORKER" --setup "${SETUP_PROOF[@]}" --key "$KEYS" >"$WORK/setup.out" 2>&1 ||
  die "fence-worker --setup ${SETUP_PROOF[*]} failed: $(cat "$WORK/setup.out")"
if [[ "$BREAK" == unfenced ]]; then
  psql -X -q -c "ALTER TABLE worker_counters DISABLE TRIGGER USER" || die "could not disable the guard trigger"
fi
mkdir -p "$CLUSTER_DIR"
for id in "${MEMBER_IDS[@]}"; do mem_start "$id"; done
# Only the namespaced processes get the endpoints (WORKER_ENV, nem_ctl's
# --endpoints): nothing in the root namespace has a test address to send to.
FENCE_ENDPOINTS=$(mem_endpoints)
for id in "${MEMBER_IDS[@]}"; do
  e2e_wait_for 30 nem_member_answers "$id" || die "member $id does not answer with a leader: $(tail -n 3 "$CLUSTER_DIR/$id.log")"
done
e2e_wait_for 30 nem_probe || die "the cluster granted nothing within 30s of starting"
CLUSTER_ID=$(nem_ctl "$FENCECTL" --endpoints "$FENCE_ENDPOINTS" member list -o json |
  sed -n 's/.*"cluster_id":"\([0-9]*\)".*/\1/p')
[[ "$CLUSTER_ID" =~ ^[1-9][0-9]*$ ]] || die "no cluster_id from fencectl member list: '$CLUSTER_ID'"
KID=$(psql -X -q -At -v ON_ERROR_STOP=1 -v pem="$(cat "$WORK/signing.pub")" -v cid="$CLUSTER_ID" \
  <<<"SELECT fence_trust_key(:'pem', :'cid'::numeric);") || die "fence_trust_key failed"
grep -q "token_signing_kid=$KID" "$CLUSTER_DIR/1.log" || die "PostgreSQL's key id $KID is not the members' token_signing_kid"
WORKER_ENV=("PGHOST=$PG_TCP_HOST" "PGPORT=$PGPORT" PGUSER=postgres PGDATABASE=postgres "FENCE_ENDPOINTS=$FENCE_ENDPOINTS")
log "PostgreSQL on $PG_TCP_HOST:$PGPORT (namespace $(ns_name pg)); cluster $FENCE_ENDPOINTS"

OFFSET_NS=$(mono_offset_ns) || die "fence-worker --clock failed"
start_workers
start_forger
log "workers (--proof) and the forger started; PostgreSQL trusts key $KID for cluster $CLUSTER_ID" \
    "($VERIFYING); nemesis for ${RUN_S}s"
T_START=$(e2e_ms)
nem_run "$RUN_S"
T_HEAL=$(e2e_ms)
HEAL_EPOCH=$(date +%s.%N)
log "nemesis stopped after $NEM_FAULTS_RUN scheduled faults; healing (no cut, SIGCONT everything, restart what is down)"
nem_heal
FINAL_GRANT_MS=$(nem_time_to_grant "$T_HEAL") || FINAL_GRANT_MS=-1
log "cluster granted again ${FINAL_GRANT_MS}ms after the heal; waiting for $LIVE_WRITES accepted writes"
live_writes() {
  psql -X -At -c "SELECT count(*) FROM worker_audit WHERE committed_at > to_timestamp($HEAL_EPOCH)"
}
live_enough() { (($(live_writes) >= LIVE_WRITES)); }
LIVE_MS=-1
e2e_wait_for "$LIVE_S" live_enough && LIVE_MS=$(($(e2e_ms) - T_HEAL))
for pid in "${WORKER_PIDS[@]}" $FORGER_PID; do kill -TERM "$pid" 2>/dev/null || true; done
LEFT=$(wait_workers 60)
T_END=$(e2e_ms)

# Load the history (the workers' logs) and the faults next to the audit table.
cat "$WORK"/w*.csv "$WORK/forger.csv" >"$WORK/events.csv" 2>/dev/null || true
awk -v off="$OFFSET_NS" '$3 ~ /^[0-9]+$/ && $4 ~ /^[0-9]+$/ {
    printf "%s,%s,%.0f,%.0f\n", $1, $2, $3 * 1e6 - off, $4 * 1e6 - off }' "$WORK/faults.log" >"$WORK/faults.csv"
psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<SQL || die "loading the history failed"
CREATE TABLE e2e_events (worker text, event text, key text, token bigint, send_ns bigint,
                         ack_ns bigint, path text, outcome text, value bigint);
\copy e2e_events FROM '$WORK/events.csv' WITH (FORMAT csv)
CREATE TABLE e2e_faults (kind text, target text, start_ns bigint, end_ns bigint);
\copy e2e_faults FROM '$WORK/faults.csv' WITH (FORMAT csv)
SQL
psql -X -v lease_ns="$((LEASE_MS * 1000000))" -v rho_ppm="$RHO_PPM" -f "$HERE/check.sql" >"$WORK/check.out" 2>&1 ||
  die "check.sql failed: $(cat "$WORK/check.out")"
declare -A FIG=()
while IFS='|' read -r kind name a _; do
  [[ "$kind" == figure ]] && FIG[$name]=$a
done <"$WORK/check.out"
MAX_ACKED=${FIG[max_acknowledged_token]:-0}

echo
log "checks"
NSQL=0
VIOLATIONS=0
while IFS='|' read -r kind name violations example; do
  [[ "$kind" == check ]] || continue
  NSQL=$((NSQL + 1))
  VIOLATIONS=$((VIOLATIONS + violations))
  if [[ "$violations" == 0 ]]; then check "$name" 1 "0 violations"; else
    check "$name" 0 "$violations violations, e.g. $example"; fi
done <"$WORK/check.out"
check check_sql_ran_every_check "NSQL == 13" "$NSQL of the 13 checks of check.sql reported"
# The per-key checks above are only as good as the writes behind them.
W_GUARD=${FIG[writes_accepted_guard]:-0} W_FU=${FIG[writes_accepted_fenced_update]:-0}
W_ADMIT=${FIG[writes_accepted_admit]:-0} W_SEQ=${FIG[writes_accepted_sequenced]:-0}
check every_write_path_accepted_writes "W_GUARD > 0 && W_FU > 0 && W_ADMIT > 0 && W_SEQ > 0" \
  "accepted: guard $W_GUARD, fenced_update $W_FU, admit $W_ADMIT, sequenced $W_SEQ"
DUPS=${FIG[replays_refused]:-0}
check delayed_duplicates_were_sent "DUPS > 0" "$DUPS delayed duplicates of a holder's own write refused"
STALE=${FIG[stale_rejections]:-0}
FS_STALE=${FIG[fence_stats_rejected_stale]:-0}
check stale_rejections_happened "STALE > 0" \
  "$STALE stale writes refused (${FIG[stale_rejections_by_path]:-none}); fence_stats counted $FS_STALE"
KA=${FIG[keepalives_ok]:-0}
check keepalives_happened "KA > 0" "$KA keepalives answered ok (${FIG[keepalives_failed]:-0} failed)"
FORCED_OK=0
[[ -f "$WORK/forced-stale.log" ]] && FORCED_OK=$(awk '$2 != "-" && $3 == 10' "$WORK/forced-stale.log" | wc -l)
check stale_worker_stopped_on_every_path "FORCED_OK == 4" \
  "$FORCED_OK of 4 forced stale writers (guard, fenced_update, admit, sequenced) were refused and exited 10: $(tr '\n' ';' <"$WORK/forced-stale.log" 2>/dev/null)"
check fence_stats_counted_every_rejection "FS_STALE >= STALE" "fence_stats $FS_STALE >= workers' $STALE"
FORGED=${FIG[forged_sent]:-0} FORGED_55F02=${FIG[forged_refused]:-0} FS_PROOF=${FIG[fence_stats_rejected_proof]:-0}
KINDS_WANTED=$((NKEYS > 1 ? 5 : 4))   # (other_key needs a second key)
check forged_proofs_were_sent "${FIG[forged_kinds]:-0} == $KINDS_WANTED && ${FIG[forged_paths]:-0} == 4 && FORGED_55F02 > 0" \
  "$FORGED forged proofs sent (${FIG[forged_sent_by_kind]:-none}) on ${FIG[forged_paths]:-0} of 4 paths, $FORGED_55F02 refused with 55F02"
check fence_stats_counted_every_proof_refusal "FS_PROOF >= FORGED_55F02" \
  "fence_stats rejected_proof $FS_PROOF >= the forger's $FORGED_55F02"
touch "$WORK/faults.log"
NEM_FAILS=0
[[ -f "$WORK/nemesis-failures.log" ]] && NEM_FAILS=$(wc -l <"$WORK/nemesis-failures.log")
NEM_RETRIED=0
[[ -f "$WORK/nemesis-unarranged.log" ]] && NEM_RETRIED=$(wc -l <"$WORK/nemesis-unarranged.log")
if ((NEM_FAILS == 0)); then
  NEM_DETAIL="every fault proved it took effect and was healed"
  ((NEM_RETRIED == 0)) || NEM_DETAIL+=" ($NEM_RETRIED clock fault(s) run twice: their member could not be made to lead the first time; nemesis-unarranged.log)"
else
  NEM_DETAIL=$(head -n 3 "$WORK/nemesis-failures.log" | tr '\n' ';')
fi
check faults_took_effect_and_healed "NEM_FAILS == 0" "$NEM_DETAIL"
MISSING=""
for kind in "${NEM_KINDS[@]}" pause_worker forced_stale; do
  grep "^$kind " "$WORK/faults.log" | grep -qv unarranged || MISSING+=" $kind"
done
check every_fault_kind_injected "${#MISSING} == 0" "${MISSING:+missing:$MISSING}${MISSING:-all ${#NEM_KINDS[@]} member kinds, pause_worker and forced_stale}"
check cluster_grants_after_heal "FINAL_GRANT_MS >= 0" "first grant ${FINAL_GRANT_MS}ms after the heal"
((FINAL_GRANT_MS >= 0)) || VIOLATIONS=$((VIOLATIONS + 1))
LIVE=$(live_writes)
check writes_accepted_after_heal "LIVE_MS >= 0" \
  "$LIVE writes accepted after the heal ($LIVE_WRITES within ${LIVE_MS}ms; bound ${LIVE_S}s)"
((LIVE_MS >= 0)) || VIOLATIONS=$((VIOLATIONS + 1))
check workers_finished "LEFT == 0" "$LEFT of $NWORKERS workers still running 60s after SIGTERM"
for id in "${MEMBER_IDS[@]}"; do
  if e2e_wait_for 30 member_caught_up "$id" "$MAX_ACKED"; then
    check "member_${id}_applied_every_ack" 1 "applied_index $(member_applied "$id") >= max acknowledged token $MAX_ACKED"
  else
    check "member_${id}_applied_every_ack" 0 "applied_index $(member_applied "$id" || echo '?') < max acknowledged token $MAX_ACKED after 30s"
    VIOLATIONS=$((VIOLATIONS + 1))
  fi
done
FRESH=$(nem_ctl "$FENCECTL" --endpoints "$FENCE_ENDPOINTS" --timeout 10s acquire safety:final --lease 1s --wait 0s 2>/dev/null) || FRESH=0
[[ "$FRESH" =~ ^[0-9]+$ ]] || FRESH=0
check fresh_token_above_every_ack "FRESH > MAX_ACKED" \
  "fresh acquire got $FRESH > max acknowledged $MAX_ACKED"
((FRESH > MAX_ACKED)) || VIOLATIONS=$((VIOLATIONS + 1))
explain_stale_rejections "$WORK/explain" || log "could not list the stale rejections of the history"
# Every refused token up to the bound is explained, unless the time budget ran out first.
EXPLAIN_WANT=$((EXPLAIN_TOKENS < EXPLAIN_MAX ? EXPLAIN_TOKENS : EXPLAIN_MAX))
check stale_rejections_explained \
  "EXPLAIN_ERRORS == 0 && (EXPLAIN_DONE == EXPLAIN_WANT || (EXPLAIN_OUT_OF_TIME == 1 && EXPLAIN_DONE > 0))" \
  "fencectl explain answered for $EXPLAIN_DONE of $EXPLAIN_TOKENS refused tokens (want $EXPLAIN_WANT: at most $EXPLAIN_MAX$( ((EXPLAIN_OUT_OF_TIME == 1)) && echo ", the ${EXPLAIN_BUDGET_S} s budget ran out")), $EXPLAIN_ERRORS errors (see explained.txt)"

# --- Report ----------------------------------------------------------------------
FAULTS=$(grep -cv '^$' "$WORK/faults.log" || true)
OPS=${FIG[history_ops]:-0}
ACCEPTED=${FIG[writes_accepted]:-0}
col() { awk -v k="$1" -v c="$2" '$1 ~ k { print $c }' "$WORK/faults.log"; }
{
  echo
  log "summary (seed $SEED)"
  printf '  %-36s %s\n' "seed" "$SEED   (make faults FAULT_SEED=$SEED FAULT_SECONDS=$RUN_S)"
  printf '  %-36s %ss of faults, %ss in all\n' "duration" "$RUN_S" "$(((T_END - T_START) / 1000))"
  printf '  %-36s %s attempted, %s granted, %s held/timed out, %s unavailable\n' "acquires" \
    "${FIG[acquires_attempted]:-0}" "${FIG[acquires_granted]:-0}" "${FIG[acquires_held]:-0}" "${FIG[acquires_unavailable]:-0}"
  printf '  %-36s %s ok, %s failed\n' "keepalives" "${FIG[keepalives_ok]:-0}" "${FIG[keepalives_failed]:-0}"
  printf '  %-36s %s (guard %s, fenced_update %s, admit %s)\n' "writes accepted" "$ACCEPTED" \
    "$W_GUARD" "$W_FU" "$W_ADMIT"
  printf '  %-36s %s (%s); fence_stats: %s\n' "stale writes refused (55F01/stale)" "$STALE" \
    "${FIG[stale_rejections_by_path]:-none}" "$FS_STALE"
  printf '  %-36s %s sent (%s): %s refused with 55F02, %s stale, %s errors, %s accepted; fence_stats rejected_proof %s\n' \
    "forged and misdirected proofs" "$FORGED" "${FIG[forged_sent_by_kind]:-none}" "$FORGED_55F02" \
    "${FIG[forged_stale]:-0}" "${FIG[forged_errors]:-0}" "${FIG[forged_accepted]:-0}" "$FS_PROOF"
  printf '  %-36s %s errors, %s releases found the lease gone\n' "other write outcomes" \
    "${FIG[write_errors]:-0}" "${FIG[releases_not_held]:-0}"
  printf '  %-36s %s within rho (violations), %s beyond rho (the %sx clock: reported, not failed)\n' \
    "overlapping holders" "${FIG[lease_overlaps_within_rho]:-0}" "${FIG[lease_overlaps_beyond_rho]:-0}" "$NEM_FAR_RATE"
  printf '  %-36s %s\n' "faults injected" "$(awk '{ n[$1]++ } END { for (k in n) printf "%s=%d ", k, n[k] }' "$WORK/faults.log")total=$FAULTS"
  mapfile -t v < <(col '^kill_leader$' 8); stats "leader kill -> new leader" "${v[@]}"
  mapfile -t v < <(col '^kill_leader$' 6); stats "leader kill -> fencectl granted" "${v[@]}"
  mapfile -t v < <(col '^kill(_leader)?$' 7); stats "member restart -> answers" "${v[@]}"
  mapfile -t v < <(col '^kill_all$' 6); stats "all killed, restarted -> granted" "${v[@]}"
  mapfile -t v < <(col '^pause_leader$' 8); stats "leader SIGSTOP -> new leader" "${v[@]}"
  mapfile -t v < <(col '^(isolate|split|bridge|oneway|leader_clients|worker_cut)$' 7); stats "partition healed -> granted" "${v[@]}"
  mapfile -t v < <(col '^(clock_rate|clock_far|clock_jump)$' 7); stats "clock healed -> granted" "${v[@]}"
  mapfile -t v < <(col '^disk_' 7); stats "disk fault healed -> granted" "${v[@]}"
  stats "heal -> grant" "$FINAL_GRANT_MS"
  stats "heal -> $LIVE_WRITES writes accepted" "$LIVE_MS"
  printf '  %-36s %s\n' "max acknowledged token" "$MAX_ACKED"
  explain_report "$WORK/explain"
} | tee "$REPORT_DIR/summary.txt"
cp -r "$WORK/explain" "$REPORT_DIR/explain" 2>/dev/null || true
cp "$WORK/faults.log" "$WORK/checks.txt" "$REPORT_DIR/"
cp "$WORK/check.out" "$REPORT_DIR/check.out"
[[ -f "$WORK/nemesis-failures.log" ]] && cp "$WORK/nemesis-failures.log" "$REPORT_DIR/"
[[ -f "$WORK/nemesis-unarranged.log" ]] && cp "$WORK/nemesis-unarranged.log" "$REPORT_DIR/"
if bash "$HERE/timeline.sh" "$WORK" "$REPORT_DIR/timeline.png" "$SEED" >"$WORK/timeline.out" 2>&1; then
  check timeline_png_drawn 1 "$REPORT_DIR/timeline.png"
else
  check timeline_png_drawn 0 "timeline.sh failed: $(tail -n 3 "$WORK/timeline.out" | tr '\n' ' ')"
fi
echo "safety: $PASSED passed, $FAILED failed" | tee -a "$REPORT_DIR/summary.txt"
echo "faults: seed=$SEED seconds=$RUN_S ops=$OPS accepted=$ACCEPTED refused=$STALE faults=$FAULTS violations=$VIOLATIONS forged=$FORGED forged_accepted=${FIG[forged_accepted]:-0}" |
  tee -a "$REPORT_DIR/summary.txt"
echo "report: $REPORT_DIR"
((FAILED == 0))
