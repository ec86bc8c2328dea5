#!/usr/bin/env bash
# Preemption of stale in-flight transactions (pg_fence.preempt) against a
# real PostgreSQL: a throwaway server with pg_fence preloaded on a port in
# 15000..15099, an Ed25519 signing key trusted by the database (the proofs
# of the verifying table come from tests/pg/sign-proof.sh), and
# preempt_test.py (Debian's /usr/bin/python3 with psycopg2), which runs the
# scenarios and reads the server log.
# Needs pg_fence installed (make -C pg_extension install; make test does).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
E2E_ROOT=$(cd "$HERE/../../.." && pwd)
export E2E_ROOT
# shellcheck source=../safety/lib/pg.sh
source "$E2E_ROOT/tests/e2e/safety/lib/pg.sh"

# this suite's ports: 15000..15099 (pg_throwaway_launch asks pg_free_port)
PG_PORT_BASE=15000 PG_PORT_COUNT=100

PYTHON=${PREEMPT_PYTHON:-/usr/bin/python3}
"$PYTHON" -c 'import psycopg2' 2>/dev/null ||
  { echo "FAIL: $PYTHON cannot import psycopg2 (apt-get install python3-psycopg2)" >&2; exit 1; }

W=$(mktemp -d /tmp/pgfence-preempt.XXXXXX)
cleanup() {
  local rc=$?
  pg_throwaway_stop "$W"
  if ((rc == 0)); then rm -rf "$W"; else echo "kept: $W" >&2; fi
}
trap cleanup EXIT

openssl genpkey -algorithm ed25519 -out "$W/signing.key" 2>/dev/null
openssl pkey -in "$W/signing.key" -pubout -out "$W/signing.pub"
pg_throwaway_start "$W" || { echo "FAIL: PostgreSQL did not start" >&2; exit 1; }

PREEMPT_KEY=$W/signing.key PREEMPT_PUB=$W/signing.pub PREEMPT_LOG=$W/pg/server.log \
  PREEMPT_SIGN=$E2E_ROOT/tests/pg/sign-proof.sh "$PYTHON" "$HERE/preempt_test.py"
