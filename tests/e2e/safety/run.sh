#!/usr/bin/env bash
# Safety under faults, end to end: a 3-member fence-coordinator cluster, a real
# PostgreSQL with pg_fence, several fence-worker processes looping over a few
# keys with 1 s leases through all three write paths (fence_guard trigger,
# fenced_update(), fence_admit over two tables), and a nemesis that kill -9s
# and restarts members (leader included, and now and then all three at once;
# the run always ends with such a power cut), SIGSTOPs members, and SIGSTOPs
# workers for longer than their lease so that they come back stale.
#
# When the nemesis stops, the cluster must recover and these must hold
# (check.sql has the queries):
#   - per key and fence, accepted tokens strictly increase in commit order;
#   - no lost update: counters equal the accepted increments;
#   - every acknowledged acquire got a token larger than every token
#     acknowledged before it was sent (all workers, all keys);
#   - the database accepted only tokens granted to that worker;
#   - every write path had accepted writes, and stale rejections happened
#     (the scenario was exercised; the checks above are not vacuous);
#   - every member restarted and answers; no acknowledged grant is missing:
#     each member applied at least up to the largest acknowledged token, and
#     a fresh acquire gets a larger token.
# Besides the random worker pauses, the seed scenario is forced once per
# write path (nem_forced_stale): those three workers must exit 3.
#
# usage: run.sh [--seconds N] [--seed S] [--workers W] [--keys K]
#   env: SAFETY_SECONDS (default 40: the CI run stays under 2 minutes),
#        SAFETY_SEED, SAFETY_WORKERS (6), SAFETY_KEYS (3), SAFETY_KEEP=1 keeps logs;
#        FENCE_WORKER_BIN, FENCECTL_BIN, FENCE_COORDINATOR_BIN, BUILD, E2E_BUILD_DIR
#        say where the binaries are (else they are searched under build*/).
# Ends with "safety: N passed, N failed"; exit status 0 only if every check passed.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
E2E_ROOT=$(cd "$HERE/../../.." && pwd)
export E2E_ROOT
source "$HERE/lib/common.sh"
source "$HERE/lib/pg.sh"
source "$HERE/lib/nemesis.sh"

RUN_S=${SAFETY_SECONDS:-40}
SEED=${SAFETY_SEED:-$(((RANDOM << 15 | RANDOM) % 1000000000))}
NWORKERS=${SAFETY_WORKERS:-6}
NKEYS=${SAFETY_KEYS:-3}
LEASE_MS=1000
LIVE_WRITES=20   # after the heal, the workers must get this many writes accepted...
LIVE_S=30        # ...within this many seconds; then they are told to stop (SIGTERM)
while (($# > 0)); do
  case $1 in
    --seconds) RUN_S=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --workers) NWORKERS=$2; shift 2 ;;
    --keys) NKEYS=$2; shift 2 ;;
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
RANDOM=$SEED

log() { echo "[$(e2e_now)] safety: $*"; }
die() { log "ERROR: $*" >&2; exit 1; }

WORKER=$(e2e_find_bin fence-worker FENCE_WORKER_BIN) || die "fence-worker is not built"
FENCECTL=$(e2e_find_bin fencectl FENCECTL_BIN) || die "fencectl is not built"
COORD=$(e2e_find_bin fence-coordinator FENCE_COORDINATOR_BIN) || die "fence-coordinator is not built"
export FENCE_COORDINATOR_BIN=$COORD FENCECTL_BIN=$FENCECTL FENCE_WORKER_BIN=$WORKER
[[ -f "${FENCE_CLUSTER_SH:-$E2E_ROOT/scripts/cluster.sh}" ]] || die "scripts/cluster.sh is missing"

WORK=$(mktemp -d /tmp/pgfence-safety.XXXXXX)
CLUSTER_DIR=$WORK/cluster
WORKER_PIDS=()
MEMBER_IDS=()
declare -A ENDPOINT_OF=()
PASSED=0
FAILED=0

cleanup() {
  local rc=$? pid i
  trap "" INT TERM   # a second Ctrl-C must not cut the cleanup short
  trap - EXIT
  set +e   # cleanup goes on whatever fails
  [[ -n "$NEM_WORKER_LOOP_PID" ]] && kill -KILL "$NEM_WORKER_LOOP_PID" 2>/dev/null
  for pid in "${WORKER_PIDS[@]}" $(cat "$WORK/forced.pids" 2>/dev/null); do
    kill -CONT "$pid" 2>/dev/null
    kill -TERM "$pid" 2>/dev/null
  done
  for ((i = 0; i < 50; i++)); do
    jobs -pr | grep -q . || break
    sleep 0.1
  done
  for pid in "${WORKER_PIDS[@]}" $(cat "$WORK/forced.pids" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
  for pid in $(cat "$CLUSTER_DIR"/*.pid 2>/dev/null); do kill -CONT "$pid" 2>/dev/null; done
  bash "${FENCE_CLUSTER_SH:-$E2E_ROOT/scripts/cluster.sh}" stop "$CLUSTER_DIR" >/dev/null 2>&1 || true
  pg_throwaway_stop "$WORK"
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
    printf '  PASS  %-40s %s\n' "$1" "$3"
  else
    FAILED=$((FAILED + 1))
    printf '  FAIL  %-40s %s\n' "$1" "$3"
  fi
}

# map_endpoints: ENDPOINT_OF[id] from each endpoint's own status answer.
map_endpoints() {
  local ep json id
  for ep in ${FENCE_ENDPOINTS//,/ }; do
    e2e_wait_for 30 e2e_status_json "$ep" || die "member at $ep does not answer /v1/status"
    json=$(e2e_status_json "$ep")
    id=$(e2e_json_field "${json%%\"members\"*}" id) || die "no id in $ep's status: $json"
    ENDPOINT_OF[$id]=$ep
  done
  mapfile -t MEMBER_IDS < <(e2e_member_ids "$CLUSTER_DIR")
  for id in "${MEMBER_IDS[@]}"; do
    [[ -n "${ENDPOINT_OF[$id]:-}" ]] || die "member $id (pid file) has no endpoint in $FENCE_ENDPOINTS"
  done
}

start_workers() {
  local i keys="" k
  for ((k = 1; k <= NKEYS; k++)); do keys+="${keys:+,}safety:k$k"; done
  for ((i = 0; i < NWORKERS; i++)); do
    # --work 50/250/450 ms: the 450 ms workers outlive lease/3 and send keepalives.
    "$WORKER" --key "$keys" --mode mixed --lease 1s --wait 2s --work "$(((i % 3) * 200 + 50))ms" \
      --iterations 10000000 --duration "$((RUN_S + 300))s" --keep-going \
      --no-lease-check --worker-id "w$i" --log "$WORK/w$i.csv" --seed "$((SEED * 64 + i + 1))" \
      --quiet >"$WORK/w$i.out" 2>&1 &
    WORKER_PIDS+=($!)
  done
}

# wait_workers BOUND_S: waits for every worker to exit; echoes how many did not.
wait_workers() {
  local deadline=$(($(e2e_ms) + $1 * 1000)) pid left=0
  for pid in "${WORKER_PIDS[@]}"; do
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
  json=$(e2e_status_json "${ENDPOINT_OF[$1]}") || return 1
  e2e_json_field "${json%%\"members\"*}" applied_index
}
member_caught_up() { local a; a=$(member_applied "$1") && ((a >= $2)); }

log "seed $SEED (reproduce the fault sequence with SAFETY_SEED=$SEED), ${RUN_S}s of faults," \
    "$NWORKERS workers, $NKEYS keys, lease ${LEASE_MS}ms; logs in $WORK"
pg_throwaway_start "$WORK" || die "PostgreSQL did not start"
"$WORKER" --setup >"$WORK/setup.out" 2>&1 || die "fence-worker --setup failed: $(cat "$WORK/setup.out")"
mkdir -p "$CLUSTER_DIR"
e2e_cluster_start "$CLUSTER_DIR" 3 || die "the cluster did not start"
map_endpoints
e2e_wait_for 30 nem_probe || die "the cluster granted nothing within 30s of starting"
log "PostgreSQL on 127.0.0.1:$PGPORT; cluster $FENCE_ENDPOINTS (members ${MEMBER_IDS[*]})"

start_workers
log "workers started; nemesis for ${RUN_S}s"
T_START=$(e2e_ms)
nem_run "$RUN_S"
T_HEAL=$(e2e_ms)
HEAL_EPOCH=$(date +%s.%N)
log "nemesis stopped; healing (SIGCONT everything, restart what is down)"
nem_heal
FINAL_GRANT_MS=$(nem_time_to_grant "$T_HEAL") || FINAL_GRANT_MS=-1
log "cluster granted again ${FINAL_GRANT_MS}ms after the heal; waiting for $LIVE_WRITES accepted writes"
live_writes() {
  psql -X -At -c "SELECT count(*) FROM worker_audit WHERE committed_at > to_timestamp($HEAL_EPOCH)"
}
live_enough() { (($(live_writes) >= LIVE_WRITES)); }
LIVE_MS=-1
e2e_wait_for "$LIVE_S" live_enough && LIVE_MS=$(($(e2e_ms) - T_HEAL))
for pid in "${WORKER_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
LEFT=$(wait_workers 60)
T_END=$(e2e_ms)

# Load the workers' logs next to the audit table.
cat "$WORK"/w*.csv >"$WORK/events.csv" 2>/dev/null || true
psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<SQL || die "loading the worker logs failed"
CREATE TABLE e2e_events (worker text, event text, key text, token bigint, send_ns bigint,
                         ack_ns bigint, path text, outcome text, value bigint);
\copy e2e_events FROM '$WORK/events.csv' WITH (FORMAT csv)
SQL
psql -X -f "$HERE/check.sql" >"$WORK/check.out" 2>&1 || die "check.sql failed: $(cat "$WORK/check.out")"
declare -A FIG=()
while IFS='|' read -r kind name a _; do
  [[ "$kind" == figure ]] && FIG[$name]=$a
done <"$WORK/check.out"
MAX_ACKED=${FIG[max_acknowledged_token]:-0}

echo
log "checks"
NSQL=0
while IFS='|' read -r kind name violations example; do
  [[ "$kind" == check ]] || continue
  NSQL=$((NSQL + 1))
  if [[ "$violations" == 0 ]]; then check "$name" 1 "0 violations"; else
    check "$name" 0 "$violations violations, e.g. $example"; fi
done <"$WORK/check.out"
check check_sql_ran_every_check "NSQL == 7" "$NSQL of the 7 checks of check.sql reported"
# The per-key checks above are only as good as the writes behind them.
W_GUARD=${FIG[writes_accepted_guard]:-0} W_FU=${FIG[writes_accepted_fenced_update]:-0}
W_ADMIT=${FIG[writes_accepted_admit]:-0}
check every_write_path_accepted_writes "W_GUARD > 0 && W_FU > 0 && W_ADMIT > 0" \
  "accepted: guard $W_GUARD, fenced_update $W_FU, admit $W_ADMIT"
STALE=${FIG[stale_rejections]:-0}
FS_STALE=${FIG[fence_stats_rejected_stale]:-0}
check stale_rejections_happened "STALE > 0" \
  "${FIG[stale_rejections]:-0} stale writes refused (${FIG[stale_rejections_by_path]:-none}); fence_stats counted ${FIG[fence_stats_rejected_stale]:-0}"
FORCED_OK=0
[[ -f "$WORK/forced-stale.log" ]] && FORCED_OK=$(awk '$2 != "-" && $3 == 3' "$WORK/forced-stale.log" | wc -l)
check stale_worker_stopped_on_every_path "FORCED_OK == 3" \
  "$FORCED_OK of 3 forced stale writers (guard, fenced_update, admit) were refused and exited 3: $(tr '\n' ';' <"$WORK/forced-stale.log" 2>/dev/null)"
check fence_stats_counted_every_rejection "FS_STALE >= STALE" "fence_stats $FS_STALE >= workers' $STALE"
NEM_FAILS=0
[[ -f "$WORK/nemesis-failures.log" ]] && NEM_FAILS=$(wc -l <"$WORK/nemesis-failures.log")
if ((NEM_FAILS == 0)); then
  NEM_DETAIL="every restarted member answered within ${NEM_RECOVERY_S}s"
else
  NEM_DETAIL=$(head -n 3 "$WORK/nemesis-failures.log" | tr '\n' ';')
fi
check members_restarted_and_recovered "NEM_FAILS == 0" "$NEM_DETAIL"
check cluster_grants_after_heal "FINAL_GRANT_MS >= 0" "first grant ${FINAL_GRANT_MS}ms after the heal"
LIVE=$(live_writes)
check writes_accepted_after_heal "LIVE_MS >= 0" \
  "$LIVE writes accepted after the heal ($LIVE_WRITES within ${LIVE_MS}ms; bound ${LIVE_S}s)"
check workers_finished "LEFT == 0" "$LEFT of $NWORKERS workers still running 60s after SIGTERM"
for id in "${MEMBER_IDS[@]}"; do
  if e2e_wait_for 30 member_caught_up "$id" "$MAX_ACKED"; then
    check "member_${id}_applied_every_ack" 1 "applied_index $(member_applied "$id") >= max acknowledged token $MAX_ACKED"
  else
    check "member_${id}_applied_every_ack" 0 "applied_index $(member_applied "$id" || echo '?') < max acknowledged token $MAX_ACKED after 30s"
  fi
done
FRESH=$("$FENCECTL" --timeout 10s acquire safety:final --lease 1s --wait 0s 2>/dev/null) || FRESH=0
[[ "$FRESH" =~ ^[0-9]+$ ]] || FRESH=0
check fresh_token_above_every_ack "FRESH > MAX_ACKED" \
  "fresh acquire got $FRESH > max acknowledged $MAX_ACKED"

# --- Summary -------------------------------------------------------------------
touch "$WORK/faults.log"
col() { awk -v k="$1" -v c="$2" '$1 ~ k { print $c }' "$WORK/faults.log"; }
echo
log "summary (seed $SEED)"
printf '  %-36s %s\n' "seed" "$SEED   (SAFETY_SEED=$SEED SAFETY_SECONDS=$RUN_S bash tests/e2e/safety/run.sh)"
printf '  %-36s %ss of faults, %ss in all\n' "duration" "$RUN_S" "$(((T_END - T_START) / 1000))"
printf '  %-36s %s attempted, %s granted, %s held/timed out, %s unavailable\n' "acquires" \
  "${FIG[acquires_attempted]:-0}" "${FIG[acquires_granted]:-0}" "${FIG[acquires_held]:-0}" "${FIG[acquires_unavailable]:-0}"
printf '  %-36s %s (guard %s, fenced_update %s, admit %s)\n' "writes accepted" "${FIG[writes_accepted]:-0}" \
  "${FIG[writes_accepted_guard]:-0}" "${FIG[writes_accepted_fenced_update]:-0}" "${FIG[writes_accepted_admit]:-0}"
printf '  %-36s %s (%s); fence_stats: %s\n' "stale writes refused (55F01/stale)" "${FIG[stale_rejections]:-0}" \
  "${FIG[stale_rejections_by_path]:-none}" "${FIG[fence_stats_rejected_stale]:-0}"
printf '  %-36s %s errors, %s releases found the lease gone\n' "other write outcomes" \
  "${FIG[write_errors]:-0}" "${FIG[releases_not_held]:-0}"
printf '  %-36s %s\n' "keepalives sent by workers" \
  "$(cat "$WORK"/w[0-9]*.out 2>/dev/null | awk '/ keepalives$/ { n += $(NF - 1) } END { print n + 0 }')"
printf '  %-36s %s\n' "faults injected" "$(awk '{ n[$1]++ } END { for (k in n) printf "%s=%d ", k, n[k] }' "$WORK/faults.log")total=$(wc -l <"$WORK/faults.log")"
mapfile -t v < <(col '^kill_leader$' 6); stats "leader kill -> new leader" "${v[@]}"
mapfile -t v < <(col '^kill_leader$' 4); stats "leader kill -> fencectl granted" "${v[@]}"
mapfile -t v < <(col '^kill(_leader)?$' 5); stats "member restart -> answers" "${v[@]}"
mapfile -t v < <(col '^kill_all$' 4); stats "all killed, restarted -> granted" "${v[@]}"
mapfile -t v < <(col '^kill_all$' 5); stats "all killed, restarted -> all answer" "${v[@]}"
mapfile -t v < <(col '^pause_leader$' 6); stats "leader SIGSTOP -> new leader" "${v[@]}"
mapfile -t v < <(col '^pause_leader$' 4); stats "leader SIGSTOP -> fencectl granted" "${v[@]}"
mapfile -t v < <(col '^pause_(member|leader)$' 5); stats "member SIGCONT -> grant" "${v[@]}"
stats "heal -> grant" "$FINAL_GRANT_MS"
stats "heal -> $LIVE_WRITES writes accepted" "$LIVE_MS"
printf '  %-36s %s\n' "max acknowledged token" "$MAX_ACKED"
echo "safety: $PASSED passed, $FAILED failed"
((FAILED == 0))
