#include "server/metrics.h"

#include <cstdio>

#include "lock/commands.h"
#include "pgfence_version.h"

namespace pgfence::server {

namespace {
// Prometheus histogram: HELP, TYPE, then its series.
void histogram(std::string& out, const member::Histogram& h, const char* name, const char* help) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " histogram\n";
    histogram_series(out, name, {}, h);
}

void metric(std::string& out, const char* name, const char* type, const char* help, std::uint64_t v) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " +
           std::to_string(v) + "\n";
}
}  // namespace

void histogram_series(std::string& out, const char* name, std::string_view label, std::span<const double> bounds,
                      std::span<const std::uint64_t> buckets, std::uint64_t count, double sum_seconds) {
    const std::string lb = label.empty() ? std::string() : std::string(label) + ",";  // before le
    const std::string only = label.empty() ? std::string() : "{" + std::string(label) + "}";
    std::uint64_t cumulative = 0;
    char buf[64];
    for (std::size_t i = 0; i < bounds.size(); ++i) {
        cumulative += buckets[i];
        std::snprintf(buf, sizeof buf, "%g\"} %llu\n", bounds[i], static_cast<unsigned long long>(cumulative));
        out += std::string(name) + "_bucket{" + lb + "le=\"" + buf;
    }
    cumulative += buckets[bounds.size()];
    out += std::string(name) + "_bucket{" + lb + "le=\"+Inf\"} " + std::to_string(cumulative) + "\n";
    std::snprintf(buf, sizeof buf, " %.9f\n", sum_seconds);
    out += std::string(name) + "_sum" + only + buf;
    out += std::string(name) + "_count" + only + " " + std::to_string(count) + "\n";
}

std::string Metrics::render(const member::Counters& c, const Gauges& g) const {
    std::string out;
    out.reserve(6000);
    metric(out, "pgfence_grants_total", "counter", "Grants applied on this member.", c.grants);
    metric(out, "pgfence_grants_many_total", "counter",
           "Grants of a set of keys under one lease (of pgfence_grants_total) applied on this member.", c.grants_many);
    metric(out, "pgfence_grant_conflicts_total", "counter", "Grants rejected because the key was held (or, from a bad entry, invalid).", c.grant_conflicts);
    metric(out, "pgfence_grants_table_full_total", "counter",
           "Grants refused because the lock table was at its size limit.", c.grants_table_full);
    metric(out, "pgfence_releases_total", "counter", "Releases applied that removed a lock.", c.releases);
    metric(out, "pgfence_release_not_held_total", "counter", "Releases applied for a key not held with that token.", c.release_not_held);
    out += "# HELP pgfence_expiries_total Expire commands applied, by whether the lock still existed.\n"
           "# TYPE pgfence_expiries_total counter\n";
    out += "pgfence_expiries_total{existed=\"true\"} " + std::to_string(c.expiries_existed) + "\n";
    out += "pgfence_expiries_total{existed=\"false\"} " + std::to_string(c.expiries_missing) + "\n";
    metric(out, "pgfence_expire_batches_total", "counter",
           "ExpireMany entries proposed by this member as leader (leases that ran out together).", c.expire_batches);
    metric(out, "pgfence_checkpoints_total", "counter",
           "Lease checkpoints applied by this member: locks whose remaining time a Checkpoint entry set or cleared.",
           c.checkpoints);
    metric(out, "pgfence_checkpoint_clears_total", "counter",
           "Clearing checkpoints proposed by this member as leader before answering a keepalive or re-grant of a "
           "checkpointed lease.",
           c.checkpoint_clears);
    metric(out, "pgfence_keepalives_total", "counter", "Successful keepalives answered by this member as leader.", c.keepalives);
    metric(out, "pgfence_keepalive_failures_total", "counter", "Keepalives refused (not_held).", c.keepalive_failures);
    metric(out, "pgfence_phantom_releases_total", "counter", "Releases proposed because the client was gone when its grant applied.", c.phantom_releases);
    metric(out, "pgfence_waiter_timeouts_total", "counter", "Waiting acquires that timed out.", c.waiter_timeouts);
    metric(out, "pgfence_bad_requests_total", "counter", "Requests answered 400.", bad_requests);
    metric(out, "pgfence_snapshots_total", "counter", "Lock-table snapshots taken by this member.", c.snapshots);
    metric(out, "pgfence_leader_changes_total", "counter", "Times the known leader changed.", c.leader_changes);
    metric(out, "pgfence_waiters", "gauge", "Acquires waiting in per-key FIFO queues.", g.waiters);
    metric(out, "pgfence_locks_held", "gauge", "Locks in the applied lock table.", g.locks_held);
    // Kids are 16 hex digits, "none" or "unknown": nothing to escape in a label.
    out += "# HELP pgfence_leases_by_kid Leases this leader holds, by the ID of the key that signed the token "
           "proof last handed out for each (none: no proof; unknown: granted under a former leader).\n"
           "# TYPE pgfence_leases_by_kid gauge\n";
    if (g.leases_by_kid != nullptr) {
        for (const auto& [kid, n] : *g.leases_by_kid) {
            out += "pgfence_leases_by_kid{kid=\"" + kid + "\"} " + std::to_string(n) + "\n";
        }
    }
    metric(out, "pgfence_term", "gauge", "Current Raft term.", g.term);
    metric(out, "pgfence_is_leader", "gauge", "1 if this member is the leader.", g.is_leader ? 1 : 0);
    metric(out, "pgfence_commit_index", "gauge", "Raft commit index.", g.commit_index);
    metric(out, "pgfence_applied_index", "gauge", "Index of the last entry applied to the lock table.", g.applied_index);
    metric(out, "pgfence_last_token", "gauge", "The largest fencing token granted (applied on this member).", g.last_token);
    metric(out, "pgfence_token_floor", "gauge", "Token floor of the applied lock table (every token granted is above it).", g.token_floor);
    metric(out, "pgfence_token_history_tokens", "gauge",
           "Tokens kept in this member's token history (GET /v1/tokens/{token}).", g.token_history_tokens);
    metric(out, "pgfence_token_history_bytes", "gauge",
           "Bytes charged to the token history's bound (--token-history-bytes).", g.token_history_bytes);
    metric(out, "pgfence_token_history_dropped_total", "counter",
           "Tokens dropped from the token history, oldest first, to stay within its bounds.", g.token_history_dropped);
    metric(out, "pgfence_token_max", "gauge",
           "The largest token the cluster can grant (bigint's largest value); grants past it are refused.", lock::kMaxToken);
    metric(out, "pgfence_peers", "gauge", "Other members in the configuration in force.", g.peers);
    metric(out, "pgfence_peers_reachable", "gauge", "Other members reachable: the connection to them is up and their member reports arrive.", g.peers_reachable);
    out += "# HELP pgfence_build_info The release this member runs (value 1).\n# TYPE pgfence_build_info gauge\n"
           "pgfence_build_info{version=\"" PGFENCE_VERSION "\"} 1\n";
    metric(out, "pgfence_peer_frames_dropped_total", "counter", "Raft messages dropped by the transport (queue full or peer unreachable).", g.peer_frames_dropped);
    metric(out, "pgfence_http_connections", "gauge", "Open HTTP connections.", g.http_connections);
    out += "# HELP pgfence_http_connections_shed_total HTTP connections closed to make room for a new one at "
           "--max-connections, by the class of the one closed (anonymous < authenticated < lease).\n"
           "# TYPE pgfence_http_connections_shed_total counter\n";
    for (std::size_t i = 0; i < net::kConnClasses; ++i) {
        out += "pgfence_http_connections_shed_total{class=\"";
        out += net::conn_class_name(static_cast<net::ConnClass>(i));
        out += "\"} " + std::to_string(g.http_shed[i]) + "\n";
    }
    out += "# HELP pgfence_http_connections_refused_total HTTP connections closed at accept: their address had "
           "--max-connections-per-address (per_address), or the member had --max-connections, every one with "
           "a request in progress (busy).\n"
           "# TYPE pgfence_http_connections_refused_total counter\n";
    out += "pgfence_http_connections_refused_total{reason=\"per_address\"} " +
           std::to_string(g.http_refused_per_address) + "\n";
    out += "pgfence_http_connections_refused_total{reason=\"busy\"} " + std::to_string(g.http_refused_busy) + "\n";
    out += "# HELP pgfence_auth_denied_total Requests refused by authentication (401) or authorization (403).\n"
           "# TYPE pgfence_auth_denied_total counter\n";
    out += "pgfence_auth_denied_total{status=\"401\"} " + std::to_string(unauthenticated) + "\n";
    out += "pgfence_auth_denied_total{status=\"403\"} " + std::to_string(forbidden) + "\n";
    out += "# HELP pgfence_http_refused_total Requests refused before authorization: from a web page, not JSON, "
           "or to an admin endpoint that is off.\n"
           "# TYPE pgfence_http_refused_total counter\n";
    out += "pgfence_http_refused_total{error=\"origin_not_allowed\"} " + std::to_string(refused_origin) + "\n";
    out += "pgfence_http_refused_total{error=\"unsupported_media_type\"} " + std::to_string(refused_media_type) + "\n";
    out += "pgfence_http_refused_total{error=\"admin_disabled\"} " + std::to_string(refused_admin) + "\n";
    out += "# HELP pgfence_tls_handshake_failures_total TLS connections refused, by port.\n"
           "# TYPE pgfence_tls_handshake_failures_total counter\n";
    out += "pgfence_tls_handshake_failures_total{port=\"client\"} " + std::to_string(g.client_tls_failures) + "\n";
    out += "pgfence_tls_handshake_failures_total{port=\"peer\"} " + std::to_string(g.peer_tls_failures) + "\n";
    out += "# HELP pgfence_peer_connections_shed_total Incoming peer connections closed to keep their bounds, by "
           "reason: pending_full, address_full (a newer unidentified one needed the place), pending_timeout (not "
           "identified in time), member_replaced (a newer one of the same member), unknown_full.\n"
           "# TYPE pgfence_peer_connections_shed_total counter\n";
    for (std::size_t r = 0; r < net::kShedReasons; ++r) {
        out += std::string("pgfence_peer_connections_shed_total{reason=\"") +
               net::shed_reason_name(static_cast<net::ShedReason>(r)) + "\"} " +
               std::to_string(g.peer_connections_shed[r]) + "\n";
    }
    metric(out, "pgfence_security_reloads_failed_total", "counter", "SIGHUP reloads of a certificate, key, auth file or token signing key that failed (the old one stays).", security_reloads_failed);
    out += "# HELP pgfence_token_proofs_total Token proofs handed to grant answers (--token-signing-key-file), by when they were signed: while the grant committed (ready, or waited for), or after (an answer whose client left is counted too).\n"
           "# TYPE pgfence_token_proofs_total counter\n";
    out += "pgfence_token_proofs_total{signed=\"ahead\"} " + std::to_string(g.proofs_ready) + "\n";
    out += "pgfence_token_proofs_total{signed=\"ahead_waited\"} " + std::to_string(g.proofs_waited) + "\n";
    out += "pgfence_token_proofs_total{signed=\"on_demand\"} " + std::to_string(g.proofs_on_demand) + "\n";
    histogram(out, fsync, "pgfence_fsync_seconds", "Duration of one write batch (one fdatasync).");
    histogram(out, snapshot_save, "pgfence_snapshot_save_seconds",
              "Writing one snapshot file: encode, write, fdatasync, rename (writer thread).");
    out += "# HELP pgfence_snapshot_save_last_seconds The newest snapshot file's write, as in pgfence_snapshot_save_seconds.\n"
           "# TYPE pgfence_snapshot_save_last_seconds gauge\n";
    out += "pgfence_snapshot_save_last_seconds " + std::to_string(snapshot_save_last_seconds) + "\n";
    histogram(out, c.proposal_commit, "pgfence_proposal_commit_seconds", "From propose() to the entry being applied on this leader.");
    return out;
}

}  // namespace pgfence::server
