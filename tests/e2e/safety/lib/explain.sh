# shellcheck shell=bash
# The fault run's stale rejections, each explained (sourced by run.sh): every
# token whose write PostgreSQL refused as stale in the workers' history
# (e2e_events: write events with outcome stale; replays and forgeries are
# refused on purpose and left out) goes to `fencectl explain TOKEN -o json`,
# run from the ctl namespace against the members and PostgreSQL, with the log
# of the worker that held the token (--client-log). Bounded: at most
# EXPLAIN_MAX tokens, and none started after EXPLAIN_BUDGET_S seconds.
#
#   explain_stale_rejections DIR   (run.sh copies DIR into the report) writes DIR/<token>.json (.err) and
#                                  DIR/explained.txt, one line per token:
#                                  token|worker|key|refused|cause|exit|first evidence;
#                                  sets EXPLAIN_TOKENS (stale tokens in all),
#                                  EXPLAIN_DONE, EXPLAIN_ERRORS (explain exited
#                                  non-zero), EXPLAIN_OUT_OF_TIME (1: the
#                                  budget ended the loop before EXPLAIN_MAX) and
#                                  EXPLAIN_CAUSES ("cause=n ...")
#   explain_report DIR             the summary's lines (printed)
#
# Needs: FENCECTL, FENCE_ENDPOINTS, PG_TCP_HOST, PGPORT, WORK; nem_ctl.

EXPLAIN_MAX=${SAFETY_EXPLAIN_MAX:-40}
EXPLAIN_BUDGET_S=${SAFETY_EXPLAIN_S:-120}

# explain_log_of TOKEN: the worker log that holds TOKEN's grant (empty if none).
explain_log_of() {
  { grep -l -m 1 -E "^[^,]*,acquire,[^,]*,$1,[^,]*,[^,]*,[^,]*,ok," "$WORK"/w*.csv 2>/dev/null || true; } | head -n 1
}

explain_stale_rejections() {
  local dir=$1 token worker key refused log rc line deadline
  local -a args
  local -A causes=()
  mkdir -p "$dir"
  : >"$dir/explained.txt"
  EXPLAIN_DONE=0 EXPLAIN_ERRORS=0 EXPLAIN_TOKENS=0 EXPLAIN_CAUSES="" EXPLAIN_OUT_OF_TIME=0
  psql -X -At -F'|' -c "SELECT token, min(worker), min(key), count(*) FROM e2e_events
                         WHERE event = 'write' AND outcome = 'stale' GROUP BY token ORDER BY token" \
    >"$dir/stale-tokens.txt" || return 1
  EXPLAIN_TOKENS=$(wc -l <"$dir/stale-tokens.txt")
  deadline=$(($(e2e_ms) + EXPLAIN_BUDGET_S * 1000))
  while IFS='|' read -r token worker key refused; do
    ((EXPLAIN_DONE < EXPLAIN_MAX)) || break
    if (($(e2e_ms) >= deadline)); then
      EXPLAIN_OUT_OF_TIME=1
      break
    fi
    args=()
    log=$(explain_log_of "$token")
    [[ -n "$log" ]] && args=(--client-log "$log")
    rc=0
    nem_ctl "$FENCECTL" --endpoints "$FENCE_ENDPOINTS" --timeout 10s explain "$token" -o json \
      --dsn "host=$PG_TCP_HOST port=$PGPORT user=postgres dbname=postgres" "${args[@]}" \
      >"$dir/$token.json" 2>"$dir/$token.err" || rc=$?
    EXPLAIN_DONE=$((EXPLAIN_DONE + 1))
    if ((rc == 0)); then
      line=$(/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); e=d["evidence"] or d["missing"] or [""]; print(d["cause"] + "|0|" + e[0])' "$dir/$token.json" 2>/dev/null) ||
        line="unreadable|0|explain's answer is not JSON"
    else
      EXPLAIN_ERRORS=$((EXPLAIN_ERRORS + 1))
      line="error|$rc|$(head -c 300 "$dir/$token.err" | tr '\n' ' ')"
    fi
    causes[${line%%|*}]=$((${causes[${line%%|*}]:-0} + 1))
    echo "$token|$worker|$key|$refused|$line" >>"$dir/explained.txt"
  done <"$dir/stale-tokens.txt"
  EXPLAIN_CAUSES=""
  for key in "${!causes[@]}"; do EXPLAIN_CAUSES+="$key=${causes[$key]} "; done
}

explain_report() {
  local dir=$1 token worker key refused cause rc evidence
  printf '  %-36s %s of %s tokens explained (bound %s, %ss): %s\n' "stale rejections by cause" \
    "$EXPLAIN_DONE" "$EXPLAIN_TOKENS" "$EXPLAIN_MAX" "$EXPLAIN_BUDGET_S" "${EXPLAIN_CAUSES:-none}"
  while IFS='|' read -r token worker key refused cause rc evidence; do
    printf '    token %s (%s, %s, %s refused): %s%s\n' "$token" "$worker" "$key" "$refused" "$cause" \
      "${evidence:+: $evidence}"
  done <"$dir/explained.txt"
}
