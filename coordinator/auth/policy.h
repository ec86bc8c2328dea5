// Who may do what: the auth file (--auth-file), parsed into users, roles and
// their grants, and the decisions made from it. Pure: std only, and libcrypto
// for SHA-256 and a constant-time compare; no clock, no thread, no I/O (the
// shell reads the file and hands over its text).
//
// Where authentication ends and authorization is decided:
//  - The shell authenticates. It finds the caller's user name from what the
//    connection proved: a bearer secret (`Authorization: Bearer S`), looked up
//    here with user_for_bearer(), or else the CN of a client certificate that
//    TLS verified against --trusted-ca-file (--client-cert-auth), looked up
//    with user_named(). Nothing else names a user; a fencing token never does.
//  - This module authorizes: allowed(user, permission, key) decides every
//    request, in one place, before the request reaches the member core. A
//    list of locks keeps only the keys the caller may read (allowed(.., kRead, key)).
//
// The file (UTF-8 text, at most kMaxFileBytes; one statement per line; '#'
// starts a comment; fields are separated by spaces or tabs):
//
//   role NAME GRANT...        GRANT is read:PREFIX, lock:PREFIX or admin
//   user NAME ROLE[,ROLE...] [token:sha256:HEX]...
//
// - read:PREFIX allows GET /v1/locks?key=K, and shows K in GET /v1/locks, for
//   every K that starts with PREFIX; lock:PREFIX allows acquire, keepalive and
//   release of those keys; admin allows /v1/status, /metrics and the
//   cluster's operations. An empty PREFIX (`read:`) means every key.
// - PREFIX is percent-encoded: %XX stands for the byte XX, and a space, '%',
//   '#' or any byte outside printable ASCII must be written so. The decoded
//   prefix is at most 512 bytes (the longest key).
// - token:sha256:HEX is the SHA-256 of a bearer secret, 64 hex digits. A user
//   may list several (rotation: add the new one, reload, move clients, remove
//   the old one, reload). A bearer secret is at least kMinBearerChars
//   characters of RFC 6750's b64token alphabet: with 22 base64url characters
//   that is at least 128 random bits when the secret is made with
//   `openssl rand -base64 32` (docs/security.md shows how).
// - A user with no token authenticates only by a client certificate whose
//   CN is its NAME.
// - NAME (role or user) is 1..128 bytes of [A-Za-z0-9._@:-]; each is defined
//   once; a user's roles must be defined (anywhere in the file); no two users
//   share a token hash.
// Limits: kMaxUsers users, kMaxRoles roles, kMaxGrantsPerRole grants per role,
// kMaxTokensPerUser tokens per user. Anything else is an error naming the
// line and the field; a file with an error is not used at all.
//
// Everything is denied unless granted: a user with no role that grants a
// permission does not have it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace pgfence::auth {

constexpr std::size_t kMaxFileBytes = 1u << 20;
constexpr std::size_t kMaxUsers = 10000;
constexpr std::size_t kMaxRoles = 1000;
constexpr std::size_t kMaxGrantsPerRole = 64;
constexpr std::size_t kMaxTokensPerUser = 8;
constexpr std::size_t kMaxNameBytes = 128;
constexpr std::size_t kMaxPrefixBytes = 512;
constexpr std::size_t kMinBearerChars = 22;
constexpr std::size_t kMaxBearerChars = 512;

enum class Permission : std::uint8_t { kRead, kLock, kAdmin };

const char* permission_name(Permission p);  // "read", "lock", "admin"

using Digest = std::array<std::uint8_t, 32>;  // SHA-256

Digest sha256(std::string_view bytes);
std::string hex(const Digest& d);  // 64 lower-case hex digits

struct Grant {
    Permission permission = Permission::kRead;
    std::string prefix;  // decoded; unused for kAdmin
};

struct Role {
    std::string name;
    std::vector<Grant> grants;
};

struct User {
    std::string name;
    std::vector<std::size_t> roles;  // indexes into Policy::roles()
    std::vector<Digest> token_hashes;
};

// Why a bearer secret was not accepted (401 in every case).
enum class BearerProblem : std::uint8_t {
    kNone,
    kMalformed,  // shorter than kMinBearerChars, longer than kMaxBearerChars, or outside b64token
    kUnknown,    // no user has that secret's hash
};

class Policy {
public:
    Policy() = default;  // no users: every credential is refused

    // Parses an auth file's text into `out` (replaced only on success).
    // Returns "" or an error "line N: ..." naming the field and its value.
    static std::string parse(std::string_view text, Policy& out);

    // The user whose token hashes as SHA-256(secret), or nullptr. The secret
    // is hashed once; the stored hashes that share its first 8 bytes are
    // found by a table lookup and each is compared whole in constant time
    // (CRYPTO_memcmp). What the lookup's time depends on is the SHA-256 of
    // the presented secret, which tells nothing about any stored secret; no
    // comparison stops at the first differing byte.
    const User* user_for_bearer(std::string_view secret, BearerProblem& problem) const;
    // The user called `name` (a client certificate's CN), or nullptr.
    const User* user_named(std::string_view name) const;

    // May `user` do `permission` on `key` (ignored for kAdmin)?
    bool allowed(const User& user, Permission permission, std::string_view key) const;
    // Does `user` hold `permission` on some prefix (a list needs read somewhere)?
    bool holds_any(const User& user, Permission permission) const;
    // The keys starting with `prefix` that `user` may read, as prefixes:
    // sorted, none a prefix of another (so the ranges they start are
    // disjoint and in key order). {prefix} when every such key is readable;
    // empty when none is. A list of locks scans exactly these, so it never
    // sees, and cannot reveal, a key the caller may not read.
    std::vector<std::string> readable_within(const User& user, std::string_view prefix) const;

    const std::vector<Role>& roles() const { return roles_; }
    const std::vector<User>& users() const { return users_; }
    // SHA-256 of the file's text, in hex: members showing different digests
    // in /v1/status were given different files.
    const std::string& digest() const { return digest_; }

private:
    std::vector<Role> roles_;
    std::vector<User> users_;
    std::map<std::string, std::size_t, std::less<>> by_name_;                       // user name -> users_ index
    std::unordered_multimap<std::uint64_t, std::pair<std::size_t, std::size_t>> by_token_;  // hash prefix -> (user, token)
    std::string digest_;
};

}  // namespace pgfence::auth
