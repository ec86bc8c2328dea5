#!/usr/bin/env bash
# bench/pg/run.sh: what fencing costs a single-row UPDATE in tps (run by make
# bench-pg; bench/pg/instructions.sh counts the same in instructions, which
# other load cannot move).
#
# pgbench, prepared mode, on a throwaway server (pg_virtualenv -t,
# shared_preload_libraries = pg_fence), for each variant of
# bench/pg/variants.sh: plain UPDATE, fence_guard (C trigger), an equivalent
# PL/pgSQL trigger, fenced_update(), fenced_update on a protected table.
#
# Rounds: each round runs every variant once, for BENCH_SECONDS each; round r
# starts with the r-th variant and goes on in list order, so over 5 rounds
# every variant runs once in every position.  A variant's figure is the
# median over the rounds of its tps divided by plain's tps in the same round
# (paired: a slow round slows both), printed with each round's ratios.
#
# Every run starts from the same state: the table bench_t is dropped and
# created anew (BENCH_ROWS rows, fence 0, the variant's trigger), vacuumed,
# fence_stats reset, a CHECKPOINT; the server has autovacuum off and no
# timed or WAL-size checkpoint within a run, so no background work lands on
# some variants and not others.  In one round all variants get the same
# pgbench --random-seed, so they update the same rows in the same order.
#
# Every write must carry a newer token than the row holds, or the fenced
# variants would refuse it and the variants would not do the same work.  So
# client c only updates rows with id % clients = c, and keeps its own
# counter :tok (pgbench variables live as long as the client) that grows by
# one per transaction.  The script checks afterwards that no transaction
# failed and that fence_stats saw no rejection.
#
# Settings (environment): BENCH_SECONDS (20), BENCH_ROWS (10000),
# BENCH_CLIENTS ("1 8"), BENCH_SYNC_COMMIT (off: measure CPU cost, not
# fsync), BENCH_ROUNDS (5; fewer leaves some variant never first),
# BENCH_WARMUP_SECONDS (5: one unreported run of every variant first),
# BENCH_OUT (build/bench-pg: logs, results.txt, the report bench.log).
# Run it on an idle machine: the ratios are paired per round, but other load
# still makes single rounds swing by several percent.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=bench/pg/variants.sh
source "$ROOT/bench/pg/variants.sh"
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
BENCH_SECONDS=${BENCH_SECONDS:-20}
BENCH_ROWS=${BENCH_ROWS:-10000}
BENCH_CLIENTS=${BENCH_CLIENTS:-"1 8"}
BENCH_SYNC_COMMIT=${BENCH_SYNC_COMMIT:-off}
BENCH_ROUNDS=${BENCH_ROUNDS:-5}
BENCH_WARMUP_SECONDS=${BENCH_WARMUP_SECONDS:-5}
WORK=${BENCH_OUT:-$ROOT/build/bench-pg}
TABLE=bench_t

usage() { sed -n '2,37p' "$0" | sed 's/^# \{0,1\}//'; }

# Drop and recreate the table as the variant needs it; reset fence_stats.
reset_table() {
  {
    echo 'SET client_min_messages = warning;'
    echo "DROP TABLE IF EXISTS $TABLE;"
    bench_table_sql "$1" "$TABLE" "$BENCH_ROWS"
    echo 'SELECT fence_stats_reset();'
    echo 'CHECKPOINT;'
  } | psql -X -q -v ON_ERROR_STOP=1 -d bench >/dev/null
}

# The pgbench script of a variant.
write_script() {
  local variant=$1 file=$WORK/$1.sql
  {
    echo '\set id :client_id + 1 + :nclients * random(0, :rows_per_client - 1)'
    echo '\set bal random(1, 1000000)'
    echo '\set tok :tok + 1'
    bench_statement "$variant" "$TABLE" :id :bal :tok
  } >"$file"
  echo "$file"
}

# One pgbench run of seconds with seed on a fresh table; prints tps.
run_one() {
  local variant=$1 clients=$2 seconds=$3 seed=$4 log=$5 script tps rejected
  reset_table "$variant"
  script=$(write_script "$variant")
  if ! pgbench -n -M prepared -c "$clients" -j "$clients" -T "$seconds" --random-seed="$seed" \
       -D nclients="$clients" -D rows_per_client=$((BENCH_ROWS / clients)) -D tok=0 \
       -f "$script" bench >"$log" 2>&1; then
    echo "bench-pg: pgbench failed for $variant with $clients clients, see $log" >&2
    return 1
  fi
  if grep -q 'number of failed transactions: [1-9]' "$log"; then
    echo "bench-pg: $variant with $clients clients had failed transactions, see $log" >&2
    return 1
  fi
  rejected=$(psql -X -At -d bench -c "SELECT coalesce(sum(rejected_stale), 0) FROM fence_stats
                                      WHERE relation = '$TABLE'::regclass")
  if [[ $rejected != 0 ]]; then
    echo "bench-pg: $variant saw $rejected stale rejections; tokens were not all newer" >&2
    return 1
  fi
  tps=$(sed -nE 's/^tps = ([0-9.]+) \(without initial connection time\)/\1/p' "$log")
  echo "$tps"
}

# The variants in round r's order: the list rotated left by r - 1.
round_order() {
  local -a v
  read -r -a v <<<"$BENCH_VARIANTS"
  local n=${#v[@]} i
  for ((i = 0; i < n; i++)); do echo "${v[(i + $1 - 1) % n]}"; done
}

run_inside() {
  mkdir -p "$WORK"
  psql -X -q -v ON_ERROR_STOP=1 -c "CREATE DATABASE bench"
  bench_database_sql | psql -X -q -v ON_ERROR_STOP=1 -d bench >/dev/null
  local results=$WORK/results.txt variant clients round tps
  : >"$results"
  echo "bench-pg: warm-up, every variant, 1 client, ${BENCH_WARMUP_SECONDS}s each (not reported)" >&2
  for variant in $BENCH_VARIANTS; do
    run_one "$variant" 1 "$BENCH_WARMUP_SECONDS" 0 "$WORK/$variant-warmup.log" >/dev/null
  done
  for clients in $BENCH_CLIENTS; do
    for round in $(seq 1 "$BENCH_ROUNDS"); do
      for variant in $(round_order "$round"); do
        echo "bench-pg: round $round, $variant, $clients client(s), ${BENCH_SECONDS}s ..." >&2
        tps=$(run_one "$variant" "$clients" "$BENCH_SECONDS" "$round" "$WORK/$variant-c$clients-r$round.log")
        echo "$clients $round $variant $tps" >>"$results"
      done
    done
  done
  report "$results"
}

# "clients round variant tps" lines -> per-round ratios to plain, medians, goals.
report() {
  echo
  echo "pg_fence benchmark: pgbench -M prepared, $BENCH_ROWS rows, ${BENCH_SECONDS}s per run, $BENCH_ROUNDS rounds (order rotated),"
  echo "synchronous_commit=$BENCH_SYNC_COMMIT, $("$("$PG_CONFIG" --bindir)/postgres" --version), $(nproc) CPUs, load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
  awk -v variants="$BENCH_VARIANTS" '
    function median(a, m,    s, i, j, t) {
      for (i = 1; i <= m; i++) s[i] = a[i]
      for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (s[j] < s[i]) { t = s[i]; s[i] = s[j]; s[j] = t }
      return (m % 2) ? s[(m + 1) / 2] : (s[m / 2] + s[m / 2 + 1]) / 2
    }
    {
      if (!($1 in seenc)) { seenc[$1] = 1; cl[++nc] = $1 }
      if (!(($1, $2) in first)) { first[$1, $2] = $3; if ($2 > nr) nr = $2 }
      tps[$1, $2, $3] = $4
    }
    END {
      nv = split(variants, v, " ")
      for (c = 1; c <= nc; c++) {
        k = cl[c]
        printf "\n%s client(s): plain in tps, the others as tps / plain tps of the same round\n", k
        printf "%-6s %-20s %10s", "round", "first", "plain"
        for (i = 2; i <= nv; i++) printf " %20s", v[i]
        printf "\n"
        for (r = 1; r <= nr; r++) {
          p = tps[k, r, "plain"]
          printf "%-6d %-20s %10.1f", r, first[k, r], p
          for (i = 1; i <= nv; i++) {
            ratio[v[i], r] = tps[k, r, v[i]] / p
            if (i > 1) printf " %20.3f", ratio[v[i], r]
          }
          printf "\n"
        }
        printf "%-27s %10s", "median", "-"
        for (i = 1; i <= nv; i++) {
          for (r = 1; r <= nr; r++) { col[r] = ratio[v[i], r]; tcol[r] = tps[k, r, v[i]] }
          med[v[i]] = median(col, nr); medtps[v[i]] = median(tcol, nr)
          if (i > 1) printf " %20.3f", med[v[i]]
        }
        printf "\n%-27s %10.1f", "median tps", medtps["plain"]
        for (i = 2; i <= nv; i++) printf " %20.1f", medtps[v[i]]
        printf "\n"
        for (r = 1; r <= nr; r++) gl[r] = ratio["fence_guard", r] / ratio["plpgsql", r]
        mgl = median(gl, nr)
        goals[c] = sprintf("  %s client(s): fence_guard %.3f x plain [%s], %.3f x plpgsql [%s], fenced_update %.3f x plain [%s]", k, \
          med["fence_guard"], (med["fence_guard"] >= 0.95 ? "met" : "MISSED"), mgl, (mgl > 1 ? "met" : "MISSED"), \
          med["fenced_update"], (med["fenced_update"] >= 1 / 1.5 ? "met" : "MISSED"))
      }
      print ""
      print "goals, on the median of the per-round ratios: fence_guard >= 0.95 x plain; fence_guard > plpgsql; fenced_update >= plain / 1.5"
      for (c = 1; c <= nc; c++) print goals[c]
    }' "$1"
}

case ${1:-} in
  -h | --help) usage; exit 0 ;;
  --inside) run_inside; exit $? ;;
  '') ;;
  *) usage >&2; exit 2 ;;
esac

if [[ ! -e $("$PG_CONFIG" --sharedir)/extension/pg_fence.control ]]; then
  echo "bench-pg: pg_fence is not installed; run: make -C $ROOT/pg_extension install" >&2
  exit 1
fi
rm -rf "$WORK"
mkdir -p "$WORK"
PG_VERSION_MAJOR=$("$PG_CONFIG" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
export BENCH_SECONDS BENCH_ROWS BENCH_CLIENTS BENCH_SYNC_COMMIT BENCH_ROUNDS \
  BENCH_WARMUP_SECONDS BENCH_OUT=$WORK
pg_virtualenv -t -v "$PG_VERSION_MAJOR" -o shared_preload_libraries=pg_fence \
  -o synchronous_commit="$BENCH_SYNC_COMMIT" -o autovacuum=off \
  -o checkpoint_timeout=1d -o max_wal_size=16GB \
  bash "$ROOT/bench/pg/run.sh" --inside 2>&1 | tee "$WORK/bench.log" | grep -v '^Creating new\|^Dropping cluster' || true
grep -q '^goals' "$WORK/bench.log"
