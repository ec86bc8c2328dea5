// Frames: header round trip, bounds on the length, version, kind; MemberInfo; SeedInfo.
#include <boost/test/unit_test.hpp>
#include <stdexcept>

#include "net/frame.h"
#include "net/member_info.h"
#include "net/seed_info.h"

using namespace pgfence::net;

BOOST_AUTO_TEST_SUITE(frames)

BOOST_AUTO_TEST_CASE(frame_round_trips_with_cluster_id_and_kind) {
    const std::string f = encode_frame(0xabcdef, FrameKind::kRaft, "payload");
    auto len = decode_frame_length(std::string_view(f).substr(0, kLengthPrefixBytes));
    BOOST_REQUIRE(std::holds_alternative<std::size_t>(len));
    BOOST_TEST(std::get<std::size_t>(len) == f.size() - kLengthPrefixBytes);
    auto body = decode_frame_body(std::string_view(f).substr(kLengthPrefixBytes));
    BOOST_REQUIRE(std::holds_alternative<Frame>(body));
    BOOST_TEST(std::get<Frame>(body).cluster_id == 0xabcdefu);
    BOOST_TEST((std::get<Frame>(body).kind == FrameKind::kRaft));
    BOOST_TEST(std::get<Frame>(body).payload == "payload");
}

BOOST_AUTO_TEST_CASE(length_over_the_maximum_or_below_the_header_is_refused) {
    std::string prefix(4, '\xff');
    BOOST_TEST(std::get<FrameError>(decode_frame_length(prefix)).message.find("exceeds kMaxFrameBytes") != std::string::npos);
    prefix = std::string("\x03\x00\x00\x00", 4);
    BOOST_TEST(std::get<FrameError>(decode_frame_length(prefix)).message.find("below the header") != std::string::npos);
    BOOST_TEST(std::holds_alternative<FrameError>(decode_frame_length("abc")));
}

BOOST_AUTO_TEST_CASE(wrong_version_and_unknown_kind_are_refused) {
    std::string f = encode_frame(1, FrameKind::kRaft, "x").substr(kLengthPrefixBytes);
    f[0] = 9;
    BOOST_TEST(std::get<FrameError>(decode_frame_body(f)).message.find("version 9") != std::string::npos);
    f[0] = static_cast<char>(kFrameVersion);
    f[9] = 42;
    BOOST_TEST(std::get<FrameError>(decode_frame_body(f)).message.find("kind 42") != std::string::npos);
}

// The header alone (what a connection's first frame is judged by before its
// body is read) decodes as the whole frame's does.
BOOST_AUTO_TEST_CASE(the_header_alone_gives_cluster_and_kind_and_is_refused_as_the_body_is) {
    std::string h = encode_frame(77, FrameKind::kMemberInfo, std::string(100, 'p')).substr(kLengthPrefixBytes, kFrameHeaderBytes);
    auto ok = decode_frame_header(h);
    BOOST_REQUIRE(std::holds_alternative<FrameHeader>(ok));
    BOOST_TEST(std::get<FrameHeader>(ok).cluster_id == 77u);
    BOOST_TEST((std::get<FrameHeader>(ok).kind == FrameKind::kMemberInfo));
    BOOST_TEST(std::get<FrameError>(decode_frame_header(h.substr(1))).message.find("got 9") != std::string::npos);
    h[9] = 0;
    BOOST_TEST(std::get<FrameError>(decode_frame_header(h)).message.find("kind 0") != std::string::npos);
    h[0] = 2;
    BOOST_TEST(std::get<FrameError>(decode_frame_header(h)).message.find("version 2") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(seed_info_round_trips_and_rejects_garbage) {
    SeedInfo info;
    info.member_id = 1;
    info.first_config = pgfence::raft::Configuration::of_voters({1, 2, 3});
    info.first_config.members[1].context = "addresses";
    info.restored = true;
    info.from_cluster = 555;
    info.from_index = 10;
    info.token_floor = 1'700'000'000'001'010ull;
    const std::string bytes = encode_seed_info(info);
    auto decoded = decode_seed_info(bytes);
    BOOST_REQUIRE(std::holds_alternative<SeedInfo>(decoded));
    BOOST_TEST((std::get<SeedInfo>(decoded) == info));
    // Framed as its own kind, which decodes.
    const std::string f = encode_frame(7, FrameKind::kSeedInfo, bytes).substr(kLengthPrefixBytes);
    BOOST_TEST((std::get<Frame>(decode_frame_body(f)).kind == FrameKind::kSeedInfo));
    BOOST_TEST(std::holds_alternative<std::string>(decode_seed_info(bytes.substr(0, bytes.size() - 1))));
    BOOST_TEST(std::holds_alternative<std::string>(decode_seed_info(bytes + "x")));
    std::string bad = bytes;
    bad[0] = 2;
    BOOST_TEST(std::get<std::string>(decode_seed_info(bad)).find("version 2") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(member_info_round_trips_and_rejects_garbage) {
    MemberInfo info{3, "127.0.0.1:7503", 3, 7, 3, 100, 99};
    const std::string bytes = encode_member_info(info);
    auto decoded = decode_member_info(bytes);
    BOOST_REQUIRE(std::holds_alternative<MemberInfo>(decoded));
    BOOST_TEST((std::get<MemberInfo>(decoded) == info));
    for (std::size_t n = 0; n < bytes.size(); ++n) {
        BOOST_TEST(std::holds_alternative<std::string>(decode_member_info(std::string_view(bytes).substr(0, n))));
    }
    std::string bad_role = bytes;
    bad_role[1 + 8 + 4 + info.client_addr.size()] = 9;
    BOOST_TEST(std::get<std::string>(decode_member_info(bad_role)).find("role") != std::string::npos);
}

// A client address is bounded once (member::kMaxAddressBytes): the longest
// goes through whole; a longer one is refused by name, never cut short.
BOOST_AUTO_TEST_CASE(member_info_refuses_a_client_address_over_the_limit) {
    const std::string longest = std::string(pgfence::member::kMaxAddressBytes - 5, 'h') + ":7503";
    MemberInfo info{3, longest, 1, 7, 3, 100, 99};
    auto decoded = decode_member_info(encode_member_info(info));
    BOOST_REQUIRE(std::holds_alternative<MemberInfo>(decoded));
    BOOST_TEST(std::get<MemberInfo>(decoded).client_addr == longest);
    info.client_addr = "h" + longest;
    try {
        encode_member_info(info);
        BOOST_FAIL("an over-long client address was encoded");
    } catch (const std::length_error& e) {
        BOOST_TEST(std::string(e.what()).find("client address is 262 bytes") != std::string::npos, e.what());
    }
}

BOOST_AUTO_TEST_SUITE_END()
