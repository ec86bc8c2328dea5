# shellcheck shell=bash
# The nemesis of tests/e2e/safety/run.sh (sourced; runs in run.sh's shell).
#
# Needs from the caller: WORK, CLUSTER_DIR, NMEMBERS, MEMBER_IDS (1..N), NWORKERS,
# WORKER_PIDS, LEASE_MS, FENCECTL, FENCE_WORKER_BIN, WORKER_ENV (array: the env of
# a worker), RANDOM seeded with the run's seed; lib/netns.sh and lib/members.sh.
#
# The schedule is drawn from the seed before anything runs (nem_plan): the same
# seed gives the same schedule, whatever the cluster does. Each cycle of it is a
# shuffle of every member fault kind, so every kind runs once per cycle; the
# nemesis never stops before the first cycle is done. Faults run one at a time
# (worker pauses come from a second loop with a schedule of its own), each one
# healed before the next:
#   kill, kill_leader, kill_all    kill -9 (one member, the leader, all: a power cut), restart
#   pause_member, pause_leader     SIGSTOP for 0.5-4 s, SIGCONT
#   isolate                        one member cut from every other host
#   split                          one member and half the workers | the rest
#   bridge                         two members cut from each other, the third sees both
#   oneway                         packets from one member (the leader, half the time) to another dropped
#   leader_clients                 the leader cut from every worker, not from its peers
#   worker_cut                     a worker cut from the cluster, not from PostgreSQL
#   clock_rate                     a member whose clocks run 0.96-0.97 or 1.03-1.04 x real time, made leader
#   clock_far                      a member whose clocks run 4 x real time, made leader (beyond rho)
#   clock_jump                     a member's wall clock jumps by 1-23 hours, monotonic time untouched; it leads meanwhile
#   disk_eio                       fdatasync fails with EIO on one member (libfiu)
#   disk_enospc                    pwrite fails with ENOSPC on one member (libfiu)
#   pause_worker                   (second loop) SIGSTOP of a worker for 1.5-3 leases
#   forced_stale                   (second loop, first) the seed's scenario once per write path
#
# Every fault proves that it took effect, and a fault that did not fails the run
# (a line in $WORK/nemesis-failures.log). A clock fault first needs its member to
# lead: when the harness cannot arrange that (no hand-over lands on it within
# NEM_LEADER_S, or it does not stay leader for the 3 s its rate is measured in,
# as under heavy load), the attempt is healed, written to
# $WORK/nemesis-unarranged.log and run again once at once; a second attempt that
# cannot be arranged fails the run. Both attempts are in faults.log (the first
# with proof "unarranged": its clock ran, so its window counts as the fault's,
# but it does not count as the kind injected). A cut's probe across it fails while it
# is cut and succeeds after the heal (and a path it must not cut still works); a
# clock's rate is measured from the leader's ttl_ms against real time; a wall
# jump is seen in the member's log timestamps; a disk fault ends the member with
# exit status 74 (storage_write_failed) or 1 (storage_open_failed, when it hit
# while the storage was being opened); a kill leaves no process.
#
# $WORK/faults.log, one line per fault:
#   kind target start_ms end_ms down_ms grant_ms back_ms elect_ms proof...
# start/end: wall-clock ms (e2e_ms) of the fault's start and heal; down_ms: how
# long it lasted; grant_ms: fault start -> a probe granted by the rest (leader
# kill/pause); back_ms: heal -> the cluster granted again; elect_ms: fault start
# -> another member said it is leader. "-" where it does not apply.

NEM_RECOVERY_S=${NEM_RECOVERY_S:-30}
NEM_LEADER_S=${NEM_LEADER_S:-$NEM_RECOVERY_S}  # nem_make_leader's bound
NEM_KINDS=(kill kill_leader kill_all pause_member pause_leader isolate split bridge oneway
           leader_clients worker_cut clock_rate clock_far clock_jump disk_eio disk_enospc)
NEM_FAR_RATE=4                      # beyond rho: clock_far
NEM_NEAR_RATES=(0.96 0.97 1.03 1.04)  # within rho (5%): clock_rate

# nem_rand MIN MAX: NEM_R = a number in MIN..MAX. Never call it (or read RANDOM)
# inside $(...): bash reseeds RANDOM in every subshell, and the draw would
# neither come from the seed nor advance the sequence.
nem_rand() { NEM_R=$(($1 + RANDOM % ($2 - $1 + 1))); }
nem_sleep_ms() { sleep "$(printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)))"; }
nem_fail() { echo "[$(e2e_now)] $*" | tee -a "$WORK/nemesis-failures.log" >&2; }
# nem_unarranged MESSAGE: a fault's precondition could not be arranged (see the
# header): a failure on the second attempt (NEM_RETRYING=1), else noted for nem_run
# to run the fault again (NEM_UNARRANGED=1).
NEM_RETRYING=0 NEM_UNARRANGED=0
nem_unarranged() {
  if ((NEM_RETRYING)); then nem_fail "$* (second attempt)"; return; fi
  NEM_UNARRANGED=1
  echo "[$(e2e_now)] $*" | tee -a "$WORK/nemesis-unarranged.log" >&2
}
nem_record() { echo "$*" >>"$WORK/faults.log"; }
nem_ctl() { ns_exec ctl "$@"; }

# ---- the schedule ---------------------------------------------------------------

# nem_plan CYCLES: the member schedule, one line per fault:
#   kind target param gap_ms hold_ms
# target: a member id (a worker index for worker_cut); param: the clock rate,
# the wall-clock jump, or "leader"/"any" for oneway; "-" otherwise.
# Only RANDOM is read: the same seed gives the same lines.
nem_plan() {
  local cycles=$1 c i j t kinds param target hold
  for ((c = 0; c < cycles; c++)); do
    kinds=("${NEM_KINDS[@]}")
    for ((i = ${#kinds[@]} - 1; i > 0; i--)); do
      j=$((RANDOM % (i + 1)))
      t=${kinds[$i]} kinds[$i]=${kinds[$j]} kinds[$j]=$t
    done
    for t in "${kinds[@]}"; do
      nem_rand 1000 3000
      target=$((RANDOM % NMEMBERS + 1)) param=- hold=$NEM_R
      case $t in
        worker_cut)   # a slow worker (run.sh's --work 1500ms: index 3, 7, ...) if there is one
          if ((NWORKERS > 3)); then target=$((3 + 4 * (RANDOM % (NWORKERS / 4)))); else target=$((RANDOM % NWORKERS)); fi
          nem_rand $((LEASE_MS * 2)) $((LEASE_MS * 3)); hold=$NEM_R ;;
        clock_rate) param=${NEM_NEAR_RATES[$((RANDOM % ${#NEM_NEAR_RATES[@]}))]} ;;
        clock_far) param=$NEM_FAR_RATE ;;
        clock_jump) param=+; ((RANDOM % 2)) || param=-; param+="$((RANDOM % 23 + 1))h" ;;
        oneway) param=leader; ((RANDOM % 2)) || param=any ;;
        pause_member | pause_leader) nem_rand 500 4000; hold=$NEM_R ;;
      esac
      nem_rand 200 1200
      echo "$t $target $param $NEM_R $hold"
    done
  done
}

# ---- what the harness sees --------------------------------------------------------

# nem_status ID: the member's own /v1/status, asked from ctl (1 s bound).
nem_status() { nem_ctl curl -s --max-time 1 "http://$(mem_endpoint "$1")/v1/status"; }

nem_role() {
  local json
  json=$(nem_status "$1") || return 1
  e2e_json_field "${json%%\"members\"*}" role
}

nem_leader_id() {
  local id
  for id in "${MEMBER_IDS[@]}"; do
    [[ "$(nem_role "$id" 2>/dev/null)" == leader ]] && { echo "$id"; return 0; }
  done
  return 1
}

# nem_member_answers ID: the member answers /v1/status and knows a leader.
nem_member_answers() {
  local json leader
  json=$(nem_status "$1") || return 1
  leader=$(e2e_json_field "${json%%\"members\"*}" leader) || return 1
  [[ -n "$leader" && "$leader" != 0 ]]
}

# nem_probe [SKIP_ID...]: one acquire + release from ctl on a probe key;
# success = the cluster grants. SKIP_IDs (stopped or cut members) are left out
# of the endpoints: a stopped member accepts connections but never answers.
nem_probe() {
  local token eps="" id skip=" $* "
  for id in "${MEMBER_IDS[@]}"; do
    [[ "$skip" == *" $id "* ]] || eps+="${eps:+,}$(mem_endpoint "$id")"
  done
  token=$(nem_ctl "$FENCECTL" --endpoints "$eps" --timeout 2s acquire nemesis:probe --lease 1s --wait 0s 2>/dev/null) || return 1
  nem_ctl "$FENCECTL" --endpoints "$eps" --timeout 2s release nemesis:probe "$token" >/dev/null 2>&1 || true
}

# nem_time_to_grant START_MS: ms from START_MS until a probe acquire succeeds.
nem_time_to_grant() {
  e2e_wait_for "$NEM_RECOVERY_S" nem_probe || return 1
  echo $(($(e2e_ms) - $1))
}

# nem_new_leader_ms START_MS OLD_ID [LIMIT_MS]: ms from START_MS until another
# member reports itself leader (polled every 20 ms).
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

# nem_grant_within START_MS LIMIT_MS SKIP_ID: ms from START_MS until a probe not
# asking SKIP_ID succeeds, trying for at most LIMIT_MS.
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

nem_dead() {
  local state
  state=$(e2e_proc_state "$1") || return 0
  [[ -z "$state" || "$state" == Z ]]
}
nem_reaped() { ! kill -0 "$1" 2>/dev/null; }
nem_stopped() { [[ "$(e2e_proc_state "$1")" == T ]]; }

# nem_up ID: sets NEM_BACK to ms until member ID answers naming a leader (-1: never).
nem_up() {
  local t0
  t0=$(e2e_ms)
  # (a wrapper such as nsenter, env or fiu-run execs the member within moments)
  e2e_wait_for 3 mem_is_member "$1" || nem_fail "member $1: pid $(mem_pid "$1") is not fence-coordinator ($(readlink "/proc/$(mem_pid "$1")/exe" 2>/dev/null))"
  if e2e_wait_for "$NEM_RECOVERY_S" nem_member_answers "$1"; then
    NEM_BACK=$(($(e2e_ms) - t0))
  else
    nem_fail "member $1 did not answer with a known leader within ${NEM_RECOVERY_S}s of its start ($(mem_mode "$1"))"
    NEM_BACK=-1
  fi
}

# nem_heal_grant START_MS: sets NEM_GRANT to ms from START_MS to a grant (-1: none).
nem_heal_grant() {
  NEM_GRANT=$(nem_time_to_grant "$1") || { nem_fail "no grant within ${NEM_RECOVERY_S}s after healing $2"; NEM_GRANT=-1; }
}

# ---- kills and pauses -----------------------------------------------------------------

# nem_kill ID KIND HOLD_MS: kill -9, stay down HOLD_MS / 2, restart.
nem_kill() {
  local id=$1 kind=$2 hold=$3 pid t0 down grant=- elect=-
  pid=$(mem_pid "$id")
  mem_is_member "$id" || { nem_fail "$kind: member $id (pid ${pid:-none}) was not running before the kill"; return 1; }
  t0=$(e2e_ms)
  kill -KILL "$pid" 2>/dev/null || true
  if [[ "$kind" == kill_leader ]]; then
    elect=$(nem_new_leader_ms "$t0" "$id") || { nem_fail "no new leader within ${NEM_RECOVERY_S}s after killing leader $id"; elect=-1; }
    grant=$(nem_time_to_grant "$t0") || { nem_fail "no grant within ${NEM_RECOVERY_S}s after killing leader $id"; grant=-1; }
  fi
  mem_kill "$id"
  ((MEM_RC == 137)) || nem_fail "$kind: member $id ended with exit status $MEM_RC, not by our kill -9 (137)"
  nem_sleep_ms $((hold / 2))
  down=$(($(e2e_ms) - t0))
  mem_start "$id"
  nem_up "$id"
  nem_record "$kind member-$id $t0 $(e2e_ms) $down $grant $NEM_BACK $elect exit=$MEM_RC"
}

nem_pause_member() {
  local id=$1 kind=$2 down=$3 pid t0 t1 grant=- elect=-
  pid=$(mem_pid "$id")
  mem_is_member "$id" || { nem_fail "$kind: member $id (pid ${pid:-none}) was not running before SIGSTOP"; return 1; }
  t0=$(e2e_ms)
  kill -STOP "$pid" 2>/dev/null || { nem_fail "$kind: SIGSTOP of member $id (pid $pid) failed"; return 1; }
  e2e_wait_for 2 nem_stopped "$pid" || nem_fail "member $id (pid $pid) is not stopped after SIGSTOP"
  if [[ "$kind" == pause_leader ]]; then
    elect=$(nem_new_leader_ms "$t0" "$id" "$down") || elect=-
    grant=$(nem_grant_within "$t0" "$down" "$id") || grant=-
  fi
  t1=$(e2e_ms)
  ((t1 - t0 < down)) && nem_sleep_ms $((down - (t1 - t0)))
  kill -CONT "$pid" 2>/dev/null || true
  t1=$(e2e_ms)
  nem_heal_grant "$t1" "the SIGCONT of member $id"
  nem_record "$kind member-$id $t0 $t1 $((t1 - t0)) $grant $NEM_GRANT $elect state=T"
}

# nem_kill_all [HOLD_MS]: every member kill -9ed at once, down HOLD_MS / 3.
nem_kill_all() {
  local id t0 t1 back=0 hold=${1:-600}
  t0=$(e2e_ms)
  for id in "${MEMBER_IDS[@]}"; do
    mem_is_member "$id" || nem_fail "kill_all: member $id was not running before the power cut"
  done
  for id in "${MEMBER_IDS[@]}"; do mem_is_member "$id" && kill -KILL "$(mem_pid "$id")" 2>/dev/null || true; done
  for id in "${MEMBER_IDS[@]}"; do
    mem_kill "$id"
    ((MEM_RC == 137)) || nem_fail "kill_all: member $id ended with exit status $MEM_RC, not by our kill -9 (137)"
  done
  nem_sleep_ms $((hold / 3))
  if [[ "${NEM_WIPE:-0}" == 1 ]]; then   # run.sh --break reissue: the broken cluster
    for id in "${MEMBER_IDS[@]}"; do rm -rf "${CLUSTER_DIR:?}/$id"; done
  fi
  t1=$(e2e_ms)
  for id in "${MEMBER_IDS[@]}"; do mem_start "$id"; done
  nem_heal_grant "$t1" "the restart of every member"
  for id in "${MEMBER_IDS[@]}"; do
    nem_up "$id"
    ((NEM_BACK < 0 || back < 0)) && back=-1 || { ((NEM_BACK > back)) && back=$NEM_BACK; }
  done
  nem_record "kill_all cluster $t0 $t1 $((t1 - t0)) $NEM_GRANT $back -"
}

# ---- partitions -------------------------------------------------------------------

# nem_others_of HOST...: every host of the run but those named, comma-separated.
nem_all_hosts() {
  local i out="ctl,pg,wf"
  for id in "${MEMBER_IDS[@]}"; do out+=",m$id"; done
  for ((i = 0; i < NWORKERS; i++)); do out+=",w$i"; done
  echo "$out"
}
nem_hosts_but() {
  local h out="" skip=" $* "
  for h in $(nem_all_hosts | tr , ' '); do [[ "$skip" == *" $h "* ]] || out+="${out:+,}$h"; done
  echo "$out"
}
nem_workers() {
  local i out="" from=${1:-0} step=${2:-1}
  for ((i = from; i < NWORKERS; i += step)); do out+="${out:+,}w$i"; done
  echo "$out"
}
nem_members_but() {
  local id out=""
  for id in "${MEMBER_IDS[@]}"; do [[ "$id" == "${1:-}" || "$id" == "${2:-}" ]] || out+="${out:+,}m$id"; done
  echo "$out"
}

# nem_cut KIND TARGET DIR A B HOLD_MS PROBE_SRC PROBE_DST PROBE_PORT [KEEP_SRC KEEP_DST KEEP_PORT]:
# cuts A from B (DIR both or one), proves the cut (PROBE_SRC cannot open
# PROBE_DST:PROBE_PORT, but KEEP_SRC still opens KEEP_DST:KEEP_PORT), holds it,
# heals, proves the heal, waits for a grant. With NEM_CUT_TRAFFIC=1 (kinds whose
# cut always separates processes that talk: a leader and its followers, workers
# and the leader) the rules must also drop packets of the real processes during
# the hold, beyond the probe's own.
nem_cut() {
  local kind=$1 target=$2 dir=$3 a=$4 b=$5 hold=$6 ps=$7 pd=$8 pp=$9 ks=${10:-} kd=${11:-} kp=${12:-}
  local t0 t1 name="$kind-$(e2e_ms)" proof="" dropped dropped0
  e2e_wait_for 5 ns_reachable "$ps" "$pd" "$pp" ||
    nem_fail "$kind: $ps cannot reach $pd:$pp even before the cut (the proof would mean nothing)"
  t0=$(e2e_ms)
  ns_cut "$name" "$dir" "$a" "$b" || { nem_fail "$kind: nft refused the cut $a -> $b"; return 1; }
  if ns_reachable "$ps" "$pd" "$pp"; then
    nem_fail "$kind: $ps still reaches $pd:$pp through the cut $a -> $b"
  else
    proof="cut:$ps-x->$pd"
  fi
  if [[ -n "$ks" ]]; then
    if e2e_wait_for 3 ns_reachable "$ks" "$kd" "$kp"; then proof+=",kept:$ks->$kd"; else
      nem_fail "$kind: $ks lost $kd:$kp, which the cut $a -> $b must not touch"; fi
  fi
  # The probes above took a while (a cut probe waits out its 1 s timeout): the
  # packets counted from here on are the real processes' alone. Held at least
  # 1.5 s more, long enough for a TCP retransmission or a new connection attempt.
  dropped0=$(ns_cut_dropped "$name")
  t1=$(e2e_ms)
  if ((t1 - t0 + 1500 < hold)); then nem_sleep_ms $((hold - (t1 - t0))); else nem_sleep_ms 1500; fi
  dropped=$(($(ns_cut_dropped "$name") - dropped0))
  if [[ "${NEM_CUT_TRAFFIC:-0}" == 1 ]] && ((dropped <= 0)); then
    nem_fail "$kind: the cut $a -> $b dropped none of the real processes' packets during the hold"
  fi
  ns_heal
  t1=$(e2e_ms)
  if e2e_wait_for 5 ns_reachable "$ps" "$pd" "$pp"; then proof+=",healed"; else
    nem_fail "$kind: $ps cannot reach $pd:$pp 5 s after the heal"; fi
  nem_heal_grant "$t1" "the $kind partition"
  nem_record "$kind $target $t0 $t1 $((t1 - t0)) - $NEM_GRANT - $proof,dropped=$dropped"
  NEM_CUT_TRAFFIC=0
}

nem_partition() {
  local kind=$1 target=$2 param=$3 hold=$4 leader other x y
  NEM_CUT_TRAFFIC=0
  case $kind in
    isolate | split | leader_clients | worker_cut) NEM_CUT_TRAFFIC=1 ;;
  esac
  case $kind in
    isolate)
      nem_cut isolate "member-$target" both "m$target" "$(nem_hosts_but "m$target")" "$hold" \
        ctl "m$target" 7501 ;;
    split)
      other=$(nem_members_but "$target" | cut -d, -f1)
      nem_cut split "member-$target" both "m$target,$(nem_workers 0 2)" \
        "$(nem_members_but "$target"),$(nem_workers 1 2)" "$hold" "m$target" "$other" 7401 ctl "m$target" 7501 ;;
    bridge)
      x=$(nem_members_but "$target" | cut -d, -f1) y=$(nem_members_but "$target" | cut -d, -f2)
      nem_cut bridge "member-$target" both "$x" "$y" "$hold" "$x" "$y" 7401 "m$target" "$x" 7401 ;;
    oneway)
      x=m$target
      if [[ "$param" == leader ]] && leader=$(nem_leader_id); then x=m$leader; fi
      y=$(nem_members_but "${x#m}" | cut -d, -f1)
      nem_cut oneway "$x-to-$y" one "$x" "$y" "$hold" "$x" "$y" 7401 ;;
    leader_clients)
      leader=$(nem_leader_id) || leader=$target
      other=$(nem_members_but "$leader" | cut -d, -f1)
      nem_cut leader_clients "member-$leader" both "m$leader" "wf,$(nem_workers)" "$hold" \
        w0 "m$leader" 7501 "m$leader" "$other" 7401 ;;
    worker_cut)
      nem_cut worker_cut "worker-$target" both "w$target" "$(nem_members_but)" "$hold" \
        "w$target" "m1" 7501 "w$target" pg 5432 ;;
  esac
}

# ---- clocks ---------------------------------------------------------------------

# nem_make_leader ID: makes member ID the leader by the leader's own graceful
# hand-over: the other follower is stopped, a probe grant leaves ID the one
# follower with the leader's latest entry, and SIGTERM makes the leader
# transfer leadership to its most caught-up follower (fence-coordinator's
# shutdown) before it exits; it is restarted at once, the follower resumed.
# Hands over again until ID leads or NEM_LEADER_S (NEM_RECOVERY_S) has passed
# since the call: a hand-over can land on the other member, and under load the
# cluster may have no leader for a while (waited for, not counted as a try).
# Sets NEM_LEADER_TRIES to the hand-overs tried; returns 1 if ID never became
# leader within the bound, or at once when member ID is not running.
nem_make_leader() {
  local id=$1 leader other deadline=$(($(e2e_ms) + NEM_LEADER_S * 1000))
  NEM_LEADER_TRIES=0
  nem_is_leader() { [[ "$(nem_role "$1" 2>/dev/null)" == leader ]]; }
  while (($(e2e_ms) < deadline)); do
    mem_is_member "$id" || return 1   # (a member that died cannot lead: the caller says so)
    leader=$(nem_leader_id) || { sleep 0.2; continue; }
    [[ "$leader" == "$id" ]] && return 0
    NEM_LEADER_TRIES=$((NEM_LEADER_TRIES + 1))
    other=$(nem_members_but "$id" "$leader" | cut -d, -f1)
    other=${other#m}
    [[ -n "$other" ]] && mem_is_member "$other" && kill -STOP "$(mem_pid "$other")" 2>/dev/null || true
    nem_probe "$other" || true
    mem_is_member "$leader" && kill -TERM "$(mem_pid "$leader")" 2>/dev/null || true
    e2e_wait_for 3 nem_is_leader "$id" || true
    mem_wait_exit "$leader" 5 || mem_kill "$leader"
    mem_start "$leader"
    [[ -n "$other" ]] && mem_is_member "$other" && kill -CONT "$(mem_pid "$other")" 2>/dev/null || true
    e2e_wait_for 10 nem_member_answers "$leader" || true
  done
  [[ "$(nem_leader_id)" == "$id" ]]
}

# nem_lock_ttl ID KEY: the ttl_ms member ID reports for KEY.
nem_lock_ttl() {
  local json
  json=$(nem_ctl curl -s --max-time 1 "http://$(mem_endpoint "$1")/v1/locks?key=$2") || return 1
  e2e_json_field "$json" ttl_ms
}

# nem_measure_rate ID: sets NEM_RATE to the rate of member ID's lease clock
# against real time (a probe lock with a 60 s lease; ttl_ms read 3 s apart, each
# reading timed by the midpoint of its request). ID must stay leader meanwhile:
# up to 3 tries, each making it leader again first; every try has a key of its
# own, released through every member (a lock left behind must not make the
# next try "held"). On failure NEM_MEASURE_WHY says what each try saw (the
# acquire's error, the ttl_ms readings, whether member ID still ran and its
# role), for the failure line the run prints.
nem_measure_rate() {
  local id=$1 try
  NEM_RATE=? NEM_MEASURE_WHY=""
  for ((try = 1; try <= 3; try++)); do
    if ((try > 1)) && ! nem_make_leader "$id"; then
      NEM_MEASURE_WHY+=" try $try: member $id did not lead again ($NEM_LEADER_TRIES hand-overs, $(nem_member_state "$id"));"
      continue
    fi
    nem_measure_rate_once "$id" "nemesis:clock:$(e2e_ms)" && return 0
    NEM_MEASURE_WHY+=" try $try: $NEM_ONCE_WHY ($(nem_member_state "$id"));"
  done
  return 1
}

# nem_member_state ID: "running, <role>" or "not running", and the
# member's last log line: what a failure line needs to tell a fault that did
# not take from a member that died.
nem_member_state() {
  local log=$CLUSTER_DIR/$1.log state
  if mem_is_member "$1"; then state="running, $(nem_role "$1" 2>/dev/null || echo 'no answer')"; else state="not running"; fi
  echo "$state; its log ends: $(tail -n 1 "$log" 2>/dev/null | cut -c 1-240)"
}

nem_measure_rate_once() {
  local id=$1 key=$2 token ttl1 ttl2 a1 a2 b1 b2 err
  NEM_ONCE_WHY=""
  if ! token=$(nem_ctl "$FENCECTL" --endpoints "$(mem_endpoint "$id")" --timeout 3s acquire "$key" --lease 60s --wait 0s 2>"$WORK/measure.err"); then
    err=$(tail -n 1 "$WORK/measure.err" | cut -c 1-200)
    NEM_ONCE_WHY="the probe acquire at member $id failed: ${err:-no message}"
    return 1
  fi
  a1=$(e2e_ms); ttl1=$(nem_lock_ttl "$id" "$key"); b1=$(e2e_ms)
  sleep 3
  a2=$(e2e_ms); ttl2=$(nem_lock_ttl "$id" "$key"); b2=$(e2e_ms)
  nem_ctl "$FENCECTL" --endpoints "$FENCE_ENDPOINTS" --timeout 3s release "$key" "$token" >/dev/null 2>&1 || true
  if ! [[ "$ttl1" =~ ^[0-9]+$ && "$ttl2" =~ ^[0-9]+$ ]]; then
    NEM_ONCE_WHY="member $id's ttl_ms for the probe read '${ttl1}' then '${ttl2}'"
    return 1
  fi
  # real time between the two readings: the midpoints of the two requests
  NEM_RATE=$(awk -v t1="$ttl1" -v t2="$ttl2" -v r=$(((a2 + b2) - (a1 + b1))) 'BEGIN { printf "%.3f", (t1 - t2) * 2 / r }')
}

nem_clock_rate() {
  local kind=$1 id=$2 rate=$3 hold=$4 t0 t1 tol proof=""
  t0=$(e2e_ms)
  mem_restart "$id" rate "$rate"
  nem_up "$id"
  if ! nem_make_leader "$id"; then
    nem_unarranged "$kind: member $id (clock x$rate) did not become leader within ${NEM_LEADER_S}s ($NEM_LEADER_TRIES hand-overs; $(nem_member_state "$id"))"
  elif ! nem_measure_rate "$id"; then
    nem_unarranged "$kind: could not measure member $id's lease clock:$NEM_MEASURE_WHY"
  else
    tol=$(awk -v r="$rate" 'BEGIN { print (r > 2 ? r * 0.1 : 0.02) }')
    if awk -v m="$NEM_RATE" -v r="$rate" -v t="$tol" 'BEGIN { exit !((m - r) <= t && (r - m) <= t) }'; then
      proof="leader=$id,rate_measured=$NEM_RATE"
    else
      nem_fail "$kind: member $id should run x$rate, its ttl_ms fell x$NEM_RATE of real time"
    fi
  fi
  nem_sleep_ms "$hold"
  t1=$(e2e_ms)
  mem_restart "$id"
  nem_up "$id"
  nem_heal_grant "$t1" "member $id's clock"
  ((NEM_UNARRANGED)) && proof=unarranged
  nem_record "$kind member-$id $t0 $t1 $((t1 - t0)) - $NEM_GRANT - rate=$rate,$proof"
}

# nem_log_wall_s ENDPOINT ID: the wall-clock second member ID writes in its
# log now: a malformed request is logged as http_refused; waits (3 s bound)
# for that line and reads its ts.
nem_log_wall_s() {
  local ts n0 log=$CLUSTER_DIR/$2.log
  n0=$(grep -c 'event=http_refused' "$log" || true)
  nem_ctl bash -c "exec 3<>/dev/tcp/${1%:*}/${1#*:}; printf 'NOT-HTTP\r\n\r\n' >&3; timeout 1 cat <&3 >/dev/null" 2>/dev/null || true
  nem_refused_logged() { (($(grep -c 'event=http_refused' "$log" || true) > n0)); }
  e2e_wait_for 3 nem_refused_logged || return 1
  ts=$(grep 'event=http_refused' "$log" | tail -n 1 | grep -o '^ts=[0-9T:.-]*Z')
  [[ -n "$ts" ]] || return 1
  date -u -d "$(sed -E 's/^ts=([0-9-]+)T([0-9:]+)\..*/\1 \2/' <<<"$ts")" +%s
}

nem_clock_jump() {
  local id=$1 jump=$2 hold=$3 t0 t1 seen want diff proof=""
  t0=$(e2e_ms)
  mem_restart "$id" wall
  nem_up "$id"
  mem_wall_jump "$id" "$jump"
  seen=$(nem_log_wall_s "$(mem_endpoint "$id")" "$id") || seen=0
  want=$(($(date +%s) + ${jump%h} * 3600))
  diff=$((seen - want))
  if ((diff < -120 || diff > 120)); then
    nem_fail "clock_jump: member $id's log says $(date -u -d "@$seen" +%FT%TZ), not real time $jump"
  else
    proof="wall_jump_seen_in_log"
  fi
  # It changes nothing: as leader, its lease clock still runs at real time.
  if ! nem_make_leader "$id"; then
    nem_unarranged "clock_jump: member $id did not become leader within ${NEM_LEADER_S}s ($NEM_LEADER_TRIES hand-overs; $(nem_member_state "$id"))"
  elif ! nem_measure_rate "$id"; then
    nem_unarranged "clock_jump: could not measure member $id's lease clock:$NEM_MEASURE_WHY"
  elif awk -v m="$NEM_RATE" 'BEGIN { exit !(m >= 0.98 && m <= 1.02) }'; then
    proof+=",leader=$id,rate_measured=$NEM_RATE"
  else
    nem_fail "clock_jump: member $id's lease clock ran x$NEM_RATE after a wall-clock jump"
  fi
  nem_sleep_ms "$hold"
  mem_wall_jump "$id" "+0"
  t1=$(e2e_ms)
  nem_heal_grant "$t1" "member $id's wall clock"
  ((NEM_UNARRANGED)) && proof+=",unarranged"
  nem_record "clock_jump member-$id $t0 $t1 $((t1 - t0)) - $NEM_GRANT - jump=$jump,$proof"
}

# ---- disks ----------------------------------------------------------------------

nem_disk() {
  local kind=$1 id=$2 spec t0 t1 rc proof=""
  case $kind in
    disk_eio) spec="enable_random name=posix/io/sync/fdatasync,probability=0.05,failinfo=5" ;;
    disk_enospc) spec="enable_random name=posix/io/rw/pwrite,probability=0.05,failinfo=28" ;;
  esac
  t0=$(e2e_ms)
  mem_restart "$id" disk "$spec"
  local from=$(($(wc -l <"$CLUSTER_DIR/$id.log") + 1))   # this start's lines only
  # Probes make log entries for every member to write, until the member stops.
  local deadline=$(($(e2e_ms) + 20000))
  while ! nem_dead "$(mem_pid "$id")" && (($(e2e_ms) < deadline)); do nem_probe "$id" || sleep 0.05; done
  if mem_wait_exit "$id" 1; then
    rc=$MEM_RC
    if ((rc == 74)) && tail -n "+$from" "$CLUSTER_DIR/$id.log" | grep -q 'event=storage_write_failed'; then
      proof="exit=74,storage_write_failed"
    elif ((rc == 1)) && tail -n "+$from" "$CLUSTER_DIR/$id.log" | grep 'event=storage_open_failed' |
                         grep -Eq 'Input/output error|No space left on device'; then
      proof="exit=1,storage_open_failed"
    else
      nem_fail "$kind: member $id exited with $rc, not as documented (74 after storage_write_failed)"
    fi
  else
    nem_fail "$kind: member $id still runs 20 s after its $kind fault was enabled"
    mem_kill "$id"
  fi
  t1=$(e2e_ms)
  mem_start "$id"
  nem_up "$id"
  nem_heal_grant "$t1" "member $id's disk"
  nem_record "$kind member-$id $t0 $t1 $((t1 - t0)) - $NEM_GRANT $NEM_BACK - $proof"
}

# ---- workers --------------------------------------------------------------------

# nem_pause_worker I DOWN_MS: SIGSTOP worker I for DOWN_MS, so it comes back stale.
nem_pause_worker() {
  local i=$1 down=$2 pid t0
  pid=${WORKER_PIDS[$i]}
  # (checked before the signal: a worker that exited left a pid that may be someone else's)
  e2e_pid_runs "$pid" "$FENCE_WORKER_BIN" ||
    { nem_fail "pause_worker: worker $i (pid $pid) is not running"; return 1; }
  t0=$(e2e_ms)
  kill -STOP "$pid" 2>/dev/null || { nem_fail "pause_worker: SIGSTOP of worker $i failed"; return 1; }
  e2e_wait_for 2 nem_stopped "$pid" || nem_fail "pause_worker: worker $i (pid $pid) is not stopped after SIGSTOP"
  nem_sleep_ms "$down"
  kill -CONT "$pid" 2>/dev/null || true
  nem_record "pause_worker worker-$i $t0 $(e2e_ms) $down - - - -"
}

# nem_forced_stale PATH: the seed scenario, made certain, once per write path.
# A fence-worker (in namespace wf) acquires safety:k1 and is SIGSTOPped before it
# writes. Only then a second one, the taker, starts: it waits for safety:k1
# behind the stopped holder, so the key changes hands as soon as the
# coordinator expires the lease (one that expires early, run.sh --break early,
# hands it over while the stopped holder's lease still runs; started before the
# holder, the taker could make it wait in the queue, and a holder counts its
# lease from its send: the wait would use up the window). Once a newer token
# is committed on the same fence the stopped worker gets SIGCONT: its write
# must be refused (exit 10, stale). Appends "PATH TOKEN EXIT" (or "PATH - why it could
# not run") to $WORK/forced-stale.log.
nem_forced_stale() {
  local path=$1 attempt pid
  for ((attempt = 1; attempt <= 3; attempt++)); do
    nem_forced_start "$path" "$attempt"
    pid=$FORCED_PID
    if e2e_wait_for 40 nem_forced_acquired "$path" "$attempt" "$pid"; then
      if grep -q ',acquire,.*,ok,' "$WORK/wforced-$path-$attempt.csv"; then
        nem_forced_finish "$path" "$attempt" "$pid"
        return 0
      fi
    fi
    kill -TERM "$pid" 2>/dev/null || true
    # A taker may have finished its cycle: its pid is signalled only while it
    # is still that fence-worker (pids are reused).
    if [[ -n "$TAKER_PID" ]] && e2e_pid_runs "$TAKER_PID" "$FENCE_WORKER_BIN"; then
      kill -TERM "$TAKER_PID" 2>/dev/null || true
    fi
  done
  echo "$path - its worker acquired nothing in 3 attempts" >>"$WORK/forced-stale.log"
}

nem_forced_start() {
  ns_spawn wf env "${WORKER_ENV[@]}" "$FENCE_WORKER_BIN" --key safety:k1 --mode "$1" --lease 1s --wait 10s --work 5s \
    --no-lease-check --worker-id "forced-$1" --log "$WORK/wforced-$1-$2.csv" --proof --quiet \
    >"$WORK/wforced-$1-$2.out" 2>&1 &
  FORCED_PID=$!
  TAKER_PID=""
}

# The taker: one cycle of acquire (waiting up to 10 s), a short write,
# release. Its log joins the workers' (w*.csv).
nem_forced_taker() {
  ns_spawn wf env "${WORKER_ENV[@]}" "$FENCE_WORKER_BIN" --key safety:k1 --mode "$1" --lease 1s --wait 10s --work 50ms \
    --iterations 1 --no-lease-check --max-clock-drift-ppm "${RHO_PPM:-50000}" --worker-id "taker-$1" \
    --log "$WORK/wtaker-$1-$2.csv" --proof --quiet >"$WORK/wtaker-$1-$2.out" 2>&1 &
  TAKER_PID=$!
  echo "$FORCED_PID $TAKER_PID" >>"$WORK/forced.pids"
}

nem_forced_acquired() {
  if grep -q ',acquire,.*,ok,' "$WORK/wforced-$1-$2.csv" 2>/dev/null; then
    kill -STOP "$3" 2>/dev/null || true
    nem_forced_taker "$1" "$2"
    return 0
  fi
  ! kill -0 "$3" 2>/dev/null
}

nem_forced_finish() {
  local path=$1 pid=$3 token t0 fence=row rc=0
  [[ "$path" == admit ]] && fence=resource
  [[ "$path" == sequenced ]] && fence=sequenced
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
  nem_record "forced_stale worker-forced-$path $t0 $(e2e_ms) $(($(e2e_ms) - t0)) - - - -"
  echo "$path $token $rc" >>"$WORK/forced-stale.log"
}

# ---- the loops --------------------------------------------------------------------

# nem_member_fault KIND TARGET PARAM HOLD_MS: one fault of the schedule.
nem_member_fault() {
  local kind=$1 id=$2 param=$3 hold=$4 leader
  case $kind in
    kill) nem_kill "$id" kill "$hold" ;;
    kill_leader) if leader=$(nem_leader_id); then nem_kill "$leader" kill_leader "$hold"; else nem_kill "$id" kill "$hold"; fi ;;
    kill_all) nem_kill_all "$hold" ;;
    pause_member) nem_pause_member "$id" pause_member "$hold" ;;
    pause_leader)
      if leader=$(nem_leader_id); then nem_pause_member "$leader" pause_leader "$hold"; else nem_pause_member "$id" pause_member "$hold"; fi ;;
    isolate | split | bridge | oneway | leader_clients | worker_cut) nem_partition "$kind" "$id" "$param" "$hold" ;;
    clock_rate | clock_far) nem_clock_rate "$kind" "$id" "$param" "$hold" ;;
    clock_jump) nem_clock_jump "$id" "$param" "$hold" ;;
    disk_eio | disk_enospc) nem_disk "$kind" "$id" ;;
    *) nem_fail "unknown fault kind '$kind' in the schedule" ;;
  esac
}

# nem_worker_loop: the forced stale writers, then worker pauses until the
# member nemesis is done ($WORK/nemesis.done); its own RANDOM, seeded by the caller.
nem_worker_loop() {
  local n=0
  nem_forced_stale guard
  nem_forced_stale fenced_update
  nem_forced_stale admit
  nem_forced_stale sequenced
  while [[ ! -f "$WORK/nemesis.done" ]] && ((n < 10000)); do
    nem_rand 200 1200
    nem_sleep_ms "$NEM_R"
    [[ ! -f "$WORK/nemesis.done" ]] || break
    nem_rand $((LEASE_MS * 3 / 2)) $((LEASE_MS * 3))
    nem_pause_worker $((RANDOM % NWORKERS)) "$NEM_R"
    n=$((n + 1))
  done
}

NEM_WORKER_LOOP_PID=""   # the worker nemesis subshell; the caller's cleanup kills it
# nem_run SECONDS: the schedule in $WORK/schedule.txt until SECONDS have passed
# and its first cycle is done (none of it with BREAK set); then a power cut of
# the whole cluster, so the final checks also cover every acknowledged grant
# surviving a restart of all (BREAK=reissue: which also wipes their data).
nem_run() {
  local worker_seed=$RANDOM end n=0 kind target param gap hold
  end=$(($(e2e_ms) + $1 * 1000))
  (
    RANDOM=$worker_seed
    nem_worker_loop
  ) &
  NEM_WORKER_LOOP_PID=$!
  if [[ -n "${BREAK:-}" ]]; then   # no member faults: the worker loop alone, for SECONDS
    while (($(e2e_ms) < end)); do sleep 0.2; done
  fi
  while [[ -z "${BREAK:-}" ]] && read -r kind target param gap hold <&4; do
    ((n >= ${#NEM_KINDS[@]} && $(e2e_ms) >= end)) && break
    nem_sleep_ms "$gap"
    NEM_UNARRANGED=0
    nem_member_fault "$kind" "$target" "$param" "$hold" || true
    echo "[$(e2e_now)] nemesis: $(grep -Ev '^(pause_worker|forced_stale)' "$WORK/faults.log" | tail -n 1)"
    if ((NEM_UNARRANGED)); then   # (see the header: once more, at once)
      NEM_UNARRANGED=0 NEM_RETRYING=1
      nem_member_fault "$kind" "$target" "$param" "$hold" || true
      NEM_RETRYING=0
      echo "[$(e2e_now)] nemesis: $(grep -Ev '^(pause_worker|forced_stale)' "$WORK/faults.log" | tail -n 1) (second attempt)"
    fi
    n=$((n + 1))
  done 4<"$WORK/schedule.txt"
  NEM_FAULTS_RUN=$n
  if [[ -z "${BREAK:-}" ]] && (($(e2e_ms) < end)); then
    echo "[$(e2e_now)] nemesis: the schedule ran out $(((end - $(e2e_ms)) / 1000))s early" >&2
  fi
  touch "$WORK/nemesis.done"
  wait "$NEM_WORKER_LOOP_PID" || true
  NEM_WORKER_LOOP_PID=""
  NEM_WIPE=$([[ "${BREAK:-}" == reissue ]] && echo 1 || echo 0)
  nem_kill_all
  echo "[$(e2e_now)] nemesis: $(tail -n 1 "$WORK/faults.log")"
}

# nem_heal: no cut, every member running normally and not stopped, every worker running.
nem_heal() {
  local id pid i
  ns_heal
  for id in "${MEMBER_IDS[@]}"; do
    pid=$(mem_pid "$id")
    [[ -n "$pid" ]] && kill -CONT "$pid" 2>/dev/null || true
    if [[ -z "$pid" ]] || nem_dead "$pid" || [[ "$(mem_mode "$id")" != "$(mem_default_mode)" ]]; then
      mem_restart "$id"
      nem_up "$id"
    fi
  done
  for i in "${!WORKER_PIDS[@]}"; do kill -CONT "${WORKER_PIDS[$i]}" 2>/dev/null || true; done
}
