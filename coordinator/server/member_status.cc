// /v1/status, /metrics and the MemberInfo this member tells its peers.
#include <boost/json.hpp>

#include "log/log.h"
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

void Member::Impl::on_member_info(const net::MemberInfo& info) {
    bool known = false;
    for (const PeerSpec& p : options.peers) known = known || (p.id == info.id && p.id != options.id);
    if (!known) {
        log::log_event(log::LogLevel::kWarn, "member_info_unknown", {{"id", log::log_value(info.id)}});
        return;
    }
    infos[info.id] = info;
}

// Members as seen by this member: itself exactly; peers as they last reported
// (MemberInfo), plus match index when this member is the leader.
std::string Member::Impl::status_json() const {
    const raft::Status st = core->raft().status();
    const lock::LockTable& table = core->table();
    json::array members;
    for (const PeerSpec& p : options.peers) {
        json::object m{{"id", p.id}, {"peer_addr", p.host + ":" + std::to_string(p.port)}};
        if (p.id == options.id) {
            m["client_addr"] = options.client_addr;
            m["role"] = raft::to_string(st.role);
            m["term"] = st.term;
            m["leader"] = st.leader;
            m["commit_index"] = st.commit;
            m["applied_index"] = table.applied_index();
            m["reachable"] = true;
        } else {
            auto it = infos.find(p.id);
            const bool seen = it != infos.end();
            m["client_addr"] = seen ? it->second.client_addr : "";
            m["role"] = seen ? raft::to_string(static_cast<raft::Role>(it->second.role)) : "unknown";
            m["term"] = seen ? it->second.term : 0;
            m["leader"] = seen ? it->second.leader : 0;
            m["commit_index"] = seen ? it->second.commit : 0;
            m["applied_index"] = seen ? it->second.applied : 0;
            m["reachable"] = transport->connected(p.id);
        }
        for (const raft::PeerStatus& ps : st.peers) {
            if (ps.id == p.id) m["match_index"] = ps.match;
        }
        if (st.role == raft::Role::kLeader && p.id == options.id) m["match_index"] = st.stable_index;
        // The URL clients use, with this cluster's scheme (members serve the same one).
        if (const auto& addr = m["client_addr"].as_string(); !addr.empty()) {
            m["client_url"] = (options.client_tls() ? "https://" : "http://") + std::string(addr);
        }
        members.push_back(std::move(m));
    }
    json::object o{{"id", options.id},
                   {"role", raft::to_string(st.role)},
                   {"term", st.term},
                   {"leader", st.leader},
                   {"commit_index", st.commit},
                   {"applied_index", table.applied_index()},
                   {"last_index", st.last_index},
                   {"snapshot_index", st.snapshot_index},
                   {"cluster_id", std::to_string(options.cluster_id)},
                   {"token_floor", table.token_floor()},
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
    const net::TransportStats ts = transport->stats();
    g.peer_frames_dropped = ts.dropped_queue_full + ts.dropped_unconnected;
    g.http_connections = http->connections();
    g.client_tls_failures = http->tls_handshake_failures();
    g.peer_tls_failures = ts.tls_refused;
    return metrics.render(core->counters(), g);
}

}  // namespace pgfence::server
