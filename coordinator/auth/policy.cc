#include "auth/policy.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <algorithm>
#include <unordered_map>

namespace pgfence::auth {

namespace {

bool name_char(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '@' || c == ':' || c == '-';
}

// RFC 6750 b64token: ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/", then "="s.
bool bearer_ok(std::string_view s) {
    if (s.size() < kMinBearerChars || s.size() > kMaxBearerChars) return false;
    std::size_t i = 0;
    for (; i < s.size(); ++i) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum && c != '-' && c != '.' && c != '_' && c != '~' && c != '+' && c != '/') break;
    }
    if (i == 0) return false;
    for (; i < s.size(); ++i) {
        if (s[i] != '=') return false;
    }
    return true;
}

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// Fields of one line, split at spaces and tabs; a '#' outside a field starts a comment.
std::vector<std::string_view> fields(std::string_view line) {
    std::vector<std::string_view> out;
    std::size_t i = 0;
    while (i < line.size()) {
        while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
        if (i == line.size() || line[i] == '#') break;
        const std::size_t start = i;
        while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
        out.push_back(line.substr(start, i - start));
    }
    return out;
}

std::string quoted(std::string_view s) {
    std::string out = "'";
    for (unsigned char c : s.substr(0, 80)) {
        if (c < 0x20 || c >= 0x7f) {
            static const char* digits = "0123456789abcdef";
            out += "\\x";
            out += digits[c >> 4];
            out += digits[c & 15];
        } else {
            out += static_cast<char>(c);
        }
    }
    if (s.size() > 80) out += "...";
    return out + "'";
}

std::string check_name(std::string_view what, std::string_view name) {
    if (name.empty() || name.size() > kMaxNameBytes) {
        return std::string(what) + " name " + quoted(name) + " must be 1.." + std::to_string(kMaxNameBytes) + " bytes";
    }
    for (unsigned char c : name) {
        if (!name_char(c)) return std::string(what) + " name " + quoted(name) + " may hold only A-Z a-z 0-9 . _ @ : -";
    }
    return {};
}

// Decodes a percent-encoded prefix; "" or an error.
std::string decode_prefix(std::string_view text, std::string& out) {
    out.clear();
    for (std::size_t i = 0; i < text.size(); ++i) {
        const unsigned char c = static_cast<unsigned char>(text[i]);
        if (c == '%') {
            const int hi = i + 2 < text.size() ? hex_value(text[i + 1]) : -1;
            const int lo = i + 2 < text.size() ? hex_value(text[i + 2]) : -1;
            if (hi < 0 || lo < 0) return "prefix " + quoted(text) + ": '%' must be followed by two hex digits";
            out.push_back(static_cast<char>(hi * 16 + lo));
            i += 2;
        } else if (c <= 0x20 || c >= 0x7f || c == '#') {
            return "prefix " + quoted(text) + " must percent-encode byte " + std::to_string(c);
        } else {
            out.push_back(static_cast<char>(c));
        }
    }
    if (out.size() > kMaxPrefixBytes) {
        return "prefix " + quoted(text) + " is longer than " + std::to_string(kMaxPrefixBytes) + " bytes";
    }
    return {};
}

std::string parse_token(std::string_view text, Digest& out) {
    constexpr std::string_view kTag = "token:sha256:";
    if (text.substr(0, kTag.size()) != kTag || text.size() != kTag.size() + 64) {
        return "token " + quoted(text) + " is not token:sha256: and 64 hex digits";
    }
    for (std::size_t i = 0; i < 32; ++i) {
        const int hi = hex_value(text[kTag.size() + 2 * i]);
        const int lo = hex_value(text[kTag.size() + 2 * i + 1]);
        if (hi < 0 || lo < 0) return "token " + quoted(text) + " is not token:sha256: and 64 hex digits";
        out[i] = static_cast<std::uint8_t>(hi * 16 + lo);
    }
    return {};
}

std::uint64_t digest_prefix(const Digest& d) {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < 8; ++i) v = v << 8 | d[i];
    return v;
}

struct PendingUser {
    std::size_t line = 0;
    std::vector<std::string_view> role_names;
};

}  // namespace

const char* permission_name(Permission p) {
    switch (p) {
        case Permission::kRead: return "read";
        case Permission::kLock: return "lock";
        case Permission::kAdmin: return "admin";
    }
    return "?";
}

Digest sha256(std::string_view bytes) {
    Digest d{};
    unsigned int n = 0;
    EVP_Digest(bytes.data(), bytes.size(), d.data(), &n, EVP_sha256(), nullptr);
    return d;
}

std::string hex(const Digest& d) {
    static const char* digits = "0123456789abcdef";
    std::string out;
    out.reserve(64);
    for (std::uint8_t b : d) {
        out += digits[b >> 4];
        out += digits[b & 15];
    }
    return out;
}

std::string Policy::parse(std::string_view text, Policy& out) {
    if (text.size() > kMaxFileBytes) {
        return "the file has " + std::to_string(text.size()) + " bytes, more than " + std::to_string(kMaxFileBytes);
    }
    Policy p;
    std::unordered_map<std::string_view, std::size_t> role_index;
    std::unordered_map<std::string_view, std::size_t> user_index;
    std::vector<PendingUser> pending;
    std::size_t line_no = 0;
    std::size_t pos = 0;
    while (pos < text.size()) {
        std::size_t end = text.find('\n', pos);
        if (end == std::string_view::npos) end = text.size();
        std::string_view line = text.substr(pos, end - pos);
        pos = end + 1;
        ++line_no;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        auto fail = [&](const std::string& why) { return "line " + std::to_string(line_no) + ": " + why; };
        for (unsigned char c : line) {
            if ((c < 0x20 && c != '\t') || c == 0x7f) return fail("control byte " + std::to_string(c));
        }
        const std::vector<std::string_view> f = fields(line);
        if (f.empty()) continue;
        if (f[0] == "role") {
            if (f.size() < 3) return fail("a role needs a name and at least one grant: role NAME GRANT...");
            if (auto why = check_name("role", f[1]); !why.empty()) return fail(why);
            if (role_index.count(f[1]) != 0) return fail("role " + quoted(f[1]) + " is defined twice");
            if (p.roles_.size() == kMaxRoles) return fail("more than " + std::to_string(kMaxRoles) + " roles");
            if (f.size() - 2 > kMaxGrantsPerRole) {
                return fail("role " + quoted(f[1]) + " has more than " + std::to_string(kMaxGrantsPerRole) + " grants");
            }
            Role role;
            role.name = std::string(f[1]);
            for (std::size_t i = 2; i < f.size(); ++i) {
                Grant g;
                std::string_view rest;
                if (f[i] == "admin") {
                    g.permission = Permission::kAdmin;
                } else if (f[i].substr(0, 5) == "read:") {
                    g.permission = Permission::kRead;
                    rest = f[i].substr(5);
                } else if (f[i].substr(0, 5) == "lock:") {
                    g.permission = Permission::kLock;
                    rest = f[i].substr(5);
                } else {
                    return fail("grant " + quoted(f[i]) + " is not read:PREFIX, lock:PREFIX or admin");
                }
                if (g.permission != Permission::kAdmin) {
                    if (auto why = decode_prefix(rest, g.prefix); !why.empty()) return fail(why);
                }
                role.grants.push_back(std::move(g));
            }
            role_index.emplace(f[1], p.roles_.size());
            p.roles_.push_back(std::move(role));
        } else if (f[0] == "user") {
            if (f.size() < 3) return fail("a user needs a name and its roles: user NAME ROLE[,ROLE...] [token:sha256:HEX]...");
            if (auto why = check_name("user", f[1]); !why.empty()) return fail(why);
            if (user_index.count(f[1]) != 0) return fail("user " + quoted(f[1]) + " is defined twice");
            if (p.users_.size() == kMaxUsers) return fail("more than " + std::to_string(kMaxUsers) + " users");
            User user;
            user.name = std::string(f[1]);
            PendingUser pu{line_no, {}};
            std::string_view roles = f[2];
            std::size_t start = 0;
            while (true) {
                const std::size_t comma = roles.find(',', start);
                const std::string_view r = roles.substr(start, comma == std::string_view::npos ? roles.npos : comma - start);
                if (auto why = check_name("role", r); !why.empty()) return fail(why);
                pu.role_names.push_back(r);
                if (comma == std::string_view::npos) break;
                start = comma + 1;
            }
            if (f.size() - 3 > kMaxTokensPerUser) {
                return fail("user " + quoted(f[1]) + " has more than " + std::to_string(kMaxTokensPerUser) + " tokens");
            }
            for (std::size_t i = 3; i < f.size(); ++i) {
                Digest d{};
                if (auto why = parse_token(f[i], d); !why.empty()) return fail(why);
                user.token_hashes.push_back(d);
            }
            user_index.emplace(f[1], p.users_.size());
            p.users_.push_back(std::move(user));
            pending.push_back(std::move(pu));
        } else {
            return fail("unknown statement " + quoted(f[0]) + " (expected role or user)");
        }
    }
    // Roles may be defined after the users that name them.
    std::unordered_map<std::string, std::string> token_owner;
    for (std::size_t u = 0; u < p.users_.size(); ++u) {
        User& user = p.users_[u];
        for (std::string_view r : pending[u].role_names) {
            auto it = role_index.find(r);
            if (it == role_index.end()) {
                return "line " + std::to_string(pending[u].line) + ": user " + quoted(user.name) + " names role " +
                       quoted(r) + ", which is not defined";
            }
            if (std::find(user.roles.begin(), user.roles.end(), it->second) == user.roles.end()) {
                user.roles.push_back(it->second);
            }
        }
        for (const Digest& d : user.token_hashes) {
            auto [it, fresh] = token_owner.emplace(hex(d), user.name);
            if (!fresh) {
                return "line " + std::to_string(pending[u].line) + ": user " + quoted(user.name) +
                       " has the same token as user " + quoted(it->second);
            }
        }
    }
    for (std::size_t u = 0; u < p.users_.size(); ++u) {
        p.by_name_.emplace(p.users_[u].name, u);
        for (std::size_t t = 0; t < p.users_[u].token_hashes.size(); ++t) {
            p.by_token_.emplace(digest_prefix(p.users_[u].token_hashes[t]), std::make_pair(u, t));
        }
    }
    p.digest_ = hex(sha256(text));
    out = std::move(p);
    return {};
}

const User* Policy::user_for_bearer(std::string_view secret, BearerProblem& problem) const {
    if (!bearer_ok(secret)) {
        problem = BearerProblem::kMalformed;
        return nullptr;
    }
    const Digest d = sha256(secret);
    const User* found = nullptr;
    auto [first, last] = by_token_.equal_range(digest_prefix(d));
    for (auto it = first; it != last; ++it) {
        const User& user = users_[it->second.first];
        if (CRYPTO_memcmp(user.token_hashes[it->second.second].data(), d.data(), d.size()) == 0) found = &user;
    }
    problem = found ? BearerProblem::kNone : BearerProblem::kUnknown;
    return found;
}

const User* Policy::user_named(std::string_view name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : &users_[it->second];
}

bool Policy::allowed(const User& user, Permission permission, std::string_view key) const {
    for (std::size_t r : user.roles) {
        for (const Grant& g : roles_[r].grants) {
            if (g.permission != permission) continue;
            if (permission == Permission::kAdmin || key.substr(0, g.prefix.size()) == g.prefix) return true;
        }
    }
    return false;
}

std::vector<std::string> Policy::readable_within(const User& user, std::string_view prefix) const {
    std::vector<std::string> narrower;  // read grants inside `prefix`
    for (std::size_t r : user.roles) {
        for (const Grant& g : roles_[r].grants) {
            if (g.permission != Permission::kRead) continue;
            if (prefix.starts_with(g.prefix)) return {std::string(prefix)};  // all of it
            if (std::string_view(g.prefix).starts_with(prefix)) narrower.push_back(g.prefix);
        }
    }
    std::sort(narrower.begin(), narrower.end());
    std::vector<std::string> out;
    for (std::string& p : narrower) {
        // Sorted: a prefix of p, if kept, is the last one kept.
        if (!out.empty() && std::string_view(p).starts_with(out.back())) continue;
        out.push_back(std::move(p));
    }
    return out;
}

bool Policy::holds_any(const User& user, Permission permission) const {
    for (std::size_t r : user.roles) {
        for (const Grant& g : roles_[r].grants) {
            if (g.permission == permission) return true;
        }
    }
    return false;
}

}  // namespace pgfence::auth
