// lock::Text (lock/text.h): a string in one pointer, null while empty.
#include <boost/test/unit_test.hpp>

#include <string>
#include <utility>
#include <vector>

#include "lock/table.h"
#include "lock/text.h"

using pgfence::lock::Text;

BOOST_AUTO_TEST_SUITE(text_test)

BOOST_AUTO_TEST_CASE(an_empty_text_is_one_null_pointer_and_reads_as_empty) {
    static_assert(sizeof(Text) == sizeof(void*));
    const Text empty;
    const Text from_empty = std::string();
    BOOST_TEST(empty.empty());
    BOOST_TEST(from_empty.empty());
    BOOST_TEST(empty.view().empty());
    BOOST_TEST(empty == from_empty);
    BOOST_TEST(empty == "");
}

BOOST_AUTO_TEST_CASE(a_text_keeps_its_bytes_through_copy_move_and_assignment) {
    const std::string bytes("owner\0with a zero byte and more than sixteen bytes", 50);
    Text a = bytes;
    BOOST_TEST(a.view() == bytes);
    BOOST_TEST(a.size() == bytes.size());
    Text b = a;  // copy: its own block
    BOOST_TEST(b == a);
    Text c = std::move(a);
    BOOST_TEST(a.empty());  // NOLINT(bugprone-use-after-move): a moved-from Text is empty
    BOOST_TEST(c.str() == bytes);
    c = "other";
    BOOST_TEST(c == "other");
    BOOST_TEST(c != b);
    b = c;
    BOOST_TEST(b == std::string("other"));
    b = Text();
    BOOST_TEST(b.empty());
}

BOOST_AUTO_TEST_CASE(self_assignment_keeps_the_bytes_and_a_moved_from_text_is_empty) {
    Text a("owner-a");
    Text& same = a;
    a = same;  // copy onto itself
    BOOST_TEST(a.view() == "owner-a");
    a = std::move(same);  // move onto itself
    BOOST_TEST(a.view() == "owner-a");
    Text b("owner-b");
    b = std::move(a);
    BOOST_TEST(b.view() == "owner-a");
    BOOST_TEST(a.empty());  // NOLINT(bugprone-use-after-move): moved from reads empty
    Text c(std::move(b));
    BOOST_TEST(c.view() == "owner-a");
    BOOST_TEST(b.empty());  // NOLINT(bugprone-use-after-move)
}

BOOST_AUTO_TEST_CASE(comparisons_are_std_string_s) {
    using namespace std::string_literals;
    const std::vector<std::string> strings{""s, "a"s, "a\0b"s, "ab"s, "b"s, "\0"s};
    for (const std::string& x : strings) {
        for (const std::string& y : strings) {
            const Text tx(x);
            const Text ty(y);
            BOOST_TEST((tx == ty) == (x == y));
            BOOST_TEST((tx == y) == (x == y));
            BOOST_TEST(((tx <=> ty) == (x <=> y)));
            BOOST_TEST((tx < ty) == (x < y));
        }
    }
    BOOST_TEST(Text("a\0b"s).size() == 3u);  // bytes after a NUL are kept
}

BOOST_AUTO_TEST_CASE(locks_differing_in_a_text_differ) {
    pgfence::lock::Lock a;
    a.key = "k";
    a.owner = "o";
    pgfence::lock::Lock b = a;
    BOOST_TEST((a == b));
    b.owner = "p";
    BOOST_TEST(!(a == b));
    b = a;
    b.user = "u";
    BOOST_TEST(!(a == b));
    b = a;
    b.value = "v";
    BOOST_TEST(!(a == b));
}

// 72 bytes on LP64: the three Texts are a pointer each, lease_ms and
// remaining_ms a u32 each (lock/table.h).
static_assert(sizeof(void*) != 8 || sizeof(pgfence::lock::Lock) == 72);

BOOST_AUTO_TEST_SUITE_END()
