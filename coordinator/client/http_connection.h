// One synchronous HTTP/1.1 keep-alive connection to one endpoint.
//
// Every call takes an absolute deadline (steady clock) covering connect,
// the TLS handshake (https:// endpoints), write and read; past it the socket
// is closed and the call reports a timeout. Over TLS the member's certificate
// must chain to the settings' CA and name the endpoint's host (DNS name, sent
// as SNI too) or IP in its SANs; a failed handshake is a kConnect error that
// says why. Beast, Asio and OpenSSL (net/stream.h) stay out of this header
// (pimpl), so it is cheap to include. Not thread-safe: one connection per
// thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "client/endpoints.h"
#include "net/tls.h"

namespace pgfence::client {

using Clock = std::chrono::steady_clock;

// Bound on a response body we are willing to read (GET /v1/locks can be
// large); a request may ask for a larger one (GET /v1/snapshot).
constexpr std::size_t kMaxResponseBodyBytes = 64u << 20;

struct HttpRequest {
    std::string method;  // "GET" or "POST"
    std::string target;  // path and query, e.g. "/v1/locks?key=a"
    std::string body;    // JSON, sent with Content-Type application/json when non-empty
    std::size_t max_response_bytes = kMaxResponseBodyBytes;
    // A 200 answer's body is not read by roundtrip(): it comes later, piece
    // by piece, from read_stream() (a chunked stream that may never end:
    // GET /v1/watch). Any other status is read whole, as usual.
    bool stream = false;
};

struct HttpResponse {
    int status = 0;
    std::string body;
    std::string location;  // Location header (redirects), empty if absent
};

enum class TransportError : std::uint8_t {
    kNone,
    kConnect,   // could not connect (refused, unreachable, resolve failed)
    kTimeout,   // deadline passed before the full response arrived
    kIo,        // connection broke while writing or reading
    kProtocol,  // the peer did not speak HTTP/1.1 we understand
};

// What read_stream() got.
enum class StreamRead : std::uint8_t {
    kData,     // body bytes were appended
    kEnd,      // the body ended (the last chunk, or the member closed the connection)
    kTimeout,  // nothing arrived by the deadline (the stream stays open)
    kError,    // the connection broke or the framing is bad (it is closed)
};

struct HttpResult {
    TransportError error = TransportError::kNone;
    std::string message;       // human-readable cause when error != kNone
    bool sent = false;         // the request started going out on the wire
    Clock::time_point sent_at; // taken just before the first byte was written
    bool reused = false;       // went over a connection kept alive from earlier
    HttpResponse response;     // valid when error == kNone
};

// What every connection of one client shares.
struct ConnectionSettings {
    net::TlsContextPtr tls;      // for https:// endpoints (TlsSide::kClient); null: tls_error says why
    std::string tls_error;
    std::string authorization;   // the Authorization header's value ("Bearer ..."), or ""
};

class HttpConnection {
public:
    // `settings` may be null for a plaintext endpoint (no TLS, no credentials).
    explicit HttpConnection(Endpoint endpoint, std::shared_ptr<const ConnectionSettings> settings = nullptr);
    ~HttpConnection();
    HttpConnection(const HttpConnection&) = delete;
    HttpConnection& operator=(const HttpConnection&) = delete;

    // Sends `request` and reads the response, connecting first if needed.
    // On any transport error the connection is closed (the next call reconnects).
    HttpResult roundtrip(const HttpRequest& request, Clock::time_point deadline);

    // After a roundtrip() with HttpRequest::stream answered 200: appends the
    // body bytes (chunked framing removed) that arrive by `deadline` to `out`,
    // waiting for at least one. Anything but kData/kTimeout closes the
    // connection; `why` says what happened for kEnd and kError.
    StreamRead read_stream(std::string& out, Clock::time_point deadline, std::string& why);

    void close();
    // True while a connection from an earlier roundtrip is kept alive.
    bool is_open() const;
    const Endpoint& endpoint() const;

private:
    class Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace pgfence::client
