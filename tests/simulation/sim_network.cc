// The simulated network: see sim_network.h.
#include "sim_network.h"

#include <algorithm>
#include <sstream>

#include "sim_failure.h"

namespace pgfence::sim {

SimNetwork::SimNetwork(std::size_t members, std::size_t capacity, const FaultConfig& faults)
    : members_(members), capacity_(capacity), faults_(faults) {
    require(members >= 1 && members <= capacity, "network of ", members, " members with room for ", capacity);
}

void SimNetwork::set_members(std::size_t members) {
    require(members >= members_ && members <= capacity_, "network: ", members, " members (had ", members_,
            ", room for ", capacity_, ")");
    members_ = members;
}

bool SimNetwork::blocked(std::size_t from, std::size_t to, std::uint64_t now_us) const {
    for (const auto& p : partitions_) {
        if (p.heal_at_us > now_us && p.blocks[from][to]) return true;
    }
    return false;
}

std::vector<std::uint64_t> SimNetwork::fate(std::size_t from, std::size_t to, std::uint64_t now_us,
                                            SimRandom& random) {
    std::vector<std::uint64_t> delays;
    if (blocked(from, to, now_us) || random.chance(faults_.drop_probability)) {
        ++dropped_;
        return delays;
    }
    const int copies = random.chance(faults_.duplicate_probability) ? 2 : 1;
    if (copies == 2) ++duplicated_;
    for (int i = 0; i < copies; ++i) {
        std::uint64_t delay = random.between(faults_.delay_min_us, faults_.delay_max_us);
        if (random.chance(faults_.long_delay_probability)) delay += random.between(0, 20 * faults_.delay_max_us);
        delays.push_back(delay);
    }
    return delays;
}

std::uint64_t SimNetwork::client_delay_us(SimRandom& random) const {
    return random.between(faults_.delay_min_us, faults_.delay_max_us);
}

std::string SimNetwork::start_partition(std::uint64_t now_us, SimRandom& random) {
    ++partitions_started_;
    std::erase_if(partitions_, [&](const Partition& p) { return p.heal_at_us <= now_us; });
    if (partitions_.size() >= kMaxPartitions) return "partition skipped (limit)";
    Partition p;
    p.blocks.assign(capacity_, std::vector<bool>(capacity_, false));
    p.heal_at_us = now_us + 1000 * random.between(1, faults_.partition_ms_max);
    std::ostringstream out;
    if (random.chance(faults_.one_way_share)) {
        const std::size_t links = random.between(1, members_);
        out << "one-way partition:";
        for (std::size_t i = 0; i < links; ++i) {
            const std::size_t a = random.index(members_);
            const std::size_t b = random.index(members_);
            if (a == b) continue;
            p.blocks[a][b] = true;
            out << " " << a + 1 << "->" << b + 1;
        }
    } else {
        std::vector<bool> side(members_);
        for (std::size_t i = 0; i < members_; ++i) side[i] = random.chance(0.5);
        out << "partition: {";
        for (std::size_t i = 0; i < members_; ++i) {
            if (side[i]) out << ' ' << i + 1;
        }
        out << " } | {";
        for (std::size_t i = 0; i < members_; ++i) {
            if (!side[i]) out << ' ' << i + 1;
        }
        out << " }";
        for (std::size_t a = 0; a < members_; ++a) {
            for (std::size_t b = 0; b < members_; ++b) p.blocks[a][b] = side[a] != side[b];
        }
    }
    out << " until " << p.heal_at_us << "us";
    partitions_.push_back(std::move(p));
    return out.str();
}

std::string SimNetwork::cut_client(int client, std::uint64_t now_us, SimRandom& random) {
    std::erase_if(client_cuts_, [&](const ClientCut& c) { return c.heal_at_us <= now_us; });
    if (client_cuts_.size() >= kMaxPartitions) return "client cut skipped (limit)";
    ++client_cuts_started_;
    ClientCut c;
    c.client = client;
    c.members.assign(capacity_, false);
    const std::size_t cut = random.between(1, members_ - 1);
    for (std::size_t n = 0; n < cut;) {
        const std::size_t i = random.index(members_);
        if (!c.members[i]) {
            c.members[i] = true;
            ++n;
        }
    }
    c.heal_at_us = now_us + 1000 * random.between(1, std::max<std::uint64_t>(1, faults_.partition_ms_max));
    std::ostringstream out;
    out << "client " << client << " cut from members";
    for (std::size_t i = 0; i < members_; ++i) {
        if (c.members[i]) out << ' ' << i + 1;
    }
    out << " until " << c.heal_at_us << "us";
    client_cuts_.push_back(std::move(c));
    return out.str();
}

bool SimNetwork::client_blocked(int client, std::size_t member, std::uint64_t now_us) const {
    for (const ClientCut& c : client_cuts_) {
        if (c.client == client && c.heal_at_us > now_us && c.members[member]) return true;
    }
    return false;
}

std::string SimNetwork::isolate(std::size_t i, std::uint64_t now_us, std::uint64_t duration_us) {
    ++partitions_started_;
    std::erase_if(partitions_, [&](const Partition& p) { return p.heal_at_us <= now_us; });
    if (partitions_.size() >= kMaxPartitions) return "isolation skipped (limit)";
    Partition p;
    p.blocks.assign(capacity_, std::vector<bool>(capacity_, false));
    for (std::size_t j = 0; j < capacity_; ++j) {
        p.blocks[i][j] = j != i;
        p.blocks[j][i] = j != i;
    }
    p.heal_at_us = now_us + duration_us;
    partitions_.push_back(std::move(p));
    return "member " + std::to_string(i + 1) + " isolated until " + std::to_string(now_us + duration_us) + "us";
}

void SimNetwork::heal_all() {
    partitions_.clear();
    client_cuts_.clear();
    faults_.drop_probability = 0;
    faults_.duplicate_probability = 0;
    faults_.long_delay_probability = 0;
}

}  // namespace pgfence::sim
