#!/usr/bin/env bash
# The Debian packages, installed on this machine and used (make test's last
# suite: it replaces the development build's extension files while it runs).
#
#   1. scripts/make-deb.sh builds the five packages from the current build;
#   2. dpkg installs them; every installed program answers --help and
#      --version (the packages' version), the manual pages are there, the
#      pgfence user exists, and systemd-analyze verifies the installed unit
#      (the manual page its Documentation= names included);
#   3. the installed fence-coordinator runs a one-member cluster, the
#      installed fencectl takes a lock from it, and a throwaway PostgreSQL
#      runs CREATE EXTENSION pg_fence from the package's files and refuses a
#      stale write, and the installed fence-relay takes an outbox entry from
#      it (its receiver is down: the entry stays pending, tried once);
#   4. dpkg purges them, their files are gone, and the development build's
#      extension is installed again (make -C pg_extension install);
#   5. in each chroot of scripts/pg-chroot.sh that has been made (trixie: 17,
#      sid: 18), its postgresql-N-pg-fence is installed, used and purged there
#      (tests/packaging/pg-deb.sh); a chroot not made is a SKIP line, or a
#      failure with PGFENCE_REQUIRE_CHROOTS=1 (make test: its matrix made them).
# Needs root. Ends with "packages: N passed, N failed".
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export E2E_ROOT=$ROOT
# shellcheck source=../e2e/safety/lib/common.sh
source "$ROOT/tests/e2e/safety/lib/common.sh"
# shellcheck source=../e2e/safety/lib/pg.sh
source "$ROOT/tests/e2e/safety/lib/pg.sh"
BUILD=${BUILD:-build}
[[ $BUILD = /* ]] || BUILD="$ROOT/$BUILD"
# shellcheck source=../../scripts/lib/pg-common.sh
source "$ROOT/scripts/lib/pg-common.sh"
VERDICT_NAME=packages
# shellcheck source=lib.sh
source "$ROOT/tests/packaging/lib.sh"
pg_major=$(pg_major_of pg_config)
PG_PACKAGE=postgresql-$pg_major-pg-fence
PACKAGES=(fence-coordinator fencectl fence-worker fence-relay "$PG_PACKAGE")

if [[ $(id -u) -ne 0 ]]; then bad "installing packages needs root"; finish; fi
for p in "${PACKAGES[@]}"; do
  if installed "$p"; then
    bad "$p is installed already: remove it first (dpkg -P $p); this test installs and removes it"
    finish
  fi
done

W=$(mktemp -d /tmp/pgfence-deb-test.XXXXXX)
coordinator_pid=""
restore_dev_build() {
  make -s -C "$ROOT/pg_extension" install >"$W/dev-install.log" 2>&1
}
cleanup() {
  [[ -n $coordinator_pid ]] && kill "$coordinator_pid" 2>/dev/null && wait "$coordinator_pid" 2>/dev/null
  pg_throwaway_stop "$W" >/dev/null 2>&1
  local p left=()
  for p in "${PACKAGES[@]}"; do installed "$p" && left+=("$p"); done
  if ((${#left[@]})); then
    dpkg -P "${left[@]}" >/dev/null 2>&1
    restore_dev_build
  fi
  rm -rf "$W"
}
trap cleanup EXIT

# --- 1. build ---------------------------------------------------------------
if ! BUILD=$BUILD bash "$ROOT/scripts/make-deb.sh" "$W/deb" >"$W/make-deb.out" 2>&1; then
  cat "$W/make-deb.out" >&2
  bad "scripts/make-deb.sh failed"
  finish
fi
version=$(sed -n 's/^project(pgfence VERSION \([0-9.]*\).*/\1/p' "$ROOT/CMakeLists.txt")
debs=()
for p in "${PACKAGES[@]}"; do
  f=$(ls "$W/deb/${p}_${version}_"*.deb 2>/dev/null | head -n1)
  if [[ -z $f ]]; then bad "no package $p $version was made"; finish; fi
  [[ $(dpkg-deb -f "$f" Package) == "$p" && $(dpkg-deb -f "$f" Version) == "$version" ]] ||
    bad "$f: Package/Version fields are not $p $version"
  debs+=("$f")
done
ok "make-deb: ${#debs[@]} packages of version $version ($(du -ch "${debs[@]}" | tail -n1 | cut -f1) in all)"
depends=$(dpkg-deb -f "$W/deb/${PG_PACKAGE}_${version}_"*.deb Depends)
[[ $depends == *postgresql-$pg_major* && $depends == *libsodium* ]] &&
  ok "$PG_PACKAGE depends on postgresql-$pg_major and libsodium ($depends)" ||
  bad "$PG_PACKAGE's Depends lacks postgresql-$pg_major or libsodium: $depends"
# fencectl --advance and fence-worker talk to PostgreSQL through libpq.
for p in fencectl fence-worker; do
  depends=$(dpkg-deb -f "$W/deb/${p}_${version}_"*.deb Depends)
  [[ $depends == *libpq5* ]] && ok "$p depends on libpq5 ($depends)" || bad "$p's Depends lacks libpq5: $depends"
done

# --- 2. install ---------------------------------------------------------------
if ! dpkg -i "${debs[@]}" >"$W/dpkg-i.out" 2>&1; then
  cat "$W/dpkg-i.out" >&2
  bad "dpkg -i failed"
  finish
fi
ok "dpkg -i installed ${PACKAGES[*]}"
for prog in fence-coordinator fencectl fence-worker fence-relay; do
  owner=$(dpkg -S "/usr/bin/$prog" 2>/dev/null | cut -d: -f1)
  [[ $owner == "$prog" ]] || bad "/usr/bin/$prog belongs to '$owner', not $prog"
  help=$("/usr/bin/$prog" --help 2>&1) && grep -qi "usage" <<<"$help" ||
    bad "/usr/bin/$prog --help failed or printed no usage"
  v=$("/usr/bin/$prog" --version 2>&1)
  [[ $v == "$prog (pgfence) $version" ]] || bad "/usr/bin/$prog --version printed '$v', not '$prog (pgfence) $version'"
  zcat "/usr/share/man/man1/$prog.1.gz" 2>/dev/null | grep -q '^\.TH "\{0,1\}'"${prog^^}" ||
    bad "/usr/share/man/man1/$prog.1.gz is missing or not a manual page of $prog"
done
((failed == 0)) && ok "installed programs answer --help and --version $version; manual pages installed"
getent passwd pgfence >/dev/null && [[ $(stat -c %U:%G /etc/pgfence) == root:pgfence ]] &&
  ok "postinst created the pgfence user and /etc/pgfence (root:pgfence)" ||
  bad "no pgfence user, or /etc/pgfence is not root:pgfence"

unit=/usr/lib/systemd/system/fence-coordinator@.service
if [[ ! -f $unit ]]; then
  bad "$unit is not installed"
else
  # A template is verified through an instance of it.
  mkdir -p "$W/unit"
  cp "$unit" "$W/unit/fence-coordinator@1.service"
  if systemd-analyze verify "$W/unit/fence-coordinator@1.service" >"$W/verify.out" 2>&1 &&
     ! grep -q . "$W/verify.out"; then
    ok "systemd-analyze verify fence-coordinator@1.service: no complaints"
  else
    cat "$W/verify.out" >&2
    bad "systemd-analyze verify complained about the unit"
  fi
fi

# --- 3. run what was installed --------------------------------------------------
base=$(e2e_free_base_port 1)
peer=127.0.0.1:$((base + 1))
client=127.0.0.1:$((base + 101))
/usr/bin/fence-coordinator --id 1 --peers "1=$peer" --client-addr "$client" --data-dir "$W/member" \
  >"$W/member.log" 2>&1 &
coordinator_pid=$!
have_token() { token=$(/usr/bin/fencectl --endpoints "$client" --timeout 2s acquire pkg:report --lease 30s 2>/dev/null); }
if e2e_wait_for 20 have_token && [[ $token =~ ^[0-9]+$ ]]; then
  ok "the installed fence-coordinator granted token $token to the installed fencectl"
else
  tail -20 "$W/member.log" >&2
  bad "the installed coordinator never granted a lock"
  token=""
fi

ext_dir=$(pg_config --sharedir)/extension
owner=$(dpkg -S "$ext_dir/pg_fence.control" 2>/dev/null | cut -d: -f1)
[[ $owner == "$PG_PACKAGE" ]] || bad "$ext_dir/pg_fence.control belongs to '$owner'"
owner=$(dpkg -S "$(pg_config --pkglibdir)/pg_fence.so" 2>/dev/null | cut -d: -f1)
[[ $owner == "$PG_PACKAGE" ]] || bad "pg_fence.so belongs to '$owner'"
if [[ -n $token ]] && pg_throwaway_start "$W" >"$W/pg.out" 2>&1; then
  out=$(psql -X -q -At -v ON_ERROR_STOP=1 2>&1 <<SQL
CREATE EXTENSION pg_fence;
SELECT extversion FROM pg_extension WHERE extname = 'pg_fence';
CREATE TABLE reports (report_id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0);
SELECT fence_protect('reports');
INSERT INTO reports VALUES (7, 'v0', 0);
UPDATE reports SET body = 'v1', fence = $token WHERE report_id = 7;
SQL
)
  rc=$?
  default_version=$(sed -n "s/^default_version *= *'\(.*\)'/\1/p" "$ext_dir/pg_fence.control")
  if [[ $rc == 0 && -n $default_version && $(head -n1 <<<"$out") == "$default_version" ]]; then
    ok "CREATE EXTENSION pg_fence from the package: version $default_version; token $token accepted"
  else
    bad "CREATE EXTENSION from the package failed: $out"
  fi
  if psql -X -q -v ON_ERROR_STOP=1 -v VERBOSITY=verbose \
       -c "UPDATE reports SET body = 'stale', fence = $((token - 1)) WHERE report_id = 7" >/dev/null 2>"$W/stale.err"; then
    bad "the packaged extension accepted a stale token $((token - 1)) after $token"
  elif grep -q "ERROR: *55F01" "$W/stale.err"; then
    ok "the packaged extension refused the stale token $((token - 1))"
  else
    bad "the stale write failed for another reason: $(cat "$W/stale.err")"
  fi
  # nothing listens on base + 50: the attempt fails, the entry stays pending
  psql -X -q -At -v ON_ERROR_STOP=1 \
    -c "SELECT fence_enqueue('pkg:mail', $token, 'op', 'http://127.0.0.1:$((base + 50))/', '{}')" >/dev/null 2>"$W/enqueue.err"
  if /usr/bin/fence-relay --once --timeout 2s >"$W/relay.log" 2>&1; then
    out=$(psql -X -At -c "SELECT state, attempts, last_error LIKE '%ConnectionRefused%' FROM fence_outbox")
    [[ $out == "pending|1|t" ]] && ok "the installed fence-relay tried the outbox entry once (receiver down: pending)" ||
      bad "after fence-relay --once the entry is '$out', not pending|1|t; $(cat "$W/enqueue.err" "$W/relay.log")"
  else
    bad "the installed fence-relay --once failed: $(tail -5 "$W/relay.log")"
  fi
  pg_throwaway_stop "$W" >/dev/null 2>&1
else
  bad "no throwaway PostgreSQL: $(tail -5 "$W/pg.out" 2>/dev/null)"
fi
kill "$coordinator_pid" 2>/dev/null
wait "$coordinator_pid" 2>/dev/null
coordinator_pid=""

# --- 4. remove, and put the development build back ------------------------------
if dpkg -P "${PACKAGES[@]}" >"$W/dpkg-p.out" 2>&1; then
  gone=1
  for f in /usr/bin/fence-coordinator /usr/bin/fencectl /usr/bin/fence-worker /usr/bin/fence-relay \
           /usr/lib/pgfence/python/pgfence/relay.py "$unit" \
           "$ext_dir/pg_fence.control" "$(pg_config --pkglibdir)/pg_fence.so"; do
    [[ -e $f ]] && { bad "$f is still there after dpkg -P"; gone=0; }
  done
  ((gone)) && ok "dpkg -P removed the packages and their files"
else
  cat "$W/dpkg-p.out" >&2
  bad "dpkg -P failed"
fi
if restore_dev_build && [[ -f "$ext_dir/pg_fence.control" ]]; then
  ok "the development build's extension is installed again"
else
  cat "$W/dev-install.log" >&2
  bad "make -C pg_extension install failed: the development extension is not back"
fi

# --- 5. the extension's packages for the chroots' majors ----------------------------
for suite in trixie sid; do
  major=$(bash "$ROOT/scripts/pg-chroot.sh" major "$suite")
  if ! bash "$ROOT/scripts/pg-chroot.sh" ready "$suite"; then
    if [[ ${PGFENCE_REQUIRE_CHROOTS:-0} == 1 ]]; then
      bad "no $suite chroot, so postgresql-$major-pg-fence was neither made nor tested"
    else
      echo "SKIP: no $suite chroot (scripts/pg-chroot.sh ensure $suite): postgresql-$major-pg-fence not tested"
    fi
    continue
  fi
  f=$(ls "$W/deb/postgresql-$major-pg-fence_${version}_"*.deb 2>/dev/null | head -n1)
  if [[ -z $f ]]; then bad "no package postgresql-$major-pg-fence $version was made in the $suite chroot"; continue; fi
  ok "make-deb: postgresql-$major-pg-fence $version ($(du -h "$f" | cut -f1)) made in the $suite chroot"
  out=$(bash "$ROOT/scripts/pg-chroot.sh" run "$suite" bash "$ROOT/tests/packaging/pg-deb.sh" "$f" 2>&1)
  echo "$out" | grep -E '^(PASS|FAIL):'
  counts=$(sed -nE 's/^pg-deb: ([0-9]+) passed, ([0-9]+) failed$/\1 \2/p' <<<"$out" | tail -n1)
  if [[ -z $counts ]]; then
    echo "$out" >&2
    bad "tests/packaging/pg-deb.sh in the $suite chroot printed no result"
    continue
  fi
  passed=$((passed + ${counts% *}))
  failed=$((failed + ${counts#* }))
done
finish
