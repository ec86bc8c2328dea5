#!/usr/bin/env bash
# Installs the Debian packages pgfence needs, only those that are missing, on
# Debian 12 (bookworm) and Debian 13 (trixie); the release comes from
# /etc/os-release (VERSION_CODENAME, else VERSION_ID). Idempotent and quick
# when everything is present; runs `apt-get update` only when something must
# be installed. Needs root (or sudo) for the install.
#
#   install-deps.sh            install what is missing
#   install-deps.sh --print    print the release's choices, one NAME=VALUE a line
#                              (release, postgresql, clang), install nothing
#
# What differs between the releases:
#                   Debian 12 (bookworm)          Debian 13 (trixie)
#   PostgreSQL      15                            17 (its contrib modules are in
#                                                 postgresql-17: no postgresql-contrib)
#   Boost           1.81 (libboost1.81-dev, ...)  1.83, the release's default
#                                                 (libboost-dev, ...)
#   clang           14 + libclang-rt-14-dev       19 + libclang-rt-19-dev
#   etcd (benches)  3.4                           3.5
# Environment: PGFENCE_BENCH_DEPS=1 adds the benchmarks' packages;
# PGFENCE_OS_RELEASE names another os-release file (default /etc/os-release).
set -euo pipefail

die() { echo "install-deps: $*" >&2; exit 1; }

os_release=${PGFENCE_OS_RELEASE:-/etc/os-release}
[[ -r $os_release ]] || die "cannot read $os_release: which Debian release is this?"
# a subshell: the file's variables (NAME, VERSION, ...) stay out of this script
IFS='|' read -r release_id codename version_id pretty < <(
  # shellcheck disable=SC1090
  . "$os_release"
  printf '%s|%s|%s|%s\n' "${ID:-?}" "${VERSION_CODENAME:-}" "${VERSION_ID:-}" "${PRETTY_NAME:-unknown}")
if [[ -z $codename ]]; then
  case $version_id in
    12) codename=bookworm ;;
    13) codename=trixie ;;
  esac
fi

supported="Debian 12 (bookworm) and Debian 13 (trixie)"
[[ $release_id == debian ]] ||
  die "unsupported system '$pretty' (ID=$release_id in $os_release): supported are $supported"
case $codename in
  bookworm)
    pg_major=15
    clang_major=14
    boost=(libboost1.81-dev libboost-json1.81-dev libboost-test1.81-dev)
    release_only=(postgresql-contrib)
    ;;
  trixie)
    pg_major=17
    clang_major=19
    boost=(libboost-dev libboost-json-dev libboost-test-dev)
    release_only=()
    ;;
  *)
    die "unsupported release '$pretty' (VERSION_CODENAME=${codename:-none}, VERSION_ID=${version_id:-none}): supported are $supported"
    ;;
esac

if [[ ${1:-} == --print ]]; then
  printf 'release=%s\npostgresql=%s\nclang=%s\n' "$codename" "$pg_major" "$clang_major"
  exit 0
fi
[[ $# -eq 0 ]] || die "unknown argument '$1' (none, or --print)"

packages=(
  build-essential cmake pkg-config git curl
  "postgresql-$pg_major" "postgresql-client-$pg_major" "postgresql-server-dev-$pg_major"
  "postgresql-$pg_major-repack" "${release_only[@]}" libpq-dev pgbouncer
  "${boost[@]}" libjemalloc-dev libssl-dev openssl libsodium-dev
  "clang-$clang_major" "libclang-rt-$clang_major-dev"
  iproute2 nftables faketime fiu-utils gnuplot-nox
  jq help2man dpkg-dev systemd prometheus prometheus-postgres-exporter
  python3 python3-psycopg2
)
# Only the benchmarks need these: etcd for the side-by-side one (make
# bench-coordinator), valgrind to count instructions (make bench-pg-instr),
# gRPC++, protoc and etcd's .proto files (golang-etcd-server-dev) for its
# etcd-grpc row (bench/etcd_grpc; the build strips the Go-only annotations from
# the .proto files, so gogo-protobuf's and googleapis' .proto files are not needed).
if [[ "${PGFENCE_BENCH_DEPS:-0}" == 1 ]]; then
  packages+=(etcd-server etcd-client valgrind
             libgrpc++-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev golang-etcd-server-dev)
fi

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages for $codename present"
  exit 0
fi

echo "install-deps: installing for $codename: ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || die "run as root (or install sudo) to install: ${missing[*]}"
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
# The tests run their own prometheus, exporter and pgbouncer; on a machine
# that runs systemd, Debian starts these services on install: stop and
# disable the ones installed now (ports 9090, 9187, 6432 stay free).
if [[ -d /run/systemd/system ]]; then
  for service in prometheus prometheus-postgres-exporter pgbouncer; do
    if [[ " ${missing[*]} " == *" $service "* ]]; then
      $SUDO systemctl disable --now "$service" >/dev/null 2>&1 || true
    fi
  done
fi
echo "install-deps: done"
