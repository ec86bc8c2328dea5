#include "server/options.h"

#include <algorithm>
#include <charconv>
#include <set>

#include "lock/commands.h"
#include "member/addresses.h"
#include "member/core.h"
#include "net/host_port.h"
#include "net/peer_transport.h"

namespace pgfence::server {

namespace {

bool parse_u64(const std::string& text, std::uint64_t& out) {
    if (text.empty()) return false;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    return ec == std::errc() && p == text.data() + text.size();
}

// Sets p.host and p.port from "HOST:PORT" (net/host_port.h); false when malformed.
bool parse_address(std::string_view text, PeerSpec& p) {
    const net::HostPort addr = net::parse_host_port(text);
    if (!addr.ok()) return false;
    p.host = addr.host;
    p.port = addr.port;
    return true;
}

std::string parse_peers(const std::string& text, std::vector<PeerSpec>& out) {
    std::size_t start = 0;
    while (start <= text.size()) {
        const std::size_t comma = text.find(',', start);
        const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        const std::size_t eq = item.find('=');
        PeerSpec p;
        if (eq == std::string::npos || !parse_u64(item.substr(0, eq), p.id) || p.id == 0 ||
            !parse_address(item.substr(eq + 1), p)) {
            return "--peers: '" + item + "' is not ID=HOST:PORT with ID >= 1";
        }
        out.push_back(p);
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return {};
}

// One --allowed-origin value: one origin or several, comma-separated.
std::string add_origins(const std::string& value, std::vector<std::string>& out) {
    std::size_t start = 0;
    while (true) {
        const std::size_t comma = value.find(',', start);
        const std::string item = value.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (auto err = check_origin(item); !err.empty()) return "--allowed-origin: '" + item + "' " + err;
        if (std::find(out.begin(), out.end(), item) == out.end()) out.push_back(item);
        if (out.size() > kMaxAllowedOrigins) {
            return "--allowed-origin: more than " + std::to_string(kMaxAllowedOrigins) + " origins";
        }
        if (comma == std::string::npos) return {};
        start = comma + 1;
    }
}

std::string set_flag(Options& o, const std::string& name, const std::string& value) {
    std::uint64_t n = 0;
    auto number = [&](std::uint64_t& dst) -> std::string {
        if (!parse_u64(value, n)) return "--" + name + ": '" + value + "' is not a non-negative integer";
        dst = n;
        return {};
    };
    auto on_off = [&](bool& dst) -> std::string {
        if (value != "on" && value != "off") return "--" + name + ": '" + value + "' must be on or off";
        dst = value == "on";
        return {};
    };
    auto bounded = [&](std::uint64_t& dst, std::uint64_t lo, std::uint64_t hi) -> std::string {
        if (!parse_u64(value, n) || n < lo || n > hi) {
            return "--" + name + ": '" + value + "' must be " + std::to_string(lo) + ".." +
                   std::to_string(hi);
        }
        dst = n;
        return {};
    };
    auto small = [&](int& dst) -> std::string {  // a period in ms, 1..60000
        std::uint64_t ms = 0;
        std::string err = bounded(ms, 1, 60000);
        if (err.empty()) dst = static_cast<int>(ms);
        return err;
    };
    if (name == "id") return number(o.id);
    if (name == "peers") return parse_peers(value, o.peers);
    if (name == "initial-cluster-token") {
        if (value.empty() || value.size() > 256) return "--" + name + ": must be 1..256 bytes";
        o.initial_cluster_token = value;
        return {};
    }
    if (name == "join") {
        if (value.empty()) return "--join needs client endpoints of the running cluster (HOST:PORT or URLs, comma-separated)";
        o.join = value;
        return {};
    }
    if (name == "client-addr") { o.client_addr = value; return {}; }
    if (name == "restore") {
        if (value.empty()) return "--restore needs a backup file (fencectl snapshot save FILE)";
        o.restore_file = value;
        return {};
    }
    if (name == "restore-token-headroom")
        return bounded(o.restore_token_headroom, 1, lock::kMaxToken / 2);
    if (name == "data-dir") { o.data_dir = value; return {}; }
    if (name == "heartbeat-ms") return small(o.heartbeat_ms);
    if (name == "election-ms") return small(o.election_ms);
    if (name == "min-lease") return number(o.min_lease_ms);
    if (name == "max-lease") return number(o.max_lease_ms);
    if (name == "max-wait") return number(o.max_wait_ms);
    if (name == "token-floor") return number(o.token_floor);
    if (name == "cluster-id") return number(o.cluster_id);
    if (name == "snapshot-every") return number(o.snapshot_every);
    if (name == "snapshot-keep") return number(o.snapshot_keep);
    if (name == "snapshot-log-percent") return number(o.snapshot_log_pct);
    if (name == "max-expire-batch") return bounded(o.max_expire_batch, 1, lock::kMaxExpireMany);
    if (name == "expiry-wave") return bounded(o.expiry_wave, 1, member::kMaxExpiryWave);
    if (name == "lease-checkpoints") return on_off(o.lease_checkpoints);
    if (name == "early-appends") return on_off(o.early_appends);
    if (name == "max-checkpoints-per-tick")
        return bounded(o.max_checkpoints_per_tick, 1, lock::kMaxCheckpoints);
    if (name == "log-wall-time") return on_off(o.log_wall_time);
    if (name == "owner-binding") return on_off(o.owner_binding);
    if (name == "max-connections") return bounded(o.max_connections, 16, kMaxConnectionsLimit);
    if (name == "max-connections-per-address")
        return bounded(o.max_connections_per_address, 1, kMaxConnectionsLimit);
    if (name == "max-watchers") return bounded(o.max_watchers, 0, kMaxConnectionsLimit);
    if (name == "watch-buffer-bytes") return bounded(o.watch_buffer_bytes, 4096, 1u << 30);
    if (name == "watch-history-events") return bounded(o.watch_history_events, 1, 100'000'000);
    if (name == "watch-history-bytes")
        return bounded(o.watch_history_bytes, 4096, std::uint64_t{64} << 30);
    if (name == "token-history-events") return bounded(o.token_history_events, 1, 100'000'000);
    if (name == "token-history-bytes")
        return bounded(o.token_history_bytes, 4096, std::uint64_t{64} << 30);
    if (name == "snapshot-chunk-bytes") return bounded(o.snapshot_chunk_bytes, 1024, 16u << 20);
    if (name == "max-clock-drift-ppm") {
        if (!parse_u64(value, n) || n > kMaxClockDriftPpmLimit) {
            return "--" + name + ": '" + value + "' must be 0.." + std::to_string(kMaxClockDriftPpmLimit) +
                   " (parts per million of clock rate; 50000 = 5%)";
        }
        o.max_clock_drift_ppm = n;
        return {};
    }
    if (name == "log-level") { o.log_level = value; return {}; }
    if (name == "cert-file") { o.cert_file = value; return {}; }
    if (name == "key-file") { o.key_file = value; return {}; }
    if (name == "trusted-ca-file") { o.trusted_ca_file = value; return {}; }
    if (name == "peer-cert-file") { o.peer_cert_file = value; return {}; }
    if (name == "peer-key-file") { o.peer_key_file = value; return {}; }
    if (name == "peer-trusted-ca-file") { o.peer_trusted_ca_file = value; return {}; }
    if (name == "peer-max-pending") return bounded(o.peer_max_pending, 1, 65536);
    if (name == "peer-max-pending-per-address")
        return bounded(o.peer_max_pending_per_address, 1, 65536);
    if (name == "peer-pending-timeout-ms") return bounded(o.peer_pending_timeout_ms, 50, 60000);
    if (name == "peer-max-connections-per-member")
        return bounded(o.peer_max_connections_per_member, 1, 64);
    if (name == "peer-max-unknown-connections")
        return bounded(o.peer_max_unknown_connections, 1, 65536);
    if (name == "auth-file") { o.auth_file = value; return {}; }
    if (name == "token-signing-key-file") { o.token_signing_key_file = value; return {}; }
    if (name == "allowed-origin") return add_origins(value, o.allowed_origins);
    return "unknown flag --" + name + " (see --help)";
}

// Flags without a value; the bool each one sets.
bool* switch_flag(Options& o, const std::string& name) {
    if (name == "client-cert-auth") return &o.client_cert_auth;
    if (name == "force-new-cluster") return &o.force_new_cluster;
    if (name == "admin-without-auth") return &o.admin_without_auth;
    return nullptr;
}

}  // namespace

int Options::election_ticks() const { return std::max(2, election_ms / heartbeat_ms); }

std::uint64_t Options::max_election_timeout_ms() const {
    return 2ull * static_cast<std::uint64_t>(election_ticks()) * static_cast<std::uint64_t>(heartbeat_ms);
}

std::string parse_options(int argc, char** argv, Options& out) {
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        if (arg == "--help" || arg == "-h") {
            out.help = true;
            return {};
        }
        if (arg == "--version") {
            out.version = true;
            return {};
        }
        if (arg.rfind("--", 0) != 0) return "unexpected argument '" + arg + "' (see --help)";
        std::string name = arg.substr(2), value;
        const std::size_t eq = name.find('=');
        if (eq != std::string::npos) {
            value = name.substr(eq + 1);
            name = name.substr(0, eq);
        }
        if (bool* on = switch_flag(out, name)) {
            if (eq == std::string::npos || value == "true") {
                *on = true;
            } else if (value == "false") {
                *on = false;
            } else {
                return "flag --" + name + " takes no value (or =true / =false), got '" + value + "'";
            }
            continue;
        }
        if (eq == std::string::npos) {
            if (i + 1 >= argc) return "flag --" + name + " needs a value";
            value = argv[++i];
        }
        if (auto err = set_flag(out, name, value); !err.empty()) return err;
    }
    return {};
}

std::string validate_options(Options& o) {
    if (o.id == 0) return "--id is required (this member's ID >= 1)";
    if (!o.peers.empty() && !o.join.empty()) {
        return "--peers and --join exclude each other: --peers bootstraps a new cluster, --join adds this member "
               "to a running one";
    }
    if (!o.restore_file.empty() && (o.force_new_cluster || !o.join.empty())) {
        return std::string("--restore bootstraps a new cluster from a backup: not with ") +
               (o.force_new_cluster ? "--force-new-cluster" : "--join");
    }
    if (!o.restore_file.empty() && o.peers.empty()) {
        return "--restore needs --peers: the members of the new cluster (every one restores the same file)";
    }
    if (o.force_new_cluster && !o.join.empty()) return "--force-new-cluster and --join exclude each other";
    std::set<std::uint64_t> ids;
    bool self = false;
    for (const PeerSpec& p : o.peers) {
        if (!ids.insert(p.id).second) return "--peers names member " + std::to_string(p.id) + " twice";
        if (p.id == o.id) self = true;
    }
    if (!o.peers.empty() && !self) return "--peers does not contain this member's --id " + std::to_string(o.id);
    if (o.client_addr.empty() && o.join.empty()) return "--client-addr is required (HOST:PORT for the HTTP API)";
    if (o.client_addr.size() > member::kMaxAddressBytes) {
        return "--client-addr is " + std::to_string(o.client_addr.size()) + " bytes, over the limit of " +
               std::to_string(member::kMaxAddressBytes) + " (a DNS name of 253, ':' and a port)";
    }
    if (!o.client_addr.empty() && !net::parse_host_port(o.client_addr).ok()) {
        return "--client-addr '" + o.client_addr + "' is not HOST:PORT";
    }
    if (o.data_dir.empty()) return "--data-dir is required";
    if (o.heartbeat_ms * 2 > o.election_ms) {
        return "--election-ms " + std::to_string(o.election_ms) + " must be at least twice --heartbeat-ms " +
               std::to_string(o.heartbeat_ms);
    }
    const std::uint64_t floor_ms = (3 * o.max_election_timeout_ms() + 1) / 2;
    if (o.min_lease_ms < floor_ms) {
        return "--min-lease " + std::to_string(o.min_lease_ms) + " ms is below 1.5 x the maximum election timeout (" +
               std::to_string(o.max_election_timeout_ms()) + " ms = 2 x --election-ms rounded to heartbeats); use --min-lease >= " +
               std::to_string(floor_ms) + " or a smaller --election-ms";
    }
    if (o.max_lease_ms < o.min_lease_ms) {
        return "--max-lease " + std::to_string(o.max_lease_ms) + " is below --min-lease " + std::to_string(o.min_lease_ms);
    }
    if (o.max_lease_ms > lock::kMaxLeaseMs) return "--max-lease " + std::to_string(o.max_lease_ms) + " exceeds 24h";
    if (o.snapshot_every < 16 || o.snapshot_every > member::kMaxSnapshotEvery) {
        return "--snapshot-every " + std::to_string(o.snapshot_every) + " must be 16.." +
               std::to_string(member::kMaxSnapshotEvery);
    }
    if (o.snapshot_log_pct > member::kMaxSnapshotLogPct) {
        return "--snapshot-log-percent " + std::to_string(o.snapshot_log_pct) + " must be 0.." +
               std::to_string(member::kMaxSnapshotLogPct);
    }
    if (o.cert_file.empty() != o.key_file.empty()) {
        return "--cert-file and --key-file go together (TLS on the HTTP API needs both); got only " +
               std::string(o.cert_file.empty() ? "--key-file" : "--cert-file");
    }
    if (!o.client_tls() && (!o.trusted_ca_file.empty() || o.client_cert_auth)) {
        return std::string(o.client_cert_auth ? "--client-cert-auth" : "--trusted-ca-file") +
               " needs TLS on the HTTP API: give --cert-file and --key-file too";
    }
    if (o.client_cert_auth && o.trusted_ca_file.empty()) {
        return "--client-cert-auth needs --trusted-ca-file (the CA that client certificates must be signed by)";
    }
    const int peer_files = !o.peer_cert_file.empty() + !o.peer_key_file.empty() + !o.peer_trusted_ca_file.empty();
    if (peer_files != 0 && peer_files != 3) {
        return "peer TLS is always mutual: give all of --peer-cert-file, --peer-key-file and --peer-trusted-ca-file "
               "(got " + std::to_string(peer_files) + " of them)";
    }
    if ((o.client_tls() || !o.auth_file.empty()) && !o.peer_tls()) {
        return std::string(o.client_tls() ? "--cert-file" : "--auth-file") +
               " needs peer TLS too (--peer-cert-file, --peer-key-file, --peer-trusted-ca-file): whoever can "
               "reach a plaintext peer port can speak for the leader and redirect clients anywhere";
    }
    return {};
}

void set_incoming_limits(const Options& o, net::TransportOptions& t) {
    t.incoming.max_pending = o.peer_max_pending;
    t.incoming.max_pending_per_address = o.peer_max_pending_per_address;
    t.incoming.max_per_member = o.peer_max_connections_per_member;
    t.incoming.max_unknown = o.peer_max_unknown_connections;
    t.pending_timeout = std::chrono::milliseconds(o.peer_pending_timeout_ms);
}

std::string check_origin(const std::string& origin) {
    const std::string why =
        "is not an origin as a browser sends it: http:// or https://, a lower-case host, an optional :PORT, "
        "nothing after (e.g. https://ops.example.com:8443)";
    std::size_t host = 0;
    if (origin.rfind("http://", 0) == 0) {
        host = 7;
    } else if (origin.rfind("https://", 0) == 0) {
        host = 8;
    } else {
        return origin == "null" || origin == "*" ? "is refused: it would let any page in (name the origins)" : why;
    }
    std::size_t i = host;
    if (i < origin.size() && origin[i] == '[') {  // an IPv6 literal
        const std::size_t close = origin.find(']', i);
        if (close == std::string::npos || close == i + 1) return why;
        for (std::size_t k = i + 1; k < close; ++k) {
            const char c = origin[k];
            if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || c == ':' || c == '.')) return why;
        }
        i = close + 1;
    } else {
        for (; i < origin.size() && origin[i] != ':'; ++i) {
            const char c = origin[i];
            if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.')) return why;
        }
        if (i == host) return why;
    }
    if (i == origin.size()) return {};
    if (origin[i] != ':' || i + 1 == origin.size()) return why;
    std::uint64_t port = 0;
    if (!parse_u64(origin.substr(i + 1), port) || port == 0 || port > 65535 || origin[i + 1] == '0') return why;
    return {};
}

std::uint64_t derive_cluster_id(const std::vector<PeerSpec>& peers, const std::string& token) {
    std::vector<PeerSpec> sorted = peers;
    std::sort(sorted.begin(), sorted.end(), [](const PeerSpec& a, const PeerSpec& b) { return a.id < b.id; });
    std::string text;
    for (const PeerSpec& p : sorted) text += std::to_string(p.id) + "=" + p.host + ":" + std::to_string(p.port) + ",";
    if (!token.empty()) text += "token=" + token;
    std::uint64_t h = 1469598103934665603ull;
    for (unsigned char c : text) {
        h ^= c;
        h *= 1099511628211ull;
    }
    return h == 0 ? 1 : h;
}

std::string usage() {
    return R"(fence-coordinator: one member of a pgfence Raft cluster (HTTP lock API + fencing tokens)

Usage: fence-coordinator --id N --peers ID=HOST:PORT,... --client-addr HOST:PORT --data-dir DIR [flags]
       fence-coordinator --id N --join ENDPOINTS --data-dir DIR [flags]   (a member added at runtime)

  --id N                 this member's ID (>= 1)
  --peers LIST           bootstrap a new cluster: every member's peer (Raft) address,
                         this one included: 1=127.0.0.1:7401,2=127.0.0.1:7402,3=127.0.0.1:7403
                         This member listens for peers on its own entry. The list is
                         recorded in the data directory as the first configuration:
                         later starts read it from there (and the members from the
                         log), so --peers may be left out or stay as it was; it still
                         gives the addresses of members that a data directory from an
                         earlier release does not record.
  --join ENDPOINTS       start a member added with `fencectl member add` (client
                         endpoints of the running cluster, HOST:PORT or URLs): it
                         asks them for the cluster ID and the addresses it was added
                         with, and refuses to start if it was not added. Instead of
                         --peers; restarts may keep it.
  --initial-cluster-token T
                         bootstrap only: the cluster ID is derived from --peers and T
                         (every member alike, as etcd's). Without it (and without
                         --cluster-id) the ID is random: the seed, the lowest ID in
                         --peers, draws it, and every other member waits (at most
                         120 s, logged) for the seed to dial its peer address and
                         send it, so start the seed too
  --client-addr H:P      where this member serves the HTTP API (with --join: may be
                         left out, and must otherwise match, the address it was
                         added with). Members learn each other's client address
                         from the configuration and the transport handshake, so a
                         follower can answer 307 with the leader's URL.
  --data-dir DIR         write-ahead log, hard state and snapshots
  --heartbeat-ms N       tick = heartbeat period (default 50)
  --election-ms N        base election timeout; the core picks a random timeout in
                         [N, 2N) rounded to ticks (default 300)
  --min-lease N          smallest lease_ms an acquire may ask for (default )" +
           std::to_string(kDefaultMinLeaseMs) + R"();
                         must be >= 1.5 x the maximum election timeout (2 x --election-ms),
                         start-up fails otherwise
  --max-lease N          largest lease_ms (default )" +
           std::to_string(kDefaultMaxLeaseMs) + R"()
  --max-wait N           largest wait_ms (default )" +
           std::to_string(kDefaultMaxWaitMs) + R"()
  --restore FILE         bootstrap a new cluster from a backup (fencectl snapshot save):
                         every member of the new cluster is started with the same FILE
                         and --peers, on an empty --data-dir. Every restore is a new
                         generation: the seed (lowest ID in --peers) draws a random ID
                         (old members and earlier restores are refused) and starts
                         tokens above the backup's last token + --restore-token-headroom
                         + the time in microseconds since the epoch; the other members
                         take both from the seed (they wait for it, as without
                         --initial-cluster-token). Not with --cluster-id. Ignored
                         (logged) once the data directory exists.
  --force-new-cluster    (no value) after the loss of quorum: this member's data
                         directory (moved aside to DIR.before-force-new-cluster) becomes
                         a new one-member cluster with every entry of its log applied, a
                         random ID, and tokens above its last token + the headroom + the
                         time in microseconds (as --restore). Add members to it with
                         fencectl member add and --join.
  --restore-token-headroom N
                         tokens skipped above the last token of a --restore or
                         --force-new-cluster (default 1000000000000): grants made after
                         the backup are stored in databases already; the headroom must
                         exceed the log entries written since (docs/operations.md)
  --token-floor N        bootstrap only: tokens start above N (the leader proposes
                         SetTokenFloor{N}; the floor never decreases)
  --cluster-id N         bootstrap only: the cluster ID checked on every peer frame;
                         default: derived (FNV-1a 64) from the sorted --peers list and
                         --initial-cluster-token when one is given, else random (from the
                         seed). Afterwards read from the data directory.
  --snapshot-every N     snapshot the lock table once N entries were applied since the
                         last snapshot, at least (default 10000; 16..10000000)
  --snapshot-log-percent P
                         and once the entries applied since the last snapshot hold P %
                         of the lock table's bytes, at least, so a large table is not
                         written out again every N small entries (default 100; 0: N
                         alone decides; at most 400: the log between two snapshots is
                         kept in memory)
  --snapshot-keep N      log entries kept behind a snapshot so a briefly lagging
                         follower catches up by log, not snapshot (default 1000)
  --max-expire-batch N   leases that ran out together are expired up to N to a log
                         entry (an ExpireMany command; default 1024; 1..1024; 1: one Expire
                         each). A member of a release before ExpireMany cannot apply
                         one and would keep the locks it expires: upgrading from such
                         a release, 1 until every member runs this release
                         (docs/operations.md, Upgrades)
  --expiry-wave N        the most leases one expiry check of the leader takes
                         (default )" +
           std::to_string(member::kDefaultExpiryWave) + "; 1.." +
           std::to_string(member::kMaxExpiryWave) + R"(): their quorum round and
                         Expires are done before the next check takes more, so a
                         request made during an expiry storm waits behind about one
                         wave. Up to a few thousand, larger waves end a storm sooner
                         and make the requests made meanwhile wait longer
                         (docs/decisions.md, ExpireMany)
  --lease-checkpoints on|off
                         the leader checkpoints each lease's remaining time through
                         the log once per run, at its half, and a new leader restarts
                         a lease from its checkpoint instead of at full length
                         (default on). A member of a release before checkpoints
                         cannot apply one: off until every member runs this release
                         (docs/operations.md, Upgrades)
  --max-checkpoints-per-tick N
                         leases checkpointed per heartbeat tick at most, in one log
                         entry (default 1024; 1..1024)
  --early-appends on|off
                         while the leader's write is outstanding, it sends what was
                         proposed meanwhile (and its heartbeats, commit index, read
                         rounds) to the followers at once instead of after that
                         write (default off; why: docs/decisions.md)
  --owner-binding on|off with --auth-file, an owner is bound to the user that
                         acquired with it (default on). off: acquires are logged
                         without the user, as a release before owner binding can
                         apply, and an owner is not bound to a user. Upgrading from
                         such a release under --auth-file: off until every member
                         runs this release (docs/operations.md, Upgrades)
  --max-connections N    open HTTP client connections at most (default 1024;
                         16..1000000). A connection that arrives at the cap takes the
                         place of the oldest idle one of the lowest class (anonymous <
                         authenticated < answered a grant or keepalive); it is closed
                         only when every open connection has a request in progress
                         or its answer still being written.
                         The member raises its open-files limit (RLIMIT_NOFILE) to
                         N + 256 within the hard limit, and warns (open_files_limit)
                         when the hard limit is lower
  --max-connections-per-address N
                         open HTTP client connections from one source address at
                         most; more are closed at accept (default 512; 1..1000000;
                         above --max-connections it is --max-connections). Clients
                         behind one NAT, proxy or pooler share one address; an
                         IPv6 /64 counts as one address
  --max-watchers N       open watches (GET /v1/watch) at most (default 512;
                         0..1000000; 0 turns watching off); more are answered 503
                         too_many_watchers. Each holds a client connection
                         (--max-connections)
  --watch-buffer-bytes N bytes one watch may have waiting for its client to read
                         (default 262144; 4096..1073741824); a watch past it is
                         closed with the line watcher_too_slow
  --watch-history-events N, --watch-history-bytes N
                         the events of the entries this member applied kept for
                         watches that start from a revision (defaults 100000 and
                         67108864; 1..100000000 and 4096..68719476736); a revision
                         older than the oldest kept is answered 410 compacted
  --token-history-events N, --token-history-bytes N
                         the tokens this member keeps the life of, as it applied
                         them, for GET /v1/tokens/{token} and /v1/keys/{key}/history
                         (defaults 100000 and 67108864; 1..100000000 and
                         4096..68719476736); a token older than the oldest kept is
                         answered 410 compacted
  --log-wall-time on|off the leader stamps each entry it proposes with its wall
                         clock (a version-4 command), which the token history
                         shows (default on). A member of a release before the
                         stamp cannot read one: off until every member runs this
                         release (docs/operations.md, Upgrades)
  --snapshot-chunk-bytes N
                         a snapshot larger than this goes to a lagging follower in
                         chunks of N bytes, at most 8 MiB (and at least one chunk)
                         un-acked (default
                         1048576; 1024..16777216)
  --max-clock-drift-ppm N  rho: the largest clock-rate error of any member or
                         client against real time, in parts per million (default
                         50000 = 5%; 0..500000). The leader proposes Expire only
                         after lease_ms x (1 + rho) of its own clock; clients stop
                         using a lease after lease x (1 - rho) from their send
                         (their own setting, same default). Give every member
                         the same value.
  --log-level L          debug | info | warn | error (default info); one key=value
                         line per event on stderr

TLS and authorization (docs/security.md; flags named as etcd's):
  --cert-file F, --key-file F   serve the HTTP API over TLS (1.2 or newer, AEAD
                         ciphers only) with this certificate chain and key (PEM).
                         A key file readable by group or others is refused.
  --trusted-ca-file F    CA bundle that client certificates are checked against
  --client-cert-auth     (no value) require a client certificate signed by
                         --trusted-ca-file; with --auth-file its CN names the user
  --peer-cert-file F, --peer-key-file F, --peer-trusted-ca-file F
                         TLS between members, always mutual (all three or none).
                         A member's certificate names its ID: CN=ID (decimal) or
                         the SAN URI:pgfence:member:ID; frames whose sender is not
                         that ID are dropped.
  --peer-max-pending N   incoming peer connections not yet identified (TLS handshake
                         in progress, or plaintext before a first frame naming a
                         member of this cluster) at most; a new one past it closes
                         the oldest silent one (default 64; 1..65536)
  --peer-max-pending-per-address N
                         ... of them from one source address (an IPv6 /64 counts
                         as one); a new one past it closes that address's oldest
                         silent one (default 16)
  --peer-pending-timeout-ms MS
                         an incoming peer connection is identified within MS or
                         closed (default 1000; 50..60000)
  --peer-max-connections-per-member N
                         identified connections of one member at most (pending
                         ones never take them); a new one closes its oldest
                         (default 4; 1..64)
  --peer-max-unknown-connections N
                         identified connections of members not in the
                         configuration (a member being added; the seed, to a
                         member waiting for it), all together (default 16; 1..65536)
  --auth-file F          users, roles and grants (read:PREFIX, lock:PREFIX,
                         admin); with it everything not granted is denied (401
                         without credentials, 403 without permission). Bearer
                         tokens are stored as SHA-256 hashes.
  --cert-file and --auth-file need the --peer-* flags too: security on the
  client port is worth nothing while anyone may speak on the peer port.
  --admin-without-auth   (no value) serve the admin endpoints (membership,
                         backups, status, metrics, version) without --auth-file
                         or --client-cert-auth, to anyone on the client network;
                         without it they answer 403 there
  --allowed-origin O     serve requests whose Origin header is O (a web page at
                         O: scheme://host[:port]); repeatable or comma-separated.
                         Default none: every request from a web page (one with
                         an Origin header) is refused 403. Requests that change
                         state need Content-Type: application/json (else 415).
  --token-signing-key-file F
                         Ed25519 private key (PEM, from openssl genpkey -algorithm
                         ed25519; readable by its owner only): every grant then
                         carries a "proof" that pg_fence verifies with the public
                         key (docs/guarantees.md). Give every member the same file.
  SIGHUP reloads the certificates, keys, the auth file and the token signing
  key; a file that fails to load keeps the old one (logged).
  --help                 this text
  --version              the release version

Signals: SIGTERM/SIGINT — a leader first hands leadership to the most up-to-date
follower (bounded wait), then the member exits. Restarting with the same flags and
--data-dir catches up from the log or a snapshot. A member removed from the
cluster (fencectl member remove) stops itself.
)";
}

}  // namespace pgfence::server
