// What a member of a new cluster that is not its seed (server/bootstrap.h:
// the lowest ID in --peers) learns before it creates its data directory: the
// cluster ID the seed chose, its first configuration and, for a new
// generation, where its state came from and its token floor.
//
// --peers names the seed's peer address only, and this member is not part
// of any cluster yet. The seed dials every member of its first
// configuration; on each connection to a member it has not heard from since
// it started, its handshake is followed by a SeedInfo frame
// (net/seed_info.h) whose header carries the cluster ID. So this member
// listens on its own peer address (the one it serves later) with a
// transport that reads handshakes and SeedInfo frames of any cluster and
// nothing else (net::TransportOptions::handshakes_only), until the seed's
// SeedInfo comes. Under --peer-cert-file the seed's certificate must name
// the seed's ID (the peer CA vouches for the answer, as for every frame).
// It waits at most `wait`, logging a seed_wait line every kSeedLogEvery;
// then the member refuses to start, naming the seed.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "server/bootstrap.h"
#include "server/options.h"

namespace pgfence::server {

// How long a member waits for its seed before it refuses to start (a
// service manager that restarts it waits again).
inline constexpr std::chrono::seconds kSeedWait{120};
inline constexpr std::chrono::seconds kSeedLogEvery{5};

// "" and `out` set, or why the seed was not heard from within `wait`.
std::string ask_seed(const Options& options, std::uint64_t seed, std::chrono::milliseconds wait,
                     std::optional<SeedAnswer>& out);

}  // namespace pgfence::server
