#!/usr/bin/env bash
# The operator's monitoring kit (deploy/), checked by the real tools against
# live metrics:
#   1. promtool check rules and promtool test rules (deploy/prometheus/), and
#      promtool check config of the example configuration; the rules that
#      rules-for-jobs.sh writes for jobs named otherwise (none of the default
#      job names left in them);
#   2. the Grafana dashboard's JSON, with jq: panels, ids, grid positions,
#      targets with a PromQL expression and a refId, the datasource variable,
#      the job variables, and every query's job matcher one of them (no
#      job name written into the dashboard);
#   3. every metric name the rules and the dashboard use is served by a live
#      3-member cluster's /metrics, or by a live prometheus-postgres-exporter
#      running deploy/postgres_exporter/pgfence-queries.yaml against a real
#      PostgreSQL with pg_fence (promtool passes rules naming metrics that do
#      not exist; this does not);
#   4. Debian's prometheus scrapes that cluster and exporter under job names
#      that are not the defaults, with the rules rules-for-jobs.sh wrote for
#      them: every rule evaluates without error, every panel's PromQL (its
#      job variables set to those names) returns series with the labels its
#      legend shows, a healthy cluster raises no alert, and a stopped member
#      leaves pgfence_peers_reachable and makes PgfenceMemberDown and
#      PgfencePeersUnreachable pending.
# Needs pg_fence installed (make test does) and Debian's prometheus,
# prometheus-postgres-exporter and jq (make deps).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
E2E_ROOT=$(cd "$HERE/../../.." && pwd)
export E2E_ROOT
# shellcheck source=../safety/lib/common.sh
source "$E2E_ROOT/tests/e2e/safety/lib/common.sh"
# shellcheck source=../safety/lib/pg.sh
source "$E2E_ROOT/tests/e2e/safety/lib/pg.sh"
FENCECTL=${FENCECTL_BIN:?set FENCECTL_BIN}
export FENCE_COORDINATOR_BIN=${FENCE_COORDINATOR_BIN:?set FENCE_COORDINATOR_BIN}
DEPLOY="$E2E_ROOT/deploy"
RULES="$DEPLOY/prometheus/pgfence.rules.yml"
# The scrape jobs of section 4: not the defaults (pgfence, pgfence_postgres).
COORD_JOB=fence-coordinators PG_JOB=fenced-postgres
DASHBOARD="$DEPLOY/grafana/pgfence-dashboard.json"
QUERIES="$DEPLOY/postgres_exporter/pgfence-queries.yaml"
EXPORTER=${POSTGRES_EXPORTER_BIN:-/usr/bin/prometheus-postgres-exporter}
for tool in promtool prometheus jq curl "$EXPORTER"; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool not installed (make deps)" >&2; exit 1; }
done

W=$(mktemp -d /tmp/pgfence-monitoring.XXXXXX)
pids=()
fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "PASS: $*"; }
cleanup() {
  local rc=$? p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  bash "$E2E_ROOT/scripts/cluster.sh" stop "$W/cluster" >/dev/null 2>&1 || true
  pg_throwaway_stop "$W"
  if ((rc == 0)); then rm -rf "$W"; else echo "kept: $W" >&2; fi
}
trap cleanup EXIT

# --- 1. promtool ---------------------------------------------------------
promtool check rules "$RULES" >"$W/promtool-check.out" 2>&1 || { cat "$W/promtool-check.out" >&2; fail "promtool check rules"; }
(cd "$DEPLOY/prometheus" && promtool test rules pgfence.rules.test.yml) >"$W/promtool-test.out" 2>&1 ||
  { cat "$W/promtool-test.out" >&2; fail "promtool test rules"; }
promtool check config "$DEPLOY/prometheus/prometheus.example.yml" >"$W/promtool-config.out" 2>&1 ||
  { cat "$W/promtool-config.out" >&2; fail "promtool check config prometheus.example.yml"; }
pass "promtool check rules, test rules, and check config of the example configuration"
bash "$DEPLOY/prometheus/rules-for-jobs.sh" "$COORD_JOB" "$PG_JOB" >"$W/rules.yml" 2>"$W/rules-for-jobs.err" ||
  { cat "$W/rules-for-jobs.err" >&2; fail "rules-for-jobs.sh $COORD_JOB $PG_JOB"; }
promtool check rules "$W/rules.yml" >"$W/promtool-check-jobs.out" 2>&1 ||
  { cat "$W/promtool-check-jobs.out" >&2; fail "promtool check rules of the rules for $COORD_JOB and $PG_JOB"; }
if grep -nE 'job *(=|!=|=~|!~) *"pgfence(_postgres)?"' "$W/rules.yml" >&2; then
  fail "rules-for-jobs.sh left default job matchers (above)"
fi
[[ $(grep -c "job=\"$COORD_JOB\"" "$W/rules.yml") == $(grep -c 'job="pgfence"' "$RULES") &&
   $(grep -c "job=\"$PG_JOB\"" "$W/rules.yml") == $(grep -c 'job="pgfence_postgres"' "$RULES") ]] ||
  fail "rules-for-jobs.sh did not rewrite every job matcher"
pass "rules-for-jobs.sh: the rules for jobs $COORD_JOB and $PG_JOB pass promtool check rules"

# --- 2. the dashboard's shape --------------------------------------------
jq -e '
  (.title | type == "string") and (.uid | type == "string") and
  (.templating.list | any(.name == "datasource" and .type == "datasource" and .query == "prometheus")) and
  (.templating.list | any(.name == "job" and .type == "query" and .datasource.uid == "${datasource}" and
                          .query == "label_values(pgfence_is_leader, job)")) and
  (.templating.list | any(.name == "postgres_job" and .type == "query" and .datasource.uid == "${datasource}" and
                          .query == "label_values(pg_fence_stats_accepted, job)")) and
  (.panels | type == "array" and length > 0) and
  ([.panels[].id] | length == (unique | length)) and
  (.panels | all(
     (.title | type == "string" and length > 0) and
     (.type == "stat" or .type == "timeseries") and
     (.gridPos | (.w > 0 and .h > 0 and .x >= 0 and .x + .w <= 24 and .y >= 0)) and
     (.datasource.uid == "${datasource}") and
     (.targets | type == "array" and length > 0) and
     (.targets | all((.expr | type == "string" and length > 0) and (.refId | type == "string")))))
' "$DASHBOARD" >/dev/null || fail "the dashboard's JSON does not have the expected shape ($DASHBOARD)"
pass "dashboard JSON: $(jq '.panels | length' "$DASHBOARD") panels, $(jq '[.panels[].targets[]] | length' "$DASHBOARD") queries"
# Every query selects its job through a variable, never by name.
jq -r '.panels[].targets[].expr' "$DASHBOARD" >"$W/panel.exprs"
if grep -noE 'job *(=|!=|=~|!~) *"[^"]*"' "$W/panel.exprs" | grep -vE ':job="\$(job|postgres_job)"$' >&2; then
  fail "dashboard queries with a job matcher other than job=\"\$job\" or job=\"\$postgres_job\" (above)"
fi
if grep -nvE 'job="\$(job|postgres_job)"' "$W/panel.exprs" >&2; then
  fail "dashboard queries that select no job (above)"
fi
! grep -n 'job=\\"pgfence' "$DASHBOARD" >&2 || fail "the dashboard names a scrape job in a matcher (above)"
pass "every dashboard query selects its job through \$job or \$postgres_job"

# --- 3. a live cluster, PostgreSQL and exporter --------------------------
e2e_cluster_start "$W/cluster" 3 >/dev/null
endpoints=$FENCE_ENDPOINTS
IFS=, read -r -a members <<<"$endpoints"
# Some of everything: grants, a keepalive, a release, a conflict.
t1=$("$FENCECTL" --endpoints "$endpoints" acquire mon:a --lease 5s)
"$FENCECTL" --endpoints "$endpoints" keepalive mon:a "$t1" >/dev/null
set +e
"$FENCECTL" --endpoints "$endpoints" acquire mon:a --lease 5s --wait 0s >/dev/null 2>&1
[[ $? == 3 ]] || fail "a second acquire of a held key did not exit 3"
set -e
"$FENCECTL" --endpoints "$endpoints" release mon:a "$t1"
t2=$("$FENCECTL" --endpoints "$endpoints" acquire mon:b --lease 5s)

pg_throwaway_start "$W" >/dev/null
psql -X -q -v ON_ERROR_STOP=1 <<SQL
CREATE EXTENSION pg_fence;
CREATE TABLE reports (report_id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0);
SELECT fence_protect('reports');
INSERT INTO reports VALUES (7, 'v0', 0);
UPDATE reports SET body = 'v1', fence = $t2 WHERE report_id = 7;
SQL
if psql -X -q -v ON_ERROR_STOP=1 -c "UPDATE reports SET body = 'stale', fence = $t1 WHERE report_id = 7" 2>"$W/stale.err"; then
  fail "the stale write (token $t1 after $t2) was accepted"
fi
grep -q "55F01\|stale" "$W/stale.err" || { cat "$W/stale.err" >&2; fail "the stale write failed for another reason"; }

# start_on_free_port NAME READY CMD...: starts CMD (each "PORT" in it replaced
# by a free loopback port) in the background until READY PORT succeeds
# (20 s); another test may take the port between the check and the bind, so
# a process that exits is started again on another port (3 tries). Sets
# `port` and appends the pid to `pids`; its output goes to $W/NAME.log.
start_on_free_port() {
  local name=$1 ready=$2 try pid
  shift 2
  for try in 1 2 3; do
    port=$(pg_free_port)
    "${@//PORT/$port}" >"$W/$name.log" 2>&1 &
    pid=$!
    pids+=("$pid")
    # Ready, or gone (the port was taken).
    ready_or_gone() { "$ready" "$port" || ! kill -0 "$pid" 2>/dev/null; }
    e2e_wait_for 20 ready_or_gone || { tail -20 "$W/$name.log" >&2; fail "$name did not get ready in 20 s"; }
    kill -0 "$pid" 2>/dev/null && return 0
    echo "$name exited on port $port (try $try): $(tail -n1 "$W/$name.log")" >&2
  done
  fail "$name could not be started (3 tries)"
}

exporter_has_stats() { curl -sf "http://127.0.0.1:$1/metrics" 2>/dev/null | grep -q '^pg_fence_stats_rejected_stale{'; }
export DATA_SOURCE_NAME="host=$PGHOST port=$PGPORT user=$PGUSER dbname=$PGDATABASE sslmode=disable"
start_on_free_port exporter exporter_has_stats "$EXPORTER" --web.listen-address=127.0.0.1:PORT \
  --extend.query-path="$QUERIES" --disable-default-metrics --disable-settings-metrics
exporter_port=$port
curl -sf "http://127.0.0.1:$exporter_port/metrics" >"$W/exporter.metrics"
grep -q "^pg_fence_stats_rejected_stale{.*name=\"reports\".*} 1\$" "$W/exporter.metrics" ||
  { grep pg_fence "$W/exporter.metrics" >&2; fail "the exporter's rejected_stale for reports is not 1"; }
grep -q "^pg_fence_stats_last_accepted_token{.*name=\"reports\".*} $t2\$" "$W/exporter.metrics" ||
  fail "the exporter's last_accepted_token for reports is not $t2"
grep -q '^pg_exporter_last_scrape_error 0$' "$W/exporter.metrics" ||
  fail "the exporter reports a failed scrape: $(grep last_scrape_error "$W/exporter.metrics")"
grep -qE '^pg_fence_rejections_total\{.*path="guard",reason="stale".*\} 1$' "$W/exporter.metrics" ||
  { grep pg_fence_rejections "$W/exporter.metrics" >&2; fail "the exporter's rejections for guard, stale are not 1"; }
pass "postgres_exporter serves fence_stats (rejected_stale 1, last_accepted_token $t2) and fence_rejection_counts (guard, stale: 1)"

# Every metric name in the rules and the dashboard is served live. A
# histogram's _bucket/_sum/_count series are served under those names.
: >"$W/live.metrics"
for ep in "${members[@]}"; do curl -sf "http://$ep/metrics" >>"$W/live.metrics"; done
cat "$W/exporter.metrics" >>"$W/live.metrics"
grep -v '^#' "$W/live.metrics" | sed -E 's/[{ ].*//' | sort -u >"$W/live.names"
grep -q '^pgfence_last_token$' "$W/live.names" || fail "no pgfence_last_token in /metrics"
# The names in the rules' expr: lines and the panels' expressions, with label
# values ("...") taken out.
{ sed -n 's/^ *expr: //p' "$RULES"; jq -r '.panels[].targets[].expr' "$DASHBOARD"; } |
  sed -E 's/"[^"]*"//g' | grep -oE '\b((pgfence|pg_fence|pg_exporter)_[a-z_]+|pg_up)\b' | sort -u >"$W/used.names"
[[ $(sed -n 's/^ *expr: //p' "$RULES" | wc -l) == $(grep -c '^ *- alert:' "$RULES") ]] ||
  fail "not every rule has a one-line expr: (this check reads those lines)"
missing=()
while read -r name; do
  grep -qx "$name" "$W/live.names" || missing+=("$name")
done <"$W/used.names"
((${#missing[@]} == 0)) || fail "metrics named in deploy/ but not served: ${missing[*]}"
pass "all $(wc -l <"$W/used.names") metric names in the rules and the dashboard are served live"

# --- 4. Prometheus scrapes them, with the rules loaded --------------------
targets=$(printf "'%s'," "${members[@]}")
cat >"$W/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $W/rules.yml
scrape_configs:
  - job_name: $COORD_JOB
    static_configs:
      - targets: [${targets%,}]
  - job_name: $PG_JOB
    static_configs:
      - targets: ['127.0.0.1:$exporter_port']
EOF
promtool check config "$W/prometheus.yml" >/dev/null || fail "promtool check config"
prometheus_ready() { curl -sf "http://127.0.0.1:$1/-/ready" >/dev/null 2>&1; }
start_on_free_port prometheus prometheus_ready prometheus --config.file="$W/prometheus.yml" \
  --storage.tsdb.path="$W/tsdb" --web.listen-address=127.0.0.1:PORT
PROM="http://127.0.0.1:$port"
# query EXPR: the JSON answer of an instant query.
query() { curl -sf --max-time 5 -G "$PROM/api/v1/query" --data-urlencode "query=$1"; }
# Three scrapes of all four targets, so that rate() over the window has points.
scraped_enough() {
  [[ $(query 'count(count_over_time(up[1m]) >= 3 and up == 1)' 2>/dev/null | jq -r '.data.result[0].value[1] // 0') == 4 ]]
}
e2e_wait_for 40 scraped_enough || { tail -20 "$W/prometheus.log" >&2; fail "Prometheus did not scrape the 3 members and the exporter 3 times"; }
rules_ok() {
  curl -sf "$PROM/api/v1/rules" | jq -e '[.data.groups[].rules[]] | length > 0 and all(.health == "ok")' >/dev/null
}
e2e_wait_for 20 rules_ok || { curl -sf "$PROM/api/v1/rules" | jq '.data.groups[].rules[] | select(.health != "ok")' >&2; fail "a rule does not evaluate"; }
pass "Prometheus evaluates all $(curl -sf "$PROM/api/v1/rules" | jq '[.data.groups[].rules[]] | length') rules without error"

# Each panel's PromQL, with Grafana's $__rate_interval as 30s and the job
# variables set to this Prometheus's job names, returns series,
# and every series has the labels its legend names ({{instance}}, ...): a
# `by (label)` of a label the metric does not have still returns a series,
# without the label.
n=0
while IFS=$'\t' read -r title expr legend; do
  q=${expr//\$__rate_interval/30s}
  q=${q//\$postgres_job/$PG_JOB}
  q=${q//\$job/$COORD_JOB}
  answer=$(query "$q") || fail "panel '$title': the query failed: $q"
  [[ $(jq -r '.status' <<<"$answer") == success ]] || fail "panel '$title': $(jq -r '.error' <<<"$answer"): $q"
  [[ $(jq '.data.result | length' <<<"$answer") -gt 0 ]] || fail "panel '$title': no series for $q"
  for label in $(grep -oE '\{\{ *[a-z_]+ *\}\}' <<<"$legend" | tr -d '{} '); do
    jq -e --arg l "$label" '.data.result | all(.metric[$l] != null)' <<<"$answer" >/dev/null ||
      fail "panel '$title': a series lacks the label '$label' its legend shows: $q"
  done
  n=$((n + 1))
done < <(jq -r '.panels[] | .title as $t | .targets[] | [$t, .expr, .legendFormat] | @tsv' "$DASHBOARD")
pass "all $n panel queries return series, with the labels their legends show, from a live cluster and exporter"

# The leader panel's query sees exactly one leader.
leaders=$(query "sum(pgfence_is_leader{job=\"$COORD_JOB\"})" | jq -r '.data.result[0].value[1]')
[[ $leaders == 1 ]] || fail "sum(pgfence_is_leader) is $leaders, not 1"
pass "one leader"

# A healthy cluster raises no alert: none pending or firing once the start
# (a member not yet heard from by its peers) has passed.
no_alerts() { [[ $(query 'count(ALERTS)' | jq '.data.result | length') == 0 ]]; }
e2e_wait_for 15 no_alerts || fail "alerts on a healthy cluster: $(query 'ALERTS' | jq -c '[.data.result[].metric | {alertname, alertstate, instance}]')"
pass "a healthy cluster raises no alert"

# pgfence_peers_reachable counts a peer only while its reports arrive: a
# stopped (SIGSTOP) member, whose TCP connections stay up, drops out of the
# others' count within a few seconds and comes back once resumed. Meanwhile
# the rules for the renamed jobs see it: PgfenceMemberDown (its scrape times
# out) and PgfencePeersUnreachable turn pending.
stopped=$(e2e_member_pid "$W/cluster" 3)
other=${members[0]}
reachable_is() { [[ $(curl -sf "http://$other/metrics" | sed -n 's/^pgfence_peers_reachable //p') == "$1" ]]; }
reachable_is 2 || fail "member 1 does not reach its 2 peers before the stop"
kill -STOP "$stopped"
if ! e2e_wait_for 10 reachable_is 1; then
  kill -CONT "$stopped"
  fail "a stopped member still counts as reachable after 10 s"
fi
pending_alerts='count by (alertname) (ALERTS{alertstate="pending",job="'$COORD_JOB'",alertname=~"PgfenceMemberDown|PgfencePeersUnreachable"})'
both_pending() { [[ $(query "$pending_alerts" | jq '.data.result | length') == 2 ]]; }
if ! e2e_wait_for 15 both_pending; then
  kill -CONT "$stopped"
  fail "with a member stopped, not both of PgfenceMemberDown and PgfencePeersUnreachable are pending for job $COORD_JOB: $(query 'ALERTS' | jq -c '[.data.result[].metric | {alertname, alertstate, job, instance}]')"
fi
kill -CONT "$stopped"
e2e_wait_for 10 reachable_is 2 || fail "the resumed member is not reachable again after 10 s"
pass "a stopped member leaves pgfence_peers_reachable (PgfenceMemberDown and PgfencePeersUnreachable pending for job $COORD_JOB) and returns when resumed"
