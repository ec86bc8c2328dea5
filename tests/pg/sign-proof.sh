#!/usr/bin/env bash
# sign-proof.sh: print a version-1 token proof (tests/vectors/token_proof_v1.txt)
# signed with an Ed25519 private key, as the coordinator would grant it.
# For the pg tests only (tests/pg/sql/proof.sql).
#   sign-proof.sh PRIVATE_KEY_PEM CLUSTER_ID TOKEN LOCK_KEY
set -euo pipefail
key=$1 cluster=$2 token=$3 lockkey=$4
msg=$(mktemp)
trap 'rm -f "$msg"' EXIT
perl -e 'print "pgfence token proof v1\0", pack("Q>Q>N", $ARGV[0], $ARGV[1], length $ARGV[2]), $ARGV[2]' \
  "$cluster" "$token" "$lockkey" >"$msg"
kid=$(openssl pkey -in "$key" -pubout -outform DER | tail -c 32 |
      openssl dgst -sha256 -binary | head -c 8 | od -An -tx1 | tr -d ' \n')
sig=$(openssl pkeyutl -sign -rawin -inkey "$key" -in "$msg" | base64 -w0 | tr '+/' '-_' | tr -d '=')
printf 'v1.%s.%s.%s' "$kid" "$cluster" "$sig"
