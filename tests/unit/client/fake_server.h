// A tiny scripted HTTP/1.1 server on 127.0.0.1 (ephemeral port) for testing
// the client's redirect, retry and deadline logic. Not a coordinator: every
// answer comes from the test's handler (but GET /healthz, see requests()).
// One thread per connection.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "client/endpoints.h"

namespace pgfence::test {

using Clock = std::chrono::steady_clock;

struct FakeRequest {
    std::string method, target, body;
    Clock::time_point arrived;  // when the full request had been read
    int connection = 0;         // 1-based number of the connection it came on
    std::string authorization;  // the Authorization header ("" when absent)
};

struct FakeReply {
    int status = 200;
    std::string body = "{}";
    std::string location;              // Location header when non-empty
    std::chrono::milliseconds delay{0};  // wait before answering (cut short when the server stops)
    bool hang_up = false;              // close the connection without answering
    bool close_after = false;          // close silently after answering (no Connection: close)
    // A streamed answer instead of `status` and `body`: 200, application/x-ndjson,
    // Transfer-Encoding: chunked, each of `chunks` written as one chunk, `gap`
    // apart. Then: `finish` sends the last chunk; `hold` keeps the connection
    // open, silent, until the server stops; neither closes the connection in
    // the middle of the body (a member that died).
    bool stream = false;
    std::vector<std::string> chunks;
    std::chrono::milliseconds gap{0};
    bool finish = false;
    bool hold = false;
};

inline FakeReply reply(int status, std::string body) {
    FakeReply r;
    r.status = status;
    r.body = std::move(body);
    return r;
}
inline FakeReply redirect_to(std::string location) {
    FakeReply r = reply(307, "");
    r.location = std::move(location);
    return r;
}
inline FakeReply delayed(FakeReply r, std::chrono::milliseconds delay) {
    r.delay = delay;
    return r;
}
inline FakeReply stream(std::vector<std::string> chunks, bool hold = false) {
    FakeReply r;
    r.stream = true;
    r.chunks = std::move(chunks);
    r.hold = hold;
    return r;
}
inline FakeReply hang_up() {
    FakeReply r;
    r.hang_up = true;
    return r;
}

class FakeServer {
public:
    using Handler = std::function<FakeReply(const FakeRequest&)>;

    explicit FakeServer(Handler handler);
    ~FakeServer();
    FakeServer(const FakeServer&) = delete;
    FakeServer& operator=(const FakeServer&) = delete;

    client::Endpoint endpoint() const { return {"127.0.0.1", port_}; }
    std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port_) + path; }
    // Requests the handler saw. GET /healthz (the client's probe of a new
    // connection) is answered 200 by the server itself and only counted.
    std::vector<FakeRequest> requests() const;
    int probes() const;
    int connections() const { return connections_.load(); }

private:
    class Impl;
    std::atomic<int> connections_{0};  // before impl_: its threads count into it
    std::unique_ptr<Impl> impl_;
    std::uint16_t port_ = 0;
};

}  // namespace pgfence::test
