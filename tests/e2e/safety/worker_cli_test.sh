#!/usr/bin/env bash
# fence-worker's command line: --help documents the exit codes; bad flags exit 2
# with a message naming the flag and the value; nothing needs a database.
# usage: worker_cli_test.sh PATH/TO/fence-worker
set -uo pipefail
bin=${1:?usage: worker_cli_test.sh PATH/TO/fence-worker}
passed=0 failed=0

# expect NAME WANT_RC WANT_TEXT ARGS...: exit status and a substring of stdout+stderr.
expect() {
  local name=$1 want_rc=$2 want_text=$3 out rc
  shift 3
  out=$("$bin" "$@" 2>&1)
  rc=$?
  if [[ $rc -eq $want_rc && "$out" == *"$want_text"* ]]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAIL $name: fence-worker $* -> rc $rc (want $want_rc), output: $out"
  fi
}

expect help_lists_exit_codes 0 "10  stale token refused by PostgreSQL (55F01)" --help
expect help_says_the_scheme_is_fencectls 0 "the same numbers as fencectl's" --help
expect help_names_modes 0 "fenced_update" --help
expect missing_key 2 "--key is required" --lease 2s
expect bad_mode 2 "invalid --mode 'fast'" --key k --mode fast
expect lease_too_short 2 "invalid --lease '50ms'" --key k --lease 50ms
expect bad_duration 2 "invalid --lease '2 s'" --key k --lease "2 s"
expect zero_iterations 2 "invalid --iterations '0'" --key k --iterations 0
expect empty_key 2 "invalid --key 'a,,b'" --key a,,b
expect control_char_key 2 "control characters" --key "$(printf 'a\tb')"
expect comma_in_worker_id 2 "invalid --worker-id 'a,b'" --key k --worker-id a,b
expect unknown_flag 2 "unknown option '--frobnicate'" --key k --frobnicate 1
expect flag_without_value 2 "option '--key' needs a value" --key
expect help_documents_proof 0 "--proof              send each grant's token proof" --help
expect help_documents_forge 0 "--forge F" --help
expect proof_takes_no_value 2 "--proof takes no value, got '--proof=yes'" --key k --proof=yes
expect forge_empty_path 2 "invalid --forge ''" --key k --forge ""
expect forge_unreadable_key 2 "invalid --forge '/nonexistent/forger.key'" --key k --forge /nonexistent/forger.key
expect bad_pause 2 "invalid --pause 'soon'" --key k --pause soon
expect bad_endpoints 2 "invalid endpoint" --key k --endpoints nope
echo "worker-cli: $passed passed, $failed failed"
((failed == 0))
