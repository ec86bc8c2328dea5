#!/usr/bin/env bash
# The package postgresql-N-pg-fence, installed and used on the release it was
# built for: tests/packaging/deb.sh runs this inside the trixie and sid
# chroots (scripts/pg-chroot.sh run SUITE ...), for 17 and 18, where what it
# installs lasts only as long as the run.
#
#   pg-deb.sh PACKAGE.deb
#
#   1. dpkg -i installs it; the control file and library belong to it;
#   2. a throwaway server (pg_virtualenv) runs CREATE EXTENSION pg_fence from
#      its files at the control file's default version, accepts token 10 and
#      refuses token 9 with 55F01;
#   3. dpkg -P removes it and its files.
# Needs root. Ends with "pg-deb: N passed, N failed".
set -uo pipefail

# --use: inside pg_virtualenv, the extension's first use (printed for step 2)
if [[ ${1:-} == --use ]]; then
  psql -X -q -At -v ON_ERROR_STOP=1 <<'SQL' || exit 1
CREATE EXTENSION pg_fence;
SELECT extversion FROM pg_extension WHERE extname = 'pg_fence';
CREATE TABLE reports (report_id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0);
SELECT fence_protect('reports');
INSERT INTO reports VALUES (7, 'v0', 0);
UPDATE reports SET body = 'v1', fence = 10 WHERE report_id = 7;
SQL
  psql -X -q -v ON_ERROR_STOP=1 -v VERBOSITY=verbose \
    -c "UPDATE reports SET body = 'stale', fence = 9 WHERE report_id = 7" 2>&1 && echo "stale accepted"
  psql -X -q -At -c "SELECT body, fence FROM reports"
  exit 0
fi

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=../../scripts/lib/pg-common.sh
source "$ROOT/scripts/lib/pg-common.sh"
VERDICT_NAME=pg-deb
# shellcheck source=lib.sh
source "$ROOT/tests/packaging/lib.sh"
deb=${1:?usage: pg-deb.sh PACKAGE.deb}
pg_major=$(pg_major_of pg_config)
package=postgresql-$pg_major-pg-fence
ok() { echo "PASS: PostgreSQL $pg_major: $*"; passed=$((passed + 1)); }
bad() { echo "FAIL: PostgreSQL $pg_major: $*" >&2; failed=$((failed + 1)); }
trap 'installed "$package" && dpkg -P "$package" >/dev/null 2>&1' EXIT

[[ $(dpkg-deb -f "$deb" Package 2>/dev/null) == "$package" ]] || { bad "$deb is not a package $package"; finish; }
installed "$package" && { bad "$package is installed already: remove it first (dpkg -P $package)"; finish; }
depends=$(dpkg-deb -f "$deb" Depends)
[[ $depends == *postgresql-$pg_major* && $depends == *libsodium* ]] &&
  ok "$package depends on postgresql-$pg_major and libsodium ($depends)" ||
  bad "$package's Depends lacks postgresql-$pg_major or libsodium: $depends"

# --- 1. install ----------------------------------------------------------------
if ! out=$(dpkg -i "$deb" 2>&1); then
  bad "dpkg -i $deb failed: $out"
  finish
fi
ext_dir=$(pg_config --sharedir)/extension
lib=$(pg_config --pkglibdir)/pg_fence.so
owners=$(dpkg -S "$ext_dir/pg_fence.control" "$lib" 2>/dev/null | cut -d: -f1 | sort -u | xargs)
[[ $owners == "$package" ]] && ok "dpkg -i installed $package; pg_fence.control and pg_fence.so are its files" ||
  bad "pg_fence.control and pg_fence.so belong to '$owners', not $package"

# --- 2. use it (on a free port: pg_virtualenv's own choice knows only this system's clusters)
default_version=$(sed -n "s/^default_version *= *'\(.*\)'/\1/p" "$ext_dir/pg_fence.control")
sql_out=$(pg_virtualenv -t -v "$pg_major" -c "-p $(pg_free_port)" bash "$0" --use 2>&1)
if [[ -n $default_version ]] && grep -qx -- "$default_version" <<<"$sql_out"; then
  ok "CREATE EXTENSION pg_fence from the package: version $default_version"
else
  bad "CREATE EXTENSION from the package failed: $sql_out"
fi
if grep -q "ERROR: *55F01" <<<"$sql_out" && ! grep -q "stale accepted" <<<"$sql_out" &&
   grep -qx 'v1|10' <<<"$sql_out"; then
  ok "the packaged extension accepted token 10 and refused the stale token 9 (55F01)"
else
  bad "the stale write was not refused with 55F01, or the row lost token 10's write: $sql_out"
fi

# --- 3. remove ---------------------------------------------------------------------
if out=$(dpkg -P "$package" 2>&1); then
  if [[ -e $ext_dir/pg_fence.control || -e $lib ]]; then
    bad "pg_fence's files are still there after dpkg -P"
  else
    ok "dpkg -P removed $package and its files"
  fi
else
  bad "dpkg -P failed: $out"
fi
finish
