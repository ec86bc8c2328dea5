// net/tls.h: which member ID and CN a certificate proves (certificates made
// here with OpenSSL's API), the private-key mode check, and the context's
// refusals naming their file.
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "net/tls.h"

namespace pgfence::net {
namespace {

struct CertDeleter {
    void operator()(X509* c) const { X509_free(c); }
};
using Cert = std::unique_ptr<X509, CertDeleter>;

// A self-signed certificate with these subject CNs (each added as its own
// entry, in order) and these SAN URIs.
Cert make_cert(const std::vector<std::string>& cns, const std::vector<std::string>& uris,
               const std::vector<std::string>& ips = {}, EVP_PKEY** key_out = nullptr) {
    EVP_PKEY* key = EVP_EC_gen("P-256");
    BOOST_TEST_REQUIRE(key != nullptr);
    Cert cert(X509_new());
    X509_set_version(cert.get(), 2);
    ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 1);
    X509_gmtime_adj(X509_getm_notBefore(cert.get()), 0);
    X509_gmtime_adj(X509_getm_notAfter(cert.get()), 3600);
    X509_set_pubkey(cert.get(), key);
    X509_NAME* name = X509_get_subject_name(cert.get());
    for (const std::string& cn : cns) {
        X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(cn.data()),
                                   static_cast<int>(cn.size()), -1, 0);
    }
    X509_set_issuer_name(cert.get(), name);
    std::string san;
    for (const std::string& u : uris) san += (san.empty() ? "" : ",") + std::string("URI:") + u;
    for (const std::string& ip : ips) san += (san.empty() ? "" : ",") + std::string("IP:") + ip;
    if (!san.empty()) {
        X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, nullptr, NID_subject_alt_name, san.c_str());
        BOOST_TEST_REQUIRE(ext != nullptr);
        X509_add_ext(cert.get(), ext, -1);
        X509_EXTENSION_free(ext);
    }
    X509_sign(cert.get(), key, EVP_sha256());
    if (key_out != nullptr) {
        *key_out = key;
    } else {
        EVP_PKEY_free(key);
    }
    return cert;
}

BOOST_AUTO_TEST_SUITE(tls)

BOOST_AUTO_TEST_CASE(a_member_certificate_names_its_id_by_cn_or_san_uri) {
    BOOST_TEST(member_id_of(make_cert({"3"}, {}).get()).value_or(0) == 3u);
    BOOST_TEST(member_id_of(make_cert({"peer"}, {"pgfence:member:7"}).get()).value_or(0) == 7u);
    // The SAN wins over the CN.
    BOOST_TEST(member_id_of(make_cert({"2"}, {"pgfence:member:5"}).get()).value_or(0) == 5u);
    // Other URIs are ignored; an IP-only SAN falls back to the CN.
    BOOST_TEST(member_id_of(make_cert({"4"}, {"spiffe://x/y"}, {"127.0.0.1"}).get()).value_or(0) == 4u);
    BOOST_TEST(member_id_of(make_cert({"9"}, {"pgfence:member:9", "pgfence:member:9"}).get()).value_or(0) == 9u);
}

BOOST_AUTO_TEST_CASE(a_certificate_bound_to_no_member_or_to_two_proves_none) {
    BOOST_TEST(!member_id_of(nullptr).has_value());
    BOOST_TEST(!member_id_of(make_cert({"member-3"}, {}).get()).has_value());
    BOOST_TEST(!member_id_of(make_cert({"0"}, {}).get()).has_value());
    BOOST_TEST(!member_id_of(make_cert({"03"}, {}).get()).has_value());
    BOOST_TEST(!member_id_of(make_cert({"18446744073709551616"}, {}).get()).has_value());  // 2^64
    BOOST_TEST(!member_id_of(make_cert({"3", "4"}, {}).get()).has_value());               // two CNs
    BOOST_TEST(!member_id_of(make_cert({"3"}, {"pgfence:member:1", "pgfence:member:2"}).get()).has_value());
    BOOST_TEST(!member_id_of(make_cert({"3"}, {"pgfence:member:03"}).get()).has_value());
    BOOST_TEST(!member_id_of(make_cert({"3"}, {"pgfence:member:x"}).get()).has_value());
}

BOOST_AUTO_TEST_CASE(common_name_is_the_single_cn) {
    BOOST_TEST(common_name(make_cert({"alice"}, {}).get()) == "alice");
    BOOST_TEST(common_name(make_cert({}, {}).get()).empty());
    BOOST_TEST(common_name(make_cert({"alice", "bob"}, {}).get()).empty());
    BOOST_TEST(common_name(make_cert({std::string("admin\0x", 7)}, {}).get()).empty());  // an embedded NUL
    BOOST_TEST(common_name(nullptr).empty());
}

BOOST_AUTO_TEST_CASE(a_private_key_must_be_the_owners_alone) {
    const std::string path = "/tmp/pgfence-tls-test-" + std::to_string(::getpid()) + ".pem";
    std::ofstream(path) << "not really a key\n";
    ::chmod(path.c_str(), 0600);
    std::string pem;
    BOOST_TEST(read_private_key(path, pem) == "");
    BOOST_TEST(pem == "not really a key\n");
    ::chmod(path.c_str(), 0640);
    std::string refused = "unchanged";
    BOOST_TEST(read_private_key(path, refused).find("has mode 0640") != std::string::npos);
    BOOST_TEST(refused == "unchanged");
    ::chmod(path.c_str(), 0604);
    BOOST_TEST(read_private_key(path, pem).find("chmod 600") != std::string::npos);
    ::chmod(path.c_str(), 0600);
    std::ofstream(path) << std::string((1u << 20) + 1, 'k');
    BOOST_TEST(read_private_key(path, pem).find("larger than 1048576 bytes") != std::string::npos);
    std::remove(path.c_str());
    BOOST_TEST(read_private_key(path, pem).find("cannot read key file '" + path + "'") != std::string::npos);
    BOOST_TEST(read_private_key("/tmp", pem).find("is not a regular file") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(contexts_refuse_missing_files_naming_them) {
    TlsContextPtr ctx;
    BOOST_TEST(make_tls_context({"", "", ""}, TlsSide::kServer, ctx).find("needs a certificate") != std::string::npos);
    BOOST_TEST(!ctx);
    BOOST_TEST(make_tls_context({"/nonexistent/c.pem", "/nonexistent/k.pem", ""}, TlsSide::kServer, ctx)
                   .find("/nonexistent/k.pem") != std::string::npos);
    BOOST_TEST(make_tls_context({"", "", "/nonexistent/ca.pem"}, TlsSide::kClient, ctx).find("/nonexistent/ca.pem") !=
               std::string::npos);
    BOOST_TEST(!ctx);
    // A client without files uses the system's CAs.
    BOOST_TEST(make_tls_context({"", "", ""}, TlsSide::kClient, ctx) == "");
    BOOST_TEST(ctx != nullptr);
}

BOOST_AUTO_TEST_CASE(contexts_load_what_they_read_once_and_refuse_fifos_and_passphrases) {
    const std::string dir = "/tmp/pgfence-tls-ctx-" + std::to_string(::getpid());
    ::mkdir(dir.c_str(), 0700);
    EVP_PKEY* key = nullptr;
    Cert cert = make_cert({"member"}, {}, {"127.0.0.1"}, &key);
    BOOST_TEST_REQUIRE(key != nullptr);
    auto write_pem = [&](const std::string& path, bool with_key, const char* passphrase) {
        FILE* f = std::fopen(path.c_str(), "w");
        BOOST_TEST_REQUIRE(f != nullptr);
        if (with_key) {
            const EVP_CIPHER* cipher = passphrase != nullptr ? EVP_aes_128_cbc() : nullptr;
            PEM_write_PrivateKey(f, key, cipher, reinterpret_cast<const unsigned char*>(passphrase),
                                 passphrase != nullptr ? static_cast<int>(std::strlen(passphrase)) : 0, nullptr, nullptr);
        } else {
            PEM_write_X509(f, cert.get());
        }
        std::fclose(f);
        ::chmod(path.c_str(), 0600);
    };
    write_pem(dir + "/cert.pem", false, nullptr);
    write_pem(dir + "/key.pem", true, nullptr);
    write_pem(dir + "/locked-key.pem", true, "secret");
    TlsContextPtr ctx;
    BOOST_TEST(make_tls_context({dir + "/cert.pem", dir + "/key.pem", ""}, TlsSide::kServer, ctx) == "");
    BOOST_TEST(static_cast<bool>(ctx));
    TlsContextPtr client;
    BOOST_TEST(make_tls_context({"", "", dir + "/cert.pem"}, TlsSide::kClient, client) == "");
    // A key with a passphrase is refused at once, never prompting.
    TlsContextPtr locked;
    const std::string why = make_tls_context({dir + "/cert.pem", dir + "/locked-key.pem", ""}, TlsSide::kServer, locked);
    BOOST_TEST(why.find("encrypted") != std::string::npos, why);
    BOOST_TEST(!locked);
    // A FIFO is refused without blocking (it has no writer: opening it for
    // reading blocks unless non-blocking).
    BOOST_TEST_REQUIRE(::mkfifo((dir + "/fifo").c_str(), 0600) == 0);
    BOOST_TEST(make_tls_context({dir + "/fifo", dir + "/key.pem", ""}, TlsSide::kServer, locked).find(
                   "certificate file '" + dir + "/fifo' is not a regular file") != std::string::npos);
    BOOST_TEST(make_tls_context({"", "", dir + "/fifo"}, TlsSide::kClient, locked).find("is not a regular file") !=
               std::string::npos);
    std::string out = "unchanged";
    BOOST_TEST(read_small_file(dir + "/fifo", "auth file", 100, out).find("auth file") != std::string::npos);
    BOOST_TEST(out == "unchanged");
    // A CA bundle with no certificate in it is refused.
    std::ofstream(dir + "/empty-ca.pem") << "no certificates here\n";
    BOOST_TEST(make_tls_context({"", "", dir + "/empty-ca.pem"}, TlsSide::kClient, locked).find("cannot load CA bundle") !=
               std::string::npos);
    EVP_PKEY_free(key);
    for (const char* f : {"/cert.pem", "/key.pem", "/locked-key.pem", "/fifo", "/empty-ca.pem"}) std::remove((dir + f).c_str());
    ::rmdir(dir.c_str());
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace pgfence::net
