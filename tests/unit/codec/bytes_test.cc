// codec/bytes.h: the little-endian layout, and a Reader that keeps its first
// failure, never reads past the end and hands its Wording what went wrong.
#define BOOST_TEST_MODULE codec_unit_tests
#include "codec/bytes.h"

#include <boost/test/unit_test.hpp>
#include <string>

namespace pgfence::codec {
namespace {

// A Wording that spells out every field of the failure.
std::string spell(const ReadFailure& f, std::string_view context) {
    return std::string(context) + "|" + std::to_string(static_cast<int>(f.kind)) + "|" +
           std::string(f.field) + "|" + (f.length_prefix ? "len" : "-") + "|" +
           std::to_string(f.size) + "|" + std::to_string(f.limit) + "|" + std::to_string(f.offset);
}

BOOST_AUTO_TEST_CASE(integers_are_little_endian_fixed_width) {
    std::string out;
    put_u8(out, 0xAB);
    put_u32(out, 0x01020304u);
    put_u64(out, 0x1112131415161718ull);
    put_string(out, "xy");
    BOOST_TEST(out == std::string("\xAB\x04\x03\x02\x01\x18\x17\x16\x15\x14\x13\x12\x11"
                                  "\x02\x00\x00\x00xy",
                                  19));
    BOOST_TEST(peek_u32(out, 1) == 0x01020304u);
    BOOST_TEST(peek_u64(out, 5) == 0x1112131415161718ull);
    poke_u32(out, 1, 0xFFFFFFFEu);
    BOOST_TEST(peek_u32(out, 1) == 0xFFFFFFFEu);
    BOOST_CHECK_THROW(put_string(out, "abc", 2, "key"), std::length_error);
}

BOOST_AUTO_TEST_CASE(reads_what_was_written) {
    std::string out;
    put_u8(out, 7);
    put_u64(out, ~0ull);
    put_string(out, "hello");
    Reader r(out);
    BOOST_TEST(r.u8() == 7u);
    BOOST_TEST(r.u64() == ~0ull);
    BOOST_TEST(r.string("s", 5) == "hello");
    BOOST_TEST(r.expect_end("the end"));
    BOOST_TEST(r.error().empty());
}

BOOST_AUTO_TEST_CASE(the_first_failure_is_kept_and_later_reads_consume_nothing) {
    const std::string in("\x01\x02\x03", 3);
    Reader r(in, spell, "ctx");
    BOOST_TEST(r.u8("a") == 1u);
    BOOST_TEST(r.u32("b") == 0u);  // 2 bytes left
    BOOST_TEST(!r.ok());
    BOOST_TEST(r.error() == "ctx|0|b|-|4|2|1");
    BOOST_TEST(r.u8("c") == 0u);  // would fit, but the reader has failed
    r.fail("later");
    BOOST_TEST(r.offset() == 1u);
    BOOST_TEST(r.error() == "ctx|0|b|-|4|2|1");
}

BOOST_AUTO_TEST_CASE(strings_are_checked_against_the_limit_then_the_end) {
    std::string in;
    put_u32(in, 9);
    in += "abc";
    Reader too_long(in, spell);
    BOOST_TEST(too_long.string("s", 8).empty());
    BOOST_TEST(too_long.error() == "|2|s|-|9|8|0");  // the offset of the length prefix
    Reader short_body(in, spell);
    BOOST_TEST(short_body.string("s", 9).empty());
    BOOST_TEST(short_body.error() == "|1|s|-|9|3|4");  // where the bytes begin
    Reader short_length(std::string_view(in).substr(0, 2), spell);
    BOOST_TEST(short_length.string("s", 9).empty());
    BOOST_TEST(short_length.error() == "|0|s|len|4|2|0");
}

BOOST_AUTO_TEST_CASE(problems_and_trailing_bytes_name_their_offset) {
    Reader r(std::string_view("\x05xyz", 4), spell);
    r.u8();
    BOOST_TEST(!r.expect_end("the record"));
    BOOST_TEST(r.error() == "|3|3 trailing bytes after the record|-|0|0|1");
    Reader at(std::string_view("ab"), spell);
    at.fail_at(1, "bad");
    BOOST_TEST(at.error() == "|3|bad|-|0|0|1");
}

BOOST_AUTO_TEST_CASE(without_a_wording_only_the_failure_and_its_offset_are_kept) {
    Reader r(std::string_view("ab"));
    BOOST_TEST(r.bytes(3).empty());
    BOOST_TEST(!r.ok());
    BOOST_TEST(r.error().empty());
    BOOST_TEST(r.offset() == 0u);
    BOOST_TEST(r.remaining() == 2u);
}

}  // namespace
}  // namespace pgfence::codec
