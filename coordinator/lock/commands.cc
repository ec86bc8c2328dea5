// Command encoding, decoding and log descriptions (format in commands.h).
#include "lock/commands.h"

#include <optional>
#include <type_traits>

#include "codec/bytes.h"

namespace pgfence::lock {

namespace {

constexpr std::uint8_t kCommandVersion = 1;
constexpr std::uint8_t kUserCommandVersion = 2;   // a Grant with a user (commands.h)
constexpr std::uint8_t kValueCommandVersion = 3;  // a Grant with a value (commands.h)
constexpr std::uint8_t kStampedVersion = 4;       // the leader's wall clock, then a command (commands.h)

enum class Tag : std::uint8_t {
    kGrant = 1,
    kRelease = 2,
    kExpire = 3,
    kSetTokenFloor = 4,
    kExpireMany = 5,
    kGrantMany = 6,
    kReleaseMany = 7,
    kCheckpoint = 8,
    kProclaim = 9,
};

// How many bytes of a key or owner describe() prints before "...".
constexpr std::size_t kMaxDescribedBytes = kMaxKeyBytes;

std::uint8_t tag_byte(Tag tag) {
    return static_cast<std::uint8_t>(tag);
}

void encode_fields(std::string& out, const Grant& grant) {
    codec::put_u8(out, tag_byte(Tag::kGrant));
    codec::put_string(out, grant.key, kMaxKeyBytes, "grant key");
    codec::put_u64(out, grant.lease_ms);
    codec::put_string(out, grant.owner, kMaxOwnerBytes, "grant owner");
    if (!grant.value.empty()) {
        codec::put_string(out, grant.user, kMaxUserBytes, "grant user");
        codec::put_string(out, grant.value, kMaxValueBytes, "grant value");
    } else if (!grant.user.empty()) {
        codec::put_string(out, grant.user, kMaxUserBytes, "grant user");
    }
}

std::uint8_t version_of(const Command& cmd) {
    const auto* grant = std::get_if<Grant>(&cmd);
    if (grant == nullptr) return kCommandVersion;
    if (!grant->value.empty()) return kValueCommandVersion;
    return !grant->user.empty() ? kUserCommandVersion : kCommandVersion;
}

void encode_fields(std::string& out, const Proclaim& proclaim) {
    codec::put_u8(out, tag_byte(Tag::kProclaim));
    codec::put_string(out, proclaim.key, kMaxKeyBytes, "proclaim key");
    codec::put_u64(out, proclaim.token);
    codec::put_string(out, proclaim.value, kMaxValueBytes, "proclaim value");
}

void encode_fields(std::string& out, const Release& release) {
    codec::put_u8(out, tag_byte(Tag::kRelease));
    codec::put_string(out, release.key, kMaxKeyBytes, "release key");
    codec::put_u64(out, release.token);
}

void encode_fields(std::string& out, const Expire& expire) {
    codec::put_u8(out, tag_byte(Tag::kExpire));
    codec::put_string(out, expire.key, kMaxKeyBytes, "expire key");
    codec::put_u64(out, expire.token);
}

void encode_fields(std::string& out, const SetTokenFloor& set) {
    codec::put_u8(out, tag_byte(Tag::kSetTokenFloor));
    codec::put_u64(out, set.floor);
}

// The count is not checked here (encode() encodes what it is given; decode
// and validate() bound it).
void encode_fields(std::string& out, const ExpireMany& many) {
    codec::put_u8(out, tag_byte(Tag::kExpireMany));
    codec::put_u32(out, static_cast<std::uint32_t>(many.locks.size()));
    for (const Expire& e : many.locks) {
        codec::put_string(out, e.key, kMaxKeyBytes, "expire_many key");
        codec::put_u64(out, e.token);
    }
}

void put_keys(std::string& out, const std::vector<std::string>& keys, std::string_view field) {
    codec::put_u32(out, static_cast<std::uint32_t>(keys.size()));
    for (const std::string& key : keys) codec::put_string(out, key, kMaxKeyBytes, field);
}

// The count is not checked here either (validate() bounds it).
void encode_fields(std::string& out, const GrantMany& many) {
    codec::put_u8(out, tag_byte(Tag::kGrantMany));
    put_keys(out, many.keys, "grant_many key");
    codec::put_u64(out, many.lease_ms);
    codec::put_string(out, many.owner, kMaxOwnerBytes, "grant_many owner");
    codec::put_string(out, many.user, kMaxUserBytes, "grant_many user");
}

void encode_fields(std::string& out, const ReleaseMany& many) {
    codec::put_u8(out, tag_byte(Tag::kReleaseMany));
    put_keys(out, many.keys, "release_many key");
    codec::put_u64(out, many.token);
}

// A GrantMany's or ReleaseMany's keys: the count in 2..kMaxGrantManyKeys,
// then each key (distinctness is validate()'s).
std::optional<std::vector<std::string>> decode_keys(codec::Reader& in, std::string_view what) {
    const std::size_t count_offset = in.offset();
    const std::uint32_t count = in.u32(std::string(what) + " count");
    if (!in.ok()) return std::nullopt;
    if (count < kMinGrantManyKeys || count > kMaxGrantManyKeys) {
        in.fail_at(count_offset, std::string(what) + " count " + std::to_string(count) + " is not in " +
                                     std::to_string(kMinGrantManyKeys) + ".." + std::to_string(kMaxGrantManyKeys));
        return std::nullopt;
    }
    const std::string field = std::string(what) + " key";
    std::vector<std::string> keys;
    keys.reserve(count);
    for (std::uint32_t i = 0; i < count; ++i) {
        const std::string_view key = in.string(field, kMaxKeyBytes);
        if (!in.ok()) return std::nullopt;
        keys.emplace_back(key);
    }
    return keys;
}

std::optional<Command> decode_grant_many(codec::Reader& in) {
    auto keys = decode_keys(in, "grant_many");
    if (!keys) return std::nullopt;
    const std::uint64_t lease_ms = in.u64("grant_many lease_ms");
    const std::string_view owner = in.string("grant_many owner", kMaxOwnerBytes);
    const std::string_view user = in.string("grant_many user", kMaxUserBytes);
    if (!in.ok()) return std::nullopt;
    return GrantMany{std::move(*keys), lease_ms, std::string(owner), std::string(user)};
}

std::optional<Command> decode_release_many(codec::Reader& in) {
    auto keys = decode_keys(in, "release_many");
    if (!keys) return std::nullopt;
    const std::uint64_t token = in.u64("release_many token");
    if (!in.ok()) return std::nullopt;
    return ReleaseMany{std::move(*keys), token};
}

void encode_fields(std::string& out, const Checkpoint& checkpoint) {
    codec::put_u8(out, tag_byte(Tag::kCheckpoint));
    codec::put_u32(out, static_cast<std::uint32_t>(checkpoint.locks.size()));
    for (const LeaseCheckpoint& c : checkpoint.locks) {
        codec::put_string(out, c.key, kMaxKeyBytes, "checkpoint key");
        codec::put_u64(out, c.token);
        codec::put_u64(out, c.remaining_ms);
    }
}

// Version 2 adds the user, which is then never empty; version 3 the user
// (may be empty) and the value, which is then never empty (commands.h).
std::optional<Command> decode_grant(codec::Reader& in, std::uint8_t version) {
    const std::string_view key = in.string("grant key", kMaxKeyBytes);
    const std::uint64_t lease_ms = in.u64("grant lease_ms");
    const std::string_view owner = in.string("grant owner", kMaxOwnerBytes);
    std::string_view user;
    std::string_view value;
    const std::size_t user_offset = in.offset();
    if (version >= kUserCommandVersion) user = in.string("grant user", kMaxUserBytes);
    const std::size_t value_offset = in.offset();
    if (version == kValueCommandVersion) value = in.string("grant value", kMaxValueBytes);
    if (!in.ok()) return std::nullopt;
    if (version == kUserCommandVersion && user.empty()) {
        in.fail_at(user_offset, "grant user is empty in command version 2 (a grant without a user is version 1)");
        return std::nullopt;
    }
    if (version == kValueCommandVersion && value.empty()) {
        in.fail_at(value_offset,
                   "grant value is empty in command version 3 (a grant without a value is version 1 or 2)");
        return std::nullopt;
    }
    return Grant{std::string(key), lease_ms, std::string(owner), std::string(user), std::string(value)};
}

std::optional<Command> decode_proclaim(codec::Reader& in) {
    const std::string_view key = in.string("proclaim key", kMaxKeyBytes);
    const std::uint64_t token = in.u64("proclaim token");
    const std::string_view value = in.string("proclaim value", kMaxValueBytes);
    if (!in.ok()) return std::nullopt;
    return Proclaim{std::string(key), token, std::string(value)};
}

template <typename KeyToken>
std::optional<Command> decode_key_token(codec::Reader& in, std::string_view key_field,
                                        std::string_view token_field) {
    const std::string_view key = in.string(key_field, kMaxKeyBytes);
    const std::uint64_t token = in.u64(token_field);
    if (!in.ok()) return std::nullopt;
    return KeyToken{std::string(key), token};
}

std::optional<Command> decode_expire_many(codec::Reader& in) {
    const std::size_t count_offset = in.offset();
    const std::uint32_t count = in.u32("expire_many count");
    if (!in.ok()) return std::nullopt;
    if (count < 1 || count > kMaxExpireMany) {
        in.fail_at(count_offset, "expire_many count " + std::to_string(count) + " is not in 1.." +
                                     std::to_string(kMaxExpireMany));
        return std::nullopt;
    }
    ExpireMany many;
    many.locks.reserve(count);
    for (std::uint32_t i = 0; i < count; ++i) {
        const std::string_view key = in.string("expire_many key", kMaxKeyBytes);
        const std::uint64_t token = in.u64("expire_many token");
        if (!in.ok()) return std::nullopt;
        many.locks.push_back(Expire{std::string(key), token});
    }
    return many;
}

std::optional<Command> decode_checkpoint(codec::Reader& in) {
    const std::size_t count_offset = in.offset();
    const std::uint32_t count = in.u32("checkpoint count");
    if (!in.ok()) return std::nullopt;
    if (count < 1 || count > kMaxCheckpoints) {
        in.fail_at(count_offset, "checkpoint count " + std::to_string(count) + " is not in 1.." +
                                     std::to_string(kMaxCheckpoints));
        return std::nullopt;
    }
    Checkpoint checkpoint;
    checkpoint.locks.reserve(count);
    for (std::uint32_t i = 0; i < count; ++i) {
        const std::string_view key = in.string("checkpoint key", kMaxKeyBytes);
        const std::uint64_t token = in.u64("checkpoint token");
        const std::uint64_t remaining_ms = in.u64("checkpoint remaining_ms");
        if (!in.ok()) return std::nullopt;
        checkpoint.locks.push_back(LeaseCheckpoint{std::string(key), token, remaining_ms});
    }
    return checkpoint;
}

std::optional<Command> decode_floor(codec::Reader& in) {
    const std::uint64_t floor = in.u64("set_token_floor floor");
    if (!in.ok()) return std::nullopt;
    return SetTokenFloor{floor};
}

std::optional<Command> decode_body(codec::Reader& in, std::uint8_t version) {
    const std::size_t tag_offset = in.offset();
    const std::uint8_t tag = in.u8("tag");
    if (!in.ok()) return std::nullopt;
    if (version != kCommandVersion && static_cast<Tag>(tag) != Tag::kGrant) {
        in.fail_at(tag_offset, "command tag " + std::to_string(tag) + " in command version " + std::to_string(version) +
                                   " (only a grant, tag 1, is)");
        return std::nullopt;
    }
    switch (static_cast<Tag>(tag)) {
        case Tag::kGrant:
            return decode_grant(in, version);
        case Tag::kRelease:
            return decode_key_token<Release>(in, "release key", "release token");
        case Tag::kExpire:
            return decode_key_token<Expire>(in, "expire key", "expire token");
        case Tag::kSetTokenFloor:
            return decode_floor(in);
        case Tag::kExpireMany:
            return decode_expire_many(in);
        case Tag::kGrantMany:
            return decode_grant_many(in);
        case Tag::kReleaseMany:
            return decode_release_many(in);
        case Tag::kCheckpoint:
            return decode_checkpoint(in);
        case Tag::kProclaim:
            return decode_proclaim(in);
    }
    in.fail_at(tag_offset, "unknown command tag " + std::to_string(tag) + " (known: 1..9)");
    return std::nullopt;
}

// Quotes `text` for a log line: printable ASCII as is (with \" and \\),
// every other byte as \xNN, so a hostile key cannot forge log lines.
std::string quoted(std::string_view text) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out = "\"";
    for (char c : text.substr(0, kMaxDescribedBytes)) {
        const auto byte = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (byte >= 0x20 && byte < 0x7F) {
            out += c;
        } else {
            out += "\\x";
            out += kHex[byte >> 4];
            out += kHex[byte & 0xF];
        }
    }
    out += text.size() > kMaxDescribedBytes ? "\"..." : "\"";
    return out;
}

std::string describe_keys(const std::vector<std::string>& keys) {
    std::string out = "count=" + std::to_string(keys.size());
    if (!keys.empty()) out += " first_key=" + quoted(keys.front());
    return out;
}

std::size_t keys_bytes(const std::vector<std::string>& keys) {
    std::size_t bytes = 4;  // the count
    for (const std::string& key : keys) bytes += 4 + key.size();
    return bytes;
}

}  // namespace

std::size_t encoded_bytes(const GrantMany& many) {
    return 2 + keys_bytes(many.keys) + 8 + 4 + many.owner.size() + 4 + many.user.size();
}

std::size_t encoded_bytes(const ReleaseMany& many) {
    return 2 + keys_bytes(many.keys) + 8;
}

std::string encode(const Command& cmd) {
    std::string out;
    codec::put_u8(out, version_of(cmd));
    std::visit([&out](const auto& c) { encode_fields(out, c); }, cmd);
    return out;
}

std::string encode(const Command& cmd, std::uint64_t wall_ms) {
    std::string out;
    codec::put_u8(out, kStampedVersion);
    codec::put_u64(out, wall_ms);
    out += encode(cmd);
    return out;
}

std::variant<Stamped, DecodeError> decode_entry(std::string_view bytes) {
    codec::Reader in(bytes, read_error, "command");
    std::uint8_t version = in.u8("version");
    std::optional<std::uint64_t> wall_ms;
    if (in.ok() && version == kStampedVersion) {
        wall_ms = in.u64("wall_ms");
        const std::size_t inner_offset = in.offset();
        version = in.u8("stamped command version");
        if (in.ok() && (version < kCommandVersion || version > kValueCommandVersion)) {
            in.fail_at(inner_offset, "stamped command version " + std::to_string(version) + " (known: " +
                                         std::to_string(kCommandVersion) + ".." +
                                         std::to_string(kValueCommandVersion) + ")");
        }
    } else if (in.ok() && (version < kCommandVersion || version > kValueCommandVersion)) {
        in.fail_at(0, "unknown command version " + std::to_string(version) + " (known: " +
                          std::to_string(kCommandVersion) + ".." + std::to_string(kStampedVersion) + ")");
    }
    std::optional<Command> cmd;
    if (in.ok()) cmd = decode_body(in, version);
    if (!cmd || !in.expect_end("the end")) return DecodeError{in.error()};
    return Stamped{std::move(*cmd), wall_ms};
}

std::variant<Command, DecodeError> decode_command(std::string_view bytes) {
    auto decoded = decode_entry(bytes);
    if (auto* err = std::get_if<DecodeError>(&decoded)) return std::move(*err);
    return std::move(std::get<Stamped>(decoded).command);
}

std::string read_error(const codec::ReadFailure& failure, std::string_view context) {
    using Kind = codec::ReadFailure::Kind;
    std::string problem(failure.field);
    switch (failure.kind) {
        case Kind::kShort:
        case Kind::kShortString:
            if (failure.length_prefix) problem += " length";
            problem += " needs " + std::to_string(failure.size) + " bytes but only " +
                       std::to_string(failure.limit) + " remain";
            break;
        case Kind::kTooLong:
            problem += " length " + std::to_string(failure.size) + " exceeds the limit of " +
                       std::to_string(failure.limit) + " bytes";
            break;
        case Kind::kProblem:
            break;
    }
    return std::string(context) + ": " + problem + " (at byte offset " +
           std::to_string(failure.offset) + ")";
}

std::string describe(const Command& cmd) {
    return std::visit(
        [](const auto& c) -> std::string {
            using C = std::decay_t<decltype(c)>;
            if constexpr (std::is_same_v<C, Grant>) {
                return "grant key=" + quoted(c.key) + " lease_ms=" + std::to_string(c.lease_ms) +
                       " owner=" + quoted(c.owner) + " user=" + quoted(c.user) +
                       (c.value.empty() ? std::string() : " value_bytes=" + std::to_string(c.value.size()));
            } else if constexpr (std::is_same_v<C, Release>) {
                return "release key=" + quoted(c.key) + " token=" + std::to_string(c.token);
            } else if constexpr (std::is_same_v<C, Expire>) {
                return "expire key=" + quoted(c.key) + " token=" + std::to_string(c.token);
            } else if constexpr (std::is_same_v<C, GrantMany>) {
                return "grant_many " + describe_keys(c.keys) + " lease_ms=" + std::to_string(c.lease_ms) +
                       " owner=" + quoted(c.owner) + " user=" + quoted(c.user);
            } else if constexpr (std::is_same_v<C, ReleaseMany>) {
                return "release_many " + describe_keys(c.keys) + " token=" + std::to_string(c.token);
            } else if constexpr (std::is_same_v<C, Proclaim>) {
                return "proclaim key=" + quoted(c.key) + " token=" + std::to_string(c.token) +
                       " value_bytes=" + std::to_string(c.value.size());
            } else if constexpr (std::is_same_v<C, ExpireMany>) {
                std::string out = "expire_many count=" + std::to_string(c.locks.size());
                if (!c.locks.empty()) {
                    out += " first_key=" + quoted(c.locks.front().key) + " first_token=" +
                           std::to_string(c.locks.front().token);
                }
                return out;
            } else if constexpr (std::is_same_v<C, Checkpoint>) {
                std::string out = "checkpoint count=" + std::to_string(c.locks.size());
                if (!c.locks.empty()) {
                    out += " first_key=" + quoted(c.locks.front().key) + " first_token=" +
                           std::to_string(c.locks.front().token) +
                           " first_remaining_ms=" + std::to_string(c.locks.front().remaining_ms);
                }
                return out;
            } else {
                return "set_token_floor floor=" + std::to_string(c.floor);
            }
        },
        cmd);
}

std::string describe(const Result& result) {
    return std::visit(
        [](const auto& r) -> std::string {
            using R = std::decay_t<decltype(r)>;
            if constexpr (std::is_same_v<R, Granted>) {
                return "granted token=" + std::to_string(r.token) + (r.created ? " created=true" : " created=false") +
                       " lease_ms=" + std::to_string(r.lease_ms);
            } else if constexpr (std::is_same_v<R, GrantRejected>) {
                return "grant_rejected holder_token=" + std::to_string(r.holder_token) +
                       (r.key.empty() ? "" : " key=" + quoted(r.key));
            } else if constexpr (std::is_same_v<R, PartOfSet>) {
                return "part_of_set key=" + quoted(r.key) + " token=" + std::to_string(r.token) +
                       " keys=" + std::to_string(r.keys);
            } else if constexpr (std::is_same_v<R, Released>) {
                return "released";
            } else if constexpr (std::is_same_v<R, NotFound>) {
                return "not_found";
            } else if constexpr (std::is_same_v<R, Expired>) {
                return std::string("expired existed=") + (r.existed ? "true" : "false");
            } else if constexpr (std::is_same_v<R, Noop>) {
                return "noop";
            } else if constexpr (std::is_same_v<R, ExpiredMany>) {
                return "expired_many existed=" + std::to_string(r.existed);
            } else if constexpr (std::is_same_v<R, Checkpointed>) {
                return "checkpointed applied=" + std::to_string(r.applied);
            } else if constexpr (std::is_same_v<R, Proclaimed>) {
                return "proclaimed";
            } else if constexpr (std::is_same_v<R, FloorSet>) {
                return "floor_set floor=" + std::to_string(r.floor);
            } else {
                return "table_full table_bytes=" + std::to_string(r.table_bytes);
            }
        },
        result);
}

}  // namespace pgfence::lock
