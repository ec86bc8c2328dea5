#!/usr/bin/env bash
# Installs the Debian 12 packages pgfence needs, only those that are missing.
# Idempotent and quick when everything is present; runs `apt-get update` only
# when something must be installed. Needs root (or sudo) for the install.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git curl
  postgresql-15 postgresql-client-15 postgresql-server-dev-15 postgresql-contrib postgresql-15-repack libpq-dev pgbouncer
  libboost1.81-dev libboost-json1.81-dev libboost-test1.81-dev libjemalloc-dev libssl-dev openssl libsodium-dev
  clang-14 libclang-rt-14-dev
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
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: run as root (or install sudo) to install: ${missing[*]}" >&2; exit 1; }
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
