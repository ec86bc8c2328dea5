#!/usr/bin/env bash
# Test and demo certificates for a local TLS cluster, made with the openssl
# command (EC P-256 keys, SHA-256 signatures, mode 600 keys).
#
#   scripts/make-certs.sh DIR N [CLIENT...]
#
# Writes into DIR (created):
#   ca.pem ca-key.pem              the client-side CA: signs the members' HTTP API
#                                  certificates and the client certificates
#   peer-ca.pem peer-ca-key.pem    the peer CA: signs only the members' peer certificates
#   member-I.pem member-I-key.pem  member I's HTTP API certificate (I = 1..N):
#                                  CN=member-I, SAN IP:127.0.0.1, DNS:localhost
#   peer-I.pem peer-I-key.pem      member I's peer certificate: CN=I,
#                                  SAN URI:pgfence:member:I, IP:127.0.0.1
#   client-NAME.pem client-NAME-key.pem   a client certificate with CN=NAME,
#                                  for each CLIENT given (default: admin)
# Certificates are valid for 30 days from now. Existing files are replaced.
# Extended key usage: serverAuth for the HTTP API certificates, clientAuth
# for client certificates (so neither can stand in for the other), both for
# peer certificates (a member both dials and accepts).
#
# One more certificate, for tests: scripts/make-certs.sh leaf DIR NAME CA SUBJECT SAN [DAYS]
# signs DIR/NAME.pem (key DIR/NAME-key.pem) with DIR/CA.pem, subject SUBJECT
# (e.g. /CN=2), subjectAltName SAN (e.g. "IP:127.0.0.1" or "" for none),
# extended key usage $LEAF_EKU (default serverAuth,clientAuth).
# FAKETIME-style offsets come from the environment (run it under faketime to
# make an expired or a not-yet-valid certificate).
set -euo pipefail

die() { echo "make-certs.sh: $*" >&2; exit 2; }
command -v openssl >/dev/null || die "openssl not found (apt-get install openssl)"

new_ca() {  # DIR NAME SUBJECT
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -sha256 -days 30 \
        -keyout "$1/$2-key.pem" -out "$1/$2.pem" -subj "$3" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null \
        || die "cannot make CA $1/$2.pem"
    chmod 600 "$1/$2-key.pem"
}

leaf() {  # DIR NAME CA SUBJECT SAN [DAYS]
    local dir=$1 name=$2 ca=$3 subject=$4 san=$5 days=${6:-30} ext
    ext=$(mktemp)
    {
        echo "basicConstraints=critical,CA:FALSE"
        echo "keyUsage=critical,digitalSignature"
        echo "extendedKeyUsage=${LEAF_EKU:-serverAuth,clientAuth}"
        [[ -n "$san" ]] && echo "subjectAltName=$san"
    } >"$ext"
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -sha256 \
        -keyout "$dir/$name-key.pem" -out "$dir/$name.csr" -subj "$subject" 2>/dev/null \
        || die "cannot make a key and request for $dir/$name"
    openssl x509 -req -sha256 -days "$days" -in "$dir/$name.csr" -CA "$dir/$ca.pem" -CAkey "$dir/$ca-key.pem" \
        -set_serial "0x$(openssl rand -hex 8)" -extfile "$ext" -out "$dir/$name.pem" 2>/dev/null \
        || die "cannot sign $dir/$name.pem with $dir/$ca.pem"
    rm -f "$ext" "$dir/$name.csr"
    chmod 600 "$dir/$name-key.pem"
}

if [[ "${1:-}" == leaf ]]; then
    shift
    (($# >= 5)) || die "usage: make-certs.sh leaf DIR NAME CA SUBJECT SAN [DAYS]"
    leaf "$@"
    exit 0
fi

dir=${1:?usage: make-certs.sh DIR N [CLIENT...]}
n=${2:?usage: make-certs.sh DIR N [CLIENT...]}
[[ "$n" =~ ^[1-9]$ ]] || die "N must be 1..9, got '$n'"
shift 2
clients=("$@")
((${#clients[@]})) || clients=(admin)
mkdir -p "$dir"
new_ca "$dir" ca "/CN=pgfence client CA"
new_ca "$dir" peer-ca "/CN=pgfence peer CA"
for ((i = 1; i <= n; i++)); do
    LEAF_EKU=serverAuth leaf "$dir" "member-$i" ca "/CN=member-$i" "IP:127.0.0.1,DNS:localhost"
    leaf "$dir" "peer-$i" peer-ca "/CN=$i" "URI:pgfence:member:$i,IP:127.0.0.1"
done
for c in "${clients[@]}"; do
    [[ "$c" =~ ^[A-Za-z0-9._@:-]{1,64}$ ]] || die "client name '$c' must be 1-64 of A-Z a-z 0-9 . _ @ : -"
    LEAF_EKU=clientAuth leaf "$dir" "client-$c" ca "/CN=$c" ""
done
