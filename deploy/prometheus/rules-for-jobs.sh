#!/usr/bin/env bash
# rules-for-jobs.sh COORDINATOR_JOB POSTGRES_JOB [RULES]: the alert rules
# (RULES, default pgfence.rules.yml beside this script) for scrape jobs named
# otherwise than `pgfence` (the members' /metrics) and `pgfence_postgres`
# (prometheus-postgres-exporter with pgfence-queries.yaml), on stdout:
#
#   deploy/prometheus/rules-for-jobs.sh fence-coordinators fenced-pg >/etc/prometheus/pgfence.rules.yml
#   promtool check rules /etc/prometheus/pgfence.rules.yml
#
# Every job matcher in RULES must be job="pgfence" or job="pgfence_postgres",
# and each is rewritten (another matcher is refused: it would pass through
# unchanged). A job name is 1..200 of
# A-Z a-z 0-9 _ . : / - (no quote or backslash to escape in PromQL or YAML).
# Exit 2 on a usage error.
set -euo pipefail

die() { echo "rules-for-jobs.sh: $*" >&2; exit 2; }

(($# == 2 || $# == 3)) || die "usage: rules-for-jobs.sh COORDINATOR_JOB POSTGRES_JOB [RULES]"
coordinator=$1 postgres=$2
rules=${3:-$(dirname "${BASH_SOURCE[0]}")/pgfence.rules.yml}
for name in "$coordinator" "$postgres"; do
    [[ "$name" =~ ^[A-Za-z0-9_.:/-]{1,200}$ ]] ||
        die "job name '$name' must be 1..200 of A-Z a-z 0-9 _ . : / -"
done
[[ "$coordinator" != "$postgres" ]] || die "the two jobs must differ, both are '$coordinator'"
[[ -r "$rules" ]] || die "cannot read $rules"

others=$(grep -oE 'job *(=~|!~|!=|=) *"[^"]*"' "$rules" | grep -vxE 'job="pgfence(_postgres)?"' | sort -u || true)
[[ -z "$others" ]] || die "$rules has job matchers this script does not rewrite: $(tr '\n' ' ' <<<"$others")"

sed -e "s|job=\"pgfence\"|job=\"$coordinator\"|g" -e "s|job=\"pgfence_postgres\"|job=\"$postgres\"|g" "$rules"
