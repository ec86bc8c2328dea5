// What a member's clients ask and what the member answers, as values: the
// requests of DESIGN.md "HTTP API" after parsing, and the answers before
// they are written as HTTP. Pure, std only. net/api_request.h parses request
// bodies into these types; the server's shell (server/member_http.cc) maps
// each Response to its status code and JSON body.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "lock/commands.h"
#include "lock/table.h"

namespace pgfence::member {

// POST /v1/acquire. wait_ms > 0: queue behind the holder (FIFO per key).
struct Acquire {
    std::string key;
    std::uint64_t lease_ms = 0;
    std::uint64_t wait_ms = 0;
    std::string owner;
};

// POST /v1/release and POST /v1/keepalive carry the same body.
struct Release {
    std::string key;
    std::uint64_t token = 0;
};
struct KeepAlive {
    std::string key;
    std::uint64_t token = 0;
};

// GET /v1/locks (every lock) or GET /v1/locks?key=K (one).
struct ListLocks {
    std::optional<std::string> key;
};

using Request = std::variant<Acquire, Release, KeepAlive, ListLocks>;

// ---- answers -------------------------------------------------------------------

// 200 {"key","token","lease_ms","owner"}. The shell reports whether it could
// write it (Core::response_written): a grant nobody received is a phantom
// (its lease ends at once and it is expired).
struct Granted {
    std::string key;
    lock::Token token = 0;
    std::uint64_t lease_ms = 0;
    std::string owner;
};

struct Released {};  // 200 {"released":true}

struct KeptAlive {  // 200 {"key","token","ttl_ms"}
    std::string key;
    lock::Token token = 0;
    std::uint64_t ttl_ms = 0;
};

struct LockView {
    lock::Lock lock;
    std::uint64_t ttl_ms = 0;  // of the leader's nominal lease deadline (0: ended)
};
struct Locks {  // 200: one lock (the request named a key) or {"locks":[...]}
    bool one = false;
    std::vector<LockView> locks;
};

struct NotHeld {};  // 404 {"error":"not_held"}

struct Held {  // 409 {"error":"held","message":...}
    std::string message;
};

struct TooLarge {};  // 400: the command does not fit one log entry

// 307 to the leader's client address when the shell knows it, else 503
// {"error":"no_leader"}. `leader`: the leader this member knows (raft::kNoNode: none).
struct Unavailable {
    std::uint64_t leader = 0;
};

using Response = std::variant<Granted, Released, KeptAlive, Locks, NotHeld, Held, TooLarge, Unavailable>;

}  // namespace pgfence::member
