// auth/policy.h: the auth file's grammar and limits, bearer lookup, and the
// decisions (deny unless granted, prefixes, admin).
#define BOOST_TEST_MODULE auth_unit_tests
#include "auth/policy.h"

#include <boost/test/unit_test.hpp>
#include <string>

namespace pgfence::auth {
namespace {

const std::string kSecretA = "Zm9vYmFyYmF6cXV4cXV1eHh5enp5";  // 28 b64token characters
const std::string kSecretB = "c2Vjb25kLXNlY3JldC1mb3ItYm9i";

std::string token_line(const std::string& secret) { return "token:sha256:" + hex(sha256(secret)); }

Policy parsed(const std::string& text) {
    Policy p;
    const std::string err = Policy::parse(text, p);
    BOOST_TEST_REQUIRE(err == "");
    return p;
}

std::string error_of(const std::string& text) {
    Policy p;
    return Policy::parse(text, p);
}

BOOST_AUTO_TEST_CASE(sha256_matches_the_standard_vector) {
    BOOST_TEST(hex(sha256("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    BOOST_TEST(hex(sha256("")) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

BOOST_AUTO_TEST_CASE(grants_are_prefixes_and_everything_else_is_denied) {
    const Policy p = parsed(
        "# reporters\n"
        "role reporter read:report/ lock:report/   # trailing comment\n"
        "role ops admin read:\n"
        "user w1 reporter " + token_line(kSecretA) + "\n"
        "user alice ops,reporter\n"
        "\tuser nobody-role reporter\r\n");
    const User* w1 = p.user_named("w1");
    BOOST_TEST_REQUIRE(w1 != nullptr);
    BOOST_TEST(p.allowed(*w1, Permission::kLock, "report/7"));
    BOOST_TEST(p.allowed(*w1, Permission::kRead, "report/"));
    BOOST_TEST(!p.allowed(*w1, Permission::kLock, "report"));     // shorter than the prefix
    BOOST_TEST(!p.allowed(*w1, Permission::kLock, "reports/7"));  // not under it
    BOOST_TEST(!p.allowed(*w1, Permission::kLock, "job/1"));
    BOOST_TEST(!p.allowed(*w1, Permission::kAdmin, ""));
    BOOST_TEST(p.holds_any(*w1, Permission::kRead));
    BOOST_TEST(!p.holds_any(*w1, Permission::kAdmin));
    const User* alice = p.user_named("alice");
    BOOST_TEST_REQUIRE(alice != nullptr);
    BOOST_TEST(p.allowed(*alice, Permission::kAdmin, ""));
    BOOST_TEST(p.allowed(*alice, Permission::kRead, "anything at all"));  // read: is every key
    BOOST_TEST(!p.allowed(*alice, Permission::kLock, "job/1"));
    BOOST_TEST(p.allowed(*alice, Permission::kLock, "report/1"));
    BOOST_TEST(p.user_named("nobody-role") != nullptr);
    BOOST_TEST(p.user_named("carol") == nullptr);
    BOOST_TEST(p.users().size() == 3u);
    BOOST_TEST(p.roles().size() == 2u);
}

// What a list may scan: the parts of the asked prefix the user may read,
// sorted, nested ones folded into the wider, nothing outside.
BOOST_AUTO_TEST_CASE(readable_within_gives_the_readable_ranges_of_a_prefix) {
    const Policy p = parsed(
        "role a read:job/a lock:x/\n"
        "role b read:job/b/ read:job/a/1 read:report/\n"
        "role all read:\n"
        "user u a,b\n"
        "user root all\n"
        "user writer-only a\n");
    const User* u = p.user_named("u");
    BOOST_TEST_REQUIRE(u != nullptr);
    using V = std::vector<std::string>;
    BOOST_TEST((p.readable_within(*u, "") == V{"job/a", "job/b/", "report/"}));  // job/a/1 is inside job/a
    BOOST_TEST((p.readable_within(*u, "job/") == V{"job/a", "job/b/"}));
    BOOST_TEST((p.readable_within(*u, "job/a/7") == V{"job/a/7"}));  // all of it is readable
    BOOST_TEST(p.readable_within(*u, "x/").empty());              // lock is not read
    BOOST_TEST((p.readable_within(*p.user_named("root"), "any") == V{"any"}));
    BOOST_TEST((p.readable_within(*p.user_named("writer-only"), "") == V{"job/a"}));
}

BOOST_AUTO_TEST_CASE(a_user_without_roles_that_grant_has_nothing) {
    const Policy p = parsed("role empty-handed read:x/\nuser u empty-handed\n");
    const User* u = p.user_named("u");
    BOOST_TEST_REQUIRE(u != nullptr);
    BOOST_TEST(!p.allowed(*u, Permission::kLock, "x/1"));
    BOOST_TEST(!p.holds_any(*u, Permission::kLock));
    const Policy none;
    BearerProblem why = BearerProblem::kNone;
    BOOST_TEST(none.user_for_bearer(kSecretA, why) == nullptr);
    BOOST_TEST(static_cast<int>(why) == static_cast<int>(BearerProblem::kUnknown));
}

BOOST_AUTO_TEST_CASE(bearer_secrets_find_their_user) {
    const Policy p = parsed("role r lock:a/\nuser a r " + token_line(kSecretA) + "\nuser b r " +
                            token_line("old-secret-of-bob-0123456789") + " " + token_line(kSecretB) + "\n");
    BearerProblem why = BearerProblem::kUnknown;
    const User* a = p.user_for_bearer(kSecretA, why);
    BOOST_TEST_REQUIRE(a != nullptr);
    BOOST_TEST(a->name == "a");
    BOOST_TEST(static_cast<int>(why) == static_cast<int>(BearerProblem::kNone));
    const User* b = p.user_for_bearer(kSecretB, why);
    BOOST_TEST_REQUIRE(b != nullptr);
    BOOST_TEST(b->name == "b");
    BOOST_TEST(p.user_for_bearer("old-secret-of-bob-0123456789", why) == b);
    // A secret one character off, or a stored hash presented as the secret, is unknown.
    BOOST_TEST(p.user_for_bearer(kSecretA + "x", why) == nullptr);
    BOOST_TEST(static_cast<int>(why) == static_cast<int>(BearerProblem::kUnknown));
    BOOST_TEST(p.user_for_bearer(hex(sha256(kSecretA)), why) == nullptr);
    // Malformed: too short, too long, outside b64token, '=' not at the end.
    for (const std::string& bad : {std::string("short-secret"), std::string(513, 'a'),
                                   std::string("has a space in it 0123456789"), std::string("abc=def0123456789012345678"),
                                   std::string("=========================")}) {
        BOOST_TEST(p.user_for_bearer(bad, why) == nullptr, bad);
        BOOST_TEST(static_cast<int>(why) == static_cast<int>(BearerProblem::kMalformed), bad);
    }
    BOOST_TEST(p.user_for_bearer(std::string(22, 'Q') + "==", why) == nullptr);
    BOOST_TEST(static_cast<int>(why) == static_cast<int>(BearerProblem::kUnknown));
}

BOOST_AUTO_TEST_CASE(prefixes_are_percent_decoded) {
    const Policy p = parsed("role r lock:team%20a/%25done%23 read:%C3%A9t%C3%A9/\nuser u r\n");
    const User* u = p.user_named("u");
    BOOST_TEST_REQUIRE(u != nullptr);
    BOOST_TEST(p.roles()[0].grants[0].prefix == "team a/%done#");
    BOOST_TEST(p.allowed(*u, Permission::kLock, "team a/%done#1"));
    BOOST_TEST(p.allowed(*u, Permission::kRead, "\xC3\xA9t\xC3\xA9/x"));
}

BOOST_AUTO_TEST_CASE(roles_may_be_defined_after_their_users) {
    const Policy p = parsed("user u late\nrole late lock:\n");
    BOOST_TEST(p.allowed(*p.user_named("u"), Permission::kLock, "k"));
}

BOOST_AUTO_TEST_CASE(errors_name_the_line_and_the_field) {
    BOOST_TEST(error_of("role r\n") == "line 1: a role needs a name and at least one grant: role NAME GRANT...");
    BOOST_TEST(error_of("\nrole r write:x\n") == "line 2: grant 'write:x' is not read:PREFIX, lock:PREFIX or admin");
    BOOST_TEST(error_of("role r lock:a b\n") == "line 1: grant 'b' is not read:PREFIX, lock:PREFIX or admin");
    BOOST_TEST(error_of("role r lock:a%2\n") == "line 1: prefix 'a%2': '%' must be followed by two hex digits");
    BOOST_TEST(error_of("role r lock:a%zz\n") == "line 1: prefix 'a%zz': '%' must be followed by two hex digits");
    BOOST_TEST(error_of("role r lock:\xC3\xA9\n") == "line 1: prefix '\\xc3\\xa9' must percent-encode byte 195");
    BOOST_TEST(error_of("role r lock:" + std::string(513, 'k') + "\n").find("is longer than 512 bytes") != std::string::npos);
    BOOST_TEST(error_of("role r read:\nrole r lock:\n") == "line 2: role 'r' is defined twice");
    BOOST_TEST(error_of("role r read:\nuser u r\nuser u r\n") == "line 3: user 'u' is defined twice");
    BOOST_TEST(error_of("user u\n") == "line 1: a user needs a name and its roles: user NAME ROLE[,ROLE...] [token:sha256:HEX]...");
    BOOST_TEST(error_of("role r read:\nuser u r,\n") == "line 2: role name '' must be 1..128 bytes");
    BOOST_TEST(error_of("user u ghost\n") == "line 1: user 'u' names role 'ghost', which is not defined");
    BOOST_TEST(error_of("role r read:\nuser u/1 r\n") == "line 2: user name 'u/1' may hold only A-Z a-z 0-9 . _ @ : -");
    BOOST_TEST(error_of("role r read:\nuser u r token:sha256:abc\n") ==
               "line 2: token 'token:sha256:abc' is not token:sha256: and 64 hex digits");
    BOOST_TEST(error_of("role r read:\nuser u r token:sha256:" + std::string(63, 'a') + "g\n").find("64 hex digits") !=
               std::string::npos);
    BOOST_TEST(error_of("role r read:\nuser a r " + token_line(kSecretA) + "\nuser b r " + token_line(kSecretA) + "\n") ==
               "line 3: user 'b' has the same token as user 'a'");
    BOOST_TEST(error_of("grant x\n") == "line 1: unknown statement 'grant' (expected role or user)");
    BOOST_TEST(error_of("role r read:\x01\n") == "line 1: control byte 1");
    BOOST_TEST(error_of(std::string(kMaxFileBytes + 1, '#')).find("more than 1048576") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(limits_are_enforced) {
    std::string many_grants = "role r";
    for (std::size_t i = 0; i <= kMaxGrantsPerRole; ++i) many_grants += " read:p" + std::to_string(i);
    BOOST_TEST(error_of(many_grants + "\n") == "line 1: role 'r' has more than 64 grants");
    std::string many_tokens = "role r read:\nuser u r";
    for (std::size_t i = 0; i <= kMaxTokensPerUser; ++i) many_tokens += " " + token_line("secret-number-" + std::to_string(i) + "-0123456789");
    BOOST_TEST(error_of(many_tokens + "\n") == "line 2: user 'u' has more than 8 tokens");
    std::string roles;
    for (std::size_t i = 0; i <= kMaxRoles; ++i) roles += "role r" + std::to_string(i) + " admin\n";
    BOOST_TEST(error_of(roles) == "line 1001: more than 1000 roles");
    BOOST_TEST(error_of("role " + std::string(129, 'n') + " admin\n").find("must be 1..128 bytes") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_failed_parse_leaves_the_policy_as_it_was) {
    Policy p = parsed("role r lock:\nuser u r\n");
    const std::string digest = p.digest();
    BOOST_TEST(Policy::parse("role broken\n", p) != "");
    BOOST_TEST(p.digest() == digest);
    BOOST_TEST(p.user_named("u") != nullptr);
}

BOOST_AUTO_TEST_CASE(the_digest_is_the_files_sha256) {
    const std::string text = "role r lock:\nuser u r\n";
    BOOST_TEST(parsed(text).digest() == hex(sha256(text)));
    BOOST_TEST(parsed(text + "# a comment changes the file\n").digest() != parsed(text).digest());
}

}  // namespace
}  // namespace pgfence::auth
