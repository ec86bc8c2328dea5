// Closed-loop load: C keep-alive connections, each looping acquire + release
// on its own key for a fixed time, all driven by ONE thread with epoll.
//
// One thread rather than one per connection: on a 2-core machine the load
// generator shares the CPU with the cluster it measures, and 32 blocking
// threads cost a wake-up (a context switch, an IPI on a VM) for every answer.
// One loop reading whatever sockets are ready keeps the generator's own CPU
// and its wake-ups small, for both targets alike (they run through the same
// loop; only the Script differs).
//
// Per connection: send the acquire request, read the whole response, send
// the release, read it, repeat. Acquire latency is measured from when the
// acquire is started (on a kept-alive connection: handed to the socket; after
// an error, the reconnect is included) to when its response is parsed, a
// followed 307 included. A 307 is followed (reconnect to its Location, send
// the same request again; not an error); any other failure counts one error,
// the connection pauses kPauseAfterError, reconnects and starts over with an
// acquire. Connecting blocks the loop (meant for loopback clusters), and so
// does the TLS handshake of an https:// endpoint; after it the connection's
// reads and writes go through OpenSSL on the same non-blocking socket.
//
// With a warm-up limit W > 0 the clock starts only once every connection has
// completed one cycle (connected, followed its redirect to the leader, made
// its TLS handshake), or W has passed: at 2,048 connections the connects and
// handshakes alone would take seconds of a short run. What the warm-up did
// (cycles, latencies) is not counted; its errors are.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "client/endpoints.h"
#include "net/tls.h"
#include "report.h"

namespace pgfence::bench {

using Clock = std::chrono::steady_clock;

struct Request {
    std::string path;  // POST target
    std::string body;  // JSON
};

// One connection's protocol. Calls come from the load thread only.
class Script {
  public:
    virtual ~Script() = default;
    virtual client::Endpoint endpoint() = 0;  // where to (re)connect: first, and after an error
    virtual Request acquire() = 0;
    virtual Request release() = 0;
    // A 200 response's body; "" when it is what the protocol expects, else
    // the error (e.g. etcd's lock answer without a key).
    virtual std::string acquired(std::string_view body) = 0;
    virtual std::string released(std::string_view body) = 0;
};

using ScriptFactory = std::function<std::unique_ptr<Script>(int connection)>;

// Bounds: recorded latencies per connection (later samples are dropped), the
// size of one response, redirects followed in a row.
constexpr std::size_t kMaxSamplesPerConnection = 4'000'000;
constexpr std::size_t kMaxResponseBytes = 1u << 20;
constexpr int kMaxRedirects = 8;
constexpr auto kPauseAfterError = std::chrono::milliseconds(5);
constexpr auto kResponseTimeout = std::chrono::seconds(5);

// Scripts are made (factory(0..connections-1)) before the clock starts.
// `tls` (TlsSide::kClient) is used for https:// endpoints; null: none may be.
// `warmup_limit`: see above (zero: the clock starts at once).
LoadResult run_load(const ScriptFactory& factory, int connections,
                    std::chrono::milliseconds duration, net::TlsContextPtr tls = nullptr,
                    std::chrono::milliseconds warmup_limit = std::chrono::milliseconds(0));

}  // namespace pgfence::bench
