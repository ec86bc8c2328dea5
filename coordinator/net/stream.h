// The bytes of one connected, non-blocking TCP socket, in plaintext or TLS:
// the one place that reads, writes and handshakes a socket for the HTTP
// server, the peer transport and the client. It never waits: every call does
// what the socket allows now and says what it needs next, so an Asio event
// loop (async_wait) and a poll() loop drive it alike.
//
// What goes in: a connected socket (attach) and, for TLS, the context it is
// to speak with and which side it is (attach_tls). What comes out: for each
// call a Step, and for reads and writes the bytes moved:
//   kDone       the call finished (bytes moved, or the handshake complete)
//   kWantRead   nothing moved; call again, the same way, once the socket is
//               readable (TLS may need to read to write, e.g. a key update)
//   kWantWrite  nothing moved; call again once the socket is writable
//   kClosed     the other side closed (close_notify, or the TCP connection
//               ended without one): a read gets nothing more, a handshake
//               or a write cannot finish (error() is then "unknown OpenSSL
//               error")
//   kFailed     broken (a TLS alert, a certificate refused; a reset in
//               plaintext — under TLS a reset without an alert reads kClosed);
//               error() and error_code() say why, and later calls fail too
// The error is taken from OpenSSL's queue (or errno) once, at the failure,
// and the queue is left empty: one failure is reported once, never seen
// again by another connection on the same thread.
//
// Order: attach or attach_tls; under TLS handshake() until kDone (plaintext
// needs none: it answers kDone at once); then read_some and write_some in
// any order; close_notify, if wanted, last. A write that answered kWant*
// must be called again with the same bytes (OpenSSL's rule; plaintext
// accepts any). detach() forgets the socket (and frees the TLS state), so
// the object can take the next one.
//
// Limits: a TLS write moves all its bytes or none (no partial writes, at
// most 1 GiB per call); a plaintext write moves what the socket buffer takes
// (kDone with fewer bytes than asked: call again with the rest); a read
// moves at most `size` bytes, under TLS at most one record (16 KiB).
//
// The socket's descriptor stays the caller's: it is never closed here (the
// caller's Asio socket or poll loop owns and waits on it). Sends never raise
// SIGPIPE (MSG_NOSIGNAL); a plaintext call never blocks, even on a blocking
// descriptor (MSG_DONTWAIT); TLS needs the descriptor non-blocking.
//
// Threading: not thread-safe; one thread at a time (the callers serialize:
// the server and incoming peer connections on the event loop, an outgoing
// peer connection under its mutex, a client connection on its own thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "net/tls.h"

namespace pgfence::net {

enum class Step : std::uint8_t { kDone, kWantRead, kWantWrite, kClosed, kFailed };

struct IoResult {
    Step step = Step::kDone;
    std::size_t bytes = 0;  // moved by this call (0 unless kDone)
};

enum class TlsRole : std::uint8_t {
    kAccept,   // the server side: SSL_accept
    kConnect,  // the client side: SSL_connect
};

class Stream {
public:
    Stream() = default;
    ~Stream();
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;

    // Plaintext over the connected socket `fd`.
    void attach(int fd);
    // TLS over `fd` with `context` (kept alive while attached): false when
    // OpenSSL cannot make the connection's state (error() says why), and the
    // stream is then failed.
    bool attach_tls(int fd, const TlsContextPtr& context, TlsRole role);
    // Forgets the socket (not closing it) and frees the TLS state; every
    // call then answers kFailed (a closed descriptor's number may be reused).
    void detach();

    bool tls() const { return ssl_ != nullptr; }
    int fd() const { return fd_; }

    // For a kConnect side, before the handshake: the server's certificate
    // must name `host` (an IP literal, or a DNS name also sent as SNI) in its
    // subject alternative names, never only in its subject CN. False when it
    // cannot be set.
    bool expect_host(const std::string& host);

    Step handshake();
    IoResult read_some(void* out, std::size_t size);
    IoResult write_some(const void* data, std::size_t size);
    // TLS: sends close_notify now, without waiting for the other side's (best
    // effort; a failure is not reported). Plaintext: nothing.
    void close_notify();
    // TLS: bytes OpenSSL holds that the socket no longer shows (read them
    // before waiting for readability).
    bool has_pending() const;

    // After a complete TLS handshake: the other side's certificate (null
    // when it sent none), and OpenSSL's verdict on it (X509_V_OK, or why the
    // chain was refused; also meaningful after a failed handshake).
    const x509_st* peer_certificate() const;
    long verify_result() const;

    // Why the last kFailed: OpenSSL's reason ("unknown OpenSSL error" when
    // it queued none) or, for a plaintext socket, strerror(errno).
    std::string error() const;
    // The same as a number: the OpenSSL error code (0 when none was queued)
    // or, for a plaintext socket, errno.
    unsigned long error_code() const { return error_code_; }

private:
    Step fail_tls(int ssl_result);
    Step fail_errno(int err);

    int fd_ = -1;
    ssl_st* ssl_ = nullptr;       // set: TLS (owned)
    TlsContextPtr context_;       // what ssl_ was made with
    TlsRole role_ = TlsRole::kAccept;
    bool failed_ = false;
    bool system_error_ = false;   // error_code_ is an errno
    unsigned long error_code_ = 0;
};

}  // namespace pgfence::net
