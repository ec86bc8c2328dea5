#!/usr/bin/env bash
# bench/pg/run.sh: what fencing costs a single-row UPDATE (run by make bench-pg).
#
# One pgbench run per variant and client count, on a throwaway server
# (pg_virtualenv -t, shared_preload_libraries = pg_fence), prepared mode:
#
#   plain          UPDATE t SET balance = :bal, fence = :tok WHERE id = :id
#   fence_guard    the same UPDATE on a table protected by fence_protect (C trigger)
#   plpgsql        the same UPDATE through an equivalent PL/pgSQL trigger
#   fenced_update  SELECT fenced_update(t, {"id": :id}, {"balance": :bal}, :tok)
#                  on an unprotected table (its WHERE fence < token is the fence)
#   fenced_update+guard  the same on a protected table (both checks)
#
# Every write must carry a newer token than the row holds, or the fenced
# variants would refuse it and the variants would not do the same work.  So
# client c only updates rows with id % clients = c, and keeps its own
# counter :tok (pgbench variables live as long as the client) that grows by
# one per transaction; tables are recreated with fence 0 before every run.
# Every variant, plain included, writes the fence column with :tok through
# the SET list, which is the fast path of fence_guard (token in NEW, no
# setting to read).  The script checks afterwards that no transaction
# failed and that fence_stats saw no rejection.
#
# Settings (environment): BENCH_SECONDS (20), BENCH_ROWS (10000),
# BENCH_CLIENTS ("1 8"), BENCH_SYNC_COMMIT (off: measure CPU cost, not fsync),
# BENCH_ROUNDS (1; with more, the variants run interleaved round after round
# and the table shows each variant's median, which resists background load),
# BENCH_WARMUP_SECONDS (5: one unreported plain run first).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
BENCH_SECONDS=${BENCH_SECONDS:-20}
BENCH_ROWS=${BENCH_ROWS:-10000}
BENCH_CLIENTS=${BENCH_CLIENTS:-"1 8"}
BENCH_SYNC_COMMIT=${BENCH_SYNC_COMMIT:-off}
BENCH_ROUNDS=${BENCH_ROUNDS:-1}
BENCH_WARMUP_SECONDS=${BENCH_WARMUP_SECONDS:-5}
VARIANTS="plain fence_guard plpgsql fenced_update fenced_update+guard"
WORK=${BENCH_OUT:-$ROOT/build/bench-pg}

# Table name of a variant.
table_of() {
  case $1 in
    plain) echo bench_plain ;;
    fence_guard) echo bench_guard ;;
    plpgsql) echo bench_plpgsql ;;
    fenced_update) echo bench_fu ;;
    fenced_update+guard) echo bench_fu_guard ;;
  esac
}

# (Re)create the variant's table with fence 0 on every row.
reset_table() {
  local variant=$1 table
  table=$(table_of "$variant")
  psql -X -q -v ON_ERROR_STOP=1 -d bench <<SQL
SET client_min_messages = warning;
DROP TABLE IF EXISTS $table;
CREATE TABLE $table (id int PRIMARY KEY, balance int NOT NULL,
                     fence bigint NOT NULL DEFAULT 0);
INSERT INTO $table SELECT i, 0, 0 FROM generate_series(1, $BENCH_ROWS) AS i;
SQL
  case $variant in
    fence_guard | fenced_update+guard)
      psql -X -q -v ON_ERROR_STOP=1 -d bench -c "SELECT fence_protect('$table')" >/dev/null ;;
    plpgsql)
      psql -X -q -v ON_ERROR_STOP=1 -d bench -c "CREATE TRIGGER zzz_plpgsql_guard
        BEFORE UPDATE ON $table FOR EACH ROW EXECUTE FUNCTION bench_plpgsql_guard()" ;;
  esac
  psql -X -q -v ON_ERROR_STOP=1 -d bench -c "VACUUM ANALYZE $table" -c "CHECKPOINT"
}

# The pgbench script of a variant.
write_script() {
  local variant=$1 table file
  table=$(table_of "$variant")
  file=$WORK/$variant.sql
  {
    echo '\set id :client_id + 1 + :nclients * random(0, :rows_per_client - 1)'
    echo '\set bal random(1, 1000000)'
    echo '\set tok :tok + 1'
    case $variant in
      fenced_update*)
        echo "SELECT fenced_update('$table', jsonb_build_object('id', CAST(:id AS int)), jsonb_build_object('balance', CAST(:bal AS int)), CAST(:tok AS bigint));" ;;
      *)
        echo "UPDATE $table SET balance = :bal, fence = :tok WHERE id = :id;" ;;
    esac
  } >"$file"
  echo "$file"
}

# One pgbench run of seconds; prints tps.
run_one() {
  local variant=$1 clients=$2 seconds=$3 round=$4 script log tps table
  table=$(table_of "$variant")
  reset_table "$variant"
  script=$(write_script "$variant")
  log=$WORK/$variant-c$clients-r$round.log
  if ! pgbench -n -M prepared -c "$clients" -j "$clients" -T "$seconds" \
       -D nclients="$clients" -D rows_per_client=$((BENCH_ROWS / clients)) -D tok=0 \
       -f "$script" bench >"$log" 2>&1; then
    echo "bench-pg: pgbench failed for $variant with $clients clients, see $log" >&2
    return 1
  fi
  if grep -q 'number of failed transactions: [1-9]' "$log"; then
    echo "bench-pg: $variant with $clients clients had failed transactions, see $log" >&2
    return 1
  fi
  local rejected
  rejected=$(psql -X -At -d bench -c "SELECT coalesce(sum(rejected_stale), 0) FROM fence_stats
                                      WHERE relation = '$table'::regclass")
  if [[ $rejected != 0 ]]; then
    echo "bench-pg: $variant saw $rejected stale rejections; tokens were not all newer" >&2
    return 1
  fi
  tps=$(sed -nE 's/^tps = ([0-9.]+) \(without initial connection time\)/\1/p' "$log")
  echo "$tps"
}

run_inside() {
  mkdir -p "$WORK"
  psql -X -q -v ON_ERROR_STOP=1 -c "CREATE DATABASE bench"
  psql -X -q -v ON_ERROR_STOP=1 -d bench <<'SQL'
CREATE EXTENSION pg_fence;
-- the PL/pgSQL equivalent of fence_guard's strict check for this UPDATE
CREATE FUNCTION bench_plpgsql_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.fence IS NULL OR NEW.fence < 0 OR NEW.fence <= OLD.fence THEN
    RAISE EXCEPTION 'stale fencing token % (fence is %)', NEW.fence, OLD.fence
      USING ERRCODE = '55F01';
  END IF;
  RETURN NEW;
END $$;
SQL
  local results=$WORK/results.txt
  : >"$results"
  echo "bench-pg: warm-up, plain, 1 client, ${BENCH_WARMUP_SECONDS}s (not reported)" >&2
  run_one plain 1 "$BENCH_WARMUP_SECONDS" warmup >/dev/null
  for clients in $BENCH_CLIENTS; do
    for round in $(seq 1 "$BENCH_ROUNDS"); do
      for variant in $VARIANTS; do
        echo "bench-pg: $variant, $clients client(s), ${BENCH_SECONDS}s, round $round ..." >&2
        echo "$variant $clients $(run_one "$variant" "$clients" "$BENCH_SECONDS" "$round")" >>"$results"
      done
    done
  done
  median_per_variant "$results" >"$WORK/medians.txt"
  print_table "$WORK/medians.txt"
}

# "variant clients tps" lines -> one line per variant and clients with the
# median and the best tps, in the order of first appearance.
median_per_variant() {
  awk '
    { key = $1 " " $2; if (!(key in n)) order[++k] = key; v[key, ++n[key]] = $3 }
    END {
      for (i = 1; i <= k; i++) {
        key = order[i]; m = n[key]
        for (a = 1; a <= m; a++) s[a] = v[key, a]
        for (a = 1; a <= m; a++) for (b = a + 1; b <= m; b++) if (s[b] < s[a]) { t = s[a]; s[a] = s[b]; s[b] = t }
        med = (m % 2) ? s[(m + 1) / 2] : (s[m / 2] + s[m / 2 + 1]) / 2
        print key, med, s[m]
      }
    }' "$1"
}

# The results as a table, with the ratio of every variant to plain UPDATE.
print_table() {
  echo
  echo "pg_fence benchmark: pgbench -M prepared, $BENCH_ROWS rows, ${BENCH_SECONDS}s per run, $BENCH_ROUNDS round(s),"
  echo "synchronous_commit=$BENCH_SYNC_COMMIT, $("$("$PG_CONFIG" --bindir)/postgres" --version), $(nproc) CPUs, load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "(tps: median of the rounds; best: highest round, the least disturbed by other load)"
  printf '%-22s %8s %12s %10s %12s %10s\n' variant clients tps "vs plain" best "vs plain"
  awk '
    $1 == "plain" { plain[$2] = $3; plainbest[$2] = $4 }
    { rows[NR] = $0 }
    END {
      for (i = 1; i <= NR; i++) {
        split(rows[i], f, " ")
        printf "%-22s %8d %12.1f %10.3f %12.1f %10.3f\n", f[1], f[2], f[3], f[3] / plain[f[2]], \
          f[4], f[4] / plainbest[f[2]]
      }
    }' "$1"
  echo
  echo "goals (issue 2), on the median: fence_guard >= 0.95 x plain; fence_guard > plpgsql; fenced_update >= plain / 1.5"
  awk '
    { tps[$1 " " $2] = $3; clients[$2] = 1 }
    END {
      for (c in clients) {
        p = tps["plain " c]; g = tps["fence_guard " c]; l = tps["plpgsql " c]; u = tps["fenced_update " c]
        printf "  %s client(s): fence_guard %.3f x plain [%s], vs plpgsql %.3f x [%s], fenced_update %.3f x plain [%s]\n", \
          c, g / p, (g >= 0.95 * p ? "met" : "MISSED"), g / l, (g > l ? "met" : "MISSED"), \
          u / p, (u >= p / 1.5 ? "met" : "MISSED")
      }
    }' "$1" | sort
}

if [[ ${1:-} == --inside ]]; then
  run_inside
  exit $?
fi

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
  -o synchronous_commit="$BENCH_SYNC_COMMIT" \
  bash "$ROOT/bench/pg/run.sh" --inside 2>&1 | tee "$WORK/bench.log" | grep -v '^Creating new\|^Dropping cluster' || true
grep -q '^goals' "$WORK/bench.log"
