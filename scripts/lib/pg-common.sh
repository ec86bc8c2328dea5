# shellcheck shell=bash
# Helpers shared by the PostgreSQL scripts and tests (sourced; defines
# functions only):
#
#   pg_major_of PG_CONFIG    the major of that pg_config's server (15, 17, ...)
#   pg_free_port             a loopback TCP port nobody listens on (bounded tries),
#                            in PG_PORT_BASE..+PG_PORT_COUNT-1 (default
#                            20000..31999, below the ephemeral range)
#   pg_ext_stage DIR         copies the extension's sources (pg_extension/, sql/,
#                            and tests/pg, tests/vectors for make installcheck)
#                            into DIR, without build products: a build there
#                            never picks up objects made in the checkout for
#                            another major (make finds targets through VPATH
#                            too, so an out-of-tree build of the checkout would)
#   pg_ext_make DIR ARGS...  make in DIR/pg_extension (PG_CONFIG from the
#                            environment, pg_config in PATH otherwise)
#   ctest_counts FILE        "PASSED FAILED SKIPPED" from ctest's output in
#                            FILE (its summary counts a skipped test as passed;
#                            here it is not), or nothing without a summary

PG_COMMON_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

pg_major_of() {
  "$1" --version 2>/dev/null | sed -nE 's/^PostgreSQL ([0-9]+).*/\1/p'
}

pg_free_port() {
  local i p
  for ((i = 0; i < 50; i++)); do
    p=$((${PG_PORT_BASE:-20000} + RANDOM % ${PG_PORT_COUNT:-12000}))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return 0
    fi
  done
  echo "pg_free_port: no free port found in 50 tries in ${PG_PORT_BASE:-20000}..$((${PG_PORT_BASE:-20000} + ${PG_PORT_COUNT:-12000} - 1))" >&2
  return 1
}

pg_ext_stage() {
  local dir=$1
  rm -rf "$dir"
  mkdir -p "$dir" || return 1
  tar -C "$PG_COMMON_ROOT" -cf - --exclude='*.o' --exclude='*.so' --exclude='*.bc' \
      --exclude=results --exclude=tmp_check --exclude=output_iso --exclude='regression.*' \
      pg_extension sql tests/pg tests/vectors | tar -C "$dir" -xf -
}

pg_ext_make() {
  local dir=$1
  shift
  make -s -C "$dir/pg_extension" PG_CONFIG="${PG_CONFIG:-pg_config}" "$@"
}

ctest_counts() {
  local line total bad skipped
  line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$1" | tail -n1)
  [[ -n $line ]] || return 0
  bad=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$line")
  total=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\2/' <<<"$line")
  skipped=$(grep -cE '^[[:space:]]*[0-9]+ - .* \(Skipped\)$' "$1" || true)
  echo "$((total - bad - skipped)) $bad $skipped"
}
