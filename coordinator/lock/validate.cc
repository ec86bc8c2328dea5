// Value checks for keys, owners, users and whole commands (commands.h).
//
// Text rule (keys, owners and users): well-formed UTF-8 (RFC 3629: no overlong forms,
// no surrogates U+D800..U+DFFF, nothing above U+10FFFF) without control
// characters: C0 (U+0000..U+001F), DEL (U+007F) and C1 (U+0080..U+009F).
#include <cstdio>
#include <string>
#include <type_traits>

#include "lock/commands.h"

namespace pgfence::lock {

namespace {

constexpr char32_t kMaxCodePoint = 0x10FFFF;
constexpr char32_t kFirstSurrogate = 0xD800;
constexpr char32_t kLastSurrogate = 0xDFFF;

std::string hex_byte(unsigned char byte) {
    char text[8];
    std::snprintf(text, sizeof text, "0x%02X", static_cast<unsigned>(byte));
    return text;
}

std::string hex_code_point(char32_t cp) {
    char text[16];
    std::snprintf(text, sizeof text, "U+%04X", static_cast<unsigned>(cp));
    return text;
}

bool is_control(char32_t cp) {
    return cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F);
}

// Sequence length announced by a lead byte, or 0 if it cannot start one.
// 0xC0/0xC1 only start overlong 2-byte forms; 0xF5..0xFF only code points > U+10FFFF.
std::size_t sequence_length(unsigned char lead) {
    if (lead < 0x80) return 1;
    if (lead >= 0xC2 && lead <= 0xDF) return 2;
    if (lead >= 0xE0 && lead <= 0xEF) return 3;
    if (lead >= 0xF0 && lead <= 0xF4) return 4;
    return 0;
}

char32_t smallest_for_length(std::size_t length) {
    constexpr char32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
    return kSmallest[length];
}

// Decodes the sequence starting at `at`; on success stores the code point and
// its length, else returns why not.
std::string decode_one(std::string_view text, std::size_t at, char32_t& cp, std::size_t& length) {
    const auto lead = static_cast<unsigned char>(text[at]);
    length = sequence_length(lead);
    if (length == 0) return "invalid UTF-8 lead byte " + hex_byte(lead);
    if (length > text.size() - at) return "truncated UTF-8 sequence";
    cp = length == 1 ? lead : lead & (0x7Fu >> length);
    for (std::size_t i = 1; i < length; ++i) {
        const auto next = static_cast<unsigned char>(text[at + i]);
        if ((next & 0xC0u) != 0x80u) return "invalid UTF-8 continuation byte " + hex_byte(next);
        cp = (cp << 6) | (next & 0x3Fu);
    }
    if (cp < smallest_for_length(length)) return "overlong UTF-8 encoding of " + hex_code_point(cp);
    if (cp >= kFirstSurrogate && cp <= kLastSurrogate) {
        return "UTF-8 encoded surrogate " + hex_code_point(cp);
    }
    if (cp > kMaxCodePoint) return "code point " + hex_code_point(cp) + " above U+10FFFF";
    return {};
}

// Empty if `text` is valid UTF-8 without control characters, else why not.
std::string check_text(std::string_view what, std::string_view text) {
    std::size_t at = 0;
    while (at < text.size()) {
        char32_t cp = 0;
        std::size_t length = 0;
        std::string problem = decode_one(text, at, cp, length);
        if (problem.empty() && is_control(cp)) {
            problem = "control character " + hex_code_point(cp);
        }
        if (!problem.empty()) {
            return std::string(what) + " byte " + std::to_string(at) + ": " + problem;
        }
        at += length;
    }
    return {};
}

std::string check_lease(std::uint64_t lease_ms) {
    if (lease_ms == 0 || lease_ms > kMaxLeaseMs) {
        return "lease_ms " + std::to_string(lease_ms) + " is outside 1.." +
               std::to_string(kMaxLeaseMs);
    }
    return {};
}

std::string check_grant(const Grant& grant) {
    if (auto problem = validate_key(grant.key); !problem.empty()) return problem;
    if (auto problem = check_lease(grant.lease_ms); !problem.empty()) return problem;
    if (auto problem = validate_owner(grant.owner); !problem.empty()) return problem;
    if (auto problem = validate_user(grant.user); !problem.empty()) return problem;
    return validate_value(grant.value);
}

std::string check_proclaim(const Proclaim& proclaim) {
    if (auto problem = validate_key(proclaim.key); !problem.empty()) return problem;
    return validate_value(proclaim.value);
}

std::string check_floor(const SetTokenFloor& set) {
    if (set.floor > kMaxToken) {
        return "token floor " + std::to_string(set.floor) + " is above the maximum token " +
               std::to_string(kMaxToken);
    }
    return {};
}

std::string check_expire_many(const ExpireMany& many) {
    if (many.locks.empty() || many.locks.size() > kMaxExpireMany) {
        return "expire_many holds " + std::to_string(many.locks.size()) + " locks; it must hold 1.." +
               std::to_string(kMaxExpireMany);
    }
    std::size_t bytes = 0;
    for (std::size_t i = 0; i < many.locks.size(); ++i) {
        if (auto problem = validate_key(many.locks[i].key); !problem.empty()) {
            return "expire_many lock " + std::to_string(i) + ": " + problem;
        }
        bytes += expire_many_bytes(many.locks[i].key.size());
    }
    if (bytes > kMaxExpireManyBytes) {
        return "expire_many locks take " + std::to_string(bytes) + " bytes; the limit is " +
               std::to_string(kMaxExpireManyBytes);
    }
    return {};
}

// 2..kMaxGrantManyKeys valid, distinct keys, the command within
// kMaxGrantManyBytes (`bytes`: its encoded size).
std::string check_keys(std::string_view what, const std::vector<std::string>& keys, std::size_t bytes) {
    if (keys.size() < kMinGrantManyKeys || keys.size() > kMaxGrantManyKeys) {
        return std::string(what) + " names " + std::to_string(keys.size()) + " keys; it must name " +
               std::to_string(kMinGrantManyKeys) + ".." + std::to_string(kMaxGrantManyKeys);
    }
    for (std::size_t i = 0; i < keys.size(); ++i) {
        if (auto problem = validate_key(keys[i]); !problem.empty()) {
            return std::string(what) + " key " + std::to_string(i) + ": " + problem;
        }
    }
    // At most 64 keys: comparing each pair costs less than building a set.
    for (std::size_t i = 1; i < keys.size(); ++i) {
        for (std::size_t j = 0; j < i; ++j) {
            if (keys[i] == keys[j]) {
                return std::string(what) + " key " + std::to_string(i) + " repeats key " + std::to_string(j) +
                       " (keys must be distinct)";
            }
        }
    }
    if (bytes > kMaxGrantManyBytes) {
        return std::string(what) + " takes " + std::to_string(bytes) + " bytes encoded; the limit is " +
               std::to_string(kMaxGrantManyBytes);
    }
    return {};
}

std::string check_checkpoint(const Checkpoint& checkpoint) {
    if (checkpoint.locks.empty() || checkpoint.locks.size() > kMaxCheckpoints) {
        return "checkpoint holds " + std::to_string(checkpoint.locks.size()) + " locks; it must hold 1.." +
               std::to_string(kMaxCheckpoints);
    }
    std::size_t bytes = 0;
    for (std::size_t i = 0; i < checkpoint.locks.size(); ++i) {
        const LeaseCheckpoint& c = checkpoint.locks[i];
        if (auto problem = validate_key(c.key); !problem.empty()) {
            return "checkpoint lock " + std::to_string(i) + ": " + problem;
        }
        if (c.remaining_ms > kMaxLeaseMs) {
            return "checkpoint lock " + std::to_string(i) + ": remaining_ms " + std::to_string(c.remaining_ms) +
                   " is above " + std::to_string(kMaxLeaseMs);
        }
        bytes += checkpoint_bytes(c.key.size());
    }
    if (bytes > kMaxCheckpointBytes) {
        return "checkpoint locks take " + std::to_string(bytes) + " bytes; the limit is " +
               std::to_string(kMaxCheckpointBytes);
    }
    return {};
}

std::string check_grant_many(const GrantMany& many) {
    if (auto problem = check_keys("grant_many", many.keys, encoded_bytes(many)); !problem.empty()) return problem;
    if (auto problem = check_lease(many.lease_ms); !problem.empty()) return problem;
    if (auto problem = validate_owner(many.owner); !problem.empty()) return problem;
    return validate_user(many.user);
}

}  // namespace

std::string validate_key(std::string_view key) {
    if (key.size() < kMinKeyBytes || key.size() > kMaxKeyBytes) {
        return "key is " + std::to_string(key.size()) + " bytes; it must be " +
               std::to_string(kMinKeyBytes) + ".." + std::to_string(kMaxKeyBytes) + " bytes";
    }
    return check_text("key", key);
}

std::string validate_owner(std::string_view owner) {
    if (owner.size() > kMaxOwnerBytes) {
        return "owner is " + std::to_string(owner.size()) + " bytes; the limit is " +
               std::to_string(kMaxOwnerBytes) + " bytes";
    }
    return check_text("owner", owner);
}

std::string validate_user(std::string_view user) {
    if (user.size() > kMaxUserBytes) {
        return "user is " + std::to_string(user.size()) + " bytes; the limit is " + std::to_string(kMaxUserBytes) +
               " bytes";
    }
    return check_text("user", user);
}

std::string validate_value(std::string_view value) {
    if (value.size() > kMaxValueBytes) {
        return "value is " + std::to_string(value.size()) + " bytes; the limit is " +
               std::to_string(kMaxValueBytes) + " bytes";
    }
    return check_text("value", value);
}

std::string validate(const Grant& grant) {
    return check_grant(grant);
}

std::string validate(const ExpireMany& many) {
    return check_expire_many(many);
}

std::string validate(const GrantMany& many) {
    return check_grant_many(many);
}

std::string validate(const ReleaseMany& many) {
    return check_keys("release_many", many.keys, encoded_bytes(many));
}

std::string validate(const Checkpoint& checkpoint) {
    return check_checkpoint(checkpoint);
}

std::string validate(const Proclaim& proclaim) {
    return check_proclaim(proclaim);
}

std::string validate(const Command& cmd) {
    return std::visit(
        [](const auto& c) -> std::string {
            using C = std::decay_t<decltype(c)>;
            if constexpr (std::is_same_v<C, Grant>) {
                return check_grant(c);
            } else if constexpr (std::is_same_v<C, SetTokenFloor>) {
                return check_floor(c);
            } else if constexpr (std::is_same_v<C, ExpireMany>) {
                return check_expire_many(c);
            } else if constexpr (std::is_same_v<C, GrantMany> || std::is_same_v<C, ReleaseMany>) {
                return validate(c);
            } else if constexpr (std::is_same_v<C, Checkpoint>) {
                return check_checkpoint(c);
            } else if constexpr (std::is_same_v<C, Proclaim>) {
                return check_proclaim(c);
            } else {
                return validate_key(c.key);  // Release, Expire: any token is well-formed
            }
        },
        cmd);
}

}  // namespace pgfence::lock
