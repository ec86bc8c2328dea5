// Certificates for the TLS tests of net/, made with OpenSSL's API: a test CA
// and leaves it signs, written as PEM files into a directory of their own.
#pragma once

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "net/tls.h"

namespace pgfence::net::testing {

// A directory of PEM files: a CA, and leaves it signed (CN = the ID).
// `tag` keeps the directories of tests running at once apart.
class Certs {
  public:
    explicit Certs(const std::string& tag = "peer-tls") : dir_("/tmp/pgfence-" + tag + "-" + std::to_string(::getpid())) {
        std::filesystem::create_directories(dir_);
        ca_key_ = EVP_EC_gen("P-256");
        ca_ = X509_new();
        fill(ca_, "test peer CA", ca_key_, nullptr, ca_key_, true);
        write_cert(ca_, dir_ + "/ca.pem");
    }
    ~Certs() {
        X509_free(ca_);
        EVP_PKEY_free(ca_key_);
        std::filesystem::remove_all(dir_);
    }
    Certs(const Certs&) = delete;
    Certs& operator=(const Certs&) = delete;

    // Writes member-ID.pem and member-ID-key.pem; returns their files.
    // `ip`: a SAN IP address to add (for a server that clients verify).
    TlsFiles member(const std::string& id, const std::string& ip = {}) {
        EVP_PKEY* key = EVP_EC_gen("P-256");
        X509* cert = X509_new();
        fill(cert, id, key, ca_, ca_key_, false, ip);
        const std::string base = dir_ + "/member-" + id;
        write_cert(cert, base + ".pem");
        FILE* f = std::fopen((base + "-key.pem").c_str(), "w");
        PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
        std::fclose(f);
        ::chmod((base + "-key.pem").c_str(), 0600);
        X509_free(cert);
        EVP_PKEY_free(key);
        return {base + ".pem", base + "-key.pem", dir_ + "/ca.pem"};
    }

  private:
    static void fill(X509* c, const std::string& cn, EVP_PKEY* key, X509* issuer, EVP_PKEY* issuer_key, bool ca,
                     const std::string& ip = {}) {
        static long serial = 1;
        X509_set_version(c, 2);
        ASN1_INTEGER_set(X509_get_serialNumber(c), serial++);
        X509_gmtime_adj(X509_getm_notBefore(c), -60);
        X509_gmtime_adj(X509_getm_notAfter(c), 3600);
        X509_set_pubkey(c, key);
        X509_NAME* name = X509_get_subject_name(c);
        X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
        X509_set_issuer_name(c, issuer ? X509_get_subject_name(issuer) : name);
        X509V3_CTX v3;
        X509V3_set_ctx(&v3, issuer ? issuer : c, c, nullptr, nullptr, 0);
        for (const char* ext : ca ? std::vector<const char*>{"critical,CA:TRUE", "critical,keyCertSign,cRLSign"}
                                  : std::vector<const char*>{"critical,CA:FALSE", "critical,digitalSignature"}) {
            const int nid = std::string(ext).find("CA:") != std::string::npos ? NID_basic_constraints : NID_key_usage;
            X509_EXTENSION* e = X509V3_EXT_conf_nid(nullptr, &v3, nid, ext);
            X509_add_ext(c, e, -1);
            X509_EXTENSION_free(e);
        }
        if (!ip.empty()) {
            X509_EXTENSION* e = X509V3_EXT_conf_nid(nullptr, &v3, NID_subject_alt_name, ("IP:" + ip).c_str());
            X509_add_ext(c, e, -1);
            X509_EXTENSION_free(e);
        }
        X509_sign(c, issuer_key, EVP_sha256());
    }
    static void write_cert(X509* c, const std::string& path) {
        FILE* f = std::fopen(path.c_str(), "w");
        PEM_write_X509(f, c);
        std::fclose(f);
    }

    std::string dir_;
    EVP_PKEY* ca_key_ = nullptr;
    X509* ca_ = nullptr;
};

}  // namespace pgfence::net::testing
