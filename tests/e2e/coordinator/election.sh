#!/usr/bin/env bash
# Election: a 3-member cluster elects exactly one leader, every member agrees on
# it and its term, and /v1/status has the documented fields.
source "$(dirname "$0")/lib.sh"
cluster_start 3
leader=$(wait_leader 10) || fail "no leader"
agree() {
    local i s
    for ((i = 1; i <= N; i++)); do
        s=$(status_of "$i")
        [[ "$(json_field "$s" leader)" == "$leader" ]] || return 1
    done
}
wait_until 10 "all members name leader $leader" agree
leaders=0
term=$(json_field "$(status_of "$leader")" term)
for ((i = 1; i <= N; i++)); do
    s=$(status_of "$i")
    [[ "$(json_field "$s" role)" == leader ]] && leaders=$((leaders + 1))
    [[ "$(json_field "$s" term)" == "$term" ]] || fail "member $i term $(json_field "$s" term) != leader term $term"
    for f in id role term leader commit_index applied_index members; do
        [[ "$s" == *"\"$f\":"* ]] || fail "member $i status lacks field $f: $s"
    done
done
((leaders == 1)) || fail "$leaders members report role leader"
s=$(status_of "$leader")
[[ "$s" == *'"match_index":'* ]] || fail "leader status lacks per-member match_index: $s"
pass "one leader ($leader, term $term), all members agree"
