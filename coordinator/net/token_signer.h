// Token proofs: the Ed25519 signature with which a member binds a fencing
// token to the cluster that issued it and the lock it was issued for, so
// that PostgreSQL (pg_fence) can verify, with the public key only, that a
// token was really granted for this lock by this cluster
// (docs/guarantees.md, "Verifiable tokens").
//
// Version 1, exact and shared with pg_fence's verifier through the test
// vector tests/vectors/token_proof_v1.txt:
//
//   message = "pgfence token proof v1" NUL
//             cluster_id (u64, big-endian)   token (u64, big-endian)
//             length of key (u32, big-endian)   key
//   proof   = "v1." kid "." cluster_id (decimal) "." signature (base64url, unpadded)
//   kid     = the first 8 bytes of SHA-256 over the raw 32-byte public key,
//             as 16 lowercase hex digits
//
// A proof is at most kMaxProofBytes. OpenSSL (libcrypto) reads the key file;
// libsodium signs (Ed25519 is deterministic: the same signature as OpenSSL's,
// in less than half the time here); nothing here is written by hand but the
// framing and the base64url.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace pgfence::net {

constexpr std::string_view kProofDomainTag{"pgfence token proof v1\0", 23};
constexpr std::size_t kKidHexDigits = 16;
// "v1." + kid + "." + 20 digits + "." + 86 characters of signature
constexpr std::size_t kMaxProofBytes = 3 + kKidHexDigits + 1 + 20 + 1 + 86;

// The bytes a version-1 proof signs. Keys are at most lock::kMaxKeyBytes in
// practice; one longer than a u32 can count throws std::length_error.
std::string proof_message(std::uint64_t cluster_id, std::uint64_t token, std::string_view key);

// RFC 4648 §5 base64url without padding.
std::string base64url(std::string_view bytes);

// An Ed25519 private key, loaded from a PEM file, that signs proofs.
// Immutable once loaded; sign() may run on any thread, on several at once.
class TokenSigner {
public:
    // Loads `path` (PKCS#8 PEM, as `openssl genpkey -algorithm ed25519`
    // writes it, unencrypted). "" on success, else why not, naming the file:
    // unreadable, readable by group or others (net::read_private_key), not
    // PEM, or not an Ed25519 key. `out` is left as it was on failure.
    static std::string load(const std::string& path, std::shared_ptr<TokenSigner>& out);

    ~TokenSigner();
    TokenSigner(const TokenSigner&) = delete;
    TokenSigner& operator=(const TokenSigner&) = delete;

    // The key's ID: kKidHexDigits lowercase hex digits (see above).
    const std::string& kid() const { return kid_; }

    // The proof of (cluster_id, token, key), in its wire form.
    std::string sign(std::uint64_t cluster_id, std::uint64_t token, std::string_view key) const;

private:
    struct Keys;
    TokenSigner(std::unique_ptr<Keys> keys, std::string kid);

    std::unique_ptr<const Keys> keys_;  // the secret key, wiped when it goes
    std::string kid_;
};

}  // namespace pgfence::net
