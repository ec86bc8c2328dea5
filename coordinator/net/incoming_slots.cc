#include "net/incoming_slots.h"

#include <algorithm>

#include "net/conn_ranks.h"

namespace pgfence::net {

const char* shed_reason_name(ShedReason r) {
    switch (r) {
        case ShedReason::kPendingFull: return "pending_full";
        case ShedReason::kAddressFull: return "address_full";
        case ShedReason::kPendingTimeout: return "pending_timeout";
        case ShedReason::kMemberReplaced: return "member_replaced";
        case ShedReason::kUnknownFull: return "unknown_full";
    }
    return "unknown";
}

IncomingSlots::PendingList::iterator IncomingSlots::victim(const std::string* address) {
    auto oldest = pending_.end();
    for (auto it = pending_.begin(); it != pending_.end(); ++it) {
        if (address != nullptr && it->address != *address) continue;
        if (!it->spoke) return it;
        if (oldest == pending_.end()) oldest = it;
    }
    return oldest;
}

void IncomingSlots::erase(PendingList::iterator it) {
    auto a = per_address_.find(it->address);
    if (a != per_address_.end() && --a->second == 0) per_address_.erase(a);
    pending_.erase(it);
}

std::optional<IncomingSlots::Shed> IncomingSlots::admit(Conn conn, const std::string& address) {
    std::optional<Shed> shed;
    std::string group = address_group(address);
    auto a = per_address_.find(group);
    if (a != per_address_.end() && a->second >= limits_.max_pending_per_address) {
        auto it = victim(&group);
        shed = Shed{it->conn, ShedReason::kAddressFull};
        erase(it);
    } else if (pending_.size() >= limits_.max_pending && !pending_.empty()) {
        auto it = victim(nullptr);
        shed = Shed{it->conn, ShedReason::kPendingFull};
        erase(it);
    }
    ++per_address_[group];
    pending_.push_back(Pending{conn, std::move(group), false});
    return shed;
}

void IncomingSlots::spoke(Conn conn) {
    for (Pending& p : pending_) {
        if (p.conn == conn) {
            p.spoke = true;
            return;
        }
    }
}

bool IncomingSlots::pending(Conn conn) const {
    return std::any_of(pending_.begin(), pending_.end(), [conn](const Pending& p) { return p.conn == conn; });
}

IncomingSlots::Identified IncomingSlots::identify(Conn conn, std::uint64_t member, bool known) {
    auto it = std::find_if(pending_.begin(), pending_.end(), [conn](const Pending& p) { return p.conn == conn; });
    if (it == pending_.end()) return {};
    erase(it);
    Identified out;
    std::list<Conn>& mine = members_[member];
    if (mine.size() >= limits_.max_per_member) {
        const Conn oldest = mine.front();
        out.shed = Shed{oldest, ShedReason::kMemberReplaced};
        remove(oldest);  // may erase `mine` when it held that one alone
    } else if (!known && unknown_ >= limits_.max_unknown) {
        if (mine.empty()) members_.erase(member);
        return Identified{false, Shed{conn, ShedReason::kUnknownFull}};
    }
    members_[member].push_back(conn);
    identified_.emplace(conn, Member{member, !known});
    if (!known) ++unknown_;
    out.admitted = true;
    return out;
}

void IncomingSlots::remove(Conn conn) {
    if (auto id = identified_.find(conn); id != identified_.end()) {
        auto m = members_.find(id->second.id);
        if (m != members_.end()) {
            m->second.remove(conn);
            if (m->second.empty()) members_.erase(m);
        }
        if (id->second.unknown) --unknown_;
        identified_.erase(id);
        return;
    }
    auto it = std::find_if(pending_.begin(), pending_.end(), [conn](const Pending& p) { return p.conn == conn; });
    if (it != pending_.end()) erase(it);
}

}  // namespace pgfence::net
