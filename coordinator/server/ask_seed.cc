#include "server/ask_seed.h"

#include <boost/asio.hpp>

#include "log/log.h"
#include "net/peer_transport.h"
#include "server/security.h"

namespace pgfence::server {

namespace {

using Clock = std::chrono::steady_clock;

std::string peer_text(const PeerSpec& p) { return p.host + ":" + std::to_string(p.port); }

SeedAnswer answer_of(std::uint64_t cluster_id, const net::SeedInfo& info) {
    SeedAnswer a;
    a.member_id = info.member_id;
    a.cluster_id = cluster_id;
    a.first_config = info.first_config;
    if (info.restored) a.origin = storage::Origin{info.from_cluster, info.from_index, info.token_floor};
    return a;
}

}  // namespace

std::string ask_seed(const Options& o, std::uint64_t seed_id, std::chrono::milliseconds wait,
                     std::optional<SeedAnswer>& out) {
    const PeerSpec* self = nullptr;
    const PeerSpec* seed = nullptr;
    for (const PeerSpec& p : o.peers) {
        if (p.id == o.id) self = &p;
        if (p.id == seed_id) seed = &p;
    }
    const std::string who = "member " + std::to_string(seed_id) + " (the seed: the lowest ID in --peers)";
    if (self == nullptr || seed == nullptr) return who + ": --peers does not name it and this member";
    Security security(o);
    if (std::string why = security.load(); !why.empty()) return why;
    boost::asio::io_context io;
    net::TransportOptions t;
    t.self_id = o.id;
    t.listen_host = self->host;
    t.listen_port = self->port;
    t.handshakes_only = true;
    set_incoming_limits(o, t);
    net::PeerTransport transport(io, t, [](raft::Message) {}, [](const net::MemberInfo&) {});
    transport.set_seed_handler([&](std::uint64_t cluster_id, const net::SeedInfo& info) {
        if (info.member_id != seed_id || cluster_id == 0) return;
        out = answer_of(cluster_id, info);
        io.stop();
    });
    transport.set_tls(security.peer_accept_tls(), security.peer_dial_tls());
    net::MemberInfo hello;
    hello.id = o.id;
    hello.client_addr = o.client_addr;
    if (std::string why = transport.start(hello); !why.empty()) return why;
    log::log_event(log::LogLevel::kInfo, "seed_ask",
                   {{"seed", log::log_value(seed_id)}, {"seed_peer_addr", peer_text(*seed)},
                    {"listening", peer_text(*self)}, {"wait_ms", std::to_string(wait.count())}});
    const Clock::time_point began = Clock::now();
    const Clock::time_point deadline = began + wait;
    while (!out && Clock::now() < deadline) {
        io.run_for(std::min<Clock::duration>(kSeedLogEvery, deadline - Clock::now()));
        if (out) break;
        const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - began);
        log::log_event(log::LogLevel::kWarn, "seed_wait",
                       {{"seed", log::log_value(seed_id)}, {"seed_peer_addr", peer_text(*seed)},
                        {"waited_ms", std::to_string(waited.count())}});
    }
    transport.stop();
    if (!out) {
        return who + " at " + peer_text(*seed) + " did not dial " + peer_text(*self) + " within " +
               std::to_string(wait.count() / 1000) + " s: start it too (every other member of a new cluster waits " +
               "for it), with the same --peers";
    }
    log::log_event(log::LogLevel::kInfo, "seed_answered",
                   {{"seed", log::log_value(seed_id)}, {"cluster_id", log::log_value(out->cluster_id)},
                    {"token_floor", out->origin ? log::log_value(out->origin->token_floor) : std::string()}});
    return {};
}

}  // namespace pgfence::server
