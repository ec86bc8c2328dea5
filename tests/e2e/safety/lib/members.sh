# shellcheck shell=bash
# The coordinator members of tests/e2e/safety/run.sh, each in its network
# namespace m<ID> (lib/netns.sh), started from run.sh's own shell so that the
# nemesis can `wait` for a member's exit status (a disk fault must end in 74).
#
# Needs: COORD (the binary), CLUSTER_DIR, NMEMBERS, WORK; lib/netns.sh sourced.
# Every member listens on its own address: peers on :7401, HTTP on :7501.
#
#   mem_start ID [MODE [ARG]]   starts member ID; MODE is
#       normal                  as built;
#       rate R                  every clock of the process runs R times real time
#                               (libfaketime "+0 xR": leases, timers, timeouts);
#       wall                    under libfaketime with monotonic time left alone
#                               (FAKETIME_DONT_FAKE_MONOTONIC=1): mem_wall_jump
#                               then moves its wall clock while it runs;
#       disk SPEC               under libfiu's fiu-run -x with SPEC enabled,
#                               e.g. "enable_random name=posix/io/sync/fdatasync,probability=0.05,failinfo=5".
#     Writes DIR/ID.pid (the process), DIR/ID.mode; appends to DIR/ID.log.
#   mem_kill ID                 kill -9 and reap (bounded 10 s); MEM_RC = the exit status seen
#   mem_restart ID [MODE [ARG]] mem_kill, then mem_start
#   mem_wall_jump ID OFFSET     the wall clock of a member started in mode wall
#                               becomes real time + OFFSET (libfaketime syntax: +1d, -2h)
#   mem_pid ID / mem_mode ID / mem_endpoint ID
#
# libfaketime deadlocks at start-up in a process linked with jemalloc (both
# hook early clock and allocation calls), and libfiu's wrappers deadlock with
# it as soon as a failure point is evaluated (seen: fiu_fail's rwlock against
# a jemalloc mutex). A faulted member therefore runs with glibc's malloc: LD_LIBRARY_PATH points at an empty library that carries
# jemalloc's soname (mem_no_jemalloc builds it once per run), so the dynamic
# linker takes it for libjemalloc.so.2 and malloc resolves to glibc. The binary
# under test is the same one.

MEM_FAKETIME_LIB=${MEM_FAKETIME_LIB:-/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1}
declare -A MEM_PID_OF=()

mem_endpoint() { echo "$(ns_addr "m$1"):7501"; }
mem_peer_list() {
  local i out=""
  for ((i = 1; i <= NMEMBERS; i++)); do out+="${out:+,}$i=$(ns_addr "m$i"):7401"; done
  echo "$out"
}
mem_endpoints() {
  local i out=""
  for ((i = 1; i <= NMEMBERS; i++)); do out+="${out:+,}$(mem_endpoint "$i")"; done
  echo "$out"
}
mem_pid() { cat "$CLUSTER_DIR/$1.pid" 2>/dev/null; }
# mem_is_member ID: the pid file's process is fence-coordinator itself (not a
# wrapper that could be stopped or killed while the member runs on).
mem_is_member() {
  local pid
  pid=$(mem_pid "$1") && e2e_pid_runs "$pid" "$COORD"
}
mem_mode() { cat "$CLUSTER_DIR/$1.mode" 2>/dev/null; }

mem_no_jemalloc() {
  local dir=$WORK/no-jemalloc
  [[ -f "$dir/libjemalloc.so.2" ]] && { echo "$dir"; return 0; }
  mkdir -p "$dir"
  echo 'void pgfence_test_without_jemalloc(void) {}' >"$dir/empty.c"
  cc -shared -fPIC -Wl,-soname,libjemalloc.so.2 -o "$dir/libjemalloc.so.2" "$dir/empty.c" ||
    { echo "members.sh: could not build the jemalloc stand-in" >&2; return 1; }
  echo "$dir"
}

# mem_default_mode: the mode a member starts in when none is named: normal, or
# "rate R" with MEM_DEFAULT_RATE=R (run.sh --break early).
mem_default_mode() { if [[ -n "${MEM_DEFAULT_RATE:-}" ]]; then echo "rate $MEM_DEFAULT_RATE"; else echo normal; fi; }

mem_start() {
  (($# >= 2)) || [[ -z "${MEM_DEFAULT_RATE:-}" ]] || set -- "$1" rate "$MEM_DEFAULT_RATE"
  local id=$1 mode=${2:-normal} arg=${3:-} nojem
  local -a wrap=()
  mkdir -p "$CLUSTER_DIR/$id"
  case $mode in
    normal) ;;
    rate)
      nojem=$(mem_no_jemalloc) || return 1
      wrap=(env "LD_LIBRARY_PATH=$nojem" "LD_PRELOAD=$MEM_FAKETIME_LIB" "FAKETIME=+0 x$arg") ;;
    wall)
      nojem=$(mem_no_jemalloc) || return 1
      echo "+0" >"$CLUSTER_DIR/$id.faketime"
      wrap=(env "LD_LIBRARY_PATH=$nojem" "LD_PRELOAD=$MEM_FAKETIME_LIB" FAKETIME_DONT_FAKE_MONOTONIC=1
            "FAKETIME_TIMESTAMP_FILE=$CLUSTER_DIR/$id.faketime" FAKETIME_NO_CACHE=1) ;;
    disk)
      nojem=$(mem_no_jemalloc) || return 1
      wrap=(env "LD_LIBRARY_PATH=$nojem" fiu-run -x -f "" -c "$arg") ;;
    *) echo "members.sh: unknown mode '$mode'" >&2; return 1 ;;
  esac
  echo "[$(e2e_now)] member $id starting ($mode${arg:+ $arg})" >>"$CLUSTER_DIR/$id.log"
  # shellcheck disable=SC2086
  ns_spawn "m$id" "${wrap[@]}" "$COORD" --id "$id" --peers "$(mem_peer_list)" \
    --client-addr "$(mem_endpoint "$id")" --data-dir "$CLUSTER_DIR/$id" --admin-without-auth ${MEM_FLAGS:-} \
    >>"$CLUSTER_DIR/$id.log" 2>&1 &
  MEM_PID_OF[$id]=$!
  echo "$!" >"$CLUSTER_DIR/$id.pid"
  echo "$mode${arg:+ $arg}" >"$CLUSTER_DIR/$id.mode"
}

# mem_kill ID: sets MEM_RC to the exit status the member had (137 after our
# kill -9; another value if it had already stopped by itself). Must run in
# run.sh's own shell (not in $(...)): only the parent can wait for it.
mem_kill() {
  local id=$1 pid rc=0
  MEM_RC=0
  pid=$(mem_pid "$id")
  [[ -n "$pid" ]] || return 0
  if mem_is_member "$id"; then   # (a member that exited by itself: its pid may be someone else's now)
    kill -CONT "$pid" 2>/dev/null || true
    kill -KILL "$pid" 2>/dev/null || true
  fi
  if [[ "${MEM_PID_OF[$id]:-}" == "$pid" ]]; then
    { wait "$pid"; } 2>/dev/null || rc=$?   # (the braces also silence bash's "Killed" notice)
  else
    e2e_wait_for 10 nem_reaped "$pid" || echo "members.sh: member $id (pid $pid) still exists 10 s after kill -9" >&2
  fi
  rm -f "$CLUSTER_DIR/$id.pid"
  MEM_RC=$rc
}

mem_restart() {
  local id=$1
  shift
  mem_kill "$id"
  mem_start "$id" "$@"
}

mem_wall_jump() {
  [[ "$(mem_mode "$1")" == wall ]] || { echo "members.sh: member $1 is not in mode wall" >&2; return 1; }
  echo "$2" >"$CLUSTER_DIR/$1.faketime"
}

# mem_wait_exit ID BOUND_S: waits for member ID to exit by itself; sets MEM_RC
# to its exit status, or returns 1 if it still runs after BOUND_S.
mem_wait_exit() {
  local id=$1 pid rc=0
  pid=$(mem_pid "$id")
  e2e_wait_for "$2" nem_dead "$pid" || return 1
  { wait "$pid"; } 2>/dev/null || rc=$?
  rm -f "$CLUSTER_DIR/$id.pid"
  MEM_RC=$rc
}
