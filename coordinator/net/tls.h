// TLS contexts for the member's two ports and for clients (Boost.Asio SSL over
// OpenSSL, kept out of this header), and the identities a certificate proves.
//
// Every context: TLS 1.2 or newer; the cipher suites are pinned here, not left
// to openssl.cnf — TLS 1.3's three AEAD suites, and for TLS 1.2 only ECDHE with
// AES-GCM or ChaCha20-Poly1305; read-ahead on (bytes can wait inside OpenSSL:
// check Stream::has_pending, stream.h, before waiting for the socket); no compression, no
// renegotiation, no session tickets (a member's connections are long-lived, and the peer transport never
// reads its outgoing connections, so a ticket would only sit in a buffer).
//
// A context is immutable once made: a reload (SIGHUP) makes a new one from the
// files and swaps it in; connections keep the one they were accepted or dialed
// with, so a reload drops no connection, and a reload that fails keeps the old.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace boost::asio::ssl {
class context;
}
struct x509_st;  // OpenSSL's X509
struct ssl_st;   // OpenSSL's SSL

namespace pgfence::net {

using TlsContextPtr = std::shared_ptr<boost::asio::ssl::context>;

struct TlsFiles {
    std::string cert_file;  // PEM certificate chain, leaf first (empty: none, a client without a certificate)
    std::string key_file;   // PEM private key of cert_file; refused if readable by group or others
    std::string ca_file;    // PEM CA bundle the other side's certificate must chain to (empty: the system's, clients only)
};

enum class TlsSide : std::uint8_t {
    kServer,         // presents cert_file; asks for no client certificate
    kServerVerify,   // presents cert_file; requires a client certificate that chains to ca_file
    kClient,         // verifies the server against ca_file; presents cert_file when given
};

// Reads the files and builds a context into `out`: "" on success, else why
// not, naming the file (and `out` is left as it was).
std::string make_tls_context(const TlsFiles& files, TlsSide side, TlsContextPtr& out);

// Reads a whole file of security material (a certificate, a CA bundle, the
// auth file, a bearer secret) into `out`: "" when `path` is a regular file of
// at most `max_bytes`, else why not, naming the file as `what` (`out` is then
// unchanged). It is opened without blocking and its type checked on the open
// file, so a FIFO or a device never stalls the caller (a SIGHUP reload runs
// on the event loop).
std::string read_small_file(const std::string& path, const char* what, std::size_t max_bytes, std::string& out);

// read_small_file for a private key (at most 1 MiB), which must also be
// readable by its owner only: a mode that lets group or others read or write
// it is refused. The mode is that of the file opened and read, so the file
// checked is the file loaded.
std::string read_private_key(const std::string& path, std::string& pem);

// Makes `ssl` read and write the connected socket `fd` itself (recv, and
// send with MSG_NOSIGNAL: a write to a closed connection is an error, never a
// SIGPIPE). `fd` stays the caller's to close; a non-blocking fd makes SSL
// calls return SSL_ERROR_WANT_READ / WANT_WRITE instead of waiting.
// net::Stream (stream.h) does this for every connection of the member and
// the client; tests and tools call it directly.
void attach_socket(ssl_st* ssl, int fd);

// The other end of the connected socket `fd` as "IP:PORT" ("[IPv6]:PORT"),
// for the line that logs a refused connection; "" when it is not known.
std::string remote_address(int fd);

// The oldest error OpenSSL queued on this thread, as text (the queue is
// emptied); "unknown OpenSSL error" when there is none.
std::string openssl_error();

// The subject CN of a certificate ("" when it has none or more than one).
std::string common_name(const x509_st* cert);
// The member ID a peer certificate is bound to: its SAN URI
// "pgfence:member:ID", else its CN when that is a decimal ID >= 1. nullopt:
// neither (such a certificate cannot be a member's).
std::optional<std::uint64_t> member_id_of(const x509_st* cert);

}  // namespace pgfence::net
