# Helpers for the membership end-to-end tests, on top of the coordinator
# tests' lib.sh: fencectl member commands, a background client that keeps
# acquiring while members change, and the check that its tokens only grew.
source "$(dirname "${BASH_SOURCE[0]}")/../coordinator/lib.sh"

FENCECTL="${FENCECTL_BIN:-$E2E_ROOT/build/coordinator/cli/fencectl}"
[[ -x "$FENCECTL" ]] || fail "fencectl not found at $FENCECTL (set FENCECTL_BIN)"
: "${FENCE_BIN_DIR:=$E2E_ROOT/build/coordinator/server}"

# Every member's client endpoint that may be up (1..9): fencectl skips the others.
all_endpoints() {
    local out="" i
    for ((i = 1; i <= 9; i++)); do out+="${out:+,}127.0.0.1:$(client_port "$i")"; done
    echo "$out"
}

fctl() { "$FENCECTL" --endpoints "$(all_endpoints)" --timeout 15s "$@"; }

# member_add ID: adds ID as a learner at its cluster.sh ports.
member_add() {
    fctl member add "$1" --peer-addr "127.0.0.1:$((BASE + $1))" --client-addr "127.0.0.1:$(client_port "$1")" \
        >/dev/null || fail "member add $1"
}

# member_remove ID: removes ID, retrying for up to 15 s while the leader
# refuses the change for now (409 member_change_refused: another change not
# yet committed, or the voters left not all heard from recently, as a
# member promoted a moment ago may not be); done once ID is not listed (an
# attempt whose answer was lost may be the one that removed it).
removed_or_refused_for_now() { fctl member remove "$1" >/dev/null 2>&1 || not_listed "$1"; }
member_remove() { wait_until 15 "member $1 is removed" removed_or_refused_for_now "$1"; }

# is_listed ID ROLE: `fencectl member list` shows ID with ROLE (voter,
# "learner (caught up)", ...) at the start of its MEMBER column.
is_listed() { fctl member list | grep -Eq "^$1 +$2"; }
not_listed() { ! fctl member list | grep -Eq "^$1 "; }

# join_and_promote ID: add, start with --join, wait until caught up, promote.
join_and_promote() {
    member_add "$1"
    "$CLUSTER" join "$DIR" "$1" || fail "cluster.sh join $1"
    wait_until 20 "learner $1 catches up" is_listed "$1" 'learner \(caught up\)'
    fctl member promote "$1" >/dev/null || fail "member promote $1"
    is_listed "$1" voter || fail "member $1 is not a voter after promote"
}

# exited ID: member ID's process is gone (it stopped itself).
exited() { ! kill -0 "$(member_pid "$1")" 2>/dev/null || grep -q "state:\s*Z" "/proc/$(member_pid "$1")/status" 2>/dev/null; }

# A client acquiring and releasing distinct keys in the background until
# stop_acquirer; every token it got is in $DIR/tokens, one per line, in order.
start_acquirer() {
    : >"$DIR/tokens"
    (
        i=0
        # Also ends when the test does (a failed test never calls stop_acquirer).
        while [[ ! -e "$DIR/stop-acquirer" ]] && kill -0 $$ 2>/dev/null; do
            i=$((i + 1))
            if t=$("$FENCECTL" --endpoints "$(all_endpoints)" --timeout 5s acquire "load:$i" --lease 2s --wait 0s 2>/dev/null); then
                echo "$t" >>"$DIR/tokens"
                "$FENCECTL" --endpoints "$(all_endpoints)" --timeout 5s release "load:$i" "$t" >/dev/null 2>&1 || true
            fi
        done
    ) &
    ACQUIRER=$!
}

# stop_acquirer MIN: waits (at most 20 s) until it has at least MIN tokens,
# then stops it; fails unless it got them, each larger than the one before.
stop_acquirer() {
    wait_until 20 "the background client gets $1 tokens" more_tokens_than "$(($1 - 1))"
    touch "$DIR/stop-acquirer"
    wait "$ACQUIRER" || true
    local n prev=0 t
    n=$(wc -l <"$DIR/tokens")
    ((n >= $1)) || fail "the background client got $n tokens, want at least $1"
    while read -r t; do
        ((t > prev)) || fail "token $t after $prev: tokens went backwards"
        prev=$t
    done <"$DIR/tokens"
    LAST_TOKEN=$prev
    rm -f "$DIR/stop-acquirer"
}

# tokens_so_far: how many tokens the background client has got.
tokens_so_far() { wc -l <"$DIR/tokens"; }
more_tokens_than() { (($(tokens_so_far) > $1)); }
