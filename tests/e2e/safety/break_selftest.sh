#!/usr/bin/env bash
# The checkers against really broken systems (run.sh --break KIND): each run
# must fail, and fail on the right check, while the checks of the parts that
# are not broken still pass:
#   reissue: every member's data directory is wiped at the final power cut, so
#     the rebuilt cluster issues tokens from the bottom again: acquired_tokens_grow
#     (b) fails; the fences hold (PostgreSQL refused every lower token). Not
#     tokens_increase_in_commit_order: once the rebuilt cluster counts up to a
#     token it issued before the wipe, two holders carry that token, and
#     fence_admit admits an equal token by design (docs/sql.md), so (a) may fail too;
#   early: every member's clocks run 2 x real time while members and workers
#     assume rho = 0, so the leader expires leases early:
#     one_holder_at_a_time_within_rho (c) fails; the fences (a) hold;
#   unfenced: worker_counters' guard trigger is disabled, so stale writers get
#     through: tokens_increase_in_commit_order (a) fails; the coordinator's (b) holds.
#   unverified: the worker tables and resources do not verify token proofs, so
#     the forger's forged and misdirected proofs get through:
#     no_forged_proof_accepted and fences_hold_granted_tokens (e) fail; the
#     coordinator's (b) holds, and no genuine proof is refused.
# Ends with "break-selftest: N passed, N failed".
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
passed=0 failed=0
ok() { if eval "$2"; then passed=$((passed + 1)); echo "  PASS  $1"; else failed=$((failed + 1)); echo "  FAIL  $1"; fi; }

# broken KIND SECONDS CHECK HOLDS...: run.sh --break KIND fails on CHECK while
# every check named in HOLDS passes.
FENCES="tokens_increase_in_commit_order increments_are_consecutive counter_equals_accepted_increments
        ledgers_equal_admitted_increments accepted_tokens_were_granted"
broken() {
  local kind=$1 seconds=$2 want=$3 rc c before=$failed
  shift 3
  bash "$HERE/run.sh" --break "$kind" --seconds "$seconds" >"$out" 2>&1
  rc=$?
  ok "$kind: the broken run fails (exit $rc)" "((rc == 1))"
  ok "$kind: $want catches it" "grep -Eq '^  FAIL  $want ' '$out'"
  for c in "$@"; do
    ok "$kind: $c still holds" "grep -Eq '^  PASS  $c ' '$out'"
  done
  ok "$kind: the summary line counts the violations" "grep -Eq '^faults: .* violations=[1-9]' '$out'"
  grep -E '^  (overlapping holders|acquires|stale writes refused|forged and misdirected proofs) ' "$out" | sed "s/^/  $kind: /"
  if ((failed > before)); then echo "--- run.sh --break $kind output:"; tail -n 60 "$out"; fi
}
# shellcheck disable=SC2086
broken reissue 5 acquired_tokens_grow ${FENCES/tokens_increase_in_commit_order /}
# shellcheck disable=SC2086
broken early 25 one_holder_at_a_time_within_rho $FENCES
broken unfenced 5 tokens_increase_in_commit_order acquired_tokens_grow accepted_tokens_were_granted
broken unverified 5 no_forged_proof_accepted acquired_tokens_grow granted_proofs_accepted
ok "unverified: fences_hold_granted_tokens catches it too" "grep -Eq '^  FAIL  fences_hold_granted_tokens ' '$out'"
echo "break-selftest: $passed passed, $failed failed"
((failed == 0))
