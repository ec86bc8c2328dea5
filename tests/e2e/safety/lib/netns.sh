# shellcheck shell=bash
# Network namespaces for tests/e2e/safety/run.sh (sourced): every host of a run
# (each coordinator member, each worker, PostgreSQL, and "ctl", from which the
# harness itself probes) gets a network namespace of its own, joined to a Linux
# bridge that lives in one more namespace ("br"). Partitions are nftables rules
# in the bridge namespace's forward hook, so one table sees every packet that
# crosses from one host to another, and one flush heals them all.
#
# Names: NS_TAG is "pgf<pid of run.sh>": namespaces are NS_TAG-<host>, veth ends
# are eth0 (inside a host) and v<index> (inside the bridge namespace). Both ends
# are created directly inside their namespaces: nothing of a run ever appears in
# the root namespace.
# Addresses: NS_NET (198.18.0.0/24, from the benchmarking range RFC 2544 sets
# aside, 198.18.0.0/15). Only the namespaces have them: ns_preflight refuses to
# start if the root namespace has an address or a route of its own in
# 198.18.0.0/15. Nothing of a run sends from the root namespace: every member,
# worker, probe and client runs inside one (ns_exec, ns_spawn), and the root
# namespace's environment carries no test address (a root default route would
# otherwise take such a packet off the machine).
#
#   ns_preflight            root, ip, nft; no 198.18/15 address or route in the root namespace
#   ns_sweep_stale          deletes namespaces of earlier runs whose run.sh is gone (kill -9)
#   ns_setup HOST...        bridge namespace + one namespace per HOST, addressed, linked, up
#   ns_teardown             kills every process in our namespaces, deletes them (idempotent)
#   ns_exec HOST CMD...     runs CMD inside HOST's namespace
#   ns_spawn HOST CMD... &  the same in the background, with $! the pid of CMD itself
#   ns_addr HOST            HOST's address
#   ns_cut NAME DIR A B     drops packets from hosts A to hosts B (DIR "both": and back);
#                           A and B are comma lists of hosts; counted per rule NAME
#   ns_cut_dropped NAME     packets the rules of cut NAME dropped so far
#   ns_heal                 removes every cut
#   ns_reachable SRC HOST PORT   a TCP connection from SRC to HOST:PORT opens within 1 s
#
# Hosts and their addresses: ctl .2, pg .5, wf .9 (the forced stale workers),
# m1..m9 .11-.19, w0..w31 .100-.131.

NS_TAG=${NS_TAG:-pgf$$}
NS_NET=198.18.0
NS_CREATED=()   # namespaces this run made (ns_teardown deletes exactly these)
NS_LOCK_FD=""

ns_name() { echo "$NS_TAG-$1"; }

ns_addr() {
  case $1 in
    ctl) echo "$NS_NET.2" ;;
    pg) echo "$NS_NET.5" ;;
    wf) echo "$NS_NET.9" ;;
    m[1-9]) echo "$NS_NET.$((10 + ${1#m}))" ;;
    w[0-9] | w[0-9][0-9]) echo "$NS_NET.$((100 + ${1#w}))" ;;
    *) echo "netns.sh: unknown host '$1'" >&2; return 1 ;;
  esac
}

# nsenter, not `ip netns exec`: ip forks and waits for CMD, nsenter execs it.
# For a background process use ns_spawn (a backgrounded function runs in a
# subshell, whose pid $! would be).
ns_exec() {
  local host=$1
  shift
  nsenter "--net=/run/netns/$(ns_name "$host")" -- "$@"
}
# ns_spawn HOST CMD... &: the same for a background process. Bash runs a
# backgrounded function in a subshell; exec makes that subshell CMD, so $! is
# CMD's pid (with ns_exec it would be the subshell's, which a kill would miss).
# Only ever call it with & (in the foreground it would replace the caller).
# It also closes the lock's descriptor (ns_lock): a member or PostgreSQL that
# outlived a killed run must not keep the next run out.
# CMD starts with SIGHUP ignored: the nemesis stops processes on purpose, and
# the kernel sends SIGHUP to a stopped process whose process group becomes
# orphaned (the shell that started the run exiting first is enough). A member
# installs its own SIGHUP handler (reloads), which replaces the ignore.
ns_spawn() {
  local host=$1
  shift
  trap '' HUP
  if [[ -n "$NS_LOCK_FD" ]]; then
    exec nsenter "--net=/run/netns/$(ns_name "$host")" -- "$@" {NS_LOCK_FD}>&-
  fi
  exec nsenter "--net=/run/netns/$(ns_name "$host")" -- "$@"
}

ns_preflight() {
  local bad
  [[ $(id -u) -eq 0 ]] || { echo "netns.sh: network namespaces need root (this is uid $(id -u))" >&2; return 1; }
  command -v ip >/dev/null || { echo "netns.sh: ip (iproute2) is not installed" >&2; return 1; }
  command -v nft >/dev/null || { echo "netns.sh: nft (nftables) is not installed" >&2; return 1; }
  bad=$(ip -4 -o addr show 2>/dev/null | awk '$4 ~ /^198\.1[89]\./ { print $2 " " $4 }')
  [[ -z "$bad" ]] || { echo "netns.sh: the root namespace has an address in 198.18.0.0/15 ($bad): refusing to run" >&2; return 1; }
  bad=$(ip -4 route show table all 2>/dev/null | awk '$1 ~ /^198\.1[89]\./')
  [[ -z "$bad" ]] || { echo "netns.sh: the root namespace has a route in 198.18.0.0/15 ($bad): refusing to run" >&2; return 1; }
  echo "netns: pre-flight: root namespace has no address or route in 198.18.0.0/15; every test address lives in a namespace"
}

# A run killed with -9 cannot clean up: its namespaces carry its pid. A pid
# counts as that run's only while it is still a bash running a script of
# tests/e2e/safety (pids are reused).
ns_sweep_stale() {
  local ns pid
  for ns in $(ip netns list 2>/dev/null | awk '{ print $1 }'); do
    [[ "$ns" =~ ^pgf([0-9]+)- ]] || continue
    pid=${BASH_REMATCH[1]}
    [[ "$pid" == "$$" ]] && continue
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'bash.*safety/' && continue
    echo "netns: removing $ns, left by run $pid which is gone" >&2
    ns_kill_all_in "$ns"
    ip netns del "$ns" 2>/dev/null || true
  done
}

# ns_lock: one namespace run at a time on this machine (ctest also marks the
# test RUN_SERIAL; this covers runs started by hand). Waits up to 15 minutes.
ns_lock() {
  exec {NS_LOCK_FD}>/tmp/pgfence-netns.lock
  flock -w 900 "$NS_LOCK_FD" || { echo "netns.sh: another namespace run holds /tmp/pgfence-netns.lock" >&2; return 1; }
}

ns_kill_all_in() {
  local ns=$1 pids i
  for ((i = 0; i < 50; i++)); do
    pids=$(ip netns pids "$ns" 2>/dev/null) || return 0
    [[ -z "$pids" ]] && return 0
    # shellcheck disable=SC2086
    kill -CONT $pids 2>/dev/null
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null
    sleep 0.1
  done
  echo "netns.sh: processes still in $ns after 5 s: $(ip netns pids "$ns" | tr '\n' ' ')" >&2
}

ns_add() {
  ip netns add "$1" || return 1
  NS_CREATED+=("$1")
  ip -n "$1" link set lo up
}

ns_setup() {
  local br host idx=0 ns
  br=$(ns_name br)
  ns_add "$br" || return 1
  ip -n "$br" link add br0 type bridge || return 1
  ip -n "$br" link set br0 up
  ns_nft -f - <<NFT || { echo "netns.sh: nft could not create the bridge table" >&2; return 1; }
table bridge pgfence {
  chain forward { type filter hook forward priority 0; policy accept; }
}
NFT
  for host in "$@"; do
    idx=$((idx + 1))
    ns=$(ns_name "$host")
    ns_add "$ns" || return 1
    ip link add eth0 netns "$ns" type veth peer name "v$idx" netns "$br" || return 1
    ip -n "$br" link set "v$idx" master br0
    ip -n "$br" link set "v$idx" up
    ip -n "$ns" addr add "$(ns_addr "$host")/24" dev eth0
    ip -n "$ns" link set eth0 up
  done
}
# ns_nft ARGS...: nft inside the bridge namespace (never the root namespace's rules).
ns_nft() { nsenter "--net=/run/netns/$(ns_name br)" -- nft "$@"; }

ns_teardown() {
  local ns
  for ns in "${NS_CREATED[@]}"; do ns_kill_all_in "$ns"; done
  for ns in "${NS_CREATED[@]}"; do ip netns del "$ns" 2>/dev/null; done
  NS_CREATED=()
}

# ns_hosts_addrs LIST: "{ a, b }" for nft from a comma list of hosts.
ns_hosts_addrs() {
  local h out=""
  for h in ${1//,/ }; do out+="${out:+, }$(ns_addr "$h")"; done
  echo "{ $out }"
}

ns_cut() {
  local name=$1 dir=$2 a b
  a=$(ns_hosts_addrs "$3") b=$(ns_hosts_addrs "$4")
  ns_nft add rule bridge pgfence forward ip saddr "$a" ip daddr "$b" counter drop comment "\"$name\"" || return 1
  if [[ "$dir" == both ]]; then
    ns_nft add rule bridge pgfence forward ip saddr "$b" ip daddr "$a" counter drop comment "\"$name\"" || return 1
  fi
}

ns_cut_dropped() {
  ns_nft list chain bridge pgfence forward 2>/dev/null |
    awk -v c="comment \"$1\"" 'index($0, c) { for (i = 1; i < NF; i++) if ($i == "packets") n += $(i + 1) } END { print n + 0 }'
}

ns_heal() { ns_nft flush chain bridge pgfence forward; }

ns_reachable() {
  ns_exec "$1" timeout 1 bash -c "exec 3<>/dev/tcp/$(ns_addr "$2")/$3" 2>/dev/null
}
