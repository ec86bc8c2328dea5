// Backup files (storage/backup.h): what is encoded decodes back; a damaged,
// cut, foreign or future file is refused with the offset and the reason.
#include <boost/test/unit_test.hpp>

#include "codec/bytes.h"
#include "storage/backup.h"
#include "storage/crc32c.h"

namespace pgfence::storage {
namespace {

Backup sample() {
    Backup b;
    b.cluster_id = 0x1234567890abcdefull;
    b.created_unix_ms = 1796170000123ull;
    b.snapshot.meta.index = 42;
    b.snapshot.meta.term = 3;
    b.snapshot.meta.config = raft::Configuration::of_voters({1, 2, 3});
    b.snapshot.data = std::string("lock table bytes\0with a zero", 28);
    return b;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// `bytes` with its last 4 bytes replaced by a CRC that matches again.
std::string recrc(std::string bytes) {
    bytes.resize(bytes.size() - 4);
    codec::put_u32(bytes, crc32c(bytes));
    return bytes;
}

BOOST_AUTO_TEST_SUITE(backup)

BOOST_AUTO_TEST_CASE(a_backup_decodes_to_what_was_encoded) {
    const Backup b = sample();
    Backup back;
    BOOST_TEST(decode_backup(encode_backup(b), back) == "");
    BOOST_TEST((back == b));
    // With learners and contexts in the configuration too (a version 2 snapshot inside).
    Backup learners = sample();
    learners.snapshot.meta.config.members.push_back(raft::ConfigMember{4, false, "ctx"});
    BOOST_TEST(decode_backup(encode_backup(learners), back) == "");
    BOOST_TEST((back == learners));
}

BOOST_AUTO_TEST_CASE(damaged_cut_foreign_and_future_files_are_refused) {
    const std::string good = encode_backup(sample());
    Backup back;
    std::string flipped = good;
    flipped[30] ^= 1;
    BOOST_TEST(has(decode_backup(flipped, back), "CRC mismatch"));
    BOOST_TEST(has(decode_backup(good.substr(0, good.size() - 1), back), "CRC mismatch"));
    BOOST_TEST(has(decode_backup(good.substr(0, 10), back), "not a pgfence backup file"));
    std::string foreign = good;
    foreign[0] = 'X';
    BOOST_TEST(has(decode_backup(recrc(foreign), back), "wrong magic number"));
    std::string future = good;
    future[4] = 2;
    BOOST_TEST(has(decode_backup(recrc(future), back), "version 2"));
    // A well-formed file around a damaged snapshot: the snapshot's own CRC catches it.
    std::string inner = good;
    inner[40] ^= 1;
    BOOST_TEST(has(decode_backup(recrc(inner), back), "the backup's snapshot"));
    BOOST_TEST((back == Backup{}));  // untouched by every refusal
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace pgfence::storage
