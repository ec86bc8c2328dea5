#include "net/token_signer.h"

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <sodium.h>

#include <array>
#include <stdexcept>

#include "auth/policy.h"
#include "net/tls.h"

namespace pgfence::net {

namespace {

void put_be(std::string& out, std::uint64_t v, int bytes) {
    for (int shift = 8 * (bytes - 1); shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
}

// No passphrase is ever asked for: an encrypted key fails to load.
int no_passphrase(char*, int, int, void*) { return -1; }

}  // namespace

std::string proof_message(std::uint64_t cluster_id, std::uint64_t token, std::string_view key) {
    std::string m;
    m.reserve(kProofDomainTag.size() + 20 + key.size());
    m.append(kProofDomainTag);
    put_be(m, cluster_id, 8);
    put_be(m, token, 8);
    if (key.size() > 0xffffffffu) throw std::length_error("proof_message: a key longer than 2^32-1 bytes");
    put_be(m, key.size(), 4);
    m.append(key);
    return m;
}

std::string base64url(std::string_view bytes) {
    static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    std::string out;
    out.reserve((bytes.size() * 4 + 2) / 3);
    std::size_t i = 0;
    for (; i + 3 <= bytes.size(); i += 3) {
        const std::uint32_t v = (std::uint32_t{static_cast<unsigned char>(bytes[i])} << 16) |
                                (std::uint32_t{static_cast<unsigned char>(bytes[i + 1])} << 8) |
                                static_cast<unsigned char>(bytes[i + 2]);
        for (int shift = 18; shift >= 0; shift -= 6) out.push_back(kAlphabet[(v >> shift) & 0x3f]);
    }
    const std::size_t rest = bytes.size() - i;
    if (rest > 0) {
        std::uint32_t v = std::uint32_t{static_cast<unsigned char>(bytes[i])} << 16;
        if (rest == 2) v |= std::uint32_t{static_cast<unsigned char>(bytes[i + 1])} << 8;
        out.push_back(kAlphabet[(v >> 18) & 0x3f]);
        out.push_back(kAlphabet[(v >> 12) & 0x3f]);
        if (rest == 2) out.push_back(kAlphabet[(v >> 6) & 0x3f]);
    }
    return out;
}

struct TokenSigner::Keys {
    std::array<unsigned char, crypto_sign_SECRETKEYBYTES> secret{};  // seed, then the public key
    std::array<unsigned char, crypto_sign_PUBLICKEYBYTES> pub{};
    ~Keys() { sodium_memzero(secret.data(), secret.size()); }
};

TokenSigner::TokenSigner(std::unique_ptr<Keys> keys, std::string kid) : keys_(std::move(keys)), kid_(std::move(kid)) {}
TokenSigner::~TokenSigner() = default;

std::string TokenSigner::load(const std::string& path, std::shared_ptr<TokenSigner>& out) {
    if (sodium_init() < 0) return "token signing: libsodium cannot be initialized";
    std::string pem;
    if (auto why = read_private_key(path, pem); !why.empty()) return "--token-signing-key-file: " + why;
    BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
    EVP_PKEY* key = bio != nullptr ? PEM_read_bio_PrivateKey(bio, nullptr, no_passphrase, nullptr) : nullptr;
    BIO_free(bio);
    OPENSSL_cleanse(pem.data(), pem.size());
    const std::string named = "token signing key file '" + path + "'";
    if (key == nullptr) return named + ": not an unencrypted PEM private key: " + openssl_error();
    std::array<unsigned char, crypto_sign_SEEDBYTES> seed{};
    std::size_t seed_len = seed.size();
    const bool ed25519 = EVP_PKEY_get_id(key) == EVP_PKEY_ED25519;
    const bool got = ed25519 && EVP_PKEY_get_raw_private_key(key, seed.data(), &seed_len) == 1 && seed_len == seed.size();
    EVP_PKEY_free(key);
    if (!ed25519) return named + ": not an Ed25519 key (make one with: openssl genpkey -algorithm ed25519)";
    if (!got) return named + ": cannot read its private key: " + openssl_error();
    auto keys = std::make_unique<Keys>();
    crypto_sign_seed_keypair(keys->pub.data(), keys->secret.data(), seed.data());
    OPENSSL_cleanse(seed.data(), seed.size());
    const std::string_view raw_pub(reinterpret_cast<const char*>(keys->pub.data()), keys->pub.size());
    std::string kid = auth::hex(auth::sha256(raw_pub)).substr(0, kKidHexDigits);
    out.reset(new TokenSigner(std::move(keys), std::move(kid)));
    return {};
}

std::string TokenSigner::sign(std::uint64_t cluster_id, std::uint64_t token, std::string_view key) const {
    const std::string message = proof_message(cluster_id, token, key);
    std::array<unsigned char, crypto_sign_BYTES> sig{};
    crypto_sign_detached(sig.data(), nullptr, reinterpret_cast<const unsigned char*>(message.data()), message.size(),
                         keys_->secret.data());
    std::string proof;
    proof.reserve(kMaxProofBytes);
    proof.append("v1.").append(kid_).push_back('.');
    proof.append(std::to_string(cluster_id)).push_back('.');
    proof.append(base64url({reinterpret_cast<const char*>(sig.data()), sig.size()}));
    return proof;
}

}  // namespace pgfence::net
