#include "net/tls.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/ssl.hpp>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>

namespace pgfence::net {

namespace ssl = boost::asio::ssl;

namespace {

constexpr const char* kTls13Suites = "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";
constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

std::optional<std::uint64_t> parse_id(std::string_view text) {
    std::uint64_t id = 0;
    if (text.empty() || text.size() > 20 || text[0] == '0') return std::nullopt;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
    if (ec != std::errc() || p != text.data() + text.size() || id == 0) return std::nullopt;
    return id;
}

// A BIO over a socket: what OpenSSL's socket BIO does, but sending with
// MSG_NOSIGNAL. The fd travels in the BIO's data pointer.
int socket_fd(BIO* b) { return static_cast<int>(reinterpret_cast<std::intptr_t>(BIO_get_data(b))); }

int socket_write(BIO* b, const char* data, int len) {
    BIO_clear_retry_flags(b);
    const ssize_t n = ::send(socket_fd(b), data, static_cast<std::size_t>(len), MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) BIO_set_retry_write(b);
    return static_cast<int>(n);
}

int socket_read(BIO* b, char* out, int len) {
    BIO_clear_retry_flags(b);
    const ssize_t n = ::recv(socket_fd(b), out, static_cast<std::size_t>(len), 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) BIO_set_retry_read(b);
    return static_cast<int>(n);
}

long socket_ctrl(BIO* b, int cmd, long, void* ptr) {
    switch (cmd) {
        case BIO_CTRL_FLUSH: return 1;  // nothing is buffered here
        case BIO_C_GET_FD:
            if (ptr != nullptr) *static_cast<int*>(ptr) = socket_fd(b);
            return socket_fd(b);
        default: return 0;
    }
}

int socket_create(BIO* b) {
    BIO_set_init(b, 1);
    return 1;
}

BIO_METHOD* socket_method() {
    static BIO_METHOD* const method = [] {
        BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR, "pgfence socket");
        BIO_meth_set_write(m, socket_write);
        BIO_meth_set_read(m, socket_read);
        BIO_meth_set_ctrl(m, socket_ctrl);
        BIO_meth_set_create(m, socket_create);
        return m;
    }();
    return method;
}

}  // namespace

void attach_socket(SSL* ssl, int fd) {
    BIO* b = BIO_new(socket_method());
    BIO_set_data(b, reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)));
    SSL_set_bio(ssl, b, b);
}

std::string remote_address(int fd) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return {};
    char host[INET6_ADDRSTRLEN] = {};
    char out[INET6_ADDRSTRLEN + 16];
    if (addr.ss_family == AF_INET) {
        const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
        if (::inet_ntop(AF_INET, &in->sin_addr, host, sizeof host) == nullptr) return {};
        std::snprintf(out, sizeof out, "%s:%u", host, static_cast<unsigned>(ntohs(in->sin_port)));
    } else if (addr.ss_family == AF_INET6) {
        const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr);
        if (::inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host) == nullptr) return {};
        std::snprintf(out, sizeof out, "[%s]:%u", host, static_cast<unsigned>(ntohs(in6->sin6_port)));
    } else {
        return {};
    }
    return out;
}

std::string openssl_error() {
    const unsigned long e = ERR_get_error();
    ERR_clear_error();
    if (e == 0) return "unknown OpenSSL error";
    if (const char* reason = ERR_reason_error_string(e)) return reason;
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    return buf;
}

namespace {

// read_small_file, and with `private_key` the mode rule of read_private_key.
std::string read_checked(const std::string& path, const char* what, std::size_t max_bytes, bool private_key,
                         std::string& out) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) return std::string("cannot read ") + what + " '" + path + "': " + std::strerror(errno);
    struct stat st {};
    std::string why;
    if (::fstat(fd, &st) != 0) {
        why = std::string("cannot read ") + what + " '" + path + "': " + std::strerror(errno);
    } else if (!S_ISREG(st.st_mode)) {
        why = std::string(what) + " '" + path + "' is not a regular file";
    } else if (private_key && (st.st_mode & 077) != 0) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
        why = std::string(what) + " '" + path + "' has mode " + mode +
              ": a private key must be readable by its owner only (chmod 600)";
    } else if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
        why = std::string(what) + " '" + path + "' is larger than " + std::to_string(max_bytes) + " bytes";
    }
    std::string text;
    if (why.empty()) text.reserve(static_cast<std::size_t>(st.st_size));  // no reallocation leaves a copy behind
    while (why.empty()) {
        char buf[4096];
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) why = std::string("cannot read ") + what + " '" + path + "': " + std::strerror(errno);
        if (n <= 0) break;
        text.append(buf, static_cast<std::size_t>(n));
        if (text.size() > max_bytes) {
            why = std::string(what) + " '" + path + "' is larger than " + std::to_string(max_bytes) + " bytes";
        }
        OPENSSL_cleanse(buf, sizeof buf);
    }
    ::close(fd);
    if (!why.empty()) {
        OPENSSL_cleanse(text.data(), text.size());
        return why;
    }
    out = std::move(text);
    return {};
}

constexpr std::size_t kMaxPemFileBytes = std::size_t{1} << 20;

}  // namespace

std::string read_small_file(const std::string& path, const char* what, std::size_t max_bytes, std::string& out) {
    return read_checked(path, what, max_bytes, false, out);
}

std::string read_private_key(const std::string& path, std::string& pem) {
    return read_checked(path, "key file", kMaxPemFileBytes, true, pem);
}

namespace {

// A private key's text, wiped when it goes.
struct KeyText {
    std::string pem;
    KeyText() = default;
    KeyText(const KeyText&) = delete;
    KeyText& operator=(const KeyText&) = delete;
    ~KeyText() { OPENSSL_cleanse(pem.data(), pem.size()); }
};

// No passphrase is ever asked for: OpenSSL's default would prompt on the
// terminal, on the event loop. An encrypted key fails to load instead.
int no_passphrase(char*, int, int, void*) { return -1; }

// Loads a PEM private key held in memory into `ctx`.
bool use_private_key(SSL_CTX* ctx, const std::string& pem) {
    BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
    EVP_PKEY* key = bio != nullptr ? PEM_read_bio_PrivateKey(bio, nullptr, no_passphrase, nullptr) : nullptr;
    const bool ok = key != nullptr && SSL_CTX_use_PrivateKey(ctx, key) == 1;
    EVP_PKEY_free(key);
    BIO_free(bio);
    return ok;
}

// Loads a PEM certificate chain held in memory (leaf first) into `ctx`.
bool use_certificate_chain(SSL_CTX* ctx, const std::string& pem) {
    BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
    if (bio == nullptr) return false;
    X509* leaf = PEM_read_bio_X509_AUX(bio, nullptr, no_passphrase, nullptr);
    bool ok = leaf != nullptr && SSL_CTX_use_certificate(ctx, leaf) == 1 && SSL_CTX_clear_chain_certs(ctx) == 1;
    X509_free(leaf);
    while (ok) {
        X509* ca = PEM_read_bio_X509(bio, nullptr, no_passphrase, nullptr);
        if (ca == nullptr) {
            // The end of the file is the one expected failure.
            const unsigned long e = ERR_peek_last_error();
            if (ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE) ERR_clear_error();
            else ok = false;
            break;
        }
        if (SSL_CTX_add0_chain_cert(ctx, ca) != 1) {  // takes `ca` on success
            X509_free(ca);
            ok = false;
        }
    }
    BIO_free(bio);
    return ok;
}

// Adds every certificate of a PEM bundle held in memory to `ctx`'s trust
// store; false if it holds none or one does not parse.
bool use_ca_bundle(SSL_CTX* ctx, const std::string& pem) {
    BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
    if (bio == nullptr) return false;
    STACK_OF(X509_INFO)* infos = PEM_X509_INFO_read_bio(bio, nullptr, no_passphrase, nullptr);
    BIO_free(bio);
    if (infos == nullptr) return false;
    X509_STORE* store = SSL_CTX_get_cert_store(ctx);
    int added = 0;
    bool ok = true;
    for (int i = 0; i < sk_X509_INFO_num(infos) && ok; ++i) {
        const X509_INFO* info = sk_X509_INFO_value(infos, i);
        if (info->x509 != nullptr) {
            ok = X509_STORE_add_cert(store, info->x509) == 1;
            ++added;
        }
        if (ok && info->crl != nullptr) ok = X509_STORE_add_crl(store, info->crl) == 1;
    }
    sk_X509_INFO_pop_free(infos, X509_INFO_free);
    return ok && added > 0;
}

}  // namespace

std::string make_tls_context(const TlsFiles& files, TlsSide side, TlsContextPtr& out) {
    const bool server = side != TlsSide::kClient;
    auto ctx = std::make_shared<ssl::context>(server ? ssl::context::tls_server : ssl::context::tls_client);
    SSL_CTX* raw = ctx->native_handle();
    ERR_clear_error();
    SSL_CTX_set_min_proto_version(raw, TLS1_2_VERSION);
    SSL_CTX_set_options(raw, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_TICKET |
                                 SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_num_tickets(raw, 0);
    // No TLS 1.2 session-ID resumption either: connections are long-lived,
    // and a server that verifies clients refuses a resumption attempt when no
    // session ID context is set.
    SSL_CTX_set_session_cache_mode(raw, SSL_SESS_CACHE_OFF);
    if (SSL_CTX_set_ciphersuites(raw, kTls13Suites) != 1 || SSL_CTX_set_cipher_list(raw, kTls12Ciphers) != 1) {
        return "cannot pin the TLS cipher suites: " + openssl_error();
    }
    // Read ahead: one recv takes whatever is there (else every record costs
    // two: its header, then its body). Stream::has_pending is checked before
    // waiting for the socket, as the bytes may then sit inside OpenSSL.
    SSL_CTX_set_read_ahead(raw, 1);
    if (!files.cert_file.empty() || !files.key_file.empty()) {
        if (files.cert_file.empty() || files.key_file.empty()) return "a certificate needs its key, and a key its certificate";
        KeyText key;
        if (auto why = read_private_key(files.key_file, key.pem); !why.empty()) return why;
        std::string chain;
        if (auto why = read_small_file(files.cert_file, "certificate file", kMaxPemFileBytes, chain); !why.empty()) {
            return why;
        }
        if (!use_certificate_chain(raw, chain)) {
            return "cannot load certificate '" + files.cert_file + "': " + openssl_error();
        }
        if (!use_private_key(raw, key.pem)) {
            if (key.pem.find("ENCRYPTED") != std::string::npos) {
                ERR_clear_error();
                return "cannot load key '" + files.key_file + "': it is encrypted, and keys with a passphrase are "
                       "not supported (openssl pkey -in KEY -out KEY.plain, then chmod 600)";
            }
            return "cannot load key '" + files.key_file + "': " + openssl_error();
        }
        if (SSL_CTX_check_private_key(raw) != 1) {
            return "key '" + files.key_file + "' does not match certificate '" + files.cert_file + "'";
        }
    } else if (server) {
        return "a TLS server needs a certificate and its key";
    }
    if (!files.ca_file.empty()) {
        std::string bundle;
        if (auto why = read_small_file(files.ca_file, "CA bundle", kMaxPemFileBytes, bundle); !why.empty()) {
            return why;
        }
        if (!use_ca_bundle(raw, bundle)) {
            return "cannot load CA bundle '" + files.ca_file + "': " + openssl_error();
        }
    } else if (side == TlsSide::kServerVerify) {
        return "verifying client certificates needs a CA bundle";
    } else if (side == TlsSide::kClient && SSL_CTX_set_default_verify_paths(raw) != 1) {
        return "cannot load the system's CA certificates: " + openssl_error();
    }
    switch (side) {
        case TlsSide::kServer: SSL_CTX_set_verify(raw, SSL_VERIFY_NONE, nullptr); break;
        case TlsSide::kServerVerify:
            SSL_CTX_set_verify(raw, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
            break;
        case TlsSide::kClient: SSL_CTX_set_verify(raw, SSL_VERIFY_PEER, nullptr); break;
    }
    out = std::move(ctx);
    return {};
}

std::string common_name(const x509_st* cert) {
    if (cert == nullptr) return {};
    const X509_NAME* subject = X509_get_subject_name(cert);
    const int at = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
    if (at < 0 || X509_NAME_get_index_by_NID(subject, NID_commonName, at) >= 0) return {};
    const ASN1_STRING* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, at));
    unsigned char* utf8 = nullptr;
    const int n = ASN1_STRING_to_UTF8(&utf8, data);
    if (n < 0) return {};
    std::string out(reinterpret_cast<const char*>(utf8), static_cast<std::size_t>(n));
    OPENSSL_free(utf8);
    if (out.find('\0') != std::string::npos) return {};  // an embedded NUL would let "a\0b" pass as "a"
    return out;
}

std::optional<std::uint64_t> member_id_of(const x509_st* cert) {
    if (cert == nullptr) return std::nullopt;
    constexpr std::string_view kUriPrefix = "pgfence:member:";
    auto* names = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
    std::optional<std::uint64_t> from_san;
    bool san_names_other = false;
    if (names != nullptr) {
        for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
            const GENERAL_NAME* n = sk_GENERAL_NAME_value(names, i);
            if (n->type != GEN_URI) continue;
            const std::string_view uri(reinterpret_cast<const char*>(ASN1_STRING_get0_data(n->d.uniformResourceIdentifier)),
                                       static_cast<std::size_t>(ASN1_STRING_length(n->d.uniformResourceIdentifier)));
            if (uri.substr(0, kUriPrefix.size()) != kUriPrefix) continue;
            const auto id = parse_id(uri.substr(kUriPrefix.size()));
            if (!id || (from_san && *from_san != *id)) san_names_other = true;
            else from_san = id;
        }
        GENERAL_NAMES_free(names);
    }
    if (san_names_other) return std::nullopt;  // two member URIs, or a malformed one: bound to none
    if (from_san) return from_san;
    return parse_id(common_name(cert));
}

}  // namespace pgfence::net
