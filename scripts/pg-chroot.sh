#!/usr/bin/env bash
# pg-chroot.sh: Debian chroots that carry the PostgreSQL majors the host does
# not, for the PostgreSQL matrix (scripts/pg-matrix.sh) and make check-debian13.
#
#   pg-chroot.sh ensure SUITE       make the chroot of SUITE (trixie: PostgreSQL 17,
#                                   sid: 18) when it is missing, half-made or broken;
#                                   prints its path
#   pg-chroot.sh ready SUITE        exits 0 when the chroot is made and sound
#   pg-chroot.sh path SUITE         prints the path (made or not)
#   pg-chroot.sh major SUITE        prints the PostgreSQL major SUITE carries
#   pg-chroot.sh with SUITE CMD...  runs CMD (a host command) in a private mount
#                                   and PID namespace in which a copy-on-write
#                                   view of the chroot (below) has /proc,
#                                   /dev, /dev/shm, /dev/pts, the host's /tmp and
#                                   this checkout (at the same paths) mounted;
#                                   CMD finds the chroot in $PG_CHROOT (its major
#                                   in $PG_CHROOT_MAJOR) and runs commands there
#                                   with `chroot "$PG_CHROOT" ...`; and $PATH
#                                   starts with $PG_CHROOT_BIN, a wrapper for each
#                                   of the chroot's PostgreSQL programs (psql,
#                                   pg_ctl, pg_dump, ..., pgbouncer) that runs it
#                                   there, in the caller's directory, as the
#                                   chroot's postgres user when
#                                   PG_CHROOT_AS_OWNER=1 (tests/e2e/safety/lib/pg.sh)
#   pg-chroot.sh run SUITE [NAME=VALUE...] CMD...
#                                   `with`, running CMD inside the chroot, as
#                                   root, in a clean environment (root's PATH,
#                                   HOME, LANG=C.UTF-8 and the NAME=VALUEs given)
#   pg-chroot.sh clean [SUITE]      removes the chroot(s)
#
# The chroots live outside the checkout, in $PGFENCE_CHROOT_CACHE (default
# /var/cache/pgfence/chroots), one directory per suite, made once with
# debootstrap from $PGFENCE_CHROOT_MIRROR (default: the Debian mirror of the
# host's apt sources). A chroot is used only when its stamp file (written
# last, naming the package list) matches this script's list and the
# PostgreSQL it carries answers; anything else (a run killed halfway, a
# changed list) is removed and made again. A run sees the chroot through an
# overlay whose changes live in memory: what it installs there (pg_fence, a
# package) is gone when it ends, so runs never see each other's state, and a
# run holds a shared lock that keeps the chroot from being made again under
# it. Every mount lives in a namespace of its own (unshare), so the kernel
# undoes all of them, and ends every process started there, when the command
# ends: also on failure, Ctrl-C or SIGKILL. Bounded: debootstrap and apt get
# 30 minutes each, waiting for a lock 60. Needs root.
set -euo pipefail
shopt -s inherit_errexit

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${PGFENCE_CHROOT_CACHE:-/var/cache/pgfence/chroots}
MIRROR=${PGFENCE_CHROOT_MIRROR:-}

die() { echo "pg-chroot: $*" >&2; exit 1; }

suite_major() {
  case $1 in
    trixie) echo 17 ;;
    sid) echo 18 ;;
    *) die "unknown suite '$1' (known: trixie for PostgreSQL 17, sid for 18)" ;;
  esac
}

# What a chroot carries: the server and its headers, what pg_fence builds
# with, what its tests run (pg_virtualenv, perl, openssl), what the package
# test needs (dpkg-shlibdeps, strip), and the DBA tools the e2e tests use.
# On trixie also the coordinator's build dependencies, for make check-debian13.
suite_packages() {
  local major
  major=$(suite_major "$1")
  echo "postgresql-$major postgresql-server-dev-$major postgresql-common"
  echo "postgresql-$major-repack pgbouncer"
  echo "build-essential make libssl-dev libsodium-dev openssl perl locales"
  echo "dpkg-dev binutils"
  if [[ $1 == trixie ]]; then
    echo "cmake pkg-config libboost-dev libboost-json-dev libboost-test-dev"
    echo "libjemalloc-dev help2man python3 iproute2 procps"
  fi
}

chroot_path() { echo "$CACHE/$1"; }
stamp_of() { echo "$(chroot_path "$1")/.pgfence-chroot"; }
wanted_stamp() { printf 'pgfence chroot v1 %s: %s\n' "$1" "$(suite_packages "$1" | xargs)"; }

# mounts_under DIR: mount points of this namespace at or below DIR.
mounts_under() {
  awk -v d="$1" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/self/mounts
}

# remove_tree DIR: removes DIR, which must lie inside the cache; never follows
# a mount out of the tree (a mount left in the host's namespace by something
# else is unmounted first, or the removal stops).
remove_tree() {
  local dir=$1 m cache
  [[ -e $dir ]] || return 0
  dir=$(realpath -e "$dir")
  cache=$(realpath -e "$CACHE")
  [[ $dir == "$cache"/?* ]] || die "refusing to remove $dir: not inside the cache $cache"
  for m in $(mounts_under "$dir" | sort -r); do
    umount -l "$m" || die "cannot unmount $m; remove $dir by hand"
  done
  [[ -z $(mounts_under "$dir") ]] || die "mounts remain under $dir"
  rm -rf --one-file-system "$dir"
}

# healthy SUITE: the stamp matches and the server's pg_config answers.
healthy() {
  local dir major
  dir=$(chroot_path "$1")
  major=$(suite_major "$1")
  [[ -f $(stamp_of "$1") && "$(cat "$(stamp_of "$1")")" == "$(wanted_stamp "$1")" ]] || return 1
  chroot "$dir" "/usr/lib/postgresql/$major/bin/pg_config" --version >/dev/null 2>&1 || return 1
  [[ -x $dir/usr/bin/pg_virtualenv ]] || return 1
}

mirror_url() {
  if [[ -n $MIRROR ]]; then echo "$MIRROR"; return; fi
  # the first Debian URI of the host's apt sources
  local url
  url=$(grep -shoE 'https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/* |
        grep -v security | head -n1 | tr -d ' ' || true)
  echo "${url:-http://deb.debian.org/debian}"
}

make_chroot() {
  local suite=$1 dir tmp url major start
  dir=$(chroot_path "$suite")
  major=$(suite_major "$suite")
  url=$(mirror_url)
  command -v debootstrap >/dev/null || {
    echo "pg-chroot: installing debootstrap" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null 2>&1 ||
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null; } ||
      die "cannot install debootstrap"
  }
  mkdir -p "$CACHE"
  remove_tree "$dir"
  tmp="$dir.partial"
  remove_tree "$tmp"
  start=$(date +%s)
  echo "pg-chroot: making the $suite chroot (PostgreSQL $major) from $url in $dir; a few minutes, once" >&2
  # debootstrap mounts /proc and /sys in the target while it runs: in a
  # namespace of its own, those mounts end with it, however it ends.
  if ! timeout 1800 unshare --mount --propagation private -- \
       debootstrap --variant=minbase --include=ca-certificates "$suite" "$tmp" "$url" >"$CACHE/$suite.debootstrap.log" 2>&1; then
    tail -n 20 "$CACHE/$suite.debootstrap.log" >&2
    die "debootstrap $suite failed or took over 30 minutes (log: $CACHE/$suite.debootstrap.log)"
  fi
  # Debian's postgresql-common creates a cluster when a server is installed:
  # not wanted here (the tests make throwaway ones).
  mkdir -p "$tmp/etc/postgresql-common/createcluster.d"
  echo "create_main_cluster = false" >"$tmp/etc/postgresql-common/createcluster.d/pgfence.conf"
  # The mirror may serve a frozen copy of a suite whose Release file is past
  # its Valid-Until (sid's is valid for days only): its signature is still
  # checked, its age is not.
  echo 'Acquire::Check-Valid-Until "false";' >"$tmp/etc/apt/apt.conf.d/99pgfence"
  # no service may start inside the chroot
  printf '#!/bin/sh\nexit 101\n' >"$tmp/usr/sbin/policy-rc.d"
  chmod 0755 "$tmp/usr/sbin/policy-rc.d"
  # shellcheck disable=SC2046
  if ! timeout 1800 unshare --mount --propagation private -- bash -c '
        set -e
        root=$1
        shift
        mount -t proc proc "$root/proc"
        mount --rbind /dev "$root/dev"
        cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
        chroot "$root" /usr/bin/env DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 \
          sh -c "apt-get update -qq && apt-get install -y -qq --no-install-recommends $*"
      ' _ "$tmp" $(suite_packages "$suite" | xargs) >"$CACHE/$suite.apt.log" 2>&1; then
    tail -n 20 "$CACHE/$suite.apt.log" >&2
    die "installing PostgreSQL $major in the $suite chroot failed or took over 30 minutes (log: $CACHE/$suite.apt.log)"
  fi
  chroot "$tmp" apt-get clean
  wanted_stamp "$suite" >"$tmp/.pgfence-chroot"
  mv "$tmp" "$dir"
  healthy "$suite" || die "the $suite chroot was made but does not answer (pg_config $major, pg_virtualenv)"
  echo "pg-chroot: $suite ready in $(( $(date +%s) - start )) s ($(du -sh --one-file-system "$dir" | cut -f1))" >&2
}

ensure() {
  local suite=$1
  suite_major "$suite" >/dev/null
  [[ $(id -u) -eq 0 ]] || die "needs root (debootstrap, chroot, mounts)"
  if ! healthy "$suite"; then
    [[ -e $(chroot_path "$suite") ]] && echo "pg-chroot: the $suite chroot is half-made, outdated or broken: making it again" >&2
    # one maker at a time, and none while a run uses the chroot
    mkdir -p "$CACHE"
    exec 9>"$CACHE/.$suite.lock"
    flock -w 3600 9 || die "the $suite chroot stayed locked (by another run or maker) for 60 minutes"
    healthy "$suite" || make_chroot "$suite"
    exec 9>&-
  fi
  chroot_path "$suite"
}

# with SUITE CMD...: see the header. The inner script runs as PID 1 of a new
# PID namespace: when it exits, every process left in the namespace is killed
# and the namespace's mounts go with it. The overlay's upper layer, the
# wrappers and the view itself live on a tmpfs mounted (in the namespace
# only) on $CACHE/.run.
with_chroot() {
  local suite=$1 dir
  shift
  (($# > 0)) || die "with: no command"
  dir=$(ensure "$suite")
  mkdir -p "$CACHE/.run"
  exec 9>"$CACHE/.$suite.lock"
  flock -s -w 3600 9 || die "the $suite chroot stayed locked (being made) for 60 minutes"
  healthy "$suite" || die "the $suite chroot changed before the run could start: run again"
  PG_CHROOT_LOWER=$dir PG_CHROOT_SUITE=$suite PG_CHROOT_MAJOR=$(suite_major "$suite") \
  PGFENCE_ROOT=$ROOT PG_CHROOT_BASE=$CACHE/.run \
  exec unshare --mount --propagation private --pid --fork --kill-child --mount-proc -- bash -c '
    set -e
    b=$PG_CHROOT_BASE
    mount -t tmpfs -o mode=0755 pgfence-chroot "$b"
    mkdir "$b/upper" "$b/work" "$b/root" "$b/bin"
    mount -t overlay overlay -o "lowerdir=$PG_CHROOT_LOWER,upperdir=$b/upper,workdir=$b/work" "$b/root"
    r=$b/root
    mount -t proc proc "$r/proc"
    mount --rbind /dev "$r/dev"
    mount --make-rslave "$r/dev"
    mount -t tmpfs -o mode=1777 shm "$r/dev/shm"
    mount --bind /tmp "$r/tmp"
    mkdir -p "$r$PGFENCE_ROOT"
    mount --bind "$PGFENCE_ROOT" "$r$PGFENCE_ROOT"
    cp /etc/resolv.conf "$r/etc/resolv.conf" 2>/dev/null || true
    export PG_CHROOT=$r
    cat >"$b/run" <<"RUN"
#!/bin/sh
# run PROGRAM ARGS...: PROGRAM of the chroot, in the caller directory (the
# chroot shares /tmp and the checkout), as postgres when PG_CHROOT_AS_OWNER=1
prog=$1
shift
if [ "${PG_CHROOT_AS_OWNER:-0}" = 1 ]; then
  set -- runuser -u postgres -- "$prog" "$@"
else
  set -- "$prog" "$@"
fi
exec chroot "$PG_CHROOT" /bin/sh -c "cd \"\$0\" 2>/dev/null || cd /; exec \"\$@\"" "$PWD" "$@"
RUN
    chmod 0755 "$b/run"
    for prog in "$r/usr/lib/postgresql/$PG_CHROOT_MAJOR/bin/"* "$r/usr/sbin/pgbouncer"; do
      [ -x "$prog" ] || continue
      printf "#!/bin/sh\nexec %s %s \"\$@\"\n" "$b/run" "${prog#"$r"}" >"$b/bin/${prog##*/}"
      chmod 0755 "$b/bin/${prog##*/}"
    done
    export PG_CHROOT_BIN=$b/bin PATH=$b/bin:$PATH
    unset PG_CHROOT_LOWER PG_CHROOT_BASE
    set +e
    "$@"
  ' _ "$@"
}

case ${1:-} in
  ensure) ensure "${2:?usage: pg-chroot.sh ensure SUITE}" ;;
  ready) suite_major "${2:?usage: pg-chroot.sh ready SUITE}" >/dev/null && healthy "$2" ;;
  run)
    shift
    with_chroot "${1:?usage: pg-chroot.sh run SUITE [NAME=VALUE...] CMD...}" \
      bash -c 'exec chroot "$PG_CHROOT" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"' _ "${@:2}" ;;
  path) chroot_path "${2:?usage: pg-chroot.sh path SUITE}" ;;
  major) suite_major "${2:?usage: pg-chroot.sh major SUITE}" ;;
  with) shift; with_chroot "${1:?usage: pg-chroot.sh with SUITE CMD...}" "${@:2}" ;;
  clean)
    if [[ -n ${2:-} ]]; then
      suite_major "$2" >/dev/null
      remove_tree "$(chroot_path "$2")"
    else
      for s in trixie sid; do remove_tree "$(chroot_path "$s")"; done
    fi ;;
  -h|--help|help|"") sed -n '2,/^set -euo/p' "$0" | sed '$d'  | sed 's/^# \{0,1\}//' ;;
  *) die "unknown command '$1' (ensure, ready, path, major, with, run, clean; --help)" ;;
esac
