# shellcheck shell=bash
# Helpers shared by scripts/demo.sh and tests/e2e/safety/run.sh (sourced).

# e2e_find_bin NAME [ENV_VAR]: path of an executable built from this repository.
# Order: $ENV_VAR if set; $E2E_BUILD_DIR and $BUILD (what `make` built, default
# build/); then any other build*/ directory (newest file wins). Prints nothing
# and returns 1 if not found.
e2e_find_bin() {
  local name=$1 var=${2:-} dir found
  if [[ -n "$var" && -n "${!var:-}" ]]; then
    [[ -x "${!var}" ]] && { echo "${!var}"; return 0; }
    echo "e2e: $var=${!var} is not an executable" >&2
    return 1
  fi
  for dir in ${E2E_BUILD_DIR:+"$E2E_BUILD_DIR"} "$E2E_ROOT/${BUILD:-build}"; do
    [[ -d "$dir" ]] || continue
    found=$(find "$dir" -maxdepth 4 -type f -name "$name" -perm -u+x 2>/dev/null | head -n 1)
    [[ -n "$found" ]] && { echo "$found"; return 0; }
  done
  found=$(find "$E2E_ROOT" -maxdepth 5 -path "$E2E_ROOT/build*" -type f -name "$name" \
            -perm -u+x -printf '%T@ %p\n' 2>/dev/null | sort -rn | head -n 1 | cut -d' ' -f2-)
  if [[ -n "$found" ]]; then
    # Say so: this binary may be older than the sources, or from another build.
    echo "e2e: $name is not in ${E2E_BUILD_DIR:-$E2E_ROOT/${BUILD:-build}}; using the newest one found: $found" >&2
    echo "$found"
    return 0
  fi
  return 1
}

# e2e_now: wall-clock time with milliseconds, for narration.
e2e_now() { date +%H:%M:%S.%3N; }

# e2e_ms: monotonic-enough milliseconds for measuring durations.
e2e_ms() { date +%s%3N; }

# e2e_wait_for TIMEOUT_S CMD...: runs CMD every 100 ms until it succeeds;
# returns 1 if it never did within TIMEOUT_S seconds.
e2e_wait_for() {
  local timeout_s=$1 deadline
  shift
  deadline=$(($(e2e_ms) + timeout_s * 1000))
  while (($(e2e_ms) < deadline)); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  return 1
}

# e2e_proc_state PID: one letter (R, S, T = stopped, Z...) or empty if gone.
e2e_proc_state() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  echo "${stat%% *}"
}

# e2e_pid_runs PID BIN: process PID is (still) executing BIN. Check it before
# signalling a pid that may have exited: pids are reused.
e2e_pid_runs() { [[ -n "$1" && "$(readlink "/proc/$1/exe" 2>/dev/null)" == "$(readlink -f "$2")" ]]; }

# e2e_port_free PORT: nothing accepts connections on 127.0.0.1:PORT.
e2e_port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# e2e_free_base_port N: a FENCE_BASE_PORT for scripts/cluster.sh whose peer
# ports (BASE+i) and HTTP ports (BASE+100+i), i = 1..N, are all free. Below
# 32768, so that no outgoing connection takes one as its ephemeral port.
e2e_free_base_port() {
  local n=$1 try base i ok
  for ((try = 0; try < 40; try++)); do
    base=$((20000 + (RANDOM % 120) * 100))
    ok=1
    for ((i = 1; i <= n; i++)); do
      e2e_port_free $((base + i)) && e2e_port_free $((base + 100 + i)) || { ok=0; break; }
    done
    ((ok == 1)) && { echo "$base"; return 0; }
  done
  echo "e2e: no free port range for the cluster in 40 tries" >&2
  return 1
}

# e2e_all_members_answer ENDPOINTS: every member of the comma list answers /v1/status.
e2e_all_members_answer() {
  local ep
  for ep in ${1//,/ }; do
    curl -s --max-time 1 "http://$ep/v1/status" >/dev/null || return 1
  done
}

# e2e_cluster_start DIR N: starts N members with scripts/cluster.sh and exports
# FENCE_ENDPOINTS (the line cluster.sh prints) once every member answers. The
# binary is $FENCE_COORDINATOR_BIN (passed as FENCE_BIN_DIR); the ports are a
# free range unless FENCE_BASE_PORT is set. A port taken between our check and
# the member's bind makes that member fail: then the whole cluster is started
# again on another range (at most 3 attempts).
e2e_cluster_start() {
  local dir=$1 n=$2 out line attempt fixed=${FENCE_BASE_PORT:-}
  local script=${FENCE_CLUSTER_SH:-$E2E_ROOT/scripts/cluster.sh}
  [[ -n "${FENCE_COORDINATOR_BIN:-}" ]] && export FENCE_BIN_DIR=${FENCE_BIN_DIR:-$(dirname "$FENCE_COORDINATOR_BIN")}
  for ((attempt = 1; attempt <= 3; attempt++)); do
    if [[ -z "$fixed" ]]; then
      FENCE_BASE_PORT=$(e2e_free_base_port "$n") || return 1
      export FENCE_BASE_PORT
    fi
    if out=$(bash "$script" start "$dir" "$n" 2>"$dir.cluster-start.err"); then
      line=$(grep -E '^export FENCE_ENDPOINTS=' <<<"$out" | tail -n 1)
      line=${line#export FENCE_ENDPOINTS=}
      if [[ -n "$line" ]] && e2e_wait_for 15 e2e_all_members_answer "$line"; then
        export FENCE_ENDPOINTS=$line
        return 0
      fi
    fi
    echo "e2e: cluster start attempt $attempt on base port $FENCE_BASE_PORT failed:" >&2
    cat "$dir.cluster-start.err" >&2
    tail -n 2 "$dir"/*.log >&2 2>/dev/null
    bash "$script" stop "$dir" >/dev/null 2>&1
    rm -rf "${dir:?}"/*
  done
  return 1
}

# e2e_member_ids DIR: ids of the members cluster.sh started (from DIR/<id>.pid).
e2e_member_ids() {
  local f
  for f in "$1"/*.pid; do
    [[ -f "$f" ]] || continue
    f=${f##*/}
    echo "${f%.pid}"
  done
}

# e2e_member_pid DIR ID
e2e_member_pid() { cat "$1/$2.pid" 2>/dev/null; }

# e2e_status_json ENDPOINT: the member's own /v1/status answer (1 s bound).
e2e_status_json() {
  curl -s --max-time 1 "http://$1/v1/status"
}

# e2e_json_field JSON FIELD: a string or number field of a flat JSON object.
e2e_json_field() {
  local v
  v=$(grep -oE "\"$2\"[[:space:]]*:[[:space:]]*(\"[^\"]*\"|[0-9]+)" <<<"$1" | head -n 1) || return 1
  v=${v#*:}
  v=${v#"${v%%[![:space:]]*}"}
  v=${v#\"}
  echo "${v%\"}"
}
