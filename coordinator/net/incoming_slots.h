// Which incoming peer connections stay open: the bounds that let known
// members through a flood of connections from anyone without a certificate.
// Pure, std only (no sockets, no clock): the transport calls it on accept,
// on identification and on close, and closes what it says to shed.
//
// A connection is *pending* from accept until it is *identified*: under TLS
// when its handshake proved a member ID (the certificate), in plaintext when
// its first frame, a MemberInfo of this cluster of at most
// kMaxFirstFrameBytes (frame.h), named one. Pending connections share a pool
// of `max_pending` places, at most `max_pending_per_address` of them from one
// source address (an IPv6 address counts as its /64 network, as on the
// client port: address_group in conn_ranks.h); the transport closes a
// connection still pending after its pending timeout (not here: no clock). Identified connections never take a
// pending place, and pending ones never take theirs: each member ID has
// `max_per_member` places; IDs the transport does not dial (a member being
// added, or in plaintext anyone claiming an ID) share `max_unknown` places
// besides.
//
// A pending connection is *silent* until spoke() (a byte or the end of the
// stream arrived): a member's dialer speaks at once (its TLS ClientHello or
// its MemberInfo), so a flood of connections that never speak is shed
// before a member's connection that is being identified.
//
// admit(conn, address), what is shed so that `conn` gets a pending place:
//   address already has max_pending_per_address  -> that address's oldest silent one, else its oldest (kAddressFull)
//   the pool already has max_pending             -> the pool's oldest silent one, else its oldest (kPendingFull)
//   otherwise                                    -> nothing
// identify(conn, member, known):
//   conn is not pending (shed, or identified)    -> refused (nothing changes)
//   the member's max_per_member places are taken -> its oldest connection is shed (kMemberReplaced): a member
//                                                   redials after a failure, the newest connection is the live one
//   unknown member, max_unknown places taken     -> refused (kUnknownFull); conn leaves the pending pool
//   otherwise                                    -> admitted
// Every connection the answer names as shed has already left its place.
//
// Threading: none (the transport's event loop owns it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <optional>
#include <string>

namespace pgfence::net {

struct IncomingLimits {
    std::size_t max_pending = 64;
    std::size_t max_pending_per_address = 16;
    std::size_t max_per_member = 4;
    std::size_t max_unknown = 16;
};

enum class ShedReason : std::uint8_t {
    kPendingFull,     // a newer connection needed the place in the pending pool
    kAddressFull,     // ... the place of its own source address
    kPendingTimeout,  // not identified in time (counted by the transport)
    kMemberReplaced,  // a newer connection of the same member took its place
    kUnknownFull,     // an unknown member's connection, and their places are taken
};
constexpr std::size_t kShedReasons = 5;
const char* shed_reason_name(ShedReason r);  // "pending_full", ...: metric labels and log values

class IncomingSlots {
public:
    using Conn = std::uint64_t;  // the caller's name for a connection, unique while it is open
    struct Shed {
        Conn conn = 0;
        ShedReason reason = ShedReason::kPendingFull;
    };
    struct Identified {
        bool admitted = false;
        std::optional<Shed> shed;  // admitted: the connection that made room; refused: the refused one
    };

    explicit IncomingSlots(IncomingLimits limits) : limits_(limits) {}

    std::optional<Shed> admit(Conn conn, const std::string& address);
    void spoke(Conn conn);
    Identified identify(Conn conn, std::uint64_t member, bool known);
    // `conn` closed: its place, pending or identified, is free (unknown: nothing).
    void remove(Conn conn);

    bool pending(Conn conn) const;
    std::size_t pending_count() const { return pending_.size(); }
    std::size_t identified_count() const { return identified_.size(); }

private:
    struct Pending {
        Conn conn;
        std::string address;  // its source address's group (address_group)
        bool spoke = false;
    };
    struct Member {
        std::uint64_t id;
        bool unknown;
    };
    using PendingList = std::list<Pending>;
    // The oldest silent connection (of address group `address`, or of any when null), else the oldest.
    PendingList::iterator victim(const std::string* address);
    void erase(PendingList::iterator it);

    IncomingLimits limits_;
    PendingList pending_;                                  // oldest first
    std::map<std::string, std::size_t, std::less<>> per_address_;  // pending connections by source address group
    std::map<std::uint64_t, std::list<Conn>> members_;     // identified connections by member, oldest first
    std::map<Conn, Member> identified_;
    std::size_t unknown_ = 0;                              // identified connections of unknown members
};

}  // namespace pgfence::net
