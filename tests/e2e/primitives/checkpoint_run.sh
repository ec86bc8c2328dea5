#!/usr/bin/env bash
# One measurement for checkpoint.sh: a 3-member cluster with
# --lease-checkpoints $1 (on|off). A holder acquires a 12 s lease and never
# renews it (a dead holder); 6.5 s after its send (on: once every member
# applied its checkpoint) the leader is SIGKILLed; another client's acquire
# with wait_ms, sent to the new leader, gets the key. Prints
# "result <mode> got_ms=<ms after the holder's send> kill_ms=<ms after the
# holder's send>" and fails if the key was granted before the holder's own
# deadline (send + lease x (1 - rho), rho 5%).
source "$(dirname "$0")/../coordinator/lib.sh"
MODE=$1
LEASE_MS=12000
KILL_AT_MS=6500
cluster_start 3 "--lease-checkpoints $MODE"
L=$(wait_leader 10) || fail "no leader"
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }
metric_of() {  # MEMBER NAME -> the metric's value (0 when absent)
    local v
    v=$(curl -s -m 2 "$(url "$1" /metrics)" 2>/dev/null | awk -v n="$2" '$1 == n { print $2 }')
    echo "${v:-0}"
}
all_checkpointed() {
    local i
    for ((i = 1; i <= N; i++)); do (($(metric_of "$i" pgfence_checkpoints_total) >= 1)) || return 1; done
}
sent=$(date +%s%N)
post "$L" /v1/acquire "{\"key\":\"dead-holder\",\"lease_ms\":$LEASE_MS}"
[[ $HTTP_CODE == 200 ]] || fail "holder acquire: $HTTP_CODE $HTTP_BODY"
holder_token=$(json_field "$HTTP_BODY" token)
if [[ $MODE == on ]]; then
    wait_until 8 "every member applied the lease's checkpoint" all_checkpointed
    echo "checkpoint applied on every member $(ms_since "$sent") ms after the holder's send"
else
    sleep 3
    (($(metric_of "$L" pgfence_checkpoints_total) == 0)) || fail "a checkpoint with --lease-checkpoints off"
fi
left=$((KILL_AT_MS - $(ms_since "$sent")))
((left > 0)) || fail "the checkpoint came after ${KILL_AT_MS} ms"
sleep "$(printf '%d.%03d' $((left / 1000)) $((left % 1000)))"
kill -9 "$(member_pid "$L")"
kill_ms=$(ms_since "$sent")
got=""
deadline=$((SECONDS + 40))
while ((SECONDS < deadline)) && [[ -z $got ]]; do
    NL=$(wait_leader 10 "$L") || fail "no new leader"
    # post() gives up after 5 s; this acquire waits up to 30 s for the key.
    out=$(curl -s -m 40 -w '\n%{http_code}' -X POST -H 'Content-Type: application/json' \
        --data-binary '{"key":"dead-holder","lease_ms":5000,"wait_ms":30000}' "$(url "$NL" /v1/acquire)" || true)
    HTTP_CODE=${out##*$'\n'}
    HTTP_BODY=${out%$'\n'*}
    if [[ $HTTP_CODE == 200 ]]; then got=$(ms_since "$sent"); else sleep 0.05; fi
done
[[ -n $got ]] || fail "the waiting acquire never got the key"
token=$(json_field "$HTTP_BODY" token)
((token > holder_token)) || fail "new token $token not above the holder's $holder_token"
holder_deadline_ms=$((LEASE_MS * 95 / 100))
((got >= holder_deadline_ms)) || fail "granted ${got} ms after the holder's send, before its own deadline ${holder_deadline_ms} ms"
echo "result $MODE got_ms=$got kill_ms=$kill_ms"
