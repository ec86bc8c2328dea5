// raft_codec: every message kind round-trips; hostile bytes give a CodecError.
#include <boost/test/unit_test.hpp>
#include <random>

#include "net/raft_codec.h"

using namespace pgfence;
using namespace pgfence::raft;

namespace {

std::vector<Message> sample_messages() {
    auto msg = [](MessageBody b) { return Message{77, 1, 2, 5, std::move(b)}; };
    Configuration with_learner;
    with_learner.members = {{1, true, "10.0.0.1:7001 10.0.0.1:7101"}, {2, true, ""}, {5, false, "learner"}};
    AppendRequest app{10, 4,
                      {Entry{4, 11, EntryType::kNormal, "grant"}, Entry{5, 12, EntryType::kNoop, ""},
                       Entry{5, 13, EntryType::kConfig, encode_configuration(with_learner)}},
                      9};
    SnapshotRequest snap{Snapshot{SnapshotMeta{100, 4, with_learner}, std::string("table\0bytes", 11)}};
    SnapshotRequest middle{Snapshot{SnapshotMeta{100, 4, with_learner}, "chunk"}, 1 << 20, false};
    SnapshotRequest last{Snapshot{SnapshotMeta{100, 4, Configuration::of_voters({1, 2, 3})}, "end"}, 2 << 20, true};
    return {msg(VoteRequest{true, 7, 3, true}),
            msg(VoteResponse{false, true}),
            msg(app),
            msg(AppendRequest{}),
            msg(AppendResponse{false, 3, 10, 8, 2}),
            msg(snap),
            msg(middle),
            msg(last),
            msg(SnapshotAck{100, 1 << 20, false}),
            msg(SnapshotAck{100, 7, true}),
            msg(Heartbeat{42, 9}),
            msg(HeartbeatResponse{9}),
            msg(TimeoutNow{}),
            msg(SnapshotRequest{Snapshot{SnapshotMeta{100, 4, with_learner, 13}, "whole"}}),
            msg(SnapshotRequest{Snapshot{SnapshotMeta{100, 4, Configuration::of_voters({1, 2}), 90}, "c"}, 7, false})};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(raft_codec)

BOOST_AUTO_TEST_CASE(every_message_kind_round_trips_with_the_frame_cluster_id) {
    for (const Message& m : sample_messages()) {
        const std::string bytes = net::encode_message(m);
        auto decoded = net::decode_message(bytes, 77);
        BOOST_REQUIRE_MESSAGE(std::holds_alternative<Message>(decoded), "body index " << m.body.index());
        BOOST_TEST((std::get<Message>(decoded) == m));
    }
}

BOOST_AUTO_TEST_CASE(every_truncation_is_an_error_not_a_crash) {
    for (const Message& m : sample_messages()) {
        const std::string bytes = net::encode_message(m);
        for (std::size_t n = 0; n < bytes.size(); ++n) {
            auto decoded = net::decode_message(std::string_view(bytes).substr(0, n), 77);
            BOOST_TEST(std::holds_alternative<net::CodecError>(decoded));
        }
    }
}

BOOST_AUTO_TEST_CASE(trailing_bytes_unknown_tag_and_version_are_refused) {
    std::string bytes = net::encode_message(sample_messages()[0]) + "x";
    BOOST_TEST(std::get<net::CodecError>(net::decode_message(bytes, 1)).message.find("trailing") != std::string::npos);
    bytes = net::encode_message(sample_messages()[8]);
    bytes[25] = 99;  // tag after version(1) from(8) to(8) term(8)
    BOOST_TEST(std::get<net::CodecError>(net::decode_message(bytes, 1)).message.find("unknown message tag") != std::string::npos);
    bytes[0] = 2;
    BOOST_TEST(std::get<net::CodecError>(net::decode_message(bytes, 1)).message.find("version") != std::string::npos);
}

// Tag 5, what a member sent before learners existed: voters only.
BOOST_AUTO_TEST_CASE(a_snapshot_of_voters_only_still_decodes) {
    std::string bytes;
    bytes.push_back(1);  // version
    for (std::uint64_t v : {1ull, 2ull, 5ull}) bytes.append(reinterpret_cast<const char*>(&v), 8);  // from to term
    bytes.push_back(5);  // tag
    for (std::uint64_t v : {100ull, 4ull}) bytes.append(reinterpret_cast<const char*>(&v), 8);  // index term
    const std::uint32_t n = 3, len = 2;
    bytes.append(reinterpret_cast<const char*>(&n), 4);
    for (std::uint64_t v : {1ull, 2ull, 3ull}) bytes.append(reinterpret_cast<const char*>(&v), 8);
    bytes.append(reinterpret_cast<const char*>(&len), 4);
    bytes.append("st");
    auto decoded = net::decode_message(bytes, 77);
    BOOST_REQUIRE(std::holds_alternative<Message>(decoded));
    const auto& snap = std::get<SnapshotRequest>(std::get<Message>(decoded).body).snapshot;
    BOOST_TEST((snap.meta.config == Configuration::of_voters({1, 2, 3})));
    BOOST_TEST(snap.data == "st");
}

BOOST_AUTO_TEST_CASE(a_configuration_entry_that_does_not_decode_is_refused) {
    for (const std::string& bad : {std::string("garbage"), encode_configuration(Configuration{})}) {
        Message m{1, 1, 2, 1, AppendRequest{0, 0, {Entry{1, 1, EntryType::kConfig, bad}}, 0}};
        auto decoded = net::decode_message(net::encode_message(m), 1);
        BOOST_REQUIRE(std::holds_alternative<net::CodecError>(decoded));
        BOOST_TEST(std::get<net::CodecError>(decoded).message.find("configuration entry") != std::string::npos);
    }
}

BOOST_AUTO_TEST_CASE(a_voters_only_snapshot_is_sent_as_tag_5) {
    Message m{77, 1, 2, 5, SnapshotRequest{Snapshot{SnapshotMeta{9, 2, Configuration::of_voters({1, 2, 3})}, "s"}}};
    const std::string bytes = net::encode_message(m);
    BOOST_TEST(static_cast<int>(bytes[25]) == 5);
    BOOST_TEST((std::get<Message>(net::decode_message(bytes, 77)) == m));
}

BOOST_AUTO_TEST_CASE(chunks_go_as_tag_10_and_a_whole_snapshot_never_does) {
    Message chunk{77, 1, 2, 5, SnapshotRequest{Snapshot{SnapshotMeta{9, 2, Configuration::of_voters({1})}, "c"}, 0, false}};
    std::string bytes = net::encode_message(chunk);
    BOOST_TEST(static_cast<int>(bytes[25]) == 10);
    // A tag 10 whose offset is 0 and done is set would be a whole snapshot: refused.
    bytes[26 + 8] = 1;
    BOOST_TEST(std::holds_alternative<net::CodecError>(net::decode_message(bytes, 77)));
}

// A snapshot whose configuration a log entry made carries that entry's
// index, whole or in chunks, as tag 13; one of the first configuration
// (index 0) keeps tags 5, 9 and 10.
BOOST_AUTO_TEST_CASE(a_snapshot_carries_its_configurations_index_as_tag_13) {
    for (bool whole : {true, false}) {
        Message m{77, 1, 2, 5,
                  SnapshotRequest{Snapshot{SnapshotMeta{9, 2, Configuration::of_voters({1, 2}), 6}, "s"}, 0, whole}};
        std::string bytes = net::encode_message(m);
        BOOST_TEST(static_cast<int>(bytes[25]) == 13);
        BOOST_TEST((std::get<Message>(net::decode_message(bytes, 77)) == m));
        // offset(8) done(1), then the configuration index: 10, beyond the snapshot index 9.
        bytes[26 + 9] = 10;
        const auto beyond = net::decode_message(bytes, 77);
        BOOST_REQUIRE(std::holds_alternative<net::CodecError>(beyond));
        BOOST_TEST(std::get<net::CodecError>(beyond).message.find("configuration index 10 is beyond") !=
                   std::string::npos);
        bytes[26 + 9] = 0;  // 0 goes as tag 5, 9 or 10
        BOOST_TEST(std::holds_alternative<net::CodecError>(net::decode_message(bytes, 77)));
    }
}

BOOST_AUTO_TEST_CASE(huge_entry_count_is_refused_before_allocating) {
    Message m{1, 1, 2, 1, AppendRequest{}};
    std::string bytes = net::encode_message(m);
    // count is the last 4 bytes of an empty AppendRequest
    for (std::size_t i = bytes.size() - 4; i < bytes.size(); ++i) bytes[i] = static_cast<char>(0xff);
    auto decoded = net::decode_message(bytes, 1);
    BOOST_REQUIRE(std::holds_alternative<net::CodecError>(decoded));
    BOOST_TEST(std::get<net::CodecError>(decoded).message.find("entry count") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(non_boolean_flag_byte_is_refused) {
    std::string bytes = net::encode_message(Message{1, 1, 2, 1, VoteResponse{false, true}});
    bytes[bytes.size() - 1] = 2;
    BOOST_TEST(std::holds_alternative<net::CodecError>(net::decode_message(bytes, 1)));
}

BOOST_AUTO_TEST_CASE(random_mutations_never_crash) {
    std::mt19937_64 rng(12345);
    const auto samples = sample_messages();
    for (int round = 0; round < 20000; ++round) {
        std::string bytes = net::encode_message(samples[static_cast<std::size_t>(round) % samples.size()]);
        const int flips = 1 + static_cast<int>(rng() % 4);
        for (int f = 0; f < flips; ++f) bytes[rng() % bytes.size()] = static_cast<char>(rng());
        auto decoded = net::decode_message(bytes, 1);  // must return, either way
        BOOST_TEST((std::holds_alternative<Message>(decoded) || std::holds_alternative<net::CodecError>(decoded)));
    }
}

BOOST_AUTO_TEST_SUITE_END()
