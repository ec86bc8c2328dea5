// Counters, gauges and histograms of one member, rendered in the Prometheus
// text format for GET /metrics.
//
// Threading: Metrics is owned by the loop thread, updated and rendered
// there only (no locks: the other threads' timings come back with their
// completions).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>

#include "member/counters.h"
#include "net/conn_ranks.h"
#include "net/incoming_slots.h"

namespace pgfence::server {

// A histogram's series in the Prometheus text format: cumulative
// NAME_bucket{LABEL,le="..."}, NAME_sum{LABEL} and NAME_count{LABEL} (`label`
// e.g. `phase="queue"`, or empty: none). Its HELP and TYPE lines are the
// caller's.
void histogram_series(std::string& out, const char* name, std::string_view label, std::span<const double> bounds,
                      std::span<const std::uint64_t> buckets, std::uint64_t count, double sum_seconds);
template <const auto& Bounds>
void histogram_series(std::string& out, const char* name, std::string_view label,
                      const member::BoundedHistogram<Bounds>& h) {
    histogram_series(out, name, label, Bounds, h.buckets(), h.count(), h.sum_seconds());
}

struct Gauges {  // sampled at render time
    std::uint64_t waiters = 0;
    std::uint64_t locks_held = 0;
    std::uint64_t term = 0;
    bool is_leader = false;
    std::uint64_t commit_index = 0;
    std::uint64_t applied_index = 0;
    std::uint64_t last_token = 0;   // the largest token granted (applied lock table)
    std::uint64_t token_floor = 0;  // the applied table's token floor
    // The token history (member/token_history.h): tokens kept, the bytes
    // charged to its bound, tokens dropped to stay within its bounds.
    std::uint64_t token_history_tokens = 0;
    std::uint64_t token_history_bytes = 0;
    std::uint64_t token_history_dropped = 0;
    std::uint64_t peers = 0;            // other members in the configuration in force
    std::uint64_t peers_reachable = 0;  // ... of them reachable (Member::Impl::peer_reachable)
    std::uint64_t peer_frames_dropped = 0;
    std::uint64_t http_connections = 0;
    // Client connections closed to make room, by the class of the one
    // closed (indexed by net::ConnClass), and refused at accept
    // (net::HttpServer::ConnectionCounters).
    std::array<std::uint64_t, net::kConnClasses> http_shed{};
    std::uint64_t http_refused_per_address = 0;
    std::uint64_t http_refused_busy = 0;
    std::uint64_t client_tls_failures = 0;  // TLS handshakes refused on the HTTP API
    std::uint64_t peer_tls_failures = 0;    // ... and on the peer port (or certificates not bound to the member)
    std::uint64_t peer_connections_shed[net::kShedReasons] = {};  // by net::ShedReason
    // Grant answers whose token proof was ready (signed while the grant
    // committed), waited for its batch's signing, or was signed after it
    // (server/proof_signer.h).
    std::uint64_t proofs_ready = 0;
    std::uint64_t proofs_waited = 0;
    std::uint64_t proofs_on_demand = 0;
    // The leader's held leases by the kid of the proof last handed out for
    // each (member/lease.h); null or empty on other members.
    const std::map<std::string, std::size_t, std::less<>>* leases_by_kid = nullptr;
};

// The shell's own metrics; the core's counters (member/counters.h) are
// rendered beside them.
struct Metrics {
    std::uint64_t bad_requests = 0;
    std::uint64_t unauthenticated = 0;  // answered 401
    std::uint64_t forbidden = 0;        // answered 403
    // Refused by the gate's screen (routes.h, step 3), by its error.
    std::uint64_t refused_origin = 0;      // 403 origin_not_allowed
    std::uint64_t refused_media_type = 0;  // 415 unsupported_media_type
    std::uint64_t refused_admin = 0;       // 403 admin_disabled
    std::uint64_t security_reloads_failed = 0;
    member::Histogram fsync;
    // Writing one snapshot file (encode, write, fdatasync, rename; on the
    // writer thread), and the newest such write's duration.
    member::Histogram snapshot_save;
    double snapshot_save_last_seconds = 0;

    std::string render(const member::Counters& c, const Gauges& g) const;
};

}  // namespace pgfence::server
