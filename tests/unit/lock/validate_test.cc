// validate_key / validate_owner / validate: the key and owner rules of
// docs/design.md "HTTP API" ("1–512 bytes of UTF-8 without control characters").
#include <boost/test/unit_test.hpp>

#include "lock/commands.h"

using namespace pgfence::lock;

namespace {

bool key_ok(std::string_view key) {
    return validate_key(key).empty();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(validate_rules)

BOOST_AUTO_TEST_CASE(key_length_must_be_1_to_512_bytes) {
    BOOST_TEST(!key_ok(""));
    BOOST_TEST(key_ok("a"));
    BOOST_TEST(key_ok(std::string(kMaxKeyBytes, 'a')));
    BOOST_TEST(!key_ok(std::string(kMaxKeyBytes + 1, 'a')));
    BOOST_TEST(validate_key(std::string(kMaxKeyBytes + 1, 'a')).find("513") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(key_length_counts_bytes_not_characters) {
    std::string full;
    for (std::size_t i = 0; i < kMaxKeyBytes / 2; ++i) full += "\xc3\xa9";  // é, 2 bytes
    BOOST_TEST(key_ok(full));         // 512 bytes, 256 characters
    BOOST_TEST(!key_ok(full + "a"));  // 513 bytes, 257 characters
}

BOOST_AUTO_TEST_CASE(key_accepts_well_formed_utf8_of_every_length) {
    BOOST_TEST(key_ok("report:7"));
    BOOST_TEST(key_ok("\xc2\xa0"));          // U+00A0, first code point after C1
    BOOST_TEST(key_ok("\xe2\x82\xac"));      // U+20AC €
    BOOST_TEST(key_ok("\xed\x9f\xbf"));      // U+D7FF, just below the surrogates
    BOOST_TEST(key_ok("\xee\x80\x80"));      // U+E000, just above them
    BOOST_TEST(key_ok("\xf0\x9f\x94\x92"));  // U+1F512 🔒
    BOOST_TEST(key_ok("\xf4\x8f\xbf\xbf"));  // U+10FFFF, the last code point
    BOOST_TEST(key_ok("a b~"));              // space and tilde are printable
}

BOOST_AUTO_TEST_CASE(key_rejects_malformed_utf8) {
    BOOST_TEST(!key_ok("\x80"));                  // lone continuation byte
    BOOST_TEST(!key_ok("\xc3"));                  // truncated 2-byte sequence
    BOOST_TEST(!key_ok("\xe2\x82"));              // truncated 3-byte sequence
    BOOST_TEST(!key_ok("\xc3\x28"));              // bad continuation byte
    BOOST_TEST(!key_ok("\xff"));                  // never valid
    BOOST_TEST(!key_ok("\xf8\x88\x80\x80\x80"));  // 5-byte form
}

BOOST_AUTO_TEST_CASE(key_rejects_overlong_encodings) {
    BOOST_TEST(!key_ok("\xc0\xaf"));  // '/' in 2 bytes
    BOOST_TEST(!key_ok("\xc1\xbf"));
    BOOST_TEST(!key_ok("\xe0\x80\xaf"));      // '/' in 3 bytes
    BOOST_TEST(!key_ok("\xe0\x9f\xbf"));      // U+07FF in 3 bytes
    BOOST_TEST(!key_ok("\xf0\x80\x80\xaf"));  // '/' in 4 bytes
    BOOST_TEST(!key_ok("\xf0\x8f\xbf\xbf"));  // U+FFFF in 4 bytes
    BOOST_TEST(validate_key("\xe0\x80\xaf").find("overlong") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(key_rejects_surrogates_and_code_points_above_10ffff) {
    BOOST_TEST(!key_ok("\xed\xa0\x80"));      // U+D800
    BOOST_TEST(!key_ok("\xed\xbf\xbf"));      // U+DFFF
    BOOST_TEST(!key_ok("\xf4\x90\x80\x80"));  // U+110000
    BOOST_TEST(!key_ok("\xf5\x80\x80\x80"));
    BOOST_TEST(validate_key("\xed\xa0\x80").find("surrogate") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(key_rejects_c0_del_and_c1_control_characters) {
    BOOST_TEST(!key_ok(std::string_view("a\0b", 3)));
    BOOST_TEST(!key_ok("a\nb"));
    BOOST_TEST(!key_ok("\x1f"));
    BOOST_TEST(!key_ok("\x7f"));
    BOOST_TEST(!key_ok("\xc2\x80"));  // U+0080
    BOOST_TEST(!key_ok("\xc2\x9f"));  // U+009F
    BOOST_TEST(validate_key("ab\x7f").find("byte 2") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(owner_may_be_empty_up_to_256_bytes_of_clean_utf8) {
    BOOST_TEST(validate_owner("").empty());
    BOOST_TEST(validate_owner(std::string(kMaxOwnerBytes, 'o')).empty());
    BOOST_TEST(!validate_owner(std::string(kMaxOwnerBytes + 1, 'o')).empty());
    BOOST_TEST(!validate_owner("a\tb").empty());
    BOOST_TEST(!validate_owner("\xc0\x80").empty());
}

BOOST_AUTO_TEST_CASE(user_may_be_empty_up_to_128_bytes_of_clean_utf8) {
    BOOST_TEST(validate_user("").empty());
    BOOST_TEST(validate_user(std::string(kMaxUserBytes, 'u')).empty());
    BOOST_TEST(validate_user(std::string(kMaxUserBytes + 1, 'u')) == "user is 129 bytes; the limit is 128 bytes");
    BOOST_TEST(!validate_user("u\nv").empty());
    BOOST_TEST(validate(Grant{"k", 1, "w", "u\x7f"}).find("user byte 1: control character U+007F") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(validate_checks_every_field_of_every_command) {
    BOOST_TEST(validate(Grant{"k", 1, ""}).empty());
    BOOST_TEST(validate(Grant{"k", kMaxLeaseMs, ""}).empty());
    BOOST_TEST(validate(Grant{"k", 0, ""}).find("lease_ms") != std::string::npos);
    BOOST_TEST(validate(Grant{"k", kMaxLeaseMs + 1, ""}).find("lease_ms") != std::string::npos);
    BOOST_TEST(!validate(Grant{"", 1, ""}).empty());
    BOOST_TEST(!validate(Grant{"k", 1, "\x01"}).empty());
    BOOST_TEST(validate(Release{"k", 0}).empty());
    BOOST_TEST(!validate(Release{"", 1}).empty());
    BOOST_TEST(!validate(Expire{"\xff", 1}).empty());
    BOOST_TEST(validate(SetTokenFloor{kMaxToken}).empty());
    BOOST_TEST(!validate(SetTokenFloor{kMaxToken + 1}).empty());
}

BOOST_AUTO_TEST_SUITE_END()
