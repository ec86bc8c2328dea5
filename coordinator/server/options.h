// Command-line flags of fence-coordinator, their defaults and their checks.
//
// Threading: Options is parsed on the main thread before the member starts
// and read-only afterwards (Member::Impl keeps its copy on the loop thread).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "member/core.h"
#include "member/lease.h"
#include "member/token_history.h"

namespace pgfence::net {
struct TransportOptions;
}  // namespace pgfence::net

namespace pgfence::server {

struct PeerSpec {
    std::uint64_t id = 0;
    std::string host;
    std::uint16_t port = 0;
};

using member::kDefaultMaxClockDriftPpm;  // rho = 5% (member/lease.h)
using member::kMaxClockDriftPpmLimit;    // the largest --max-clock-drift-ppm
using member::kDefaultMinLeaseMs;        // --min-lease, --max-lease, --max-wait (member/lease.h)
using member::kDefaultMaxLeaseMs;
using member::kDefaultMaxWaitMs;

// Tokens a restored cluster skips past the backup's last token: more than
// the log entries a busy cluster writes in months (20,000 cycles/s is about
// 5 x 10^9 entries a day), and 10^-7 of the token space.
constexpr std::uint64_t kDefaultRestoreTokenHeadroom = 1'000'000'000'000ull;

inline constexpr std::uint64_t kMaxConnectionsLimit = 1'000'000;  // the largest --max-connections

struct Options {
    std::uint64_t id = 0;
    // Bootstrap of a new cluster: every member, including this one. Later:
    // the peer addresses of members whose configuration entry has none (a
    // cluster bootstrapped by a release that did not record them).
    std::vector<PeerSpec> peers;
    // Bootstrap only: the cluster ID is derived from peers and it; empty
    // (and no cluster_id): random, the seed's (server/bootstrap.h).
    std::string initial_cluster_token;
    // A member added to a running cluster: client endpoints (URLs or
    // HOST:PORT, comma-separated) to ask for its identity and addresses.
    std::string join;
    std::string client_addr;      // host:port of this member's HTTP API (with --join: may be left to the cluster)
    // Bootstrap of a new cluster from a backup file (storage/backup.h), or
    // (force_new_cluster) of a one-member cluster from this member's own data
    // directory after the loss of quorum. Either way the new cluster is a
    // new generation (server/bootstrap.h): a random ID, tokens above the
    // state's last token plus restore_token_headroom plus the time.
    std::string restore_file;
    bool force_new_cluster = false;
    std::uint64_t restore_token_headroom = kDefaultRestoreTokenHeadroom;
    std::string data_dir;
    int heartbeat_ms = 50;
    int election_ms = 300;
    std::uint64_t min_lease_ms = kDefaultMinLeaseMs;
    std::uint64_t max_lease_ms = kDefaultMaxLeaseMs;  // at most lock::kMaxLeaseMs (24h)
    std::uint64_t max_wait_ms = kDefaultMaxWaitMs;
    std::uint64_t token_floor = 0;
    std::uint64_t cluster_id = 0;  // bootstrap only; 0: derived (with a token) or random
    std::uint64_t snapshot_every = 10000;
    std::uint64_t snapshot_keep = 1000;  // log entries kept behind a snapshot for slow followers
    std::uint64_t snapshot_log_pct = 100;  // member::Config::snapshot_log_pct
    std::uint64_t snapshot_chunk_bytes = 1u << 20;  // InstallSnapshot data per message (raft.h)
    std::uint64_t max_expire_batch = member::kDefaultMaxExpireBatch;  // Expires per log entry
    std::uint64_t expiry_wave = member::kDefaultExpiryWave;  // member::Config::expiry_wave
    bool owner_binding = true;  // --owner-binding on|off (member::Config::owner_binding)
    bool lease_checkpoints = true;  // --lease-checkpoints on|off (member::Config::lease_checkpoints)
    bool early_appends = false;  // --early-appends on|off (member::Config::early_appends)
    std::uint64_t max_checkpoints_per_tick = 1024;  // member::Config::max_checkpoints_per_tick
    std::uint64_t max_connections = 1024;  // open HTTP client connections (at the cap, the lowest ranked gives way)
    // Open HTTP client connections from one source address (more are closed
    // at accept): half the default cap, so that no one address can hold the
    // client port, and room for a NAT or a pooler in front of many clients.
    std::uint64_t max_connections_per_address = 512;
    // GET /v1/watch (server/watchers.h): open watches at most, the bytes one
    // watch may have waiting unwritten, and the history of events kept for
    // watches that resume (member/watch_history.h).
    std::uint64_t max_watchers = 512;
    std::uint64_t watch_buffer_bytes = 256u << 10;
    std::uint64_t watch_history_events = 100000;
    std::uint64_t watch_history_bytes = 64u << 20;
    // GET /v1/tokens/{token} and /v1/keys/{key}/history: the tokens kept
    // (member/token_history.h), at most so many and so many bytes.
    std::uint64_t token_history_events = member::kDefaultTokenHistoryTokens;
    std::uint64_t token_history_bytes = member::kDefaultTokenHistoryBytes;
    bool log_wall_time = true;  // --log-wall-time on|off (member::Config::log_wall_time)
    // rho: the largest clock-rate error of any member or client against real
    // time, in parts per million (0..kMaxClockDriftPpmLimit). The leader
    // proposes Expire after lease_ms * (1 + rho) (member/lease.h).
    std::uint64_t max_clock_drift_ppm = kDefaultMaxClockDriftPpm;
    std::string log_level = "info";
    // TLS on the HTTP API (--cert-file, --key-file; clients verified against
    // --trusted-ca-file when --client-cert-auth) and on the peer port (always
    // mutual: all three --peer-* files). Empty: plaintext.
    std::string cert_file;
    std::string key_file;
    std::string trusted_ca_file;
    bool client_cert_auth = false;
    std::string peer_cert_file;
    std::string peer_key_file;
    std::string peer_trusted_ca_file;
    // Incoming peer connections (net/incoming_slots.h): places for those not
    // yet identified, from one source address among them, how long one may
    // stay so, places per member, and for members not in the configuration.
    std::uint64_t peer_max_pending = 64;
    std::uint64_t peer_max_pending_per_address = 16;
    std::uint64_t peer_pending_timeout_ms = 1000;
    std::uint64_t peer_max_connections_per_member = 4;
    std::uint64_t peer_max_unknown_connections = 16;
    std::string auth_file;  // users, roles and grants (auth/policy.h); empty: no authorization
    // Admin routes (Need::kAdmin: membership, backups, status, metrics,
    // version) answer without authentication only with this switch
    // (--admin-without-auth); with auth configured it changes nothing.
    bool admin_without_auth = false;
    // Origins (scheme://host[:port], as browsers send them) whose requests
    // are served; a request with any other Origin header is refused
    // (--allowed-origin, repeatable or comma-separated; empty: none).
    std::vector<std::string> allowed_origins;
    // Ed25519 private key (PEM) that signs a proof into every grant
    // (net/token_signer.h); the same file on every member. Empty: no proofs.
    std::string token_signing_key_file;
    bool help = false;
    bool version = false;  // --version: print it and exit

    bool client_tls() const { return !cert_file.empty(); }
    // Callers prove who they are: a user of --auth-file, or a client
    // certificate the CA signed (--client-cert-auth).
    bool auth_configured() const { return !auth_file.empty() || client_cert_auth; }
    bool peer_tls() const { return !peer_cert_file.empty(); }

    int election_ticks() const;
    // The largest election timeout the core can pick, in ms (2 x election_ticks ticks).
    std::uint64_t max_election_timeout_ms() const;
};

inline constexpr std::size_t kMaxAllowedOrigins = 64;  // --allowed-origin values at most

// An --allowed-origin value: "" when it is an origin as a browser serializes
// it (http or https, "://", a host of lower-case letters, digits, '-', '.',
// or a bracketed IPv6 address, an optional ":PORT", nothing after), else why not.
std::string check_origin(const std::string& origin);

// Parses argv; on error returns a message naming the flag and value. A flag
// takes its value as `--name value` or `--name=value`; a flag without a value
// (--client-cert-auth) is given alone, or as `--name=true|false`;
// --help and --version are given alone.
std::string parse_options(int argc, char** argv, Options& out);
// Cross-field checks (peer list contains --id, lease bounds, ...).
std::string validate_options(Options& opts);
std::string usage();
// Copies the --peer-max-* and --peer-pending-timeout-ms flags into `t`.
void set_incoming_limits(const Options& o, net::TransportOptions& t);

// FNV-1a 64 over the sorted "id=host:port" list, then the token when there
// is one: every member given the same --peers and --initial-cluster-token
// derives the same cluster ID; a different list or token gives another.
// Without a token it is the ID an earlier release derived from that list.
std::uint64_t derive_cluster_id(const std::vector<PeerSpec>& peers, const std::string& token = {});

}  // namespace pgfence::server
