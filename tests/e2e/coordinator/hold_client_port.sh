#!/usr/bin/env bash
# One client holds every member's client port (keep-alive connections, each
# sending GET /healthz every second, reconnecting when closed) while a lease
# holder renews on a new connection every 400 ms across a leader kill: it
# keeps its lease, and the members shed the attacker's connections
# (pgfence_http_connections_shed_total, http_connection_shed). The cap is
# small (HOLD_CAP, default 64; HOLD_PER_ADDRESS 32) to keep the test short;
# HOLD_CAP=1024 HOLD_PER_ADDRESS=512 runs it at the defaults. The figures:
# renew latency and grants/s during the hold (hold_client_port.py).
source "$(dirname "$0")/lib.sh"
CAP=${HOLD_CAP:-64}
PER_ADDRESS=${HOLD_PER_ADDRESS:-32}
# HOLD_FLAGS replaces the per-address flag (e.g. empty for a binary without it).
FLAGS=${HOLD_FLAGS---max-connections-per-address $PER_ADDRESS}
cluster_start 3 "--max-connections $CAP $FLAGS"
wait_leader 10 >/dev/null || fail "no leader"
expect=(--expect-shedding)
[[ -n "$FLAGS" ]] || expect=()
timeout 110 python3 "$(dirname "$0")/hold_client_port.py" test --base "$BASE" --cap "$CAP" \
    --per-address "$PER_ADDRESS" --dir "$DIR" --cluster "$CLUSTER" "${expect[@]}" ||
    fail "the holder did not keep its lease through the held client port (see above)"
pass "client port held by one client: the holder kept its lease"
