#!/usr/bin/env bash
# Several keys under one lease (docs/http-api.md "Several keys under one
# lease"), against a real 3-member cluster: a set is granted all or nothing
# (409 names the held key, nothing granted), kept alive and released only
# whole (part_of_set otherwise), a waiting set is not jumped by a later
# single-key waiter (no barging) and goes once its keys are free, the set
# expires as one ExpireMany (--max-expire-batch's default), and bad sets are
# refused with 400.
source "$(dirname "$0")/../coordinator/lib.sh"

cluster_start 3  # leases that run out together go in one ExpireMany (the default batch)
L=$(wait_leader 10) || fail "no leader"

acquire() { post "$L" /v1/acquire "$1"; }
token_of() { json_field "$HTTP_BODY" token; }
lock_token() {  # KEY -> its token, "" when not held
    get "$L" "/v1/locks?key=$1"
    [[ $HTTP_CODE == 200 ]] && json_field "$HTTP_BODY" token || true
}
expect() {  # CODE WHAT: the last answer had status CODE
    [[ $HTTP_CODE == "$1" ]] || fail "$2: HTTP $HTTP_CODE $HTTP_BODY (want $1)"
}

# ---- all or nothing ----
acquire '{"keys":["mk/b","mk/a","mk/c"],"lease_ms":60000,"owner":"s1"}'
expect 200 "acquire of a free set"
T=$(token_of)
[[ $HTTP_BODY == *'"keys":["mk/b","mk/a","mk/c"]'* ]] || fail "keys not answered in the order asked: $HTTP_BODY"
for k in mk/a mk/b mk/c; do [[ $(lock_token $k) == "$T" ]] || fail "$k is not held with the set's token $T"; done
acquire '{"keys":["mk/x","mk/a"],"lease_ms":5000,"owner":"s2"}'
expect 409 "acquire of a set with a held key"
[[ $(json_field "$HTTP_BODY" message) == "key mk/a is held with token $T" ]] || fail "409 does not name the held key: $HTTP_BODY"
[[ -z $(lock_token mk/x) ]] || fail "mk/x was granted although mk/a is held"
pass "a set is granted whole with one token ($T); a held key refuses it all with 409 naming the key"

# ---- whole keepalive and release; part_of_set ----
post "$L" /v1/release "{\"key\":\"mk/a\",\"token\":$T}"
expect 400 "release of one key of a set"
[[ $(json_field "$HTTP_BODY" error) == part_of_set ]] || fail "not part_of_set: $HTTP_BODY"
[[ $(json_field "$HTTP_BODY" message) == "key mk/a is part of a set of 3 keys granted with token $T: release them together" ]] ||
    fail "part_of_set message: $HTTP_BODY"
post "$L" /v1/keepalive "{\"key\":\"mk/b\",\"token\":$T}"
expect 400 "keepalive of one key of a set"
post "$L" /v1/release "{\"keys\":[\"mk/a\",\"mk/b\"],\"token\":$T}"
expect 400 "release of part of a set"
[[ $(lock_token mk/a) == "$T" && $(lock_token mk/b) == "$T" ]] || fail "a refused release removed a key"
post "$L" /v1/keepalive "{\"keys\":[\"mk/c\",\"mk/a\",\"mk/b\"],\"token\":$T}"
expect 200 "keepalive of the whole set"
[[ $(json_field "$HTTP_BODY" ttl_ms) == 60000 ]] || fail "keepalive answer: $HTTP_BODY"
post "$L" /v1/keepalive "{\"keys\":[\"mk/a\",\"mk/b\",\"mk/c\"],\"token\":$((T + 1))}"
expect 404 "keepalive of the set with a wrong token"
post "$L" /v1/release "{\"keys\":[\"mk/a\",\"mk/b\",\"mk/c\"],\"token\":$T}"
expect 200 "release of the whole set"
for k in mk/a mk/b mk/c; do [[ -z $(lock_token $k) ]] || fail "$k still held after the set's release"; done
pass "a set is kept alive and released only whole; one key or a part is 400 part_of_set"

# ---- bad sets: 400 naming the key, nothing granted ----
acquire '{"keys":["mk/d","mk/e","mk/d"],"lease_ms":5000}'
expect 400 "duplicate keys"
[[ $HTTP_BODY == *"key 'mk/d' is named twice"* ]] || fail "duplicate not named: $HTTP_BODY"
acquire '{"keys":[],"lease_ms":5000}'
expect 400 "an empty set"
acquire '{"keys":["mk/d"],"lease_ms":5000}'
expect 400 "a set of one key"
many=$(for i in $(seq 1 65); do printf '"mk/n%d",' "$i"; done)
acquire "{\"keys\":[${many%,}],\"lease_ms\":5000}"
expect 400 "65 keys"
[[ $HTTP_BODY == *"names 65 keys"* ]] || fail "too many keys: $HTTP_BODY"
acquire '{"keys":["mk/d","mk/\u0001"],"lease_ms":5000}'
expect 400 "a bad key"
[[ -z $(lock_token mk/d) && -z $(lock_token mk/n1) ]] || fail "a refused set granted a key"
pass "duplicates, an empty set, one key, 65 keys and a bad key are refused with 400, nothing granted"

# ---- fairness: a waiting set is not jumped by a later single-key waiter ----
acquire '{"key":"mk/w1","lease_ms":60000,"owner":"holder"}'
expect 200 "holder of mk/w1"
T1=$(token_of)
waiters() { curl -s -m 1 "$(url "$L" /metrics)" | sed -n 's/^pgfence_waiters \([0-9]*\).*/\1/p'; }
waiting() { [[ "$(waiters)" == "$1" ]]; }  # N: the leader counts N waiting acquires
curl -s -m 30 -X POST -H 'Content-Type: application/json' \
    --data-binary '{"keys":["mk/w1","mk/w2"],"lease_ms":60000,"wait_ms":25000,"owner":"set"}' \
    "$(url "$L" /v1/acquire)" >"$DIR/set.out" &
set_pid=$!
wait_until 10 "the set waits" waiting 1
curl -s -m 30 -X POST -H 'Content-Type: application/json' \
    --data-binary '{"key":"mk/w2","lease_ms":60000,"wait_ms":25000,"owner":"later"}' \
    "$(url "$L" /v1/acquire)" >"$DIR/later.out" &
later_pid=$!
wait_until 10 "the later single-key waiter waits" waiting 2
[[ -z $(lock_token mk/w2) ]] || fail "the later waiter took mk/w2 ahead of the waiting set (barging)"
post "$L" /v1/release "{\"key\":\"mk/w1\",\"token\":$T1}"
expect 200 "release of mk/w1"
wait "$set_pid" || fail "the waiting set's request failed"
TS=$(json_field "$(cat "$DIR/set.out")" token)
[[ $TS =~ ^[0-9]+$ && $(lock_token mk/w2) == "$TS" && $(lock_token mk/w1) == "$TS" ]] ||
    fail "the set was not granted once its keys were free: $(cat "$DIR/set.out")"
[[ ! -s $DIR/later.out ]] || fail "the later waiter was answered before the set let go: $(cat "$DIR/later.out")"
post "$L" /v1/release "{\"keys\":[\"mk/w1\",\"mk/w2\"],\"token\":$TS}"
expect 200 "release of the waiting set"
wait "$later_pid" || fail "the later waiter's request failed"
[[ $(json_field "$(cat "$DIR/later.out")" owner) == later ]] || fail "the later waiter was not granted: $(cat "$DIR/later.out")"
pass "a waiting set goes first once its keys are free; the later single-key waiter on a free key waits behind it"

# ---- the set expires as one ----
acquire '{"keys":["mk/e1","mk/e2","mk/e3"],"lease_ms":1000,"owner":"e"}'
expect 200 "acquire of a short set"
TE=$(token_of)
gone() { [[ -z $(lock_token mk/e1) && -z $(lock_token mk/e2) && -z $(lock_token mk/e3) ]]; }
wait_until 10 "the set expires" gone
grep -q "expire_proposed.*key=mk/e1.*token=$TE.*batch=3" "$DIR/$L.log" ||
    fail "the set's keys were not proposed in one ExpireMany: $(grep expire_proposed "$DIR/$L.log" | tail -3)"
get "$L" /metrics
[[ $HTTP_BODY =~ pgfence_grants_many_total\ ([0-9]+) ]] && ((BASH_REMATCH[1] >= 3)) ||
    fail "pgfence_grants_many_total: $(grep grants_many <<<"$HTTP_BODY")"
pass "the set expired as one ExpireMany of its 3 keys; pgfence_grants_many_total counts the sets"

# ---- fencectl with several keys ----
FENCECTL=${FENCECTL_BIN:?set FENCECTL_BIN}
ctl() { "$FENCECTL" --endpoints "$FENCE_ENDPOINTS" --timeout 5s "$@"; }
TF=$(ctl acquire mk/f1 mk/f2 --lease 30s --wait 0s) || fail "fencectl acquire of a set"
[[ $TF =~ ^[0-9]+$ && $(lock_token mk/f1) == "$TF" && $(lock_token mk/f2) == "$TF" ]] || fail "fencectl acquire printed '$TF'"
set +e
ctl release mk/f1 "$TF" 2>"$DIR/ctl.err"
rc=$?
set -e
[[ $rc == 2 ]] && grep -q "part of a set of 2 keys" "$DIR/ctl.err" || fail "fencectl release of one key of a set: exit $rc, $(cat "$DIR/ctl.err")"
[[ $(ctl keepalive mk/f2 mk/f1 "$TF") == 30000 ]] || fail "fencectl keepalive of the set"
ctl release mk/f2 mk/f1 "$TF" || fail "fencectl release of the set"
[[ -z $(lock_token mk/f1) && -z $(lock_token mk/f2) ]] || fail "the set is still held after fencectl release"
pass "fencectl acquire/keepalive/release take several keys; one key of the set alone exits 2 (part_of_set)"
