# shellcheck shell=bash
# The nemesis of tests/e2e/safety/run.sh (sourced; runs in run.sh's shell).
#
# Needs from the caller: WORK, CLUSTER_DIR, E2E_ROOT, FENCECTL, FENCE_WORKER_BIN, LEASE_MS,
# MEMBER_IDS (array), ENDPOINT_OF (assoc. array id -> host:port),
# WORKER_PIDS (array), RANDOM seeded with the run's seed.
#
# One coordinator fault at a time (workers are paused by a second, parallel
# loop), then heal, then measure how long the cluster took to
# grant again. Every fault appends a line to $WORK/faults.log:
#   <kind> <target> <down_ms> <grant_ms> <back_ms> [<elect_ms>]
# kill/kill_leader: elect_ms = kill of the leader until another member said it
#   is leader; grant_ms = kill until a fresh `fencectl acquire` (a new process,
#   with the client's retry backoff) was granted; back_ms = restart until the
#   member answered /v1/status naming a leader.
# pause_member/pause_leader: elect_ms/grant_ms = SIGSTOP of the leader until
#   another member said it is leader / granted a probe that did not ask the
#   stopped one (if within the pause); back_ms = SIGCONT until a grant.
# "-" where it does not apply.
# A member that does not come back within NEM_RECOVERY_S appends to
# $WORK/nemesis-failures.log (the run then fails).

NEM_RECOVERY_S=${NEM_RECOVERY_S:-30}

nem_rand() { echo $(($1 + RANDOM % ($2 - $1 + 1))); }   # nem_rand MIN MAX
nem_sleep_ms() { sleep "$(printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)))"; }
nem_fail() { echo "[$(e2e_now)] $*" | tee -a "$WORK/nemesis-failures.log" >&2; }
nem_record() { echo "$*" >>"$WORK/faults.log"; }

# nem_role ID: role the member reports about itself ("" if it does not answer).
nem_role() {
  local json
  json=$(e2e_status_json "${ENDPOINT_OF[$1]}") || return 1
  e2e_json_field "${json%%\"members\"*}" role
}

nem_leader_id() {
  local id
  for id in "${MEMBER_IDS[@]}"; do
    [[ "$(nem_role "$id" 2>/dev/null)" == leader ]] && { echo "$id"; return 0; }
  done
  return 1
}

# nem_probe [SKIP_ID]: one acquire + release on a probe key; success = the
# cluster grants. SKIP_ID (a stopped member) is left out of the endpoints: a
# SIGSTOPped member accepts connections but never answers, and the client
# would spend its whole per-attempt timeout on it (see FINDINGS.md).
nem_probe() {
  local token eps="" id
  for id in "${MEMBER_IDS[@]}"; do
    [[ "$id" == "${1:-}" ]] || eps+="${eps:+,}${ENDPOINT_OF[$id]}"
  done
  token=$("$FENCECTL" --endpoints "$eps" --timeout 2s acquire nemesis:probe --lease 1s --wait 0s 2>/dev/null) || return 1
  "$FENCECTL" --endpoints "$eps" --timeout 2s release nemesis:probe "$token" >/dev/null 2>&1 || true
}

# nem_time_to_grant START_MS: ms from START_MS until a probe acquire succeeds.
nem_time_to_grant() {
  e2e_wait_for "$NEM_RECOVERY_S" nem_probe || return 1
  echo $(($(e2e_ms) - $1))
}

# nem_member_answers ID: the member answers /v1/status and knows a leader.
nem_member_answers() {
  local json leader
  json=$(e2e_status_json "${ENDPOINT_OF[$1]}") || return 1
  leader=$(e2e_json_field "${json%%\"members\"*}" leader) || return 1
  [[ -n "$leader" && "$leader" != 0 ]]
}

# nem_restart ID: restarts a killed member; echoes ms until it answers with a leader.
nem_restart() {
  local id=$1 t0
  t0=$(e2e_ms)
  if ! bash "${FENCE_CLUSTER_SH:-$E2E_ROOT/scripts/cluster.sh}" restart "$CLUSTER_DIR" "$id" >>"$WORK/cluster-restarts.log" 2>&1; then
    nem_fail "member $id: scripts/cluster.sh restart failed (see cluster-restarts.log)"
    return 1
  fi
  if ! e2e_wait_for "$NEM_RECOVERY_S" nem_member_answers "$id"; then
    nem_fail "member $id did not answer with a known leader within ${NEM_RECOVERY_S}s of its restart"
    return 1
  fi
  echo $(($(e2e_ms) - t0))
}

# nem_dead PID: the process is gone or a zombie.
nem_dead() {
  local state
  state=$(e2e_proc_state "$1") || return 0
  [[ -z "$state" || "$state" == Z ]]
}

# nem_reaped PID: no such process any more (not even a zombie).
nem_reaped() { ! kill -0 "$1" 2>/dev/null; }

# nem_kill ID KIND: kill -9, stay down a while, restart; KIND is kill or kill_leader.
nem_kill() {
  local id=$1 kind=$2 pid t0 down grant back elect
  pid=$(e2e_member_pid "$CLUSTER_DIR" "$id")
  [[ -n "$pid" ]] || { nem_fail "member $id has no pid file"; return 1; }
  t0=$(e2e_ms)
  kill -KILL "$pid" 2>/dev/null || true
  grant=- elect=-
  if [[ "$kind" == kill_leader ]]; then
    elect=$(nem_new_leader_ms "$t0" "$id") || { nem_fail "no new leader within ${NEM_RECOVERY_S}s after killing leader $id"; elect=-1; }
    grant=$(nem_time_to_grant "$t0") || { nem_fail "no grant within ${NEM_RECOVERY_S}s after killing leader $id"; grant=-1; }
  fi
  # Timing above does not wait for the pid to vanish (a zombie is dead, and
  # this machine's pid 1 may take seconds to reap it); the restart below does,
  # so that back_ms measures the restart only.
  e2e_wait_for 10 nem_reaped "$pid" || nem_fail "member $id (pid $pid) still exists 10s after kill -9"
  nem_sleep_ms "$(nem_rand 200 1500)"
  down=$(($(e2e_ms) - t0))
  back=$(nem_restart "$id") || back=-1
  nem_record "$kind member-$id $down $grant $back $elect"
}

# nem_new_leader_ms START_MS OLD_ID [LIMIT_MS]: ms from START_MS until another
# member reports itself leader (polled every 20 ms, bounded by LIMIT_MS,
# default NEM_RECOVERY_S).
nem_new_leader_ms() {
  local id deadline=$(($1 + ${3:-$((NEM_RECOVERY_S * 1000))}))
  while (($(e2e_ms) < deadline)); do
    for id in "${MEMBER_IDS[@]}"; do
      [[ "$id" != "$2" && "$(nem_role "$id" 2>/dev/null)" == leader ]] && { echo $(($(e2e_ms) - $1)); return 0; }
    done
    sleep 0.02
  done
  return 1
}

# nem_grant_within START_MS LIMIT_MS SKIP_ID: ms from START_MS until a probe
# acquire (not asking SKIP_ID) succeeds, trying for at most LIMIT_MS (one
# probe may overrun it by 2 s).
nem_grant_within() {
  while (($(e2e_ms) < $1 + $2)); do
    if nem_probe "$3"; then
      echo $(($(e2e_ms) - $1))
      return 0
    fi
    sleep 0.05
  done
  return 1
}

# nem_pause_member ID KIND: SIGSTOP for 0.5-3 s (the leader: 1.5-4 s), SIGCONT.
# For the leader: elect_ms = until another member said it is leader, grant_ms =
# until the others granted ("-" if not within the pause). back_ms: SIGCONT
# until a grant asking every member.
nem_pause_member() {
  local id=$1 kind=$2 pid down t0 t1 grant=- back elect=-
  pid=$(e2e_member_pid "$CLUSTER_DIR" "$id")
  [[ -n "$pid" ]] || { nem_fail "member $id has no pid file"; return 1; }
  if [[ "$kind" == pause_leader ]]; then down=$(nem_rand 1500 4000); else down=$(nem_rand 500 3000); fi
  t0=$(e2e_ms)
  kill -STOP "$pid" 2>/dev/null || return 0
  if [[ "$kind" == pause_leader ]]; then
    elect=$(nem_new_leader_ms "$t0" "$id" "$down") || elect=-
    grant=$(nem_grant_within "$t0" "$down" "$id") || grant=-
  fi
  t1=$(e2e_ms)
  ((t1 - t0 < down)) && nem_sleep_ms $((down - (t1 - t0)))
  kill -CONT "$pid" 2>/dev/null || true
  down=$(($(e2e_ms) - t0))
  t1=$(e2e_ms)
  back=$(nem_time_to_grant "$t1") || { nem_fail "no grant within ${NEM_RECOVERY_S}s after SIGCONT of member $id"; back=-1; }
  nem_record "$kind member-$id $down $grant $back $elect"
}

# nem_pause_worker: SIGSTOP a worker for 1.5-3 leases, so it comes back stale.
nem_pause_worker() {
  local i pid down
  i=$((RANDOM % ${#WORKER_PIDS[@]}))
  pid=${WORKER_PIDS[$i]}
  kill -0 "$pid" 2>/dev/null || return 0
  down=$(nem_rand $((LEASE_MS * 3 / 2)) $((LEASE_MS * 3)))
  kill -STOP "$pid" 2>/dev/null || return 0
  nem_sleep_ms "$down"
  kill -CONT "$pid" 2>/dev/null || true
  nem_record "pause_worker worker-$i $down - -"
}

# nem_forced_stale PATH: the seed scenario, made certain, once per write path.
# A fence-worker acquires safety:k1 and is SIGSTOPped before it writes; we wait
# until another worker's newer token is committed on the same fence, then
# SIGCONT it: its write must be refused (exit 3). The random worker pauses may
# or may not land between an acquire and its write; this one always does.
# Appends "PATH TOKEN EXIT_STATUS" (or "PATH - why it could not run") to
# $WORK/forced-stale.log.
nem_forced_stale() {
  local path=$1 attempt pid
  for ((attempt = 1; attempt <= 3; attempt++)); do
    nem_forced_start "$path" "$attempt"
    pid=$FORCED_PID
    # Acquired (then frozen here), or the worker gave up (held/unavailable): retry.
    if e2e_wait_for 40 nem_forced_acquired "$path" "$attempt" "$pid"; then
      if grep -q ',acquire,.*,ok,' "$WORK/wforced-$path-$attempt.csv"; then
        nem_forced_finish "$path" "$attempt" "$pid"
        return 0
      fi
    fi
    kill -TERM "$pid" 2>/dev/null || true
  done
  echo "$path - its worker acquired nothing in 3 attempts" >>"$WORK/forced-stale.log"
}

# nem_forced_start PATH ATTEMPT: starts the worker (a child of this shell, so
# that `wait` gets its exit status); sets FORCED_PID.
nem_forced_start() {
  "$FENCE_WORKER_BIN" --key safety:k1 --mode "$1" --lease 1s --wait 10s --work 5s \
    --no-lease-check --worker-id "forced-$1" --log "$WORK/wforced-$1-$2.csv" --quiet \
    >"$WORK/wforced-$1-$2.out" 2>&1 &
  FORCED_PID=$!
  echo "$FORCED_PID" >>"$WORK/forced.pids"
}

# nem_forced_acquired PATH ATTEMPT PID: true (and PID frozen) once the worker
# logged its acquire, or true once it exited without one.
nem_forced_acquired() {
  if grep -q ',acquire,.*,ok,' "$WORK/wforced-$1-$2.csv" 2>/dev/null; then
    kill -STOP "$3" 2>/dev/null || true
    return 0
  fi
  ! kill -0 "$3" 2>/dev/null
}

# nem_forced_finish PATH ATTEMPT PID: waits for a newer write, wakes the worker.
nem_forced_finish() {
  local path=$1 pid=$3 token t0 fence=row rc=0
  [[ "$path" == admit ]] && fence=resource
  t0=$(e2e_ms)
  token=$(grep ',acquire,' "$WORK/wforced-$path-$2.csv" | head -n 1 | cut -d, -f4)
  nem_newer_written() {
    (($(psql -X -At -c "SELECT coalesce(max(token), 0) FROM worker_audit
                         WHERE key = 'safety:k1' AND fence = '$fence'") > token))
  }
  e2e_wait_for 60 nem_newer_written ||
    echo "$path - no newer write on safety:k1 within 60s" >>"$WORK/forced-stale.log"
  kill -CONT "$pid" 2>/dev/null || true
  e2e_wait_for 30 nem_dead "$pid" || kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" || rc=$?
  nem_record "forced_stale worker-forced-$path $(($(e2e_ms) - t0)) - -"
  echo "$path $token $rc" >>"$WORK/forced-stale.log"
}

# nem_kill_all: kill -9 of every member at once (a power cut), then restart
# all: acknowledged grants must survive on disk. grant_ms = first restart until
# the cluster granted; back_ms = until every member answered naming a leader.
nem_kill_all() {
  local id pid t0 t1 grant back=0 b
  t0=$(e2e_ms)
  for id in "${MEMBER_IDS[@]}"; do
    pid=$(e2e_member_pid "$CLUSTER_DIR" "$id")
    # (|| true: under run.sh's set -e, a member already gone must not end the run)
    [[ -n "$pid" ]] && kill -KILL "$pid" 2>/dev/null || true
  done
  for id in "${MEMBER_IDS[@]}"; do
    e2e_wait_for 10 nem_reaped "$(e2e_member_pid "$CLUSTER_DIR" "$id")" ||
      nem_fail "member $id still exists 10s after kill -9"
  done
  nem_sleep_ms "$(nem_rand 200 1000)"
  t1=$(e2e_ms)
  for id in "${MEMBER_IDS[@]}"; do
    bash "${FENCE_CLUSTER_SH:-$E2E_ROOT/scripts/cluster.sh}" restart "$CLUSTER_DIR" "$id" \
      >>"$WORK/cluster-restarts.log" 2>&1 || nem_fail "member $id: scripts/cluster.sh restart failed"
  done
  grant=$(nem_time_to_grant "$t1") || { nem_fail "no grant within ${NEM_RECOVERY_S}s after restarting every member"; grant=-1; }
  for id in "${MEMBER_IDS[@]}"; do
    if e2e_wait_for "$NEM_RECOVERY_S" nem_member_answers "$id"; then
      b=$(($(e2e_ms) - t1))
      ((b > back)) && back=$b
    else
      nem_fail "member $id did not answer with a known leader within ${NEM_RECOVERY_S}s of the restart of all"
      back=-1
    fi
  done
  nem_record "kill_all cluster $((t1 - t0)) $grant $back"
}

# nem_member_fault: picks and injects one coordinator fault.
nem_member_fault() {
  local pick id leader
  pick=$((RANDOM % 7))
  id=${MEMBER_IDS[$((RANDOM % ${#MEMBER_IDS[@]}))]}
  if ((pick < 2)); then
    nem_kill "$id" kill
  elif ((pick < 4)); then
    # No member says it is leader (an election is under way): an ordinary kill.
    if leader=$(nem_leader_id); then nem_kill "$leader" kill_leader; else nem_kill "$id" kill; fi
  elif ((pick < 5)); then
    nem_pause_member "$id" pause_member
  elif ((pick < 6)); then
    if leader=$(nem_leader_id); then nem_pause_member "$leader" pause_leader; else nem_pause_member "$id" pause_member; fi
  else
    nem_kill_all
  fi
}

# nem_loop SECONDS FAULT: FAULT with random gaps until SECONDS have passed.
nem_loop() {
  local end=$(($(e2e_ms) + $1 * 1000)) n=0
  while (($(e2e_ms) < end && n < 10000)); do
    nem_sleep_ms "$(nem_rand 200 1200)"
    (($(e2e_ms) < end)) || break
    "$2"
    n=$((n + 1))
  done
}

# nem_run SECONDS: two nemeses at once until SECONDS have passed: one for the
# coordinator members (in this shell), one that pauses workers (a subshell
# with its own seed derived from RANDOM, so a run's seed fixes both sequences).
NEM_WORKER_LOOP_PID=""   # the worker nemesis subshell; the caller's cleanup kills it
nem_run() {
  local worker_seed=$RANDOM start_ms
  start_ms=$(e2e_ms)
  (
    RANDOM=$worker_seed
    nem_forced_stale guard
    nem_forced_stale fenced_update
    nem_forced_stale admit
    nem_loop $(($1 - ($(e2e_ms) - start_ms) / 1000)) nem_pause_worker
  ) &
  NEM_WORKER_LOOP_PID=$!
  nem_loop "$1" nem_member_fault_verbose
  wait "$NEM_WORKER_LOOP_PID" || true
  NEM_WORKER_LOOP_PID=""
  # Always end with a power cut of the whole cluster: the final checks then
  # also cover every acknowledged grant surviving a restart of all members.
  nem_kill_all
  echo "[$(e2e_now)] nemesis: $(tail -n 1 "$WORK/faults.log")"
}

nem_member_fault_verbose() {
  nem_member_fault || true   # a fault that could not run was recorded by nem_fail
  echo "[$(e2e_now)] nemesis: $(grep -v '^pause_worker' "$WORK/faults.log" | tail -n 1)"
}

# nem_heal: every member running and not stopped, every worker running.
nem_heal() {
  local id pid i
  for id in "${MEMBER_IDS[@]}"; do
    pid=$(e2e_member_pid "$CLUSTER_DIR" "$id")
    [[ -n "$pid" ]] && kill -CONT "$pid" 2>/dev/null || true   # a dead one is restarted below
    if [[ -z "$pid" ]] || ! kill -0 "$pid" 2>/dev/null; then
      nem_restart "$id" >/dev/null || true
    fi
  done
  for i in "${!WORKER_PIDS[@]}"; do kill -CONT "${WORKER_PIDS[$i]}" 2>/dev/null || true; done
}
