# shellcheck shell=bash
# Verdicts of the package tests (sourced): set VERDICT_NAME first.
#   ok MSG / bad MSG    a PASS / FAIL line, counted
#   finish              the closing "NAME: N passed, N failed"; exits non-zero on a failure
#   installed PACKAGE   is PACKAGE installed (dpkg)?
passed=0
failed=0
ok() { echo "PASS: $*"; passed=$((passed + 1)); }
bad() { echo "FAIL: $*" >&2; failed=$((failed + 1)); }
finish() {
  echo "${VERDICT_NAME:?}: $passed passed, $failed failed"
  ((failed == 0))
  exit
}
installed() { [[ $(dpkg-query -W -f='${Status}' "$1" 2>/dev/null) == "install ok installed" ]]; }
