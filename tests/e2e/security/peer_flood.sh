#!/usr/bin/env bash
# peer_flood.sh tls|plain: a flood on the peer ports from anyone without a
# certificate does not keep a restarting cluster from electing and granting.
#
# A 3-member cluster (mutual TLS on the peer port, or plaintext) is restarted
# whole three times; the median time from the start of its members to the
# first granted acquire is the normal figure. Then peer_flood.py floods every
# peer port with connections that never name a member: 20 silent ones (never
# a byte) from each of 127.0.0.1..127.0.0.5 and 60 from 127.0.0.6 (160 per
# port, over the pending pool of 64: pending_full sheds), and 8 speaking ones
# from each of 127.0.0.2..127.0.0.6 (40 per port) that send the start of a
# TLS ClientHello (16 03 01 + 3 bytes), or in plaintext the first 7 bytes of
# a frame header, and stall; each is opened again as soon as it is closed.
# 127.0.0.6 opens 68 of the 200, so its share of the pool's places (about 22)
# is past the 16 one address may hold: address_full sheds it on every
# member, not only when the arrivals happen to bunch up. Speaking ones come
# only from addresses that are not a member's (docs/security.md: a fast
# stream of them from a member's own address can shed its handshake). The cluster is restarted whole three
# times during the flood, and the median time to a granted acquire must be at
# most 2 x the normal median. Prints both figures, the bound, grants/s (one fencectl acquire
# after another, for 3 s) without and during the flood, and each member's
# pending_full / address_full / pending_timeout shed counts; every member
# must have shed by pending_full and address_full.
source "$(dirname "$0")/lib.sh"

MODE=${1:?usage: peer_flood.sh tls|plain}
FLOOD_PID=""
on_exit() {
    local rc=$?
    set +e  # cleanup must run whatever happens here
    if [[ -n "$FLOOD_PID" ]]; then kill "$FLOOD_PID" 2>/dev/null; fi
    (exit "$rc")
    cleanup  # reads $?: stops the cluster, keeps DIR on failure
}
trap on_exit EXIT

case "$MODE" in
    tls)
        tls_cluster_start 3
        FCTL=(--cacert "$TLS_DIR/ca.pem" --cert "$TLS_DIR/client-admin.pem" --key "$TLS_DIR/client-admin-key.pem")
        ;;
    plain)
        cluster_start 3
        FCTL=()
        url() { echo "http://127.0.0.1:$(client_port "$1")$2"; }
        ;;
    *) fail "mode must be tls or plain, got '$MODE'" ;;
esac
wait_leader 20 >/dev/null || fail "no leader at start"

now_ms() { echo $(($(date +%s%N) / 1000000)); }
acquire_once() {  # a fresh key each time (leases outlive restarts; this runs in subshells)
    "$FENCECTL" --endpoints "$FENCE_ENDPOINTS" --timeout 1s "${FCTL[@]}" \
        acquire "flood/$MODE/${EPOCHREALTIME/./}" --lease 2s --wait 0s >/dev/null 2>&1
}

# Stops every member, starts them all again, and prints the milliseconds
# from the start to the first granted acquire (fails after 60 s).
restart_to_grant_ms() {
    "$CLUSTER" stop "$DIR" >/dev/null 2>&1 || fail "cluster did not stop"
    local t0 i deadline
    t0=$(now_ms)
    for ((i = 1; i <= N; i++)); do "$CLUSTER" restart "$DIR" "$i" >/dev/null 2>&1 || fail "member $i did not start"; done
    deadline=$((SECONDS + 60))
    until acquire_once; do
        ((SECONDS < deadline)) || fail "no grant within 60 s of a full restart ($MODE)"
        sleep 0.02
    done
    echo $(($(now_ms) - t0))
}

# Grants per second: one acquire after another for 3 s.
grants_per_s() {
    local n=0 end=$((SECONDS + 3)) t0 t1
    t0=$(now_ms)
    while ((SECONDS < end)); do acquire_once && n=$((n + 1)); done
    t1=$(now_ms)
    echo "$((n * 1000 / (t1 - t0)))"
}

# Three full restarts: sets RUNS (their times, ms) and MEDIAN.
three_restarts() {
    local ms
    RUNS=()
    for _ in 1 2 3; do
        ms=$(restart_to_grant_ms)
        [[ "$ms" =~ ^[0-9]+$ ]] || fail "a restart gave no figure ('$ms')"
        RUNS+=("$ms")
    done
    MEDIAN=$(printf '%s\n' "${RUNS[@]}" | sort -n | sed -n 2p)
}

three_restarts
normal=("${RUNS[@]}")
median=$MEDIAN
normal_rate=$(grants_per_s)
echo "normal: restart to first grant ${normal[*]} ms (median $median ms); $normal_rate grants/s"

peer_ports=$((BASE + 1))
for ((i = 2; i <= N; i++)); do peer_ports+=",$((BASE + i))"; done
if [[ "$MODE" == tls ]]; then
    speak_hex=160301020001  # record header (handshake, TLS 1.0), length 512, ClientHello: then nothing
else
    speak_hex=40000000013412  # length 64, version 1, two bytes of the cluster ID: then nothing
fi
silent_sources=127.0.0.1,127.0.0.2,127.0.0.3,127.0.0.4,127.0.0.5,127.0.0.6,127.0.0.6,127.0.0.6  # 60 from .6
speak_sources=127.0.0.2,127.0.0.3,127.0.0.4,127.0.0.5,127.0.0.6
flood_total=$((N * (8 * 20 + 5 * 8)))
python3 "$(dirname "$0")/peer_flood.py" --ports "$peer_ports" --sources "$silent_sources" --per 20 \
    --speak-sources "$speak_sources" --speak-per 8 --speak-hex "$speak_hex" \
    --seconds 60 --status "$DIR/flood.status" &
FLOOD_PID=$!
# Every flood socket has connected once (the members close and it reopens them).
flood_on() { [[ -f "$DIR/flood.status" ]] && [[ "$(cat "$DIR/flood.status")" =~ connects=([0-9]+) ]] &&
    ((BASH_REMATCH[1] >= flood_total)); }
wait_until 15 "the flood's $flood_total connections" flood_on
# As many restarts under the flood as without, compared median to median: one
# restart's time varies with the election's random timeout as much as with
# the flood.
three_restarts
flooded_runs=("${RUNS[@]}")
flooded=$MEDIAN
flood_rate=$(grants_per_s)
bound=$((2 * median))
echo "flood ($(cat "$DIR/flood.status")): restart to first grant ${flooded_runs[*]} ms (median $flooded ms; normal median $median ms, bound $bound ms); grants/s $normal_rate normal, $flood_rate during the flood"
shed_fail=""
for ((i = 1; i <= N; i++)); do
    line="member $i shed since the flood's restart:"
    for reason in pending_full address_full pending_timeout; do
        v=$(metric "$i" "pgfence_peer_connections_shed_total{reason=\"$reason\"}")
        line+=" $reason=${v:-missing}"
        if [[ "$reason" != pending_timeout ]] && ! { [[ "$v" =~ ^[0-9]+$ ]] && ((v > 0)); }; then
            shed_fail+=" member $i $reason='$v'"
        fi
    done
    echo "$line"
done
kill "$FLOOD_PID" 2>/dev/null
((flooded <= bound)) || fail "under the flood the restarted cluster granted after a median $flooded ms, over 2 x the normal median ($bound ms)"
[[ -z "$shed_fail" ]] || fail "the flood did not fill every member's pending places (shed counts:$shed_fail)"
pass "$MODE: under a flood of $flood_total silent and speaking peer connections a full restart granted after a median $flooded ms (normal median $median ms, bound $bound ms)"
