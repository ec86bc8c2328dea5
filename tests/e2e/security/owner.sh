#!/usr/bin/env bash
# An owner is bound to the user that made it (--auth-file), and a retry never
# shortens a lease; with --token-signing-key-file on. Replays the attack:
# user ua acquires shared/k with a 30 s lease; user uc, allowed lock and read
# on the same prefix, reads ua's owner from GET /v1/locks and acquires as
# that owner with a 1 s lease. uc gets 409 (no token, no proof), and 2 s
# later ua still holds the key with its token and most of its 30 s. Then ua's
# own retry asking 1 s gets its token back with lease_ms 30000, and 2 s later
# still holds. Prints the ttl_ms left at each check.
source "$(dirname "$0")/lib.sh"

secret() { openssl rand -base64 32 | tr '+/' '-_' | tr -d '='; }
hash_of() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }
UA=$(secret) UC=$(secret) OPS=$(secret)
for u in UA UC OPS; do
    printf '%s\n' "${!u}" >"$DIR/$u.bearer"
    (umask 077 && printf 'Authorization: Bearer %s\n' "${!u}" >"$DIR/$u.header")
done
{
    echo "role shared lock:shared/ read:shared/"
    echo "role ops admin read:"
    echo "user ua shared token:sha256:$(hash_of "$UA")"
    echo "user uc shared token:sha256:$(hash_of "$UC")"
    echo "user ops ops token:sha256:$(hash_of "$OPS")"
} >"$DIR/auth.txt"
KEY_FILE="$DIR/signing.key"
openssl genpkey -algorithm ed25519 -out "$KEY_FILE" 2>/dev/null
chmod 600 "$KEY_FILE"
export FENCE_STATUS_BEARER_FILE="$DIR/OPS.bearer"  # cluster.sh's leader poll
STATUS_AUTH=(-H "@$DIR/OPS.header")
tls_cluster_start 3 "--auth-file $DIR/auth.txt --token-signing-key-file $KEY_FILE"
leader=$(wait_leader 10) || fail "no leader"

# as USER METHOD PATH [BODY]: the answer's status line "CODE" then its body, following redirects.
as() {
    local user=$1 method=$2 path=$3 body=${4:-}
    local args=(-s -L -m 3 "${CURL_TLS[@]}" -H "@$DIR/$user.header" -w '\n%{http_code}' -X "$method")
    [[ -z $body ]] || args+=(-H 'Content-Type: application/json' --data-binary "$body")
    curl "${args[@]}" "$(url "$leader" "$path")" || true
}
code_of() { tail -n 1 <<<"$1"; }
body_of() { sed '$d' <<<"$1"; }
acquire_as() {  # USER OWNER LEASE_MS
    as "$1" POST /v1/acquire "{\"key\":\"shared/k\",\"lease_ms\":$3,\"owner\":\"$2\"}"
}
lock_now() { body_of "$(as UA GET '/v1/locks?key=shared/k')"; }

out=$(acquire_as UA ua-worker-7 30000)
[[ $(code_of "$out") == 200 ]] || fail "ua's acquire: $out"
token=$(json_field "$(body_of "$out")" token)
[[ -n $(json_field "$(body_of "$out")" proof) ]] || fail "ua's grant carries no proof: $out"
pass "ua acquires shared/k with a 30 s lease: token $token, with a proof"

# uc reads the owner, then names it with a 1 s lease.
seen=$(body_of "$(as UC GET /v1/locks)")
owner=$(json_field "$seen" owner)
[[ $owner == ua-worker-7 ]] || fail "uc could not read ua's owner from GET /v1/locks: $seen"
out=$(acquire_as UC "$owner" 1000)
[[ $(code_of "$out") == 409 ]] || fail "uc acquiring as ua's owner was answered $(code_of "$out"), want 409: $out"
[[ $(body_of "$out") != *'"proof"'* && $(body_of "$out") != *'"lease_ms"'* ]] || fail "uc's refusal carries a grant: $out"
[[ $(json_field "$(lock_now)" lease_ms) == 30000 ]] || fail "uc's attempt changed ua's lease: $(lock_now)"
# Read at once: ttl_ms tells ua's 30 s lease from the 1 s uc asked for.
now=$(lock_now)
ttl=$(json_field "$now" ttl_ms)
[[ $(json_field "$now" token) == "$token" && $(json_field "$now" lease_ms) == 30000 ]] ||
    fail "after uc's attempt ua no longer holds shared/k with token $token and 30 s: $now"
(( ttl > 25000 )) || fail "ua's lease has $ttl ms left after uc's 1 s attempt, want > 25000"
out=$(acquire_as UC uc-worker 1000)
[[ $(code_of "$out") == 409 ]] || fail "the key was free for uc after its attempt: $out"
pass "uc naming ua's owner with a 1 s lease: 409, no token, no proof; ua still holds token $token, ttl_ms $ttl"

# ua's own retry asking less keeps the longer lease.
out=$(acquire_as UA ua-worker-7 1000)
[[ $(code_of "$out") == 200 && $(json_field "$(body_of "$out")" token) == "$token" ]] ||
    fail "ua's retry did not get token $token back: $out"
[[ $(json_field "$(body_of "$out")" lease_ms) == 30000 ]] || fail "ua's retry asking 1 s answered: $out, want lease_ms 30000"
[[ -n $(json_field "$(body_of "$out")" proof) ]] || fail "ua's retry carries no proof: $out"
now=$(lock_now)
ttl=$(json_field "$now" ttl_ms)
[[ $(json_field "$now" token) == "$token" ]] || fail "after ua's 1 s retry the lock is gone: $now"
(( ttl > 25000 )) || fail "ua's retry asking 1 s shortened the lease: $ttl ms left"
pass "ua's retry asking 1 s: token $token, lease_ms 30000 answered; ttl_ms $ttl right after (not shortened)"
