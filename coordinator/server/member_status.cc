// /v1/status, /metrics and the MemberInfo this member tells its peers.
#include <algorithm>
#include <boost/json.hpp>

#include "log/log.h"
#include "member/addresses.h"
#include "net/host_port.h"
#include "server/member_impl.h"

namespace pgfence::server {

namespace json = boost::json;


net::MemberInfo Member::Impl::my_info() const {
    net::MemberInfo info;
    info.id = options.id;
    info.client_addr = options.client_addr;
    if (core) {
        info.role = static_cast<std::uint8_t>(core->raft().role());
        info.term = core->raft().term();
        info.leader = core->raft().leader();
        info.commit = core->raft().status().commit;
        info.applied = core->table().applied_index();
    }
    return info;
}

void Member::Impl::apply_configuration(const raft::Configuration& c) {
    if (announced_at_start) {
        const bool again = *announced_at_start == c;
        announced_at_start.reset();
        if (again) return;  // the core's first report of what start() announced
    }
    for (const raft::ConfigMember& m : c.members) {
        member::MemberAddresses a;
        if (m.context.empty() || !member::decode_addresses(m.context, a).empty()) continue;
        Addresses& known = book[m.id];
        if (!a.peer_addr.empty()) known.peer_addr = a.peer_addr;
        if (!a.client_addr.empty()) known.client_addr = a.client_addr;
    }
    std::string voters, learners;
    for (const raft::ConfigMember& m : c.members) {
        std::string& list = m.voter ? voters : learners;
        if (!list.empty()) list += ',';
        list += std::to_string(m.id);
    }
    log::log_event(log::LogLevel::kInfo, "configuration",
                   {{"index", log::log_value(core ? core->raft().configuration_index() : 0)},
                    {"voters", voters},
                    {"learners", learners}});
    if (transport) transport->set_peers(peers_to_dial(true));
}

// The configuration's members but this one (while joining: every member the
// join answer named), at their peer addresses.
std::vector<net::PeerAddress> Member::Impl::peers_to_dial(bool warn) const {
    std::vector<net::PeerAddress> out;
    auto add = [&](raft::NodeId id) {
        if (id == options.id) return;
        auto it = book.find(id);
        const std::string text = it == book.end() ? std::string() : it->second.peer_addr;
        const net::HostPort addr = net::parse_host_port(text);  // views `text`
        if (!addr.ok()) {
            if (!warn) return;
            log::log_event(log::LogLevel::kWarn, "peer_address_unknown",
                           {{"peer", log::log_value(id)},
                            {"reason", "its configuration entry has none: give it in --peers"}});
            return;
        }
        out.push_back(net::PeerAddress{id, std::string(addr.host), addr.port});
    };
    const raft::Configuration& config = core->raft().configuration();
    if (config.members.empty()) {
        for (const auto& [id, a] : book) add(id);
    } else {
        for (const raft::ConfigMember& m : config.members) add(m.id);
    }
    // A leader still tells a removed member of its removal (raft.h), or
    // answers its campaign with raft::Removed.
    if (core->is_leader()) {
        for (const raft::PeerStatus& p : core->raft().status().peers) {
            if (p.leaving && !config.contains(p.id)) add(p.id);
        }
        for (const auto& [id, until] : telling_removed) {
            if (!config.contains(id)) add(id);
        }
    }
    return out;
}

std::string Member::Impl::client_addr_of(raft::NodeId id, std::string_view in_config) const {
    if (id == options.id) return options.client_addr;
    if (auto it = infos.find(id); it != infos.end() && !it->second.client_addr.empty()) return it->second.client_addr;
    if (!in_config.empty()) return std::string(in_config);
    if (auto it = book.find(id); it != book.end()) return it->second.client_addr;
    return {};
}

void Member::Impl::on_member_info(const net::MemberInfo& info) {
    if (info.id == options.id || (!core->raft().configuration().contains(info.id) && book.count(info.id) == 0)) {
        log::log_event(log::LogLevel::kWarn, "member_info_unknown", {{"id", log::log_value(info.id)}});
        return;
    }
    infos[info.id] = info;
    info_heard_tick[info.id] = core->ticks();
}

// Four MemberInfo periods, and at least two election timeouts: a peer that
// missed that many is stopped, hung or cut off (1 s with the default timing).
std::uint64_t Member::Impl::reachable_ticks() const {
    return std::max<std::uint64_t>(4 * kInfoEveryTicks, 2 * static_cast<std::uint64_t>(options.election_ticks()));
}

bool Member::Impl::peer_reachable(raft::NodeId id) const {
    if (!transport->connected(id)) return false;
    auto heard = info_heard_tick.find(id);
    return heard != info_heard_tick.end() && core->ticks() - heard->second <= reachable_ticks();
}

// Members as seen by this member: the configuration in force (while joining:
// the members it knows of); itself exactly; peers as they last reported
// (MemberInfo), plus match index when this member is the leader.
std::string Member::Impl::status_json() const {
    const raft::Status st = core->raft().status();
    const lock::LockTable& table = core->table();
    const raft::Configuration& config = core->raft().configuration();
    std::vector<std::pair<raft::NodeId, bool>> listed;  // id, voter
    if (config.members.empty()) {
        for (const auto& [id, a] : book) listed.emplace_back(id, false);
    } else {
        for (const raft::ConfigMember& m : config.members) listed.emplace_back(m.id, m.voter);
    }
    json::array members;
    for (const auto& [id, voter] : listed) {
        auto known = book.find(id);
        json::object m{{"id", id},
                       {"voter", voter},
                       {"peer_addr", known == book.end() ? std::string() : known->second.peer_addr}};
        if (id == options.id) {
            m["client_addr"] = options.client_addr;
            m["role"] = raft::to_string(st.role);
            m["term"] = st.term;
            m["leader"] = st.leader;
            m["commit_index"] = st.commit;
            m["applied_index"] = table.applied_index();
            m["reachable"] = true;
        } else {
            auto it = infos.find(id);
            const bool seen = it != infos.end();
            m["client_addr"] = client_addr_of(id);
            m["role"] = seen ? raft::to_string(static_cast<raft::Role>(it->second.role)) : "unknown";
            m["term"] = seen ? it->second.term : 0;
            m["leader"] = seen ? it->second.leader : 0;
            m["commit_index"] = seen ? it->second.commit : 0;
            m["applied_index"] = seen ? it->second.applied : 0;
            m["reachable"] = peer_reachable(id);
        }
        for (const raft::PeerStatus& ps : st.peers) {
            if (ps.id != id) continue;
            m["match_index"] = ps.match;
            if (!ps.voter) m["caught_up"] = ps.caught_up;
        }
        if (st.role == raft::Role::kLeader && id == options.id) m["match_index"] = st.stable_index;
        // The URL clients use, with this cluster's scheme (members serve the same one).
        if (const auto& addr = m["client_addr"].as_string(); !addr.empty()) {
            m["client_url"] = (options.client_tls() ? "https://" : "http://") + std::string(addr);
        }
        members.push_back(std::move(m));
    }
    json::object o{{"id", options.id},
                   {"role", raft::to_string(st.role)},
                   {"voter", config.is_voter(options.id)},
                   {"term", st.term},
                   {"leader", st.leader},
                   {"commit_index", st.commit},
                   {"applied_index", table.applied_index()},
                   {"last_index", st.last_index},
                   {"snapshot_index", st.snapshot_index},
                   {"config_index", st.config_index},
                   {"cluster_id", std::to_string(options.cluster_id)},
                   {"token_floor", table.token_floor()},
                   {"last_token", table.last_token()},
                   {"locks", table.size()},
                   {"tls", json::object{{"client", options.client_tls()}, {"peer", options.peer_tls()},
                                        {"client_cert_auth", options.client_cert_auth}}},
                   {"auth_file_digest", security.auth_enabled() ? security.policy()->digest() : std::string()},
                   {"members", std::move(members)}};
    return json::serialize(o);
}

std::string Member::Impl::metrics_text() const {
    Gauges g;
    g.waiters = core->waiter_count();
    g.locks_held = core->table().size();
    g.term = core->raft().term();
    g.is_leader = core->is_leader();
    g.commit_index = core->raft().status().commit;
    g.applied_index = core->table().applied_index();
    g.last_token = core->table().last_token();
    g.token_floor = core->table().token_floor();
    g.token_history_tokens = core->token_history().size();
    g.token_history_bytes = core->token_history().bytes();
    g.token_history_dropped = core->token_history().dropped();
    g.leases_by_kid = &core->leases_by_kid();
    for (const raft::ConfigMember& m : core->raft().configuration().members) {
        if (m.id == options.id) continue;
        ++g.peers;
        if (peer_reachable(m.id)) ++g.peers_reachable;
    }
    const net::TransportStats ts = transport->stats();
    g.peer_frames_dropped = ts.dropped_queue_full + ts.dropped_unconnected;
    g.http_connections = http->connections();
    const net::HttpServer::ConnectionCounters& hc = http->connection_counters();
    g.http_shed = hc.shed;
    g.http_refused_per_address = hc.refused_per_address;
    g.http_refused_busy = hc.refused_busy;
    g.client_tls_failures = http->tls_handshake_failures();
    g.peer_tls_failures = ts.tls_refused;
    for (std::size_t r = 0; r < net::kShedReasons; ++r) g.peer_connections_shed[r] = ts.shed[r];
    if (proof_signer) {
        const ProofSigner::Counts n = proof_signer->counts();
        g.proofs_ready = n.ready;
        g.proofs_waited = n.waited;
        g.proofs_on_demand = n.on_demand;
    }
    std::string out = metrics.render(core->counters(), g);
    watchers->render_metrics(out);
    render_commit_phases(out, commit_phases);
    return out;
}

}  // namespace pgfence::server
