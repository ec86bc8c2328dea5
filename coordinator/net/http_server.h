// The HTTP/1.1 server of a member (Boost.Beast, kept out of this header).
//
// Keep-alive; every request bounded (header and body limits; an oversized body
// is answered 400 bad_request and the connection closed); a read timeout on
// headers, bodies, idle keep-alive connections and responses the client does
// not read (checked every 250 ms). At most max_connections_per_address from
// one source address (more are closed at accept) and max_connections at
// once: a connection that arrives at the cap takes the place of the oldest
// idle connection of the lowest class (net/conn_ranks.h; the handler raises
// a connection's class through HttpExchange::raise_class), and is closed at
// accept only when every open connection has a request being handled or its
// response still being written (a response stuck mid-write is ended by the
// read timeout, not shed: shedding would report it unwritten). Both
// are counted (connection_counters) and logged, at most 20 lines a second
// (http_connection_shed, http_connection_refused). One request per connection is handled at a
// time; the handler may answer later (a waiting acquire) through the
// HttpExchange it is given, and can ask whether the client has gone away
// meanwhile (phantom-lock detection).
//
// TLS (set_tls): every accepted connection first completes a TLS handshake
// (under read_timeout) with the context current at accept; a client that does
// not (plaintext to a TLS port, a certificate the CA did not sign, ...) is
// closed and counted. Plaintext and TLS connections read and write through
// the same non-blocking stream (net/stream.h; no Asio SSL stream): a read of
// what is there when the socket is readable (or OpenSSL holds bytes), one
// write of the response, and a wait for the readiness the stream asks for.
// Both find a gone client the same way, by poll(POLLRDHUP) on the TCP
// socket; a response that cannot be written is reported unwritten either way.
//
// Threading: everything runs on the io_context's single thread; the handler
// and HttpExchange methods are called and must be called on it.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "net/conn_ranks.h"
#include "net/tls.h"

namespace boost::asio {
class io_context;
}

namespace pgfence::net {

struct HttpRequest {
    std::string method;  // "GET", "POST", ...
    std::string target;  // path and query, as sent
    std::string body;
    std::string authorization;  // the Authorization header's value ("" when absent)
    std::string client_cn;      // CN of the client certificate TLS verified ("" when none was asked for or it has none)
    std::string content_type;   // the Content-Type header's value ("" when absent)
    // The Origin header's value; unset when absent. Browsers send it with
    // every request a page makes but a plain GET or HEAD; other clients
    // send none.
    std::optional<std::string> origin;
};

struct HttpResponse {
    unsigned status = 200;
    std::string body;
    std::string content_type = "application/json";
    std::string location;  // set for 307
};

// A response that streams (GET /v1/watch): a status line and headers, then
// bytes as the handler writes them, as chunks (Transfer-Encoding: chunked;
// to an HTTP/1.0 client, raw bytes, the end being the connection's close).
// It never ends by itself: end() ends it, or the client's going away, a
// write that fails, or a write the client does not take within
// read_timeout; the connection closes with it (never kept alive). Nothing
// bounds what is queued: the handler asks unwritten_bytes() and stops
// writing (or ends the stream) past its own bound. The connection is never
// shed for room while its stream is open (it is busy, net/conn_ranks.h).
// Destroying the last reference ends it.
class HttpStream {
public:
    virtual ~HttpStream() = default;
    // Queues `bytes` (not empty) as one chunk, and writes what the socket
    // takes at once; nothing once closed().
    virtual void write(std::string_view bytes) = 0;
    // Queued bytes (with their chunk framing) the socket has not taken yet.
    virtual std::size_t unwritten_bytes() const = 0;
    // end() was called, or the stream closed otherwise (on_close).
    virtual bool closed() const = 0;
    // The last chunk after what is queued; the connection closes once it is
    // written (or with the read timeout).
    virtual void end() = 0;
    // `fn` runs once when the stream closes other than by end(): the
    // client went away (seen at once, by a watch on the socket) or a write
    // failed or timed out. Posted to the loop: never from within a call on
    // the stream.
    virtual void on_close(std::function<void()> fn) = 0;
    // `fn` runs once, posted, when every queued byte has been written
    // (at once, posted, when none is queued); replaces an earlier one.
    virtual void on_drained(std::function<void()> fn) = 0;
};

class HttpExchange {
public:
    virtual ~HttpExchange() = default;
    // True once the peer closed its side (or half-closed it with
    // shutdown(SHUT_WR)) while the request was pending. Costs one poll(2) of
    // the socket unless watch_close() was called; a close is seen even with a
    // pipelined request still unread.
    virtual bool client_gone() const = 0;
    // For a request that may stay pending long (a waiting acquire): watch the
    // socket so that client_gone() needs no system call.
    virtual void watch_close() = 0;
    // Sends the response (only the first call counts). `written(ok)` runs
    // after the write finished (possibly before respond() returns: a response
    // that fits the socket buffer is sent at once); ok=false when it could
    // not be written. The HttpHandler is never called from within respond()
    // (not even for a pipelined request already received): it is not re-entered.
    virtual void respond(HttpResponse response, std::function<void(bool ok)> written = {}) = 0;
    // Answers with a stream instead (HttpStream), `status` and
    // `content_type`, its headers written at once; then respond() does
    // nothing. Null when the exchange was answered already or the client is gone.
    // send_buffer_bytes > 0: the socket's kernel send buffer is set to it
    // (SO_SNDBUF; the kernel doubles it, and no longer grows it up to
    // megabytes for a client that does not read), so that unwritten_bytes()
    // soon shows a client that falls behind.
    virtual std::shared_ptr<HttpStream> open_stream(unsigned status, std::string content_type,
                                                    std::size_t send_buffer_bytes = 0) = 0;
    // Ranks the connection for load shedding (net/conn_ranks.h): its class
    // only goes up, for the connection's life. Call before respond(); no
    // system call.
    virtual void raise_class(ConnClass c) = 0;
};

struct HttpServerOptions {
    std::string host = "127.0.0.1";
    std::uint16_t port = 0;
    std::size_t max_connections = 1024;
    std::size_t max_connections_per_address = 512;  // 0 admits none
    std::size_t max_body_bytes = 64u << 10;
    std::size_t max_header_bytes = 8u << 10;
    std::chrono::milliseconds read_timeout{30000};
};

using HttpHandler = std::function<void(const HttpRequest&, std::shared_ptr<HttpExchange>)>;

class HttpServer {
public:
    HttpServer(boost::asio::io_context& io, HttpServerOptions options, HttpHandler handler);
    ~HttpServer();
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

    // Binds and starts accepting; returns an error message or "".
    std::string start();
    void stop();
    std::size_t connections() const;
    // Connections closed to make room (by the class of the one closed) or
    // refused at accept.
    struct ConnectionCounters {
        std::array<std::uint64_t, kConnClasses> shed{};  // indexed by ConnClass
        std::uint64_t refused_per_address = 0;           // its address had max_connections_per_address
        std::uint64_t refused_busy = 0;                  // at the cap, every connection busy
    };
    const ConnectionCounters& connection_counters() const;
    // Accepts that failed; after one for want of descriptors or memory the
    // server waits kAcceptRetry (accept_retry.h) before accepting again.
    std::uint64_t accept_failures() const;

    // Serve TLS with `context` (null: plaintext); verify_client: the context
    // requires client certificates (TlsSide::kServerVerify), whose CN each
    // request then carries. Before start(), or later to swap in a reloaded
    // context: connections accepted from then on use it, open ones keep theirs.
    void set_tls(TlsContextPtr context, bool verify_client);
    std::uint64_t tls_handshake_failures() const;

private:
    struct Impl;
    std::shared_ptr<Impl> impl_;
};

// The bytes of `r` as an HTTP/1.x response (replacing `out`): status line,
// Server, Content-Type, Location when set, for a 401 the challenge
// `WWW-Authenticate: Bearer realm="pgfence"` (RFC 6750; the only scheme
// served), Connection when it differs from the version's default,
// Content-Length, body. Header values come from the member itself, never
// from a request.
void format_response(std::string& out, unsigned version, const HttpResponse& r, bool keep_alive);

}  // namespace pgfence::net
