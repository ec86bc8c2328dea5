// One fence-coordinator member: drives the Raft core from a single-threaded
// event loop, applies committed commands to the lock table, serves the HTTP
// API (docs/http-api.md), keeps the leader-local lease deadlines and waiter queues.
//
// Threading: everything runs on the io_context's thread except a leader's
// Ready writes and snapshot adoptions, which run on the writer thread
// (writer.h), and snapshot files, written by the snapshot thread (a second
// Writer) beside them; both post their completion back. After a Ready write
// it ran, the writer thread also sends that Ready's messages
// (Ready::messages, which may leave only once durable) through the
// thread-safe PeerTransport::send. A follower or candidate writes its Ready
// on the event loop itself, unless a snapshot adoption is queued: then its
// Ready queues behind it (server/disk_turn.h decides). Member is owned by
// the io_context's thread: start(), shutdown() and reload() are called there.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "server/bootstrap.h"
#include "server/durable_log.h"
#include "server/options.h"

namespace boost::asio {
class io_context;
}

namespace pgfence::server {

class Member {
public:
    // `plan`: what bootstrap.h decided (the first configuration, the known
    // addresses); options.cluster_id and options.client_addr are final.
    Member(boost::asio::io_context& io, Options options, StartPlan plan, std::unique_ptr<DurableLog> log);
    ~Member();
    Member(const Member&) = delete;
    Member& operator=(const Member&) = delete;

    // Builds the core from storage, listens, starts ticking. Error message or "".
    std::string start();
    // Graceful stop: a leader first transfers leadership (bounded wait); then
    // the writer threads finish their queued jobs and stop, and `done` runs
    // on the loop.
    void shutdown(std::function<void()> done);
    // SIGHUP: reload certificates, keys and the auth file; new connections
    // use what loaded, and a file that fails keeps the old one (logged).
    void reload();

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace pgfence::server
