#include "net/raft_codec.h"

#include <type_traits>

#include "net/bytes.h"
#include "net/frame.h"

namespace pgfence::net {

namespace {

using namespace pgfence::raft;

constexpr std::size_t kEntryHeaderBytes = 8 + 8 + 1 + 4;

template <class T>
constexpr std::uint8_t tag_of() {
    if constexpr (std::is_same_v<T, VoteRequest>) return 1;
    else if constexpr (std::is_same_v<T, VoteResponse>) return 2;
    else if constexpr (std::is_same_v<T, AppendRequest>) return 3;
    else if constexpr (std::is_same_v<T, AppendResponse>) return 4;
    else if constexpr (std::is_same_v<T, SnapshotRequest>) return 5;
    else if constexpr (std::is_same_v<T, Heartbeat>) return 6;
    else if constexpr (std::is_same_v<T, HeartbeatResponse>) return 7;
    else return 8;
}

void put_entry(ByteWriter& w, const Entry& e) {
    w.u64(e.term);
    w.u64(e.index);
    w.u8(static_cast<std::uint8_t>(e.type));
    w.str(e.data);
}

void put_body(ByteWriter& w, const VoteRequest& b) {
    w.u8(b.pre_vote ? 1 : 0);
    w.u64(b.last_log_index);
    w.u64(b.last_log_term);
    w.u8(b.transfer ? 1 : 0);
}
void put_body(ByteWriter& w, const VoteResponse& b) {
    w.u8(b.pre_vote ? 1 : 0);
    w.u8(b.granted ? 1 : 0);
}
void put_body(ByteWriter& w, const AppendRequest& b) {
    w.u64(b.prev_log_index);
    w.u64(b.prev_log_term);
    w.u64(b.leader_commit);
    w.u32(static_cast<std::uint32_t>(b.entries.size()));
    for (const Entry& e : b.entries) put_entry(w, e);
}
void put_body(ByteWriter& w, const AppendResponse& b) {
    w.u8(b.success ? 1 : 0);
    w.u64(b.match_index);
    w.u64(b.reject_index);
    w.u64(b.reject_hint);
    w.u64(b.hint_term);
}
void put_body(ByteWriter& w, const SnapshotRequest& b) {
    const Snapshot& s = b.snapshot;
    w.u64(s.meta.index);
    w.u64(s.meta.term);
    w.u32(static_cast<std::uint32_t>(s.meta.members.size()));
    for (NodeId id : s.meta.members) w.u64(id);
    w.str(s.data);
}
void put_body(ByteWriter& w, const Heartbeat& b) {
    w.u64(b.commit);
    w.u64(b.read_round);
}
void put_body(ByteWriter& w, const HeartbeatResponse& b) { w.u64(b.read_round); }
void put_body(ByteWriter&, const TimeoutNow&) {}

bool get_bool(ByteReader& r, const char* what) {
    const std::uint8_t v = r.u8(what);
    if (v > 1) r.fail(std::string(what) + " must be 0 or 1, got " + std::to_string(v));
    return v == 1;
}

// Reads an entry count and checks that many entries could fit in what is left.
std::uint32_t get_count(ByteReader& r, const char* what, std::size_t min_item_bytes) {
    const std::uint32_t n = r.u32(what);
    if (r.ok() && static_cast<std::uint64_t>(n) * min_item_bytes > r.remaining()) {
        r.fail(std::string(what) + " " + std::to_string(n) + " cannot fit in the " +
               std::to_string(r.remaining()) + " bytes left");
    }
    return r.ok() ? n : 0;
}

Entry get_entry(ByteReader& r) {
    Entry e;
    e.term = r.u64("entry term");
    e.index = r.u64("entry index");
    const std::uint8_t type = r.u8("entry type");
    if (type > static_cast<std::uint8_t>(EntryType::kNoop)) {
        r.fail("unknown entry type " + std::to_string(type));
    }
    e.type = static_cast<EntryType>(type);
    e.data = r.str("entry data", kMaxFrameBytes);
    return e;
}

MessageBody get_append(ByteReader& r) {
    AppendRequest b;
    b.prev_log_index = r.u64("prev_log_index");
    b.prev_log_term = r.u64("prev_log_term");
    b.leader_commit = r.u64("leader_commit");
    const std::uint32_t n = get_count(r, "entry count", kEntryHeaderBytes);
    b.entries.reserve(n);
    for (std::uint32_t i = 0; i < n && r.ok(); ++i) b.entries.push_back(get_entry(r));
    return b;
}

MessageBody get_snapshot(ByteReader& r) {
    SnapshotRequest b;
    b.snapshot.meta.index = r.u64("snapshot index");
    b.snapshot.meta.term = r.u64("snapshot term");
    const std::uint32_t n = get_count(r, "member count", 8);
    if (n > kMaxMembers) r.fail("member count " + std::to_string(n) + " exceeds " + std::to_string(kMaxMembers));
    for (std::uint32_t i = 0; i < n && r.ok(); ++i) b.snapshot.meta.members.push_back(r.u64("member id"));
    b.snapshot.data = r.str("snapshot data", kMaxFrameBytes);
    return b;
}

MessageBody get_body(ByteReader& r, std::uint8_t tag) {
    switch (tag) {
        case 1: {
            VoteRequest b;
            b.pre_vote = get_bool(r, "pre_vote");
            b.last_log_index = r.u64("last_log_index");
            b.last_log_term = r.u64("last_log_term");
            b.transfer = get_bool(r, "transfer");
            return b;
        }
        case 2: {
            VoteResponse b;
            b.pre_vote = get_bool(r, "pre_vote");
            b.granted = get_bool(r, "granted");
            return b;
        }
        case 3: return get_append(r);
        case 4: {
            AppendResponse b;
            b.success = get_bool(r, "success");
            b.match_index = r.u64("match_index");
            b.reject_index = r.u64("reject_index");
            b.reject_hint = r.u64("reject_hint");
            b.hint_term = r.u64("hint_term");
            return b;
        }
        case 5: return get_snapshot(r);
        case 6: {
            Heartbeat b;
            b.commit = r.u64("heartbeat commit");
            b.read_round = r.u64("read_round");
            return b;
        }
        case 7: return HeartbeatResponse{r.u64("read_round")};
        case 8: return TimeoutNow{};
        default: r.fail("unknown message tag " + std::to_string(tag)); return TimeoutNow{};
    }
}

}  // namespace

std::string encode_message(const raft::Message& m) {
    std::string out;
    ByteWriter w(out);
    w.u8(kRaftCodecVersion);
    w.u64(m.from);
    w.u64(m.to);
    w.u64(m.term);
    std::visit(
        [&w](const auto& body) {
            w.u8(tag_of<std::decay_t<decltype(body)>>());
            put_body(w, body);
        },
        m.body);
    return out;
}

std::variant<raft::Message, CodecError> decode_message(std::string_view bytes,
                                                       std::uint64_t cluster_id) {
    ByteReader r(bytes);
    const std::uint8_t version = r.u8("codec version");
    if (r.ok() && version != kRaftCodecVersion) {
        return CodecError{"unsupported raft codec version " + std::to_string(version)};
    }
    raft::Message m;
    m.cluster_id = cluster_id;
    m.from = r.u64("from");
    m.to = r.u64("to");
    m.term = r.u64("term");
    const std::uint8_t tag = r.u8("message tag");
    if (r.ok()) m.body = get_body(r, tag);
    if (r.ok() && r.remaining() != 0) {
        r.fail(std::to_string(r.remaining()) + " trailing bytes after the message");
    }
    if (!r.ok()) return CodecError{r.error()};
    return m;
}

}  // namespace pgfence::net
