#!/usr/bin/env bash
# bench/pg/instructions.sh: instructions the backend executes per UPDATE for
# each variant of bench/pg/variants.sh (BENCH_VARIANTS, then the trigger
# shapes weighed against it, BENCH_CANDIDATE_VARIANTS), counted by valgrind
# (callgrind) on `postgres --single`.  Other load on the machine cannot
# move this figure, as it moves tps (run by make bench-pg and make
# bench-pg-instr).
#
# A template cluster is set up once per variant, with the variant's table
# bench_t (BENCH_INSTR_ROWS rows, fence 0).  For each variant and each of the
# two statement counts N1 < N2 of BENCH_INSTR_COUNTS, a fresh copy of that
# template runs under callgrind:
#
#   PREPARE s(int, int, bigint) AS <the variant's statement with $1 $2 $3>
#   EXECUTE s(id, i, i)      for i = 1 .. N, one line (one transaction) each,
#                            id = the rows in turn: a newer token every time
#
#   per statement = (I(N2) - I(N1)) / (N2 - N1)
#   per UPDATE    = per statement - the no-op's per statement
#
# I is what callgrind counted over the whole process.  Start-up, the shutdown
# checkpoint and first-use costs (catalog caches, the plan, compiling the
# PL/pgSQL function) are the same at N1 and N2 and cancel.  The no-op
# prepares SELECT WHERE false with the same parameters and runs the same
# EXECUTE lines, so per UPDATE leaves out reading the line, the EXECUTE and
# an empty transaction around it; what remains is the row's write, its
# trigger or function, and its commit.  After each run, outside valgrind,
# the script checks that no statement failed, that every row holds the last
# token written to it, and that fenced_update returned applied every time.
# For the trigger variants it also splits the figure, from callgrind's
# inclusive counts per function: PostgreSQL's BEFORE ROW path
# (ExecBRUpdateTriggers, which locks the row and then calls the function),
# the row lock in it (heap_lock_tuple), and the trigger function itself;
# for the AFTER ROW candidates, queuing the event (ExecARUpdateTriggers),
# firing it (AfterTriggerEndQuery) and the function.
#
# Token proofs: BENCH_PROOF_VARIANTS, with proofs for tokens
# 1 .. N2 and BENCH_PROOF_TOKEN signed first (tests/pg/sign-proof.sh, about
# 20 ms each).  Their cost per UPDATE: fence_guard+proof - fence_guard (a
# proof found in the session's cache), and fence_guard+proof_fresh -
# fence_guard+set (a proof verified every time; both runs also execute a
# SET line per UPDATE, which cancels).
#
# The outbox (BENCH_OUTBOX_VARIANTS): fence_admit and fence_enqueue per
# call, a newer token for resource bench:ID each time (the "per UPDATE"
# column is per call for them); checked after each run: every resource
# holds the last token admitted to it, and fence_outbox has one entry per
# fence_enqueue.
#
# Rejections (BENCH_REJECTION_VARIANTS): fence_advance refused every time
# (a stale token, a false result), with the ring of fence_rejections on and
# off; the difference per call is the cost of recording a rejection.
# Checked after each run: every call returned false, and every resource
# still holds BENCH_REJECT_FENCE.
#
# Goals: fence_guard at most 1.05 x plain per UPDATE, and fewer
# than plpgsql; with pg_fence.preempt on, fence_guard+preempt at most 1.03 x
# fence_guard+proof (the same guard, preemption off); for mode sequenced, fence_guard+seq at most 1.05 x fence_guard
# (plain+seq, the same UPDATE without a trigger, splits the difference into
# the sequence column's own cost and the guard's).  The first is out of reach for a trigger: PostgreSQL's own
# cost of a BEFORE ROW trigger (the row lock) is about 0.07 x plain, of an
# AFTER ROW trigger more (docs/sql.md, fence_guard, Cost).  A benchmark, not a test: it prints PASS or FAIL for each and
# exits 0 either way (non-zero only when a run or a check fails).
#
# Settings (environment): BENCH_INSTR_COUNTS ("2000 4000"), BENCH_INSTR_ROWS
# (1000), BENCH_INSTR_OUT (build/bench-pg-instr: the report instructions.txt,
# every run's logs and callgrind file), PG_CONFIG.  As root, postgres runs as
# the user postgres (BENCH_INSTR_USER).  Needs valgrind and openssl; takes
# about six minutes (signing the proofs, about one).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=bench/pg/variants.sh
source "$ROOT/bench/pg/variants.sh"
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
BINDIR=$("$PG_CONFIG" --bindir)
read -r N1 N2 extra <<<"${BENCH_INSTR_COUNTS:-2000 4000}"
ROWS=${BENCH_INSTR_ROWS:-1000}
OUT=${BENCH_INSTR_OUT:-$ROOT/build/bench-pg-instr}
RUN_USER=${BENCH_INSTR_USER:-postgres}
# the settings of every postgres --single run
PG_OPTS=(-c shared_preload_libraries=pg_fence -c huge_pages=off -c jit=off -c fsync=off)

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'; }   # the header, up to its first other line
[[ ${1:-} == -h || ${1:-} == --help ]] && { usage; exit 0; }
(($# == 0)) || { usage >&2; exit 2; }
if [[ ! $N1 =~ ^[1-9][0-9]*$ || ! ${N2:-} =~ ^[1-9][0-9]*$ || -n ${extra:-} ]] || ((N1 >= N2)); then
  echo "instructions.sh: BENCH_INSTR_COUNTS must be two counts N1 < N2, got '${BENCH_INSTR_COUNTS:-}'" >&2
  exit 2
fi
[[ $ROWS =~ ^[1-9][0-9]*$ ]] || { echo "instructions.sh: BENCH_INSTR_ROWS must be a positive integer, got '$ROWS'" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "instructions.sh: valgrind is missing; run: PGFENCE_BENCH_DEPS=1 bash scripts/install-deps.sh" >&2; exit 1; }
if [[ ! -e $("$PG_CONFIG" --sharedir)/extension/pg_fence.control ]]; then
  echo "instructions.sh: pg_fence is not installed; run: make -C $ROOT/pg_extension install" >&2
  exit 1
fi

# Settings of variant's runs besides PG_OPTS, one argument a line.
bench_run_settings() {
  case $1 in
    advance_stale) printf '%s\n' -c pg_fence.log_rejections=off ;;
    advance_stale+ring_off) printf '%s\n' -c pg_fence.log_rejections=off -c pg_fence.rejection_log_size=0 ;;
  esac
}

# Run "$@" as the user that owns the clusters (postgres refuses root).
as_run_user() {
  if [[ $(id -u) -eq 0 ]]; then runuser -u "$RUN_USER" -- "$@"; else "$@"; fi
}

# postgres --single on cluster DIR, reading statements from stdin.
single() {
  local dir=$1
  shift
  as_run_user "$BINDIR/postgres" --single "$@" -D "$dir" "${PG_OPTS[@]}" postgres
}

# The statements of one run: PREPARE, then N EXECUTE lines (with the proof
# variants' SET pg_fence.proof lines).
run_sql() {
  local variant=$1 n=$2
  if [[ $variant == no-op ]]; then
    echo 'PREPARE s(int, int, bigint) AS SELECT WHERE false'
  else
    # shellcheck disable=SC2016  # $1 $2 $3 are PREPARE's parameters, not shell's
    echo "PREPARE s(int, int, bigint) AS $(bench_statement "$variant" bench_t '$1' '$2' '$3')"
  fi
  case $variant in
    fence_guard+proof | fence_guard+preempt)
      [[ $variant == fence_guard+preempt ]] && echo 'SET pg_fence.preempt = on'
      echo "SET pg_fence.proof = '$(sed -n '$p' "$PROOFS")'"
      awk -v n="$n" -v rows="$ROWS" -v tok="$BENCH_PROOF_TOKEN" 'BEGIN { for (i = 1; i <= n; i++) printf "EXECUTE s(%d, %d, %d)\n", (i - 1) % rows + 1, i, tok }' ;;
    fence_guard+proof_fresh | fence_guard+set)
      awk -v n="$n" -v rows="$ROWS" '
        { proof[NR] = $0 }
        END { for (i = 1; i <= n; i++) printf "SET pg_fence.proof = '\''%s'\''\nEXECUTE s(%d, %d, %d)\n", proof[i], (i - 1) % rows + 1, i, i }' "$PROOFS" ;;
    *)
      awk -v n="$n" -v rows="$ROWS" 'BEGIN { for (i = 1; i <= n; i++) printf "EXECUTE s(%d, %d, %d)\n", (i - 1) % rows + 1, i, i }' ;;
  esac
}

# Proofs for lock key BENCH_PROOF_KEY, one per line: tokens 1 .. N2, then BENCH_PROOF_TOKEN.
sign_proofs() {
  local i
  echo "instructions.sh: signing $((N2 + 1)) token proofs ..." >&2
  for i in $(seq 1 "$N2") "$BENCH_PROOF_TOKEN"; do
    bash "$ROOT/tests/pg/sign-proof.sh" "$ROOT/tests/vectors/token_proof_v1.key" \
      12345678901234567890 "$i" "$BENCH_PROOF_KEY"
    echo
  done >"$PROOFS"
}

# Sum of the fences after n statements of variant: each row holds the last
# token written to it (fence_guard+proof: always BENCH_PROOF_TOKEN).
expected_fence_sum() {
  if [[ $2 == fence_guard+proof || $2 == fence_guard+preempt ]]; then
    echo $((BENCH_PROOF_TOKEN * ($1 < ROWS ? $1 : ROWS)))
    return
  fi
  if [[ $2 == advance_stale* ]]; then
    echo $((BENCH_REJECT_FENCE * ROWS))
    return
  fi
  awk -v n="$1" -v rows="$ROWS" 'BEGIN {
    s = 0
    for (r = 1; r <= rows && r <= n; r++) s += r + rows * int((n - r) / rows)
    printf "%.0f\n", s
  }'
}

# The variant's template cluster: a copy of the initdb'd base, with bench_t.
make_template() {
  local variant=$1 dir=$TMP/template-$1
  cp -a "$TMP/base" "$dir"
  [[ $variant == no-op ]] && return 0
  { bench_database_sql; bench_table_sql "$variant" bench_t "$ROWS"; printf 'CHECKPOINT;\n\n'; } |
    single "$dir" -j >"$OUT/setup-$variant.log" 2>&1
  if grep -q 'ERROR' "$OUT/setup-$variant.log"; then
    echo "instructions.sh: setting up $variant failed, see $OUT/setup-$variant.log" >&2
    return 1
  fi
}

# Fail unless the run of variant with n statements did all its writes.
check_run() {
  local variant=$1 n=$2 dir=$3 log=$4 sum applied refused
  if grep -q 'ERROR' "$log.err"; then
    echo "instructions.sh: $variant, $n statements: a statement failed, see $log.err" >&2
    return 1
  fi
  [[ $variant == no-op ]] && return 0
  local sum_sql='SELECT sum(fence) AS fence_sum FROM bench_t' entries
  # the outbox variants: each resource bench:ID holds the last token admitted
  [[ $variant == fence_admit || $variant == fence_enqueue || $variant == advance_stale* ]] &&
    sum_sql="SELECT sum(fence) AS fence_sum FROM fence_resources WHERE resource LIKE 'bench:%'"
  sum=$(echo "$sum_sql" | single "$dir" 2>/dev/null |
        sed -nE 's/^[[:space:]]*1: fence_sum = "([0-9]+)".*/\1/p')
  if [[ $sum != "$(expected_fence_sum "$n" "$variant")" ]]; then
    echo "instructions.sh: $variant, $n statements: sum(fence) is '$sum', not $(expected_fence_sum "$n" "$variant"): not every write was done" >&2
    return 1
  fi
  if [[ $variant == fence_enqueue ]]; then
    entries=$(echo 'SELECT count(*) AS entries FROM fence_outbox' | single "$dir" 2>/dev/null |
              sed -nE 's/^[[:space:]]*1: entries = "([0-9]+)".*/\1/p')
    if [[ $entries != "$n" ]]; then
      echo "instructions.sh: $variant, $n statements: fence_outbox has '$entries' entries, not $n" >&2
      return 1
    fi
  fi
  if [[ $variant == advance_stale* ]]; then
    refused=$(grep -c 'fence_advance = "f"' "$log.out" || true)
    if ((refused != n)); then
      echo "instructions.sh: $variant, $n statements: fence_advance refused $refused calls, not $n; see $log.out" >&2
      return 1
    fi
  fi
  if [[ $variant == fenced_update* ]]; then
    applied=$(grep -c 'fenced_update = "applied"' "$log.out" || true)
    if ((applied != n)); then
      echo "instructions.sh: $variant, $n statements: fenced_update applied $applied times, not $n; see $log.out" >&2
      return 1
    fi
  fi
}

# Instructions of one run of variant with n statements, on a fresh copy.
count_run() {
  local variant=$1 n=$2 dir=$TMP/run log=$OUT/$1-$2 total settings
  mapfile -t settings < <(bench_run_settings "$variant")
  rm -rf "$dir"
  cp -a "$TMP/template-$variant" "$dir"
  run_sql "$variant" "$n" >"$TMP/run.sql"
  as_run_user valgrind --tool=callgrind --callgrind-out-file="$TMP/callgrind.out" \
    --log-file="$TMP/valgrind.log" "$BINDIR/postgres" --single -D "$dir" "${PG_OPTS[@]}" \
    "${settings[@]}" postgres \
    <"$TMP/run.sql" >"$log.out" 2>"$log.err"
  cp "$TMP/valgrind.log" "$log.valgrind"
  cp "$TMP/callgrind.out" "$log.callgrind"
  total=$(sed -n 's/^summary: \([0-9]*\)$/\1/p' "$TMP/callgrind.out")
  [[ -n $total ]] || { echo "instructions.sh: no callgrind total for $variant, $n statements; see $log.valgrind" >&2; return 1; }
  check_run "$variant" "$n" "$dir" "$log"
  echo "$total"
}

# Inclusive instructions of the costliest function matching regex in a run.
inclusive() {
  callgrind_annotate --inclusive=yes --threshold=100 "$1" | awk -v re="$2" '
    $0 ~ (":(" re ") \\[") { n = $1; gsub(",", "", n); if (n + 0 > max) max = n + 0 }
    END { printf "%.0f\n", max }'
}

# Per statement of variant (N2 run minus N1 run) inside functions matching regex.
per_statement_in() {
  local a b
  a=$(inclusive "$OUT/$1-$N1.callgrind" "$2")
  b=$(inclusive "$OUT/$1-$N2.callgrind" "$2")
  echo $(((b - a) / (N2 - N1)))
}

# "variant path lock function" lines of the trigger variants.
trigger_breakdown() {
  local variant function
  for variant in fence_guard plpgsql fenced_update+guard guard_when fence_guard+seq; do
    function=fence_guard
    [[ $variant == plpgsql ]] && function=plpgsql_call_handler
    echo "$variant $(per_statement_in "$variant" 'ExecBRUpdateTriggers(New)?')" \
      "$(per_statement_in "$variant" heap_lock_tuple) $(per_statement_in "$variant" "$function") $function"
  done
}

rm -rf "$OUT"
mkdir -p "$OUT"
TMP=$(mktemp -d /tmp/pgfence-instr.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
[[ $(id -u) -eq 0 ]] && chown "$RUN_USER:" "$TMP"
as_run_user "$BINDIR/initdb" -D "$TMP/base" --no-sync -A trust >"$OUT/initdb.log" 2>&1
results=$OUT/counts.txt
: >"$results"
PROOFS=$OUT/proofs.txt
sign_proofs
for variant in no-op $BENCH_VARIANTS $BENCH_SEQ_VARIANTS $BENCH_CANDIDATE_VARIANTS $BENCH_PROOF_VARIANTS \
               $BENCH_OUTBOX_VARIANTS $BENCH_REJECTION_VARIANTS; do
  make_template "$variant"
  for n in "$N1" "$N2"; do
    echo "instructions.sh: $variant, $n statements under callgrind ..." >&2
    total=$(count_run "$variant" "$n")
    echo "$variant $n $total" >>"$results"
  done
done

# "variant queue fire function" lines of the AFTER ROW candidates: the
# event's queuing (ExecARUpdateTriggers: fetches OLD, evaluates WHEN), its
# firing at the end of the statement (AfterTriggerEndQuery), and the
# function called in it.
after_breakdown() {
  local variant
  for variant in after_plpgsql after_when; do
    echo "$variant $(per_statement_in "$variant" ExecARUpdateTriggers)" \
      "$(per_statement_in "$variant" AfterTriggerEndQuery)" \
      "$(per_statement_in "$variant" plpgsql_call_handler)"
  done
}

trigger_breakdown >"$OUT/triggers.txt"
after_breakdown >"$OUT/after.txt"

{
  echo
  echo "pg_fence instructions per UPDATE: callgrind on postgres --single, $ROWS rows, N = $N1 and $N2 prepared statements,"
  echo "$("$BINDIR/postgres" --version), valgrind $(valgrind --version | sed 's/^valgrind-//')"
  echo "(per statement: (I(N2) - I(N1)) / (N2 - N1); per UPDATE: that minus the no-op's, SELECT WHERE false)"
  awk -v n1="$N1" -v n2="$N2" '
    FNR == NR { total[$1, $2] = $3; if (!($1 in seen)) { seen[$1] = 1; order[++k] = $1 }; next }
    { trig[++t] = $0 }
    END {
      for (i = 1; i <= k; i++) { v = order[i]; per[v] = (total[v, n2] - total[v, n1]) / (n2 - n1) }
      printf "%-22s %16s %14s %10s\n", "variant", "instr/statement", "instr/UPDATE", "vs plain"
      printf "%-22s %16.0f %14s %10s\n", "no-op", per["no-op"], "-", "-"
      plain = per["plain"] - per["no-op"]
      for (i = 1; i <= k; i++) {
        v = order[i]
        if (v == "no-op") continue
        upd[v] = per[v] - per["no-op"]
        printf "%-22s %16.0f %14.0f %10.3f\n", v, per[v], upd[v], upd[v] / plain
      }
      print ""
      print "the triggers, per UPDATE: PostgreSQL'\''s BEFORE ROW path (ExecBRUpdateTriggers: it locks the row, then"
      print "calls the trigger function), the row lock in it, the function; the path minus the function is"
      print "PostgreSQL'\''s own cost of firing a BEFORE ROW trigger"
      printf "%-22s %16s %9s %9s %24s  %s\n", "variant", "BEFORE ROW path", "row lock", "function", "path - function", "function"
      for (i = 1; i <= t; i++) {
        split(trig[i], f, " ")
        printf "%-22s %16d %9d %9d %9d (%.3f x plain)  %s\n", f[1], f[2], f[3], f[4], f[2] - f[4], (f[2] - f[4]) / plain, f[5]
      }
      print ""
      print "the AFTER ROW candidates, per UPDATE: queuing the event (ExecARUpdateTriggers: fetches OLD,"
      print "evaluates WHEN), firing it at the end of the statement (AfterTriggerEndQuery), the function"
      print "called there; queue + fire - function is PostgreSQL'\''s own cost of an AFTER ROW trigger"
      printf "%-22s %9s %9s %9s %24s\n", "variant", "queue", "fire", "function", "queue + fire - function"
      while ((getline line < after) > 0) {
        split(line, f, " ")
        m = f[2] + f[3] - f[4]
        printf "%-22s %9d %9d %9d %9d (%.3f x plain)\n", f[1], f[2], f[3], f[4], m, m / plain
      }
      print ""
      printf "budget of the 1.05 goal: %.0f instructions per UPDATE above plain\n", 0.05 * plain
      print ""
      print "token proofs, per UPDATE above their baseline:"
      hit = upd["fence_guard+proof"] - upd["fence_guard"]
      fresh = upd["fence_guard+proof_fresh"] - upd["fence_guard+set"]
      printf "  the same proof in every transaction (SET once; a session cache hit): %.0f instructions (fence_guard+proof - fence_guard, %.3f x plain)\n", hit, hit / plain
      printf "  fresh proof per transaction (Ed25519 verify): %.0f instructions (fence_guard+proof_fresh - fence_guard+set, %.3f x plain)\n", fresh, fresh / plain
      pre = upd["fence_guard+preempt"] - upd["fence_guard+proof"]
      printf "  pg_fence.preempt on (the registry: register, PRE_COMMIT check, removal): %.0f instructions (fence_guard+preempt - fence_guard+proof)\n", pre
      print ""
      print "the outbox, per call (a new token, a new entry each time):"
      e = upd["fence_enqueue"]; a = upd["fence_admit"]
      printf "  fence_enqueue %.0f instructions (%.3f x plain); fence_admit alone %.0f; the rest (checks, key, INSERT) %.0f\n", e, e / plain, a, e - a
      r = upd["advance_stale"]; r0 = upd["advance_stale+ring_off"]
      print ""
      print "rejections, per refused call (fence_advance, stale token, pg_fence.log_rejections off):"
      printf "  ring on %.0f instructions, ring off (pg_fence.rejection_log_size = 0) %.0f: recording one rejection in fence_rejections costs %.0f (%.3f x the refused call)\n", r, r0, r - r0, (r - r0) / r0
      g = upd["fence_guard"]; l = upd["plpgsql"]
      print ""
      print "goals, instructions per UPDATE:"
      printf "  %s fence_guard %.3f x plain (goal: at most 1.05)\n", (g <= 1.05 * plain ? "PASS" : "FAIL"), g / plain
      printf "  %s fence_guard %.3f x plpgsql (goal: below 1)\n", (g < l ? "PASS" : "FAIL"), g / l
      printf "  %s fence_guard+preempt %.3f x fence_guard+proof (goal: at most 1.03)\n", (upd["fence_guard+preempt"] <= 1.03 * upd["fence_guard+proof"] ? "PASS" : "FAIL"), upd["fence_guard+preempt"] / upd["fence_guard+proof"]
      q = upd["fence_guard+seq"]; qp = upd["plain+seq"]
      print "goal (mode sequenced), instructions per UPDATE:"
      printf "  %s fence_guard+seq %.3f x fence_guard, %.0f more (goal: at most 1.05)\n", (q <= 1.05 * g ? "PASS" : "FAIL"), q / g, q - g
      printf "  of which the wider row and SET list (plain+seq - plain): %.0f; the guard on it (fence_guard+seq - plain+seq): %.0f, against fence_guard - plain: %.0f\n", qp - plain, q - qp, g - plain
    }' after="$OUT/after.txt" "$results" "$OUT/triggers.txt"
} | tee "$OUT/instructions.txt"
