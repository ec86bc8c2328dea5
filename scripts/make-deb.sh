#!/usr/bin/env bash
# Builds pgfence's Debian packages from an existing build (make build), without
# compiling anything again:
#
#   fence-coordinator        /usr/bin/fence-coordinator, its manual page, the
#                            systemd unit fence-coordinator@.service, an example
#                            environment file; creates the pgfence system user,
#                            stops the unit's instances before removal
#   fencectl                 /usr/bin/fencectl and its manual page
#   fence-worker             /usr/bin/fence-worker and its manual page
#   fence-relay              /usr/bin/fence-relay (the outbox relay, Python),
#                            its manual page, and the Python package pgfence
#                            in /usr/lib/pgfence/python (Architecture: all)
#   postgresql-N-pg-fence    the pg_fence extension (library, control file,
#                            SQL) for PostgreSQL N: one package per major whose
#                            server headers are present, 15 on the host, 17 and
#                            18 in the chroots of scripts/pg-chroot.sh once
#                            they have been made (make test makes them)
#
#   scripts/make-deb.sh [OUT_DIR]     (default OUT_DIR: $BUILD/deb, BUILD=build)
#   scripts/make-deb.sh --pg-extension OUT_DIR
#                                     only postgresql-N-pg-fence, for the
#                                     PostgreSQL of the pg_config in PATH (what
#                                     the first form runs inside each chroot)
#
# The files come from `cmake --install` (per component) and the extension's
# `make install` (built in a copy of its sources, for each major), both with
# DESTDIR set to
# a staging tree, and from deploy/systemd/ (the unit names /usr/bin, so make
# install leaves it out); programs are stripped; Depends comes from
# dpkg-shlibdeps on the system the package is for. Prints the path of each
# package made.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
[[ $BUILD = /* ]] || BUILD="$ROOT/$BUILD"
PG_ONLY=0
if [[ ${1:-} == --pg-extension ]]; then
  PG_ONLY=1
  shift
  [[ -n ${1:-} ]] || { echo "make-deb: --pg-extension needs an output directory" >&2; exit 1; }
fi
OUT=$(realpath -m "${1:-$BUILD/deb}")
die() { echo "make-deb: $*" >&2; exit 1; }
# shellcheck source=lib/pg-common.sh
source "$ROOT/scripts/lib/pg-common.sh"

for tool in dpkg-deb dpkg-shlibdeps; do
  command -v "$tool" >/dev/null || die "$tool not found (apt-get install dpkg-dev)"
done
version=$(sed -n 's/^project(pgfence VERSION \([0-9.]*\).*/\1/p' "$ROOT/CMakeLists.txt")
[[ -n $version ]] || die "no project(pgfence VERSION ...) in CMakeLists.txt"
arch=$(dpkg --print-architecture)

W=$(mktemp -d /tmp/pgfence-deb.XXXXXX)
trap 'rm -rf "$W"' EXIT
mkdir -p "$OUT" "$W/debian"
printf 'Source: pgfence\n\nPackage: pgfence\nArchitecture: any\n' >"$W/debian/control"

# shlib_depends FILE...: the Depends line dpkg-shlibdeps derives from FILEs' NEEDED libraries.
shlib_depends() {
  (cd "$W" && dpkg-shlibdeps -O "$@" 2>/dev/null) | sed -n 's/^shlibs:Depends=//p'
}

# package NAME STAGE DEPENDS DESCRIPTION [ARCH]: writes DEBIAN/control and
# builds OUT/NAME_VERSION_ARCH.deb (ARCH: the machine's, or all).
package() {
  local name=$1 stage=$2 depends=$3 description=$4 arch=${5:-$arch}
  mkdir -p "$stage/DEBIAN"
  local size
  size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
  cat >"$stage/DEBIAN/control" <<EOF
Package: $name
Version: $version
Architecture: $arch
Maintainer: pgfence developers <pgfence@localhost>
Installed-Size: $size
Depends: $depends
Section: database
Priority: optional
Description: $description
EOF
  find "$stage" -type d -exec chmod 0755 {} +
  dpkg-deb --root-owner-group -Zxz --build "$stage" "$OUT/${name}_${version}_${arch}.deb" >/dev/null
  echo "$OUT/${name}_${version}_${arch}.deb"
}

# extension_package: postgresql-N-pg-fence for the PostgreSQL of pg_config,
# built in a copy of the sources (the objects of one major never meet another's).
extension_package() {
  local pg_major so
  pg_major=$(pg_major_of pg_config)
  [[ -n $pg_major ]] || die "no pg_config in PATH (install postgresql-server-dev-N)"
  pg_ext_stage "$W/pgsrc" || die "copying the extension's sources failed"
  pg_ext_make "$W/pgsrc" >/dev/null
  pg_ext_make "$W/pgsrc" install DESTDIR="$W/stage-pg" >/dev/null
  so=$(find "$W/stage-pg" -name 'pg_fence.so' | head -n1)
  [[ -n $so ]] || die "the extension's make install put no pg_fence.so under DESTDIR"
  strip --strip-unneeded "$so"
  package "postgresql-$pg_major-pg-fence" "$W/stage-pg" \
    "postgresql-$pg_major, $(shlib_depends -e"$so")" \
    "pg_fence: fencing tokens for PostgreSQL $pg_major
 The pg_fence extension (CREATE EXTENSION pg_fence) refuses a write whose
 fencing token is not newer than the fence already stored, so a paused
 former lock holder cannot overwrite a newer one; it can also verify that a
 token was issued by a trusted pgfence cluster for the row's lock."
}

if ((PG_ONLY)); then
  extension_package
  exit 0
fi

for prog in coordinator/server/fence-coordinator coordinator/cli/fencectl coordinator/worker/fence-worker; do
  [[ -x "$BUILD/$prog" ]] || die "$BUILD/$prog is not built (run make build)"
  [[ -f "$BUILD/man/$(basename "$prog").1" ]] || die "$BUILD/man/$(basename "$prog").1 is missing (help2man: run make deps, then make build)"
done
[[ -f "$BUILD/man/fence-relay.1" ]] || die "$BUILD/man/fence-relay.1 is missing (help2man: run make deps, then make build)"
built=$("$BUILD/coordinator/server/fence-coordinator" --version)
[[ $built == *" $version" ]] || die "the build is of another version ($built), not $version: rebuild"

# The four programs, one cmake --install component each.
for component in coordinator fencectl worker relay; do
  DESTDIR="$W/stage-$component" cmake --install "$BUILD" --prefix /usr --component "$component" >/dev/null
done
find "$W"/stage-* -name '*.1' -exec gzip -9n {} +
# Debian ships programs stripped of their debug information (fence-relay is a script).
strip --strip-unneeded "$W"/stage-{coordinator,fencectl,worker}/usr/bin/*
mkdir -p "$W/stage-coordinator/etc/pgfence" "$W/stage-coordinator/usr/lib/systemd/system" \
         "$W/stage-coordinator/usr/share/doc/fence-coordinator/examples"
install -m 0644 "$ROOT/deploy/systemd/fence-coordinator@.service" "$W/stage-coordinator/usr/lib/systemd/system/"
install -m 0644 "$ROOT/deploy/systemd/coordinator.env" "$W/stage-coordinator/usr/share/doc/fence-coordinator/examples/"

mkdir -p "$W/stage-coordinator/DEBIAN"
cat >"$W/stage-coordinator/DEBIAN/postinst" <<'EOF'
#!/bin/sh
# Creates the pgfence system user the unit runs as, and lets it read /etc/pgfence.
set -e
if [ "$1" = configure ]; then
  if ! getent passwd pgfence >/dev/null; then
    adduser --system --group --home /var/lib/pgfence --no-create-home --quiet pgfence
  fi
  chown root:pgfence /etc/pgfence
  chmod 0750 /etc/pgfence
  if [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi
fi
exit 0
EOF
cat >"$W/stage-coordinator/DEBIAN/prerm" <<'EOF'
#!/bin/sh
# Stops the running members (fence-coordinator@ID) before their program goes.
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
  systemctl stop 'fence-coordinator@*.service' || true
fi
exit 0
EOF
cat >"$W/stage-coordinator/DEBIAN/postrm" <<'EOF'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi
exit 0
EOF
chmod 0755 "$W/stage-coordinator/DEBIAN/postinst" "$W/stage-coordinator/DEBIAN/prerm" "$W/stage-coordinator/DEBIAN/postrm"

package fence-coordinator "$W/stage-coordinator" \
  "$(shlib_depends -e"$W/stage-coordinator/usr/bin/fence-coordinator"), adduser" \
  "pgfence lock coordinator (one Raft member)
 fence-coordinator is one member of a pgfence cluster: a Raft-replicated lock
 service whose every grant carries a fencing token that only grows, for
 PostgreSQL's pg_fence extension to refuse writes from former lock holders.
 Includes the systemd unit fence-coordinator@.service."
package fencectl "$W/stage-fencectl" \
  "$(shlib_depends -e"$W/stage-fencectl/usr/bin/fencectl")" \
  "pgfence command-line client
 fencectl takes, keeps and releases pgfence locks, runs a command while
 holding one (passing the fencing token in FENCE_TOKEN, and with --advance
 publishing it in PostgreSQL first, through libpq), and manages the
 cluster's members and backups."
package fence-worker "$W/stage-worker" \
  "$(shlib_depends -e"$W/stage-worker/usr/bin/fence-worker")" \
  "pgfence demonstration and test worker
 fence-worker takes a pgfence lock and writes to PostgreSQL with its fencing
 token; the end-to-end tests and the demo run it."

package fence-relay "$W/stage-relay" "python3, python3-psycopg2" \
  "pgfence outbox relay
 fence-relay delivers the entries of pg_fence's fenced outbox (fence_enqueue)
 to HTTP endpoints with an Idempotency-Key, at least once, never an entry
 whose token a newer lock holder has overtaken. Includes the Python client
 package pgfence (in /usr/lib/pgfence/python)." all

# The extension: the host's major here, the others inside their chroots
# (written to $W, which the chroot shares, then moved to OUT).
extension_package
for suite in trixie sid; do
  if ! bash "$ROOT/scripts/pg-chroot.sh" ready "$suite"; then
    echo "make-deb: no $suite chroot, so no postgresql-$(bash "$ROOT/scripts/pg-chroot.sh" major "$suite")-pg-fence" \
         "(make test, or scripts/pg-chroot.sh ensure $suite, makes it)" >&2
    continue
  fi
  mkdir -p "$W/out-$suite"
  bash "$ROOT/scripts/pg-chroot.sh" run "$suite" bash "$ROOT/scripts/make-deb.sh" --pg-extension "$W/out-$suite" >/dev/null ||
    die "building the extension's package in the $suite chroot failed"
  for f in "$W/out-$suite"/*.deb; do
    mv "$f" "$OUT/"
    echo "$OUT/$(basename "$f")"
  done
done
