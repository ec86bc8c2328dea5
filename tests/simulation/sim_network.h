// The simulated network between members: for each message it decides whether
// it is dropped, how long it takes and whether a duplicate follows; long
// delays reorder messages. Partitions block links: symmetric (the members
// split into two sides) or one-way (some links block a single direction);
// each heals at a time drawn when it starts. Clients can be cut off from
// some members too (both ways: requests and replies are lost), healing likewise.
//
// Links are by member position 0..capacity-1 (member id - 1). Partitions and
// client cuts are drawn among the members started so far (set_members());
// an isolation cuts a member off from every position.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim_random.h"
#include "swarm.h"

namespace pgfence::sim {

class SimNetwork {
public:
    // `members` started at first, room for `capacity` (members that join later).
    SimNetwork(std::size_t members, std::size_t capacity, const FaultConfig& faults);
    // Members started so far (positions 0..members-1), at most the capacity.
    void set_members(std::size_t members);

    // Delivery delays for one message from -> to: empty when dropped, two
    // entries when duplicated. Blocked links drop everything.
    std::vector<std::uint64_t> fate(std::size_t from, std::size_t to, std::uint64_t now_us, SimRandom& random);

    // A delay for client traffic (never dropped; clients have timeouts).
    std::uint64_t client_delay_us(SimRandom& random) const;

    bool blocked(std::size_t from, std::size_t to, std::uint64_t now_us) const;

    // Starts a random partition at now_us; returns a description.
    std::string start_partition(std::uint64_t now_us, SimRandom& random);

    // Cuts `client` off from a random non-empty subset of the members (not
    // all) until a drawn heal time; returns a description.
    std::string cut_client(int client, std::uint64_t now_us, SimRandom& random);
    bool client_blocked(int client, std::size_t member, std::uint64_t now_us) const;
    std::uint64_t client_cuts() const { return client_cuts_started_; }

    // Cuts member `i` off from everyone, both ways, for `duration_us`.
    std::string isolate(std::size_t i, std::uint64_t now_us, std::uint64_t duration_us);

    // Heals everything and stops dropping/duplicating/long delays (liveness phase).
    void heal_all();

    std::uint64_t dropped() const { return dropped_; }
    std::uint64_t duplicated() const { return duplicated_; }

    std::uint64_t partitions() const { return partitions_started_; }  // started so far (isolations included)

private:
    std::uint64_t partitions_started_ = 0;
    struct Partition {
        std::vector<std::vector<bool>> blocks;  // [from][to]
        std::uint64_t heal_at_us = 0;
    };
    static constexpr std::size_t kMaxPartitions = 4;

    std::size_t members_;
    std::size_t capacity_;
    FaultConfig faults_;
    std::vector<Partition> partitions_;  // at most kMaxPartitions
    struct ClientCut {
        int client = 0;
        std::vector<bool> members;  // cut from these
        std::uint64_t heal_at_us = 0;
    };
    std::vector<ClientCut> client_cuts_;  // at most kMaxPartitions
    std::uint64_t client_cuts_started_ = 0;
    std::uint64_t dropped_ = 0;
    std::uint64_t duplicated_ = 0;
};

}  // namespace pgfence::sim
