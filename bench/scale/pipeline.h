// Many keep-alive HTTP/1.1 connections to ONE endpoint (the leader), each
// with several requests in flight (pipelined; the member answers them in
// order), all driven by one thread with epoll. Used by bench_scale to load
// a million locks (many connections x a deep pipeline) and to hold 10000
// connections that each send a keepalive now and then.
//
// One thread, as bench/coordinator/load.h argues: on a 2-core machine the
// generator shares the CPU with the cluster it measures; one loop reading
// whatever sockets are ready costs neither a thread per connection (10000
// stacks, a wake-up per answer) nor locks. The loop stays cheap because its
// work per answer is a parse and a callback; answers are matched to
// requests by order (a FIFO of what is in flight per connection).
//
// No redirects are followed: the endpoint must be the leader, and a 307 is
// an answer like any other for the handler to count. Connecting blocks the
// loop (loopback); the endpoint is resolved once. Plaintext only.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sys/socket.h>

#include <boost/beast/http.hpp>

#include "client/endpoints.h"

namespace pgfence::bench {

using Clock = std::chrono::steady_clock;

// What the loop reports; calls come from the loop's thread.
class PipelineHandler {
  public:
    virtual ~PipelineHandler() = default;
    // One answer to the request sent with `tag` on connection `conn`.
    virtual void on_response(std::size_t conn, std::uint64_t tag, unsigned status, std::string_view body,
                             std::chrono::microseconds latency) = 0;
    // Connection `conn` failed and is closed; `lost` requests had no answer.
    virtual void on_error(std::size_t conn, const std::string& why, std::size_t lost) = 0;
    // Called every tick (kTickMs) and after each batch of events: open
    // connections, send what is due.
    virtual void on_tick(Clock::time_point now) = 0;
    virtual bool done() const = 0;
};

// Bounds: one response's size, the wait for the oldest request in flight.
constexpr std::size_t kMaxPipelineResponseBytes = 1u << 16;
constexpr auto kPipelineResponseTimeout = std::chrono::seconds(10);

class Pipeline {
  public:
    Pipeline(client::Endpoint at, std::size_t connections, PipelineHandler& handler);
    ~Pipeline();
    Pipeline(const Pipeline&) = delete;
    Pipeline& operator=(const Pipeline&) = delete;

    // Connects `conn` (closed now); false with `error` set on failure.
    bool open(std::size_t conn, std::string& error);
    bool is_open(std::size_t conn) const { return conns_[conn].fd >= 0; }
    std::size_t in_flight(std::size_t conn) const { return conns_[conn].in_flight.size(); }
    // Queues a POST on open connection `conn`; its answer is reported with `tag`.
    void post(std::size_t conn, std::string_view path, std::string_view body, std::uint64_t tag);
    // Runs until the handler is done or `give_up`; false if it gave up.
    bool run(Clock::time_point give_up);

  private:
    struct Sent {
        Clock::time_point at;
        std::uint64_t tag;
    };
    struct Conn {
        int fd = -1;
        std::string out;
        std::size_t out_sent = 0;
        std::string in;
        std::optional<boost::beast::http::response_parser<boost::beast::http::string_body>> parser;
        std::deque<Sent> in_flight;
        bool want_write = false;
    };

    static void reset(Conn& c);  // closed, nothing queued
    void flush(std::size_t conn);
    void on_readable(std::size_t conn);
    bool parse(std::size_t conn);
    void fail(std::size_t conn, const std::string& why);
    void watch(std::size_t conn, int op);
    void set_want_write(std::size_t conn, bool want);
    void check_timeouts(Clock::time_point now);

    client::Endpoint at_;
    sockaddr_storage addr_{};  // at_, resolved
    socklen_t addr_len_ = 0;
    std::vector<Conn> conns_;
    PipelineHandler& handler_;
    int epfd_ = -1;
};

}  // namespace pgfence::bench
