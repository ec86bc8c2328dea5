# shellcheck shell=bash
# A throwaway PostgreSQL for the demo and the end-to-end tests (sourced).
#
#   pg_throwaway_start DIR [NAME=VALUE...]
#                            initdb + pg_ctl start on a free loopback port, with
#                            pg_fence preloaded and the given server settings
#                            (e.g. wal_level=logical); exports PGHOST PGPORT
#                            PGUSER PGDATABASE so psql and libpq need no
#                            arguments, and writes the port to DIR/pg/port.
#   pg_throwaway_launch DIR [NAME=VALUE...]
#                            the start without the initdb: starts the data
#                            directory DIR/pg/data made otherwise (e.g. by
#                            pg_basebackup, as the server's owner).
#   pg_throwaway_stop DIR    stops it (immediate) and is safe to call twice.
#
# Works as root (the server runs as the `postgres` user, which Debian's
# postgresql package creates) and as an ordinary user. Loopback only; trust
# authentication on 127.0.0.1, which is fine for a server that lives a minute.
#
# In a network namespace (tests/e2e/safety/lib/netns.sh): with PG_NETNS (the
# namespace) and PG_LISTEN (its address) set, the server runs inside PG_NETNS
# on PG_LISTEN:5432 and trusts PG_TRUST_NET (a CIDR); PGHOST is then the Unix
# socket directory (which no network cut reaches), for the harness's own queries,
# and PG_TCP_HOST/PGPORT are what clients in other namespaces connect to.
#
# In a chroot of another PostgreSQL major (scripts/pg-chroot.sh with SUITE
# ...: PG_CHROOT and PG_CHROOT_BIN set), the server and every PostgreSQL
# program (psql, pg_dump, pgbouncer, ...) are the chroot's: PG_CHROOT_BIN
# holds wrappers that run them there, and comes first in PATH; the data
# directory lives under /tmp, which the chroot shares.
#
#   pg_give_to_owner PATH... chown -R PATHs to the server's owner (the
#                            chroot's postgres user in a chroot)

pg_bindir() {
  local d
  if [[ -n "${PG_CHROOT_BIN:-}" ]]; then echo "$PG_CHROOT_BIN"; return 0; fi
  d=$(pg_config --bindir 2>/dev/null) || true
  if [[ -x "$d/pg_ctl" ]]; then echo "$d"; return 0; fi
  for d in /usr/lib/postgresql/15/bin /usr/lib/postgresql/*/bin; do
    [[ -x "$d/pg_ctl" ]] && { echo "$d"; return 0; }
  done
  echo "pg.sh: no pg_ctl found (install postgresql-15)" >&2
  return 1
}

# pg_as_owner CMD...: runs CMD as the server's owner (postgres when we are root).
pg_as_owner() {
  if [[ -n "${PG_CHROOT_BIN:-}" ]]; then
    PG_CHROOT_AS_OWNER=1 "$@"
  elif [[ $(id -u) -eq 0 ]]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

pg_give_to_owner() {
  if [[ -n "${PG_CHROOT:-}" ]]; then
    chroot "$PG_CHROOT" chown -R postgres: "$@"
  elif [[ $(id -u) -eq 0 ]]; then
    chown -R postgres: "$@"
  fi
}

# pg_server_as_owner CMD...: pg_as_owner, inside PG_NETNS when that is set
# (the namespace mode needs root, so the owner is postgres there).
pg_server_as_owner() {
  if [[ -n "${PG_NETNS:-}" && -n "${NS_LOCK_FD:-}" ]]; then
    # (without the namespace lock's descriptor: see ns_spawn)
    nsenter "--net=/run/netns/$PG_NETNS" -- runuser -u postgres -- "$@" {NS_LOCK_FD}>&-
  elif [[ -n "${PG_NETNS:-}" ]]; then
    nsenter "--net=/run/netns/$PG_NETNS" -- runuser -u postgres -- "$@"
  else
    pg_as_owner "$@"
  fi
}

# pg_free_port: a loopback TCP port nobody listens on (scripts/lib/pg-common.sh)
# shellcheck source=../../../../scripts/lib/pg-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../../../scripts/lib/pg-common.sh"

pg_throwaway_start() {
  local dir=$1 bindir
  shift
  bindir=$(pg_bindir) || return 1
  if [[ ! -f "${PG_CHROOT:-}$(pg_config --pkglibdir)/pg_fence.so" ]]; then
    echo "pg.sh: pg_fence is not installed in ${PG_CHROOT:-}$(pg_config --pkglibdir) (run: make -C pg_extension install)" >&2
    return 1
  fi
  mkdir -p "$dir/pg"
  chmod 711 "$dir"
  pg_give_to_owner "$dir/pg"
  pg_as_owner "$bindir/initdb" -D "$dir/pg/data" -U postgres -A trust -E UTF8 \
    --locale=C --no-sync >"$dir/pg/initdb.log" 2>&1 ||
    { echo "pg.sh: initdb failed, see $dir/pg/initdb.log:" >&2; tail -n 5 "$dir/pg/initdb.log" >&2; return 1; }
  if [[ -n "${PG_NETNS:-}" ]]; then
    echo "host all all ${PG_TRUST_NET:?PG_TRUST_NET must be set with PG_NETNS} trust" >>"$dir/pg/data/pg_hba.conf"
  fi
  pg_throwaway_launch "$dir" "$@"
}

pg_throwaway_launch() {
  local dir=$1 bindir port i opts setting
  shift
  bindir=$(pg_bindir) || return 1
  opts="-c listen_addresses=${PG_LISTEN:-127.0.0.1} -c unix_socket_directories='$dir/pg'"
  opts+=" -c shared_preload_libraries=pg_fence -c fsync=off -c max_connections=60"
  for setting in "$@"; do
    [[ $setting == *=* && $setting != *"'"* ]] ||
      { echo "pg.sh: a setting is NAME=VALUE without single quotes, not: $setting" >&2; return 1; }
    opts+=" -c ${setting%%=*}='${setting#*=}'"
  done
  for ((i = 0; i < 5; i++)); do
    if [[ -n "${PG_NETNS:-}" ]]; then port=5432; else port=$(pg_free_port) || return 1; fi
    if pg_server_as_owner "$bindir/pg_ctl" -D "$dir/pg/data" -l "$dir/pg/server.log" -w -t 60 \
         -o "$opts -c port=$port" \
         start >"$dir/pg/pg_ctl.log" 2>&1; then
      export PGHOST=127.0.0.1 PGPORT=$port PGUSER=postgres PGDATABASE=postgres
      if [[ -n "${PG_NETNS:-}" ]]; then
        export PGHOST=$dir/pg PG_TCP_HOST=$PG_LISTEN
      fi
      echo "$port" >"$dir/pg/port"
      pg_check_major || return 1
      return 0
    fi
  done
  echo "pg.sh: PostgreSQL did not start, see $dir/pg/server.log:" >&2
  tail -n 10 "$dir/pg/server.log" >&2
  return 1
}

# pg_check_major: in a chroot, the server that answers is the chroot's major
pg_check_major() {
  [[ -n "${PG_CHROOT_MAJOR:-}" ]] || return 0
  local v
  v=$(psql -X -At -c 'SHOW server_version_num' 2>&1)
  [[ $v =~ ^[0-9]+$ && $((v / 10000)) == "$PG_CHROOT_MAJOR" ]] && return 0
  echo "pg.sh: the server on port $PGPORT is not PostgreSQL $PG_CHROOT_MAJOR (server_version_num: $v)" >&2
  return 1
}

pg_throwaway_stop() {
  local dir=$1 bindir
  [[ -f "$dir/pg/data/postmaster.pid" ]] || return 0
  bindir=$(pg_bindir) || return 0
  pg_as_owner "$bindir/pg_ctl" -D "$dir/pg/data" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
}
