// encode / decode_command: the format in commands.h, round trips, and hostile
// input (truncation, trailing bytes, bad version/tag/lengths, random bytes).
#include <boost/test/unit_test.hpp>

#include "lock/commands.h"
#include "test_support.h"

using namespace pgfence::lock;
using pgfence::lock::test::Bytes;

namespace {

constexpr std::uint8_t kVersion = 1;
constexpr std::uint64_t kAllOnes = ~0ull;

// One command of each kind, including boundary values.
std::vector<Command> samples() {
    return {
        Grant{"report:7", 10'000, "worker-a"},
        Grant{"report:7", 10'000, "worker-a", "ua"},
        Grant{"k", 1, "", std::string(kMaxUserBytes, 'u')},
        Grant{std::string(kMaxKeyBytes, 'k'), kMaxLeaseMs, std::string(kMaxOwnerBytes, 'o')},
        Grant{"k", 0, ""},                  // invalid values still encode (validate() is separate)
        Grant{"\xff\x00 x", kAllOnes, ""},  // as do invalid bytes
        Release{"report:7", 41},
        Release{"ключ", kAllOnes},
        Expire{"report:7", 0},
        Expire{std::string(kMaxKeyBytes, 'e'), 1},
        SetTokenFloor{0},
        SetTokenFloor{kAllOnes},
        ExpireMany{{Expire{"a", 1}, Expire{"b", kAllOnes}}},
        GrantMany{{"b", "a"}, 10'000, "worker-a", ""},
        GrantMany{{"a", "b", "c"}, kAllOnes, "", "ua"},
        GrantMany{{"a", "a"}, 0, ""},  // invalid values still encode
        ReleaseMany{{"x", "y"}, 41},
        ReleaseMany{{"x", std::string(kMaxKeyBytes, 'y')}, kAllOnes},
        Checkpoint{{LeaseCheckpoint{"a", 1, 0}, LeaseCheckpoint{"b", kAllOnes, kAllOnes}}},
        Grant{"election/a", 10'000, "w", "", "http://a:80"},
        Grant{"election/a", 10'000, "w", "ua", std::string(kMaxValueBytes, 'v')},
        Proclaim{"election/a", 41, "http://b:80"},
        Proclaim{"election/a", kAllOnes, ""},
        Proclaim{std::string(kMaxKeyBytes, 'p'), 1, std::string(kMaxValueBytes, 'v')},
    };
}

std::string decode_error(std::string_view bytes) {
    auto decoded = decode_command(bytes);
    if (auto* error = std::get_if<DecodeError>(&decoded)) return error->message;
    return {};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(codec)

BOOST_AUTO_TEST_CASE(encoding_follows_the_documented_layout) {
    const std::string grant = Bytes().u8(kVersion).u8(1).str("report:7").u64(10'000).str("w").get();
    BOOST_TEST(encode(Grant{"report:7", 10'000, "w"}) == grant);
    BOOST_TEST(encode(Release{"k", 0x0102030405060708}) ==
               Bytes().u8(kVersion).u8(2).str("k").u64(0x0102030405060708).get());
    BOOST_TEST(encode(Expire{"k", 7}) == Bytes().u8(kVersion).u8(3).str("k").u64(7).get());
    BOOST_TEST(encode(SetTokenFloor{9}) == Bytes().u8(kVersion).u8(4).u64(9).get());
    BOOST_TEST(encode(ExpireMany{{Expire{"a", 1}, Expire{"bc", 2}}}) ==
               Bytes().u8(kVersion).u8(5).u32(2).str("a").u64(1).str("bc").u64(2).get());
    BOOST_TEST(encode(Checkpoint{{LeaseCheckpoint{"a", 1, 500}, LeaseCheckpoint{"bc", 2, 0}}}) ==
               Bytes().u8(kVersion).u8(8).u32(2).str("a").u64(1).u64(500).str("bc").u64(2).u64(0).get());
}

// A Grant with a user is version 2 (the user after the owner); one without
// is version 1, byte for byte what releases before users write and read.
BOOST_AUTO_TEST_CASE(a_grant_with_a_user_is_version_2_and_version_1_decodes_without_one) {
    const std::string v2 = Bytes().u8(2).u8(1).str("report:7").u64(10'000).str("w").str("ua").get();
    BOOST_TEST(encode(Grant{"report:7", 10'000, "w", "ua"}) == v2);
    const std::string v1 = Bytes().u8(1).u8(1).str("report:7").u64(10'000).str("w").get();
    BOOST_TEST(encode(Grant{"report:7", 10'000, "w", ""}) == v1);
    auto decoded = decode_command(v1);
    BOOST_TEST_REQUIRE(std::holds_alternative<Command>(decoded));
    BOOST_TEST((std::get<Command>(decoded) == Command{Grant{"report:7", 10'000, "w", ""}}));
}

// A Grant with a value is version 3 (user, maybe empty, then value after
// the owner); Proclaim is tag 9 in version 1.
BOOST_AUTO_TEST_CASE(a_grant_with_a_value_is_version_3_and_proclaim_is_tag_9) {
    BOOST_TEST(encode(Grant{"e", 5, "w", "", "v"}) == Bytes().u8(3).u8(1).str("e").u64(5).str("w").str("").str("v").get());
    BOOST_TEST(encode(Grant{"e", 5, "w", "u", "v"}) ==
               Bytes().u8(3).u8(1).str("e").u64(5).str("w").str("u").str("v").get());
    BOOST_TEST(encode(Proclaim{"e", 7, "v"}) == Bytes().u8(1).u8(9).str("e").u64(7).str("v").get());
    // One encoding per command: version 3 with an empty value, or of another
    // command, is refused; so is a value over the limit, before its bytes.
    std::string error = decode_error(Bytes().u8(3).u8(1).str("e").u64(5).str("w").str("u").str("").get());
    BOOST_TEST(error.find("grant value is empty in command version 3") != std::string::npos, error);
    error = decode_error(Bytes().u8(3).u8(9).str("e").u64(7).str("v").get());
    BOOST_TEST(error.find("command tag 9 in command version 3") != std::string::npos, error);
    error = decode_error(Bytes().u8(1).u8(9).str("e").u64(7).u32(kMaxValueBytes + 1).get());
    BOOST_TEST(error.find("proclaim value length 4097 exceeds the limit of 4096 bytes") != std::string::npos, error);
    BOOST_CHECK_THROW(encode(Proclaim{"e", 7, std::string(kMaxValueBytes + 1, 'v')}), std::length_error);
    BOOST_CHECK_THROW(encode(Grant{"e", 5, "w", "", std::string(kMaxValueBytes + 1, 'v')}), std::length_error);
}

// One encoding per command: version 2 holds only a Grant with a user.
BOOST_AUTO_TEST_CASE(version_2_without_a_user_or_of_another_command_is_rejected) {
    std::string error = decode_error(Bytes().u8(2).u8(1).str("k").u64(1).str("w").str("").get());
    BOOST_TEST(error.find("grant user is empty in command version 2") != std::string::npos, error);
    BOOST_TEST(error.find("offset 20") != std::string::npos, error);
    error = decode_error(Bytes().u8(2).u8(4).u64(1).get());
    BOOST_TEST(error.find("command tag 4 in command version 2") != std::string::npos, error);
    error = decode_error(Bytes().u8(2).u8(1).str("k").u64(1).str("w").str(std::string(kMaxUserBytes + 1, 'u')).get());
    BOOST_TEST(error.find("grant user length 129 exceeds the limit of 128") != std::string::npos, error);
}

BOOST_AUTO_TEST_CASE(expire_many_counts_outside_1_to_the_limit_are_rejected_at_the_count) {
    // An empty batch encodes (encode() does not check counts) and decodes to an error.
    BOOST_TEST(decode_error(encode(ExpireMany{})).find("expire_many count 0") != std::string::npos);
    for (std::uint32_t count : {0u, static_cast<std::uint32_t>(kMaxExpireMany) + 1, 0xffffffffu}) {
        const std::string error = decode_error(Bytes().u8(kVersion).u8(5).u32(count).str("a").u64(1).get());
        BOOST_TEST(error.find("expire_many count " + std::to_string(count)) != std::string::npos, error);
        BOOST_TEST(error.find("offset 2") != std::string::npos, error);
    }
    // The largest count decodes (bounded: kMaxExpireMany locks, each key within its limit).
    ExpireMany full;
    for (std::size_t i = 0; i < kMaxExpireMany; ++i) full.locks.push_back(Expire{"k" + std::to_string(i), i});
    auto decoded = decode_command(encode(full));
    BOOST_TEST_REQUIRE(std::holds_alternative<Command>(decoded));
    BOOST_TEST((std::get<Command>(decoded) == Command{full}));
}

BOOST_AUTO_TEST_CASE(checkpoint_counts_outside_1_to_the_limit_are_rejected_at_the_count) {
    BOOST_TEST(decode_error(encode(Checkpoint{})).find("checkpoint count 0") != std::string::npos);
    for (std::uint32_t count : {0u, static_cast<std::uint32_t>(kMaxCheckpoints) + 1, 0xffffffffu}) {
        const std::string error = decode_error(Bytes().u8(kVersion).u8(8).u32(count).str("a").u64(1).u64(2).get());
        BOOST_TEST(error.find("checkpoint count " + std::to_string(count)) != std::string::npos, error);
        BOOST_TEST(error.find("offset 2") != std::string::npos, error);
    }
    // A count larger than the bytes that follow fails at the first missing field, allocating nothing more.
    const std::string error = decode_error(Bytes().u8(kVersion).u8(8).u32(3).str("a").u64(1).u64(2).get());
    BOOST_TEST(error.find("checkpoint key length needs 4 bytes") != std::string::npos, error);
    std::string cut = encode(Checkpoint{{LeaseCheckpoint{"a", 1, 2}}});
    cut.pop_back();
    BOOST_TEST(decode_error(cut).find("checkpoint remaining_ms") != std::string::npos, decode_error(cut));
    Checkpoint full;
    for (std::size_t i = 0; i < kMaxCheckpoints; ++i) full.locks.push_back(LeaseCheckpoint{"k" + std::to_string(i), i, i});
    auto decoded = decode_command(encode(full));
    BOOST_TEST_REQUIRE(std::holds_alternative<Command>(decoded));
    BOOST_TEST((std::get<Command>(decoded) == Command{full}));
}

BOOST_AUTO_TEST_CASE(a_checkpoint_in_command_version_2_is_rejected) {
    const std::string error = decode_error(Bytes().u8(2).u8(8).u32(1).str("a").u64(1).u64(2).get());
    BOOST_TEST(error.find("command tag 8 in command version 2") != std::string::npos, error);
}

BOOST_AUTO_TEST_CASE(every_command_round_trips) {
    for (const Command& cmd : samples()) {
        auto decoded = decode_command(encode(cmd));
        BOOST_TEST_REQUIRE(std::holds_alternative<Command>(decoded), describe(cmd));
        BOOST_TEST((std::get<Command>(decoded) == cmd), describe(cmd));
    }
}

BOOST_AUTO_TEST_CASE(encode_refuses_keys_and_owners_over_their_limits) {
    BOOST_CHECK_THROW(encode(Grant{std::string(kMaxKeyBytes + 1, 'k'), 1, ""}), std::length_error);
    BOOST_CHECK_THROW(encode(Grant{"k", 1, std::string(kMaxOwnerBytes + 1, 'o')}),
                      std::length_error);
    BOOST_CHECK_THROW(encode(Grant{"k", 1, "o", std::string(kMaxUserBytes + 1, 'u')}), std::length_error);
    BOOST_CHECK_THROW(encode(Release{std::string(kMaxKeyBytes + 1, 'k'), 1}), std::length_error);
    BOOST_CHECK_THROW(encode(Expire{std::string(kMaxKeyBytes + 1, 'k'), 1}), std::length_error);
}

BOOST_AUTO_TEST_CASE(every_truncation_of_a_valid_encoding_is_rejected) {
    for (const Command& cmd : samples()) {
        const std::string bytes = encode(cmd);
        for (std::size_t length = 0; length < bytes.size(); ++length) {
            BOOST_TEST_REQUIRE(!decode_error(bytes.substr(0, length)).empty(),
                               describe(cmd) << " cut to " << length << " bytes");
        }
    }
}

BOOST_AUTO_TEST_CASE(trailing_bytes_are_rejected_with_their_offset) {
    for (const Command& cmd : samples()) {
        const std::string bytes = encode(cmd);
        const std::string error = decode_error(bytes + '\0');
        BOOST_TEST(error.find("trailing") != std::string::npos, error);
        BOOST_TEST(error.find("offset " + std::to_string(bytes.size())) != std::string::npos,
                   error);
    }
}

BOOST_AUTO_TEST_CASE(unknown_version_is_rejected) {
    std::string bytes = encode(SetTokenFloor{1});
    for (int version : {0, 2, 255}) {
        bytes[0] = static_cast<char>(version);
        const std::string error = decode_error(bytes);
        BOOST_TEST(error.find("version " + std::to_string(version)) != std::string::npos, error);
    }
}

BOOST_AUTO_TEST_CASE(unknown_tag_is_rejected_with_its_offset) {
    for (int tag : {0, 10, 255}) {
        const std::string error = decode_error(Bytes().u8(kVersion).u8(tag).u64(1).get());
        BOOST_TEST(error.find("tag " + std::to_string(tag)) != std::string::npos, error);
        BOOST_TEST(error.find("offset 1") != std::string::npos, error);
    }
}

BOOST_AUTO_TEST_CASE(length_over_the_limit_is_rejected_before_reading_the_bytes) {
    // Key length 513 with no key bytes behind it: the limit is what fails.
    const std::string error = decode_error(Bytes().u8(kVersion).u8(2).u32(kMaxKeyBytes + 1).get());
    BOOST_TEST(error.find("key length 513") != std::string::npos, error);
    BOOST_TEST(error.find("offset 2") != std::string::npos, error);
    const std::string owner_error =
        decode_error(Bytes().u8(kVersion).u8(1).str("k").u64(1).u32(kMaxOwnerBytes + 1).get());
    BOOST_TEST(owner_error.find("owner length 257") != std::string::npos, owner_error);
    const std::string huge = decode_error(Bytes().u8(kVersion).u8(1).u32(0xffffffff).get());
    BOOST_TEST(huge.find("4294967295") != std::string::npos, huge);
}

BOOST_AUTO_TEST_CASE(length_past_the_end_of_input_is_rejected) {
    const std::string error = decode_error(Bytes().u8(kVersion).u8(2).u32(10).get() + "abc");
    BOOST_TEST(error.find("needs 10 bytes but only 3 remain") != std::string::npos, error);
}

// Deterministic fuzzing inside the unit test: random and mutated inputs never
// crash, and whatever decodes re-encodes to the very same bytes (the encoding
// is canonical).
BOOST_AUTO_TEST_CASE(random_and_mutated_bytes_never_crash_and_decoded_ones_round_trip) {
    std::mt19937_64 rng(20240601);
    const auto valid = samples();
    int decoded_count = 0;
    for (int i = 0; i < 200'000; ++i) {
        const std::string bytes = i % 2 == 0
                                      ? test::random_bytes(rng, 64)
                                      : test::mutate(rng, encode(valid[rng() % valid.size()]));
        auto decoded = decode_command(bytes);
        if (auto* cmd = std::get_if<Command>(&decoded)) {
            ++decoded_count;
            BOOST_TEST_REQUIRE(encode(*cmd) == bytes, "iteration " << i);
        } else {
            BOOST_TEST_REQUIRE(!std::get<DecodeError>(decoded).message.empty(), "iteration " << i);
        }
    }
    BOOST_TEST(decoded_count > 0);  // the mutations do reach the decoded path
}

BOOST_AUTO_TEST_CASE(describe_escapes_bytes_that_could_forge_log_lines) {
    const std::string text = describe(Grant{"a\nb\"c", 5, "w"});
    BOOST_TEST(text.find('\n') == std::string::npos, text);
    BOOST_TEST(text.find("lease_ms=5") != std::string::npos, text);
    BOOST_TEST(describe(SetTokenFloor{3}).find("floor=3") != std::string::npos);
    BOOST_TEST(describe(Release{"k", 4}).find("token=4") != std::string::npos);
    BOOST_TEST(describe(Expire{"k", 6}).find("expire") == 0u);
}

// Version 4 stamps a command with the leader's wall clock: [4][wall_ms
// u64][the command's own bytes]. decode_entry() returns both, decode_command()
// the command; every older version still decodes, with no stamp.
BOOST_AUTO_TEST_CASE(a_stamped_command_is_version_4_and_older_versions_decode_without_a_stamp) {
    for (const Command& cmd : samples()) {
        const std::string plain = encode(cmd);
        const std::string stamped = encode(cmd, 1'796'420'452'990);
        BOOST_TEST(stamped == Bytes().u8(4).u64(1'796'420'452'990).get() + plain);
        auto entry = decode_entry(stamped);
        BOOST_TEST_REQUIRE(std::holds_alternative<Stamped>(entry), decode_error(stamped));
        BOOST_TEST((std::get<Stamped>(entry).command == cmd));
        BOOST_TEST(std::get<Stamped>(entry).wall_ms.value_or(0) == 1'796'420'452'990u);
        auto command = decode_command(stamped);
        BOOST_TEST_REQUIRE(std::holds_alternative<Command>(command));
        BOOST_TEST((std::get<Command>(command) == cmd));
        // The older format, as releases before the stamp write it: no wall time.
        auto old = decode_entry(plain);
        BOOST_TEST_REQUIRE(std::holds_alternative<Stamped>(old));
        BOOST_TEST((std::get<Stamped>(old).command == cmd));
        BOOST_TEST(!std::get<Stamped>(old).wall_ms.has_value());
    }
    // Version 1 bytes written by hand (a release before the stamp): a Release.
    auto v1 = decode_entry(Bytes().u8(1).u8(2).str("k").u64(7).get());
    BOOST_TEST_REQUIRE(std::holds_alternative<Stamped>(v1));
    BOOST_TEST((std::get<Stamped>(v1).command == Command{Release{"k", 7}}));
    BOOST_TEST(!std::get<Stamped>(v1).wall_ms.has_value());
}

BOOST_AUTO_TEST_CASE(a_stamp_must_hold_one_command_of_versions_1_to_3) {
    const std::string release = encode(Release{"k", 7});
    // A stamp inside a stamp, a stamp of nothing, a truncated stamp, an unknown inner version.
    std::string error = decode_error(Bytes().u8(4).u64(1).get() + encode(Release{"k", 7}, 2));
    BOOST_TEST(error.find("stamped command version 4") != std::string::npos, error);
    BOOST_TEST(error.find("byte offset 9") != std::string::npos, error);
    error = decode_error(Bytes().u8(4).u64(1).get());
    BOOST_TEST(error.find("stamped command version needs 1 bytes") != std::string::npos, error);
    error = decode_error(Bytes().u8(4).u8(1).u8(2).get());
    BOOST_TEST(error.find("wall_ms needs 8 bytes") != std::string::npos, error);
    error = decode_error(Bytes().u8(4).u64(1).u8(9).get() + release.substr(1));
    BOOST_TEST(error.find("stamped command version 9") != std::string::npos, error);
    error = decode_error(Bytes().u8(5).get() + release.substr(1));
    BOOST_TEST(error.find("unknown command version 5 (known: 1..4)") != std::string::npos, error);
    // Trailing bytes after a stamped command are refused as after any other.
    error = decode_error(encode(Release{"k", 7}, 1) + "x");
    BOOST_TEST(!error.empty());
}

BOOST_AUTO_TEST_SUITE_END()
