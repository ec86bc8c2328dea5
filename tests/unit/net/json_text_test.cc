// append_json_string: the text comes back unchanged through a JSON parser for
// every kind of character a key, owner or message may hold, and characters
// that need no escape are copied byte for byte.
#include "net/json_text.h"

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>
#include <random>
#include <string>

namespace pgfence::net {
namespace {

std::string quoted(std::string_view text) {
    std::string out = "x";  // appends, keeping what was there
    append_json_string(out, text);
    return out.substr(1);
}

std::string round_trip(std::string_view text) {
    const boost::json::value v = boost::json::parse(quoted(text));
    return std::string(v.as_string());
}

BOOST_AUTO_TEST_SUITE(json_text)

BOOST_AUTO_TEST_CASE(special_characters_are_escaped_and_parse_back) {
    BOOST_TEST(quoted("") == "\"\"");
    BOOST_TEST(quoted("report:7") == "\"report:7\"");
    BOOST_TEST(quoted("a\"b\\c") == "\"a\\\"b\\\\c\"");
    BOOST_TEST(quoted(std::string("\x01\n\x1f", 3)) == "\"\\u0001\\u000a\\u001f\"");
    BOOST_TEST(quoted("Ωmega €") == "\"Ωmega €\"");  // UTF-8 copied as it is
    for (const std::string s :
         {"", "plain", "q\"uote", "back\\slash", "tab\tnew\nline", "Ωmega \"w\" €", "/"}) {
        BOOST_TEST(round_trip(s) == s);
    }
}

BOOST_AUTO_TEST_CASE(random_utf8_text_parses_back_unchanged) {
    std::mt19937 rng(12345);
    const std::u32string alphabet = U"aZ09 :/\"\\\t\n\x01\x7f\u00e9\u03a9\u20ac\U0001F512";
    for (int round = 0; round < 2000; ++round) {
        std::string text;
        const int n = static_cast<int>(rng() % 24);
        for (int i = 0; i < n; ++i) {
            const char32_t cp = alphabet[rng() % alphabet.size()];
            if (cp < 0x80) {
                text.push_back(static_cast<char>(cp));
            } else if (cp < 0x800) {
                text.push_back(static_cast<char>(0xC0 | (cp >> 6)));
                text.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
            } else if (cp < 0x10000) {
                text.push_back(static_cast<char>(0xE0 | (cp >> 12)));
                text.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
                text.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
            } else {
                text.push_back(static_cast<char>(0xF0 | (cp >> 18)));
                text.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
                text.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
                text.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
            }
        }
        BOOST_TEST_INFO("round " << round);
        BOOST_TEST(round_trip(text) == text);
    }
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace pgfence::net
