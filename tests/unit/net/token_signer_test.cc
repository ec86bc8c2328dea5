// net/token_signer.h: the shared test vector (tests/vectors/token_proof_v1.*)
// signed exactly, base64url against RFC 4648's examples, a proof that
// OpenSSL verifies with the public key, and the key file's refusals.
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "net/token_signer.h"

namespace pgfence::net {
namespace {

const std::string kVectors = PGFENCE_SOURCE_DIR "/tests/vectors/";

std::string slurp(const std::string& path) {
    std::ifstream in(path);
    BOOST_TEST_REQUIRE(in.good(), "cannot read " << path);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// name=value lines of token_proof_v1.txt ('#' lines are comments).
std::map<std::string, std::string> vector_fields() {
    std::map<std::string, std::string> out;
    std::istringstream in(slurp(kVectors + "token_proof_v1.txt"));
    for (std::string line; std::getline(in, line);) {
        if (line.empty() || line[0] == '#') continue;
        const auto eq = line.find('=');
        BOOST_TEST_REQUIRE(eq != std::string::npos, "bad vector line: " << line);
        out[line.substr(0, eq)] = line.substr(eq + 1);
    }
    return out;
}

std::string hex(std::string_view bytes) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    for (unsigned char c : bytes) {
        out.push_back(kHex[c >> 4]);
        out.push_back(kHex[c & 0xf]);
    }
    return out;
}

// A private file (mode 0600) holding `text`; removed when it goes.
struct KeyFile {
    std::string path;
    KeyFile(const std::string& name, const std::string& text, mode_t mode = 0600)
        : path("/tmp/pgfence-signer-" + std::to_string(::getpid()) + "-" + name) {
        std::ofstream(path) << text;
        ::chmod(path.c_str(), mode);
    }
    ~KeyFile() { std::remove(path.c_str()); }
};

BOOST_AUTO_TEST_SUITE(token_signer)

BOOST_AUTO_TEST_CASE(signs_the_shared_vector_exactly) {
    auto v = vector_fields();
    const std::uint64_t cluster = std::stoull(v["cluster_id"]);
    const std::uint64_t token = std::stoull(v["token"]);
    BOOST_TEST(hex(proof_message(cluster, token, v["key"])) == v["message_hex"]);

    KeyFile key("vector.key", slurp(kVectors + "token_proof_v1.key"));
    std::shared_ptr<TokenSigner> signer;
    BOOST_TEST_REQUIRE(TokenSigner::load(key.path, signer) == "");
    BOOST_TEST(signer->kid() == v["kid"]);
    const std::string proof = signer->sign(cluster, token, v["key"]);
    BOOST_TEST(proof == v["proof"]);
    BOOST_TEST(proof.size() <= kMaxProofBytes);
    // Ed25519 signing is deterministic: the same proof again.
    BOOST_TEST(signer->sign(cluster, token, v["key"]) == proof);
    BOOST_TEST(signer->sign(cluster, token + 1, v["key"]) != proof);
}

BOOST_AUTO_TEST_CASE(a_proof_verifies_with_the_public_key_only) {
    KeyFile key("verify.key", slurp(kVectors + "token_proof_v1.key"));
    std::shared_ptr<TokenSigner> signer;
    BOOST_TEST_REQUIRE(TokenSigner::load(key.path, signer) == "");
    const std::uint64_t cluster = 18446744073709551615ull;  // the largest: 20 digits
    const std::string key_name(512, 'k');
    const std::string proof = signer->sign(cluster, 7, key_name);
    BOOST_TEST(proof.size() == kMaxProofBytes);
    const std::string sig64 = proof.substr(proof.rfind('.') + 1);

    // Decode the signature (base64url, unpadded) and verify with OpenSSL.
    std::string sig;
    std::uint32_t acc = 0;
    int bits = 0;
    for (char c : sig64) {
        const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        acc = (acc << 6) | static_cast<std::uint32_t>(alphabet.find(c));
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            sig.push_back(static_cast<char>((acc >> bits) & 0xff));
        }
    }
    BOOST_TEST_REQUIRE(sig.size() == 64u);
    const std::string pub_pem = slurp(kVectors + "token_proof_v1.pub");
    BIO* bio = BIO_new_mem_buf(pub_pem.data(), static_cast<int>(pub_pem.size()));
    EVP_PKEY* pub = PEM_read_bio_PUBKEY(bio, nullptr, nullptr, nullptr);
    BIO_free(bio);
    BOOST_TEST_REQUIRE(pub != nullptr);
    auto verifies = [&](std::uint64_t c, std::uint64_t t, const std::string& k) {
        const std::string m = proof_message(c, t, k);
        EVP_MD_CTX* ctx = EVP_MD_CTX_new();
        const bool ok = EVP_DigestVerifyInit(ctx, nullptr, nullptr, nullptr, pub) == 1 &&
                        EVP_DigestVerify(ctx, reinterpret_cast<const unsigned char*>(sig.data()), sig.size(),
                                         reinterpret_cast<const unsigned char*>(m.data()), m.size()) == 1;
        EVP_MD_CTX_free(ctx);
        return ok;
    };
    BOOST_TEST(verifies(cluster, 7, key_name));
    BOOST_TEST(!verifies(cluster, 8, key_name));          // another token
    BOOST_TEST(!verifies(cluster - 1, 7, key_name));      // another cluster
    BOOST_TEST(!verifies(cluster, 7, key_name + "x"));    // another lock
    EVP_PKEY_free(pub);
}

BOOST_AUTO_TEST_CASE(base64url_matches_rfc4648_without_padding) {
    BOOST_TEST(base64url("") == "");
    BOOST_TEST(base64url("f") == "Zg");
    BOOST_TEST(base64url("fo") == "Zm8");
    BOOST_TEST(base64url("foo") == "Zm9v");
    BOOST_TEST(base64url("foob") == "Zm9vYg");
    BOOST_TEST(base64url("\xfb\xff") == "-_8");  // the two url-safe characters
}

BOOST_AUTO_TEST_CASE(refuses_a_bad_key_file_naming_it) {
    std::shared_ptr<TokenSigner> signer;
    {
        KeyFile open_key("open.key", slurp(kVectors + "token_proof_v1.key"), 0640);
        const std::string why = TokenSigner::load(open_key.path, signer);
        BOOST_TEST(why.find("has mode 0640") != std::string::npos, why);
        BOOST_TEST(why.find(open_key.path) != std::string::npos, why);
    }
    {
        KeyFile pub("public.key", slurp(kVectors + "token_proof_v1.pub"));
        const std::string why = TokenSigner::load(pub.path, signer);
        BOOST_TEST(why.find("not an unencrypted PEM private key") != std::string::npos, why);
    }
    {
        // A P-256 key: a private key, but not Ed25519.
        EVP_PKEY* ec = EVP_EC_gen("P-256");
        BOOST_TEST_REQUIRE(ec != nullptr);
        BIO* mem = BIO_new(BIO_s_mem());
        PEM_write_bio_PrivateKey(mem, ec, nullptr, nullptr, 0, nullptr, nullptr);
        char* data = nullptr;
        const long n = BIO_get_mem_data(mem, &data);
        KeyFile ec_key("ec.key", std::string(data, static_cast<std::size_t>(n)));
        BIO_free(mem);
        EVP_PKEY_free(ec);
        const std::string why = TokenSigner::load(ec_key.path, signer);
        BOOST_TEST(why.find("not an Ed25519 key") != std::string::npos, why);
    }
    BOOST_TEST(TokenSigner::load("/nonexistent/signing.key", signer).find("cannot read") != std::string::npos);
    BOOST_TEST(!signer);  // nothing was loaded by any refusal
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace pgfence::net
