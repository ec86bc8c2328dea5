#include "net/raft_codec.h"

#include <type_traits>

#include "codec/bytes.h"
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
    else if constexpr (std::is_same_v<T, SnapshotRequest>) return 9;  // or 5, 10, 13: see tag_of_body
    else if constexpr (std::is_same_v<T, Heartbeat>) return 6;
    else if constexpr (std::is_same_v<T, HeartbeatResponse>) return 7;
    else if constexpr (std::is_same_v<T, SnapshotAck>) return 11;
    else if constexpr (std::is_same_v<T, Removed>) return 12;
    else return 8;
}

void put_entry(std::string& out, const Entry& e) {
    codec::put_u64(out, e.term);
    codec::put_u64(out, e.index);
    codec::put_u8(out, static_cast<std::uint8_t>(e.type));
    codec::put_string(out, e.data);
}

void put_body(std::string& out, const VoteRequest& b) {
    codec::put_u8(out, b.pre_vote ? 1 : 0);
    codec::put_u64(out, b.last_log_index);
    codec::put_u64(out, b.last_log_term);
    codec::put_u8(out, b.transfer ? 1 : 0);
}
void put_body(std::string& out, const VoteResponse& b) {
    codec::put_u8(out, b.pre_vote ? 1 : 0);
    codec::put_u8(out, b.granted ? 1 : 0);
}
void put_body(std::string& out, const AppendRequest& b) {
    codec::put_u64(out, b.prev_log_index);
    codec::put_u64(out, b.prev_log_term);
    codec::put_u64(out, b.leader_commit);
    codec::put_u32(out, static_cast<std::uint32_t>(b.entries.size()));
    for (const Entry& e : b.entries) put_entry(out, e);
}
void put_body(std::string& out, const AppendResponse& b) {
    codec::put_u8(out, b.success ? 1 : 0);
    codec::put_u64(out, b.match_index);
    codec::put_u64(out, b.reject_index);
    codec::put_u64(out, b.reject_hint);
    codec::put_u64(out, b.hint_term);
}
template <class T>
std::uint8_t tag_of_body(const T&) {
    return tag_of<T>();
}
bool whole(const SnapshotRequest& b) { return b.offset == 0 && b.done; }

// A snapshot whose configuration a log entry made (config_index > 0) goes
// as tag 13, whole or a chunk. One of the first configuration goes as
// before: whole, of voters without contexts, as tag 5, which the release
// before learners reads too; any other whole one as tag 9; a chunk of a
// larger one as tag 10.
bool voters_only_whole(const SnapshotRequest& b) {
    return whole(b) && b.snapshot.meta.config_index == 0 && b.snapshot.meta.config.voters_only();
}
std::uint8_t tag_of_body(const SnapshotRequest& b) {
    if (b.snapshot.meta.config_index != 0) return 13;
    if (!whole(b)) return 10;
    return voters_only_whole(b) ? 5 : 9;
}

void put_body(std::string& out, const SnapshotRequest& b) {
    const Snapshot& s = b.snapshot;
    if (!whole(b) || s.meta.config_index != 0) {
        codec::put_u64(out, b.offset);
        codec::put_u8(out, b.done ? 1 : 0);
    }
    if (s.meta.config_index != 0) codec::put_u64(out, s.meta.config_index);
    codec::put_u64(out, s.meta.index);
    codec::put_u64(out, s.meta.term);
    if (voters_only_whole(b)) {
        codec::put_u32(out, static_cast<std::uint32_t>(s.meta.config.members.size()));
        for (const ConfigMember& m : s.meta.config.members) codec::put_u64(out, m.id);
    } else {
        codec::put_string(out, encode_configuration(s.meta.config));
    }
    codec::put_string(out, s.data);
}
void put_body(std::string& out, const Heartbeat& b) {
    codec::put_u64(out, b.commit);
    codec::put_u64(out, b.read_round);
}
void put_body(std::string& out, const HeartbeatResponse& b) { codec::put_u64(out, b.read_round); }
void put_body(std::string&, const TimeoutNow&) {}
void put_body(std::string&, const Removed&) {}
void put_body(std::string& out, const SnapshotAck& b) {
    codec::put_u64(out, b.index);
    codec::put_u64(out, b.received);
    codec::put_u8(out, b.rejected ? 1 : 0);
}

bool get_bool(codec::Reader& r, const char* what) {
    const std::uint8_t v = r.u8(what);
    if (v > 1) r.fail(std::string(what) + " must be 0 or 1, got " + std::to_string(v));
    return v == 1;
}

// Reads an entry count and checks that many entries could fit in what is left.
std::uint32_t get_count(codec::Reader& r, const char* what, std::size_t min_item_bytes) {
    const std::uint32_t n = r.u32(what);
    if (r.ok() && static_cast<std::uint64_t>(n) * min_item_bytes > r.remaining()) {
        r.fail(std::string(what) + " " + std::to_string(n) + " cannot fit in the " +
               std::to_string(r.remaining()) + " bytes left");
    }
    return r.ok() ? n : 0;
}

Entry get_entry(codec::Reader& r) {
    Entry e;
    e.term = r.u64("entry term");
    e.index = r.u64("entry index");
    const std::uint8_t type = r.u8("entry type");
    if (type > static_cast<std::uint8_t>(EntryType::kConfig)) {
        r.fail("unknown entry type " + std::to_string(type));
    }
    e.type = static_cast<EntryType>(type);
    e.data = r.string("entry data", kMaxFrameBytes);
    if (r.ok() && e.type == EntryType::kConfig) {
        if (std::string why = check_config_entry(e.data); !why.empty()) r.fail("configuration entry: " + why);
    }
    return e;
}

MessageBody get_append(codec::Reader& r) {
    AppendRequest b;
    b.prev_log_index = r.u64("prev_log_index");
    b.prev_log_term = r.u64("prev_log_term");
    b.leader_commit = r.u64("leader_commit");
    const std::uint32_t n = get_count(r, "entry count", kEntryHeaderBytes);
    b.entries.reserve(n);
    for (std::uint32_t i = 0; i < n && r.ok(); ++i) b.entries.push_back(get_entry(r));
    return b;
}

enum class SnapshotTag { kWhole, kVotersOnly, kChunk, kIndexed };

// Tag 9 (kWhole), 5 (kVotersOnly: a member list without learners), 10
// (kChunk: offset and done first, then as tag 9) or 13 (kIndexed: offset,
// done and the configuration's index first, then as tag 9).
MessageBody get_snapshot(codec::Reader& r, SnapshotTag tag) {
    SnapshotRequest b;
    if (tag == SnapshotTag::kChunk || tag == SnapshotTag::kIndexed) {
        b.offset = r.u64("snapshot chunk offset");
        b.done = get_bool(r, "snapshot chunk done");
        if (r.ok() && tag == SnapshotTag::kChunk && b.offset == 0 && b.done) {
            r.fail("a snapshot chunk that is the whole snapshot is sent as tag 5 or 9");
        }
    }
    if (tag == SnapshotTag::kIndexed) {
        b.snapshot.meta.config_index = r.u64("snapshot configuration index");
        if (r.ok() && b.snapshot.meta.config_index == 0) {
            r.fail("a snapshot of the first configuration (configuration index 0) is sent as tag 5, 9 or 10");
        }
    }
    b.snapshot.meta.index = r.u64("snapshot index");
    b.snapshot.meta.term = r.u64("snapshot term");
    if (r.ok() && b.snapshot.meta.config_index > b.snapshot.meta.index) {
        r.fail("snapshot configuration index " + std::to_string(b.snapshot.meta.config_index) +
               " is beyond the snapshot index " + std::to_string(b.snapshot.meta.index));
    }
    const bool voters_only = tag == SnapshotTag::kVotersOnly;
    if (voters_only) {
        const std::uint32_t n = get_count(r, "member count", 8);
        if (n > kMaxMembers) r.fail("member count " + std::to_string(n) + " exceeds " + std::to_string(kMaxMembers));
        std::vector<NodeId> ids;
        for (std::uint32_t i = 0; i < n && r.ok(); ++i) ids.push_back(r.u64("member id"));
        b.snapshot.meta.config = Configuration::of_voters(ids);
    } else {
        const std::string_view config = r.string("snapshot configuration", kMaxFrameBytes);
        if (r.ok()) {
            if (std::string why = decode_configuration(config, b.snapshot.meta.config); !why.empty()) {
                r.fail("snapshot configuration: " + why);
            }
        }
    }
    b.snapshot.data = r.string("snapshot data", kMaxFrameBytes);
    return b;
}

MessageBody get_body(codec::Reader& r, std::uint8_t tag) {
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
        case 5: return get_snapshot(r, SnapshotTag::kVotersOnly);
        case 6: {
            Heartbeat b;
            b.commit = r.u64("heartbeat commit");
            b.read_round = r.u64("read_round");
            return b;
        }
        case 7: return HeartbeatResponse{r.u64("read_round")};
        case 8: return TimeoutNow{};
        case 9: return get_snapshot(r, SnapshotTag::kWhole);
        case 10: return get_snapshot(r, SnapshotTag::kChunk);
        case 13: return get_snapshot(r, SnapshotTag::kIndexed);
        case 12: return Removed{};
        case 11: {
            SnapshotAck b;
            b.index = r.u64("snapshot ack index");
            b.received = r.u64("snapshot ack received");
            b.rejected = get_bool(r, "snapshot ack rejected");
            return b;
        }
        default: r.fail("unknown message tag " + std::to_string(tag)); return TimeoutNow{};
    }
}

}  // namespace

std::string encode_message(const raft::Message& m) {
    std::string out;
    codec::put_u8(out, kRaftCodecVersion);
    codec::put_u64(out, m.from);
    codec::put_u64(out, m.to);
    codec::put_u64(out, m.term);
    std::visit(
        [&out](const auto& body) {
            codec::put_u8(out, tag_of_body(body));
            put_body(out, body);
        },
        m.body);
    return out;
}

std::variant<raft::Message, CodecError> decode_message(std::string_view bytes,
                                                       std::uint64_t cluster_id) {
    codec::Reader r(bytes, peer_read_error);
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
    if (!r.expect_end("the message")) return CodecError{r.error()};
    return m;
}

}  // namespace pgfence::net
