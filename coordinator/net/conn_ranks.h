// Which client connection gives way when the HTTP server is full: the one
// rule of load shedding on the client port, pure (std, and libc's address
// text conversion; no sockets) so that it is tested without sockets.
//
// Every open connection has a class, which only goes up for the
// connection's life (the shell raises it: member_http.cc):
//   kAnonymous     < kAuthenticated (a request on it carried valid credentials)
//                  < kLease         (it was answered a grant or a keepalive)
// and is either busy (a request is with the handler — a waiting acquire, a
// commit — or its answer is still being written) or idle (reading its next
// request). A connection whose answer is stuck mid-write (a client that does
// not read) is busy: shedding it would report a written grant unwritten; the
// write's deadline (read_timeout) ends it instead. When a
// connection arrives at the cap, the server closes the oldest idle
// connection of the lowest class — idle longest, since its last answer was
// written out or since it was accepted — and admits the newcomer; a busy
// connection is never closed for room, so when every one is busy the
// newcomer is refused. ShedOrder keeps that order with O(1) steps and no
// allocation once a connection is added (list splices).
//
// AddressCounts bounds the connections from one source address (a refused
// connection is closed at accept, before it costs a session); an IPv6
// address counts as its /64 network (address_group).
//
// Threading: none of its own; the HTTP server uses both on its loop thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace pgfence::net {

enum class ConnClass : std::uint8_t { kAnonymous = 0, kAuthenticated = 1, kLease = 2 };
inline constexpr std::size_t kConnClasses = 3;

// "anonymous", "authenticated", "lease": the metric label and the log value.
std::string_view conn_class_name(ConnClass c);

// The open connections (items of type T) in shedding order.
template <class T>
class ShedOrder {
    using List = std::list<T>;

  public:
    // Where one connection is; valid from add() until remove().
    struct Slot {
        ConnClass cls = ConnClass::kAnonymous;
        bool busy = false;
        typename List::iterator at;
    };

    // A new connection: idle, anonymous, the youngest.
    Slot add(T item) {
        List& l = idle_[0];
        return Slot{ConnClass::kAnonymous, false, l.insert(l.end(), std::move(item))};
    }
    void remove(Slot& s) { list_of(s).erase(s.at); }
    // A request went to the handler: not to be shed until idle() again.
    void busy(Slot& s) {
        if (s.busy) return;
        busy_.splice(busy_.end(), list_of(s), s.at);
        s.busy = true;
    }
    // Its answer is written out: idle, the youngest of its class.
    void idle(Slot& s) {
        List& to = idle_[index(s.cls)];
        to.splice(to.end(), list_of(s), s.at);
        s.busy = false;
    }
    // Raises the class (a lower one is ignored); an idle connection moves
    // to the young end of its new class.
    void raise(Slot& s, ConnClass c) {
        if (index(c) <= index(s.cls)) return;
        List& from = list_of(s);
        s.cls = c;
        if (!s.busy) idle_[index(c)].splice(idle_[index(c)].end(), from, s.at);
    }
    // The connection to close for a newcomer: the oldest idle one of the
    // lowest class; none when every connection is busy (or none is open).
    std::optional<T> victim() const {
        for (const List& l : idle_) {
            if (!l.empty()) return l.front();
        }
        return std::nullopt;
    }
    std::size_t size() const {
        std::size_t n = busy_.size();
        for (const List& l : idle_) n += l.size();
        return n;
    }

  private:
    static std::size_t index(ConnClass c) { return static_cast<std::size_t>(c); }
    List& list_of(const Slot& s) { return s.busy ? busy_ : idle_[index(s.cls)]; }

    std::array<List, kConnClasses> idle_;  // by class, oldest idle first
    List busy_;
};

// What a per-address limit counts a source address (as text, as the log
// shows it) under: an IPv4 address, and an IPv4-mapped IPv6 one
// ("::ffff:10.0.0.1"), is itself; any other IPv6 address is its /64 network,
// the low 64 bits zero ("2001:db8:1:2::5" -> "2001:db8:1:2::/64"), since a
// host is commonly given a whole /64 and would otherwise have 2^64
// addresses. Text that is not an address is its own group. The peer port's
// pending places (incoming_slots.h) group the same way.
std::string address_group(const std::string& address);

// Open connections per source address group (address_group), each at most
// `limit`.
class AddressCounts {
  public:
    explicit AddressCounts(std::size_t limit) : limit_(limit) {}
    // Counts one more from `address`'s group; false (nothing counted) when
    // it has `limit` already.
    bool try_add(const std::string& address);
    void remove(const std::string& address);
    std::size_t count(const std::string& address) const;
    std::size_t addresses() const { return counts_.size(); }  // groups with any open
    std::size_t limit() const { return limit_; }

  private:
    std::size_t limit_;
    std::unordered_map<std::string, std::size_t> counts_;  // by group; no entry for a group with none open
};

}  // namespace pgfence::net
