// The leader's leases with their expiry index (leases.h).
#include "member/leases.h"

#include <algorithm>
#include <limits>

namespace pgfence::member {

const Lease* LeaseSet::find(std::string_view key) const {
    auto it = leases_.find(key);
    return it == leases_.end() ? nullptr : &it->second.lease;
}

LeaseSet::Slot* LeaseSet::find_token(std::string_view key, lock::Token token, Map::iterator* at) {
    auto it = leases_.find(key);
    if (it == leases_.end() || it->second.lease.token != token) return nullptr;
    *at = it;
    return &it->second;
}

void LeaseSet::DueHeap::push(Due due) {
    heap_.push_back(due);
    sift_up(static_cast<std::uint32_t>(heap_.size() - 1), due);
}

void LeaseSet::DueHeap::erase(std::uint32_t i) {
    heap_[i].lease->second.*place_ = kNotIndexed;
    const Due last = heap_.back();
    heap_.pop_back();
    if (i < heap_.size()) {
        if (i > 0 && before(last, heap_[(i - 1) / 4])) {
            sift_up(i, last);
        } else {
            sift_down(i, last);
        }
    }
    // Back to a quarter of its peak (after a storm): the memory goes back too.
    if (heap_.capacity() > 4096 && heap_.size() < heap_.capacity() / 4) heap_.shrink_to_fit();
}

void LeaseSet::DueHeap::update(std::uint32_t i, Time at) {
    Due due = heap_[i];
    due.at = at;
    if (i > 0 && before(due, heap_[(i - 1) / 4])) {
        sift_up(i, due);
    } else {
        sift_down(i, due);
    }
}

void LeaseSet::DueHeap::sift_up(std::uint32_t i, Due due) {
    while (i > 0) {
        const std::uint32_t parent = (i - 1) / 4;
        if (!before(due, heap_[parent])) break;
        put(i, heap_[parent]);
        i = parent;
    }
    put(i, due);
}

void LeaseSet::DueHeap::sift_down(std::uint32_t i, Due due) {
    const std::size_t n = heap_.size();
    for (;;) {
        const std::size_t first = std::size_t{i} * 4 + 1;
        if (first >= n) break;
        std::size_t least = first;
        for (std::size_t c = first + 1; c < std::min(first + 4, n); ++c) {
            if (before(heap_[c], heap_[least])) least = c;
        }
        if (!before(heap_[least], due)) break;
        put(i, heap_[least]);
        i = static_cast<std::uint32_t>(least);
    }
    put(i, due);
}

std::string LeaseSet::DueHeap::check() const {
    for (std::size_t i = 0; i < heap_.size(); ++i) {
        if (heap_[i].lease->second.*place_ != i) return "the index's entry " + std::to_string(i) + " is not its slot's place";
        if (i > 0 && before(heap_[i], heap_[(i - 1) / 4])) {
            return "the index's entry for " + heap_[i].lease->first + " comes before its parent";
        }
    }
    return {};
}

void LeaseSet::unindex(Map::iterator it) {
    if (it->second.at != kNotIndexed) running_.erase(it->second.at);
    if (it->second.checkpoint != kNotIndexed) checkpoints_due_.erase(it->second.checkpoint);
}

// A lease already in an index stays where it is (restart(): moved in place
// by DueHeap::update()); one otherwise changed left both first.
void LeaseSet::index(Map::iterator it) {
    Slot& slot = it->second;
    if (slot.lease.checkpoint_due && slot.checkpoint == kNotIndexed) {
        checkpoints_due_.push(Due{slot.lease.checkpoint_at(), &*it});
    }
    if (slot.lease.phase == LeasePhase::kRunning && slot.at == kNotIndexed) {
        running_.push(Due{slot.lease.expire_at, &*it});
    }
}

// A kid's number: the one it has (it or a kid of no lease kept it last), else
// the first number no lease uses, else a new one; kUnknownKidNumber for a kid
// too long, or once every number is in use.
std::uint16_t LeaseSet::kid_number(std::string_view kid) {
    if (kid.size() > kMaxProofKidBytes) return kUnknownKidNumber;
    std::size_t unused = kid_names_.size();
    for (std::size_t i = 0; i < kid_names_.size(); ++i) {
        if (kid_names_[i] == kid) return static_cast<std::uint16_t>(i);
        if (unused == kid_names_.size() && i > kUnknownKidNumber && !by_kid_.contains(kid_names_[i])) unused = i;
    }
    if (unused == kid_names_.size()) {
        if (kid_names_.size() > std::numeric_limits<std::uint16_t>::max()) return kUnknownKidNumber;
        kid_names_.emplace_back();
    }
    kid_names_[unused] = kid;
    return static_cast<std::uint16_t>(unused);
}

void LeaseSet::count_kid(std::uint16_t number, bool add) {
    const std::string_view kid = kid_names_[number];
    auto it = by_kid_.find(kid);
    if (add) {
        if (it == by_kid_.end()) it = by_kid_.emplace(std::string(kid), 0).first;
        ++it->second;
        return;
    }
    if (it != by_kid_.end() && --it->second == 0) by_kid_.erase(it);
}

void LeaseSet::start_all(const lock::LockTable& table, Time now, std::uint64_t max_clock_drift_ppm) {
    clear();
    leases_.reserve(table.size());
    table.for_each([&](const lock::Lock& l) {
        Lease lease = Lease::start(l.token, l.lease_ms, now, max_clock_drift_ppm, checkpoints_);
        lease.answers = 1;  // a former leader may have answered it
        lease.kid = kUnknownKidNumber;
        count_kid(lease.kid, true);
        auto it = leases_.emplace(l.key, Slot{std::move(lease)}).first;
        index(it);
    });
}

void LeaseSet::start(std::string_view key, lock::Token token, std::uint64_t lease_ms, Time now,
                     std::uint64_t max_clock_drift_ppm) {
    auto it = leases_.find(key);
    std::uint32_t answers = 0;
    std::uint64_t checkpoint_index = 0;
    std::uint16_t kid = kNoKidNumber;
    if (it == leases_.end()) {
        it = leases_.emplace(std::string(key), Slot{}).first;
    } else {
        unindex(it);
        count_kid(it->second.lease.kid, false);
        if (it->second.lease.token == token) {
            answers = it->second.lease.answers;
            kid = it->second.lease.kid;
            checkpoint_index = it->second.lease.checkpoint_index;
        }
    }
    it->second.lease = Lease::start(token, lease_ms, now, max_clock_drift_ppm, checkpoints_);
    it->second.lease.answers = answers;
    it->second.lease.kid = kid;
    it->second.lease.checkpoint_index = checkpoint_index;
    count_kid(it->second.lease.kid, true);
    index(it);
}

bool LeaseSet::answered(std::string_view key, lock::Token token, std::string_view kid) {
    Map::iterator it;
    Slot* s = find_token(key, token, &it);
    if (s == nullptr) return false;
    if (s->lease.answers < Lease::kMaxAnswers) ++s->lease.answers;
    if (!kid.empty() && kid != kid_names_[s->lease.kid]) {
        count_kid(s->lease.kid, false);
        s->lease.kid = kid_number(kid);
        count_kid(s->lease.kid, true);
    }
    return true;
}

const Lease* LeaseSet::unanswered(std::string_view key, lock::Token token) {
    Map::iterator it;
    Slot* s = find_token(key, token, &it);
    if (s == nullptr) return nullptr;
    if (s->lease.answers > 0 && s->lease.answers < Lease::kMaxAnswers) --s->lease.answers;
    return &s->lease;
}

bool LeaseSet::restart(std::string_view key, lock::Token token, Time now, std::uint64_t max_clock_drift_ppm,
                       std::uint64_t run_ms) {
    Map::iterator it;
    Slot* s = find_token(key, token, &it);
    if (s == nullptr) return false;
    s->lease.restart(now, max_clock_drift_ppm, checkpoints_, run_ms);
    // Its phase is unchanged: indexed while running, it moves in place.
    if (s->at != kNotIndexed) running_.update(s->at, s->lease.expire_at);
    if (s->checkpoint != kNotIndexed) {
        if (!s->lease.checkpoint_due) {
            checkpoints_due_.erase(s->checkpoint);
        } else {
            checkpoints_due_.update(s->checkpoint, s->lease.checkpoint_at());
        }
    }
    index(it);  // a checkpoint newly due goes in
    return true;
}

bool LeaseSet::checkpoint_proposed(std::string_view key, lock::Token token, std::uint64_t index) {
    Map::iterator it;
    Slot* s = find_token(key, token, &it);
    if (s == nullptr) return false;
    s->lease.checkpoint_index = std::max(s->lease.checkpoint_index, index);
    return true;
}

std::size_t LeaseSet::take_checkpoints(Time now, std::size_t limit, std::size_t max_bytes,
                                       std::vector<DueCheckpoint>& out) {
    std::size_t taken = 0;
    std::size_t bytes = 0;
    while (taken < limit && !checkpoints_due_.empty() && checkpoints_due_.top().at <= now) {
        Node& node = *checkpoints_due_.top().lease;
        const std::size_t more = lock::checkpoint_bytes(node.first.size());
        if (bytes + more > max_bytes) break;
        bytes += more;
        checkpoints_due_.erase(0);
        Lease& lease = node.second.lease;
        lease.checkpoint_due = false;
        ++taken;
        // A lease being expired, or cut by a phantom grant, is not checkpointed.
        if (lease.phase != LeasePhase::kRunning || lease.deadline <= now) continue;
        out.push_back(DueCheckpoint{node.first, lease.token, lease.run_ms, lease.started});
    }
    return taken;
}

bool LeaseSet::cut(std::string_view key, lock::Token token, Time now) {
    Map::iterator it;
    Slot* s = find_token(key, token, &it);
    if (s == nullptr || s->lease.expiring()) return false;
    unindex(it);
    s->lease.checkpoint_due = false;
    s->lease.deadline = std::min(s->lease.deadline, now);
    s->lease.expire_at = std::min(s->lease.expire_at, now);
    index(it);
    return true;
}

bool LeaseSet::set_running(std::string_view key, lock::Token token) {
    Map::iterator it;
    Slot* s = find_token(key, token, &it);
    if (s == nullptr) return false;
    unindex(it);
    s->lease.phase = LeasePhase::kRunning;
    index(it);
    return true;
}

LeaseSet::Settled LeaseSet::settle_expiring(std::string_view key, lock::Token token, Time asked, bool ok) {
    Map::iterator it;
    Slot* s = find_token(key, token, &it);
    if (s == nullptr || s->lease.phase != LeasePhase::kConfirming) return Settled::kGone;
    unindex(it);  // kConfirming: from the checkpoints' index only
    if (ok && asked >= s->lease.expire_at) {
        s->lease.phase = LeasePhase::kExpiring;
        s->lease.checkpoint_due = false;
        return Settled::kDue;
    }
    s->lease.phase = LeasePhase::kRunning;
    index(it);
    return Settled::kRunning;
}

bool LeaseSet::erase(std::string_view key, lock::Token token) {
    Map::iterator it;
    if (find_token(key, token, &it) == nullptr) return false;
    unindex(it);
    count_kid(it->second.lease.kid, false);
    leases_.erase(it);
    return true;
}

void LeaseSet::clear() {
    running_.clear();
    checkpoints_due_.clear();
    Map().swap(leases_);  // its bucket array too: a deposed leader gives the memory back
    by_kid_.clear();
    kid_names_.assign({std::string(kNoProofKid), std::string(kUnknownProofKid)});
}

std::size_t LeaseSet::take_due(Time now, std::size_t limit, std::vector<DueLease>& out) {
    std::size_t taken = 0;
    while (taken < limit && !running_.empty() && running_.top().at <= now) {
        Node& lease = *running_.top().lease;
        running_.erase(0);
        lease.second.lease.phase = LeasePhase::kConfirming;
        out.push_back(DueLease{lease.first, lease.second.lease.token});
        ++taken;
    }
    return taken;
}

std::string LeaseSet::check_invariants() const {
    std::size_t running = 0;
    std::size_t checkpoints = 0;
    std::map<std::string, std::size_t, std::less<>> kids;
    for (const auto& [key, slot] : leases_) {
        if (slot.lease.kid >= kid_names_.size()) {
            return "the lease of " + key + " has kid number " + std::to_string(slot.lease.kid) +
                   ", past the kids known";
        }
        ++kids[kid_names_[slot.lease.kid]];
        if (slot.lease.checkpoint_due) {
            ++checkpoints;
            if (slot.checkpoint >= checkpoints_due_.size() ||
                checkpoints_due_.at(slot.checkpoint).at != slot.lease.checkpoint_at() ||
                &checkpoints_due_.at(slot.checkpoint).lease->first != &key) {
                return "the checkpoint of the lease of " + key + " is not indexed at its checkpoint_at";
            }
        } else if (slot.checkpoint != kNotIndexed) {
            return "the lease of " + key + " has no checkpoint due but a place in the checkpoint index";
        }
        if (slot.lease.phase != LeasePhase::kRunning) {
            if (slot.at != kNotIndexed) return "the lease of " + key + " does not run but has a place in the index";
            continue;
        }
        ++running;
        if (slot.at >= running_.size() || running_.at(slot.at).at != slot.lease.expire_at ||
            &running_.at(slot.at).lease->first != &key) {
            return "the running lease of " + key + " is not indexed at its expire_at";
        }
    }
    if (kids != by_kid_) return "the leases by kid are not counted as they are held";
    if (checkpoints != checkpoints_due_.size()) {
        return "the checkpoint index holds " + std::to_string(checkpoints_due_.size()) + " leases, " +
               std::to_string(checkpoints) + " have a checkpoint due";
    }
    if (running != running_.size()) {
        return "the expiry index holds " + std::to_string(running_.size()) + " leases, " +
               std::to_string(running) + " run";
    }
    if (auto problem = running_.check(); !problem.empty()) return "expiry index: " + problem;
    if (auto problem = checkpoints_due_.check(); !problem.empty()) return "checkpoint index: " + problem;
    return {};
}

}  // namespace pgfence::member
