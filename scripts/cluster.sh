#!/usr/bin/env bash
# Local fence-coordinator cluster on 127.0.0.1 for tests and demos.
#
#   scripts/cluster.sh start DIR [N] [--tls]
#                                      start N (default 3) members, data under DIR/<id>/,
#                                      pid in DIR/<id>.pid, log in DIR/<id>.log; waits
#                                      (bounded) for a leader, then prints exactly one line,
#                                      for eval or to paste into a shell:
#                                      export FENCE_ENDPOINTS=127.0.0.1:p1,...
#                                      Refuses (exit 2, pid files untouched) while a member
#                                      started from DIR still runs: stop DIR first.
#                                      --tls: certificates made in DIR/tls/ (scripts/make-certs.sh:
#                                      CA DIR/tls/ca.pem, client certificate client-admin.pem);
#                                      the HTTP API serves TLS (client certificates checked
#                                      against DIR/tls/ca.pem when asked for), the peers speak
#                                      mutual TLS, and the line is export FENCE_ENDPOINTS=https://...
#   scripts/cluster.sh join DIR ID     start member ID (1..9), already added to the cluster
#                                      (fencectl member add ID --peer-addr 127.0.0.1:BASE+ID
#                                      --client-addr 127.0.0.1:BASE+100+ID), with --join
#                                      (the endpoints of DIR's members); restart reuses it.
#                                      Not with --tls (certificates are made for 1..N only).
#   scripts/cluster.sh restart DIR ID  stop member ID (SIGTERM, SIGKILL after a bound), start it again
#   scripts/cluster.sh stop DIR        stop every member (SIGTERM, then SIGKILL after a bound)
#
# Ports: FENCE_BASE_PORT (default 7400). Member i listens for peers on
# BASE+i and serves HTTP on BASE+100+i (member 1 of the default: 7401 / 7501).
# Binary: $FENCE_BIN_DIR/fence-coordinator, else build/coordinator/server/.
# Extra member flags: FENCE_COORDINATOR_FLAGS (e.g. "--heartbeat-ms 20 --election-ms 150 --min-lease 500").
# Every member is started with --admin-without-auth (status, membership and
# backups answer without --auth-file: a cluster on loopback for tests and
# demos) when the binary knows that flag (a binary of an earlier release,
# e.g. the A side of bench/coordinator/ab.sh, has none and answers them
# without auth anyway); FENCE_ADMIN_WITHOUT_AUTH=0 leaves it out, which
# needs authentication in the flags (the leader poll reads /v1/status).
# The flags used at start are saved in DIR/cluster.env so restart reuses them.
# With --auth-file in the flags, FENCE_STATUS_BEARER_FILE names a bearer
# secret with admin rights for the leader poll (else the TLS client
# certificate client-admin.pem is presented, for --client-cert-auth).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WAIT_LEADER_SECONDS="${FENCE_WAIT_LEADER_SECONDS:-20}"
STOP_GRACE_SECONDS="${FENCE_STOP_GRACE_SECONDS:-10}"

die() { echo "cluster.sh: $*" >&2; exit 2; }

find_bin() {
    local candidates=()
    [[ -n "${FENCE_BIN_DIR:-}" ]] && candidates+=("$FENCE_BIN_DIR/fence-coordinator" "$FENCE_BIN_DIR/coordinator/server/fence-coordinator")
    candidates+=("$ROOT/build/coordinator/server/fence-coordinator" "$ROOT/build/fence-coordinator")
    for c in "${candidates[@]}"; do [[ -x "$c" ]] && { echo "$c"; return; }; done
    die "fence-coordinator not found (tried ${candidates[*]}); build it or set FENCE_BIN_DIR"
}

peer_list() {  # N BASE
    local n=$1 base=$2 out="" i
    for ((i = 1; i <= n; i++)); do out+="${out:+,}$i=127.0.0.1:$((base + i))"; done
    echo "$out"
}

start_member() {  # DIR ID
    local dir=$1 id=$2
    # shellcheck disable=SC1091
    source "$dir/cluster.env"
    mkdir -p "$dir/$id"
    local tls=()
    if [[ "${TLS:-0}" == 1 ]]; then
        tls=(--cert-file "$dir/tls/member-$id.pem" --key-file "$dir/tls/member-$id-key.pem"
             --trusted-ca-file "$dir/tls/ca.pem"
             --peer-cert-file "$dir/tls/peer-$id.pem" --peer-key-file "$dir/tls/peer-$id-key.pem"
             --peer-trusted-ca-file "$dir/tls/peer-ca.pem")
    fi
    # A member that joined keeps joining (its data directory says who it is;
    # --join only matters until it has its configuration).
    local boot=(--peers "$PEERS")
    if [[ -f "$dir/$id.join" ]]; then boot=(--join "$(cat "$dir/$id.join")"); fi
    # A local cluster for tests and demos: its admin endpoints (status,
    # membership, backups) answer without auth too, unless
    # FENCE_ADMIN_WITHOUT_AUTH=0 (auth, when the flags configure it, decides).
    # A binary from before --admin-without-auth existed (ADMIN_FLAG=0, found
    # once at start) serves them without auth anyway and refuses the flag.
    local admin=(--admin-without-auth)
    [[ "${FENCE_ADMIN_WITHOUT_AUTH:-1}" == 0 || "${ADMIN_FLAG:-1}" == 0 ]] && admin=()
    # shellcheck disable=SC2086
    "$BIN" --id "$id" "${boot[@]}" --client-addr "127.0.0.1:$((BASE + 100 + id))" \
        --data-dir "$dir/$id" "${tls[@]}" "${admin[@]}" $FLAGS >>"$dir/$id.log" 2>&1 &
    echo $! >"$dir/$id.pid"
}

# shellcheck source=lib/process.sh
source "$ROOT/scripts/lib/process.sh"  # alive

stop_member() {  # DIR ID
    local pidfile="$1/$2.pid" pid i
    [[ -f "$pidfile" ]] || return 0
    pid=$(cat "$pidfile")
    if alive "$pid"; then
        kill -CONT "$pid" 2>/dev/null || true
        kill -TERM "$pid" 2>/dev/null || true
        for ((i = 0; i < STOP_GRACE_SECONDS * 10; i++)); do
            alive "$pid" || break
            sleep 0.1
        done
        if alive "$pid"; then
            echo "cluster.sh: member $2 (pid $pid) ignored SIGTERM for ${STOP_GRACE_SECONDS}s; SIGKILL" >&2
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    rm -f "$pidfile"
}

# The members of DIR whose pid file names a running fence-coordinator, as
# "ID (pid PID)" items separated by commas. A pid file whose process is gone, or whose pid now
# belongs to another program, names no running member.
running_members() {  # DIR
    local pidfile pid out=()
    for pidfile in "$1"/*.pid; do
        [[ -f "$pidfile" ]] || continue
        pid=$(cat "$pidfile")
        [[ "$pid" =~ ^[0-9]+$ ]] && alive "$pid" || continue
        # comm holds the first 15 bytes of the program's name.
        [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == fence-coordinat* ]] || continue
        out+=("$(basename "$pidfile" .pid) (pid $pid)")
    done
    local IFS=,
    echo "${out[*]}"
}

# Fails, with the end of its log, if a member started from DIR has exited.
members_alive() {  # DIR
    local dir=$1 pidfile pid
    for pidfile in "$dir"/*.pid; do
        [[ -f "$pidfile" ]] || continue
        pid=$(cat "$pidfile")
        if ! alive "$pid"; then
            echo "cluster.sh: member $(basename "$pidfile" .pid) (pid $pid) exited; end of its log:" >&2
            tail -n 5 "${pidfile%.pid}.log" >&2 || true
            return 1
        fi
    done
}

# True if member ID of DIR (its pid file) is the process listening on its
# HTTP port, so that another cluster left on the same ports is not mistaken
# for this one. Without ss (iproute2) the check is skipped.
own_port() {  # DIR ID
    command -v ss >/dev/null || return 0
    local pid
    pid=$(cat "$1/$2.pid" 2>/dev/null) || return 1
    ss -Hltnp "sport = :$((BASE + 100 + $2))" 2>/dev/null | grep -q "pid=$pid,"
}

# Polls /v1/status of every member until one reports role leader (bounded).
wait_leader() {  # DIR
    local dir=$1 deadline=$((SECONDS + WAIT_LEADER_SECONDS)) i scheme=http
    # shellcheck disable=SC1091
    source "$dir/cluster.env"
    local curl_flags=()
    if [[ "${TLS:-0}" == 1 ]]; then
        scheme=https
        curl_flags+=(--cacert "$dir/tls/ca.pem" --cert "$dir/tls/client-admin.pem" --key "$dir/tls/client-admin-key.pem")
    fi
    if [[ -n "${FENCE_STATUS_BEARER_FILE:-}" ]]; then
        # From a file (mode 600), not the command line, where ps would show the secret.
        (umask 077 && printf 'Authorization: Bearer %s\n' "$(head -n 1 "$FENCE_STATUS_BEARER_FILE")" >"$dir/.status-header")
        curl_flags+=(-H "@$dir/.status-header")
    fi
    while ((SECONDS < deadline)); do
        # A member that exited (e.g. its port was taken) must not let a stale
        # cluster on the same ports pass for this one.
        members_alive "$dir" || return 1
        for ((i = 1; i <= N; i++)); do
            own_port "$dir" "$i" || continue
            if curl -s -m 1 "${curl_flags[@]}" "$scheme://127.0.0.1:$((BASE + 100 + i))/v1/status" 2>/dev/null | grep -Eq '^\{"id":[0-9]+,"role":"leader"'; then
                return 0
            fi
        done
        sleep 0.1
    done
    echo "cluster.sh: no leader after ${WAIT_LEADER_SECONDS}s; logs in $dir/*.log" >&2
    return 1
}

endpoints() {  # DIR
    # shellcheck disable=SC1091
    source "$1/cluster.env"
    local out="" i scheme=""
    [[ "${TLS:-0}" == 1 ]] && scheme=https://
    for ((i = 1; i <= N; i++)); do out+="${out:+,}${scheme}127.0.0.1:$((BASE + 100 + i))"; done
    echo "$out"
}

cmd_start() {
    local tls=0 args=() a
    for a in "$@"; do
        if [[ "$a" == --tls ]]; then tls=1; else args+=("$a"); fi
    done
    set -- "${args[@]}"
    local dir=${1:?usage: cluster.sh start DIR [N] [--tls]} n=${2:-3} base=${FENCE_BASE_PORT:-7400} i
    [[ "$n" =~ ^[1-9]$ ]] || die "N must be 1..9, got '$n'"
    local bin
    bin=$(find_bin) || exit 2
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    # Before anything in DIR is written: a second start would overwrite the
    # pid files, and stop would no longer find the members still running.
    local running
    running=$(running_members "$dir")
    [[ -z "$running" ]] || die "members of $dir are still running: ${running//,/, }; stop them first: $0 stop $dir"
    if ((tls)); then "$ROOT/scripts/make-certs.sh" "$dir/tls" "$n" admin || exit 2; fi
    # Whether this binary knows --admin-without-auth (an older release has
    # no such flag and exits 2 on it). Not a pipe into grep -q: with
    # pipefail, the binary's SIGPIPE would fail the test.
    local help admin_flag=0
    help=$("$bin" --help 2>&1 || true)
    [[ "$help" == *--admin-without-auth* ]] && admin_flag=1
    cat >"$dir/cluster.env" <<ENV
N=$n
BASE=$base
BIN=$bin
ADMIN_FLAG=$admin_flag
TLS=$tls
PEERS=$(peer_list "$n" "$base")
FLAGS="${FENCE_COORDINATOR_FLAGS:-}"
ENV
    for ((i = 1; i <= n; i++)); do start_member "$dir" "$i"; done
    wait_leader "$dir" || exit 1
    echo "export FENCE_ENDPOINTS=$(endpoints "$dir")"
}

cmd_join() {
    local dir=${1:?usage: cluster.sh join DIR ID} id=${2:?usage: cluster.sh join DIR ID}
    [[ -f "$dir/cluster.env" ]] || die "$dir/cluster.env missing: was the cluster started with 'start $dir'?"
    [[ "$id" =~ ^[1-9]$ ]] || die "ID must be 1..9, got '$id'"
    # shellcheck disable=SC1091
    source "$dir/cluster.env"
    [[ "${TLS:-0}" == 1 ]] && die "join is not supported with --tls (no certificate for member $id)"
    [[ -f "$dir/$id.pid" ]] && alive "$(cat "$dir/$id.pid")" && die "member $id is running already"
    local out="" i
    for ((i = 1; i <= 9; i++)); do
        [[ $i == "$id" ]] && continue
        if [[ -f "$dir/$i.pid" ]]; then out+="${out:+,}127.0.0.1:$((BASE + 100 + i))"; fi
    done
    [[ -n "$out" ]] || die "no member of $dir is running to join"
    echo "$out" >"$dir/$id.join"
    start_member "$dir" "$id"
}

cmd_restart() {
    local dir=${1:?usage: cluster.sh restart DIR ID} id=${2:?usage: cluster.sh restart DIR ID}
    [[ -f "$dir/cluster.env" ]] || die "$dir/cluster.env missing: was the cluster started with 'start $dir'?"
    stop_member "$dir" "$id"
    start_member "$dir" "$id"
}

cmd_stop() {
    local dir=${1:?usage: cluster.sh stop DIR} f
    for f in "$dir"/*.pid; do
        [[ -e "$f" ]] || continue
        stop_member "$dir" "$(basename "$f" .pid)" &
    done
    wait
}

case "${1:-}" in
    start) shift; cmd_start "$@" ;;
    join) shift; cmd_join "$@" ;;
    restart) shift; cmd_restart "$@" ;;
    stop) shift; cmd_stop "$@" ;;
    *) echo "usage: cluster.sh start DIR [N] [--tls] | join DIR ID | restart DIR ID | stop DIR" >&2; exit 2 ;;
esac
