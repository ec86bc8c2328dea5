# shellcheck shell=bash
# Shared by this suite's tests (sourced after tests/e2e/cli/lib.sh, which sets
# ROOT, WORK, fail, wait_until and the EXIT trap, or after a script that sets
# ROOT, WORK and fail itself, as partition.sh does): fence-worker runs whose
# tokens come from their own logs, and fencectl explain's cause as JSON.
# Ports of the suite: 15100..15499 (each script names its own).
# shellcheck source=../safety/lib/common.sh
source "$ROOT/tests/e2e/safety/lib/common.sh"
# shellcheck source=../safety/lib/pg.sh
source "$ROOT/tests/e2e/safety/lib/pg.sh"
: "${FENCE_WORKER_BIN:?set FENCE_WORKER_BIN to the fence-worker binary}"

worker() { "$FENCE_WORKER_BIN" "$@"; }

# token_of LOG: the token of the worker's first acquire (empty until it has one).
token_of() { awk -F, '$2 == "acquire" && $8 == "ok" { print $4; exit }' "$1" 2>/dev/null; }

# has_token LOG: the worker has acquired (a command for wait_until).
has_token() { [[ -n "$(token_of "$1")" ]]; }

# json_field FILE FIELD: a top-level field of explain's JSON answer.
json_field() { /usr/bin/python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))[sys.argv[2]]; print(json.dumps(v) if isinstance(v,(list,dict)) else v)' "$1" "$2"; }

# explain_run ARGS...: runs fencectl (a script whose fencectl must run
# elsewhere, in a network namespace, defines its own after sourcing this).
explain_run() { "$FENCECTL_BIN" "$@"; }

# expect_cause WANT TOKEN [ARGS...]: fencectl explain TOKEN -o json names WANT
# (the evidence is printed either way); its answer is left in
# $WORK/explain-TOKEN-WANT.json.
expect_cause() {
  local want=$1 token=$2 out=$WORK/explain-$2-$1.json got code=0
  shift 2
  explain_run explain "$token" --dsn "$EXPLAIN_DSN" -o json "$@" >"$out" 2>"$out.err" || code=$?
  ((code == 0)) || fail "fencectl explain $token exited $code: $(cat "$out.err")"
  got=$(json_field "$out" cause) || fail "explain's answer is not JSON: $(cat "$out")"
  echo "  explain $token $*: cause $got"
  json_field "$out" evidence | /usr/bin/python3 -c 'import json,sys; [print("    - " + e) for e in json.load(sys.stdin)]'
  [[ "$got" == "$want" ]] || fail "token $token: cause '$got', want '$want' ($(cat "$out"))"
}

# stale_rejections TOKEN: rows of fence_rejections with TOKEN refused as stale.
stale_rejections() {
  psql -X -At -c "SELECT count(*) FROM fence_rejections WHERE token = $1 AND reason = 'stale'"
}
