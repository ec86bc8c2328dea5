// The history of lock events kept for watches (member/watch_history.h): its
// bounds, the oldest revision it can serve, resets; and the events the core
// appends as entries apply, the same on every member.
#include <boost/test/unit_test.hpp>

#include "harness.h"
#include "member/watch_history.h"

using namespace pgfence;
using namespace pgfence::member;
using namespace pgfence::member::test;

namespace {

WatchEvent granted(raft::Index rev, std::string key, lock::Token token, std::string owner = "o") {
    return WatchEvent{rev, WatchEventType::kGranted, std::move(key), token, std::move(owner), 1000, false};
}

std::vector<raft::Index> revisions(const WatchHistory& h) {
    std::vector<raft::Index> out;
    for (std::uint64_t s = h.begin_seq(); s < h.end_seq(); ++s) out.push_back(h.at(s).revision);
    return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(watch_history)

BOOST_AUTO_TEST_CASE(keeps_events_in_order_and_finds_a_revision) {
    WatchHistory h(100, 1u << 20);
    BOOST_TEST(h.oldest_revision() == 1u);
    BOOST_TEST(h.end_seq() == 0u);
    h.append(granted(3, "a", 3));
    h.append(granted(5, "b", 5));
    h.append(granted(5, "c", 5));
    h.append(granted(9, "d", 9));
    BOOST_TEST((revisions(h) == std::vector<raft::Index>{3, 5, 5, 9}));
    BOOST_TEST(h.seq_of(1) == 0u);
    BOOST_TEST(h.seq_of(4) == 1u);
    BOOST_TEST(h.seq_of(5) == 1u);
    BOOST_TEST(h.seq_of(6) == 3u);
    BOOST_TEST(h.seq_of(10) == 4u);
    BOOST_TEST(h.at(2).key == "c");
    BOOST_CHECK_THROW(h.append(granted(8, "late", 8)), std::logic_error);
}

BOOST_AUTO_TEST_CASE(the_event_bound_drops_the_oldest_and_raises_the_oldest_revision) {
    WatchHistory h(3, 1u << 20);
    for (raft::Index r = 1; r <= 5; ++r) h.append(granted(r * 2, "k", r * 2));
    BOOST_TEST((revisions(h) == std::vector<raft::Index>{6, 8, 10}));
    BOOST_TEST(h.begin_seq() == 2u);
    BOOST_TEST(h.end_seq() == 5u);
    // Revision 5 (no event) can still be served: every event >= 5 is kept.
    BOOST_TEST(h.oldest_revision() == 5u);
    BOOST_TEST(h.seq_of(5) == 2u);
}

// An entry's events share a revision: dropping some of them makes the
// revision unservable, yet the rest of its events may still be appended.
BOOST_AUTO_TEST_CASE(a_revision_partly_dropped_is_no_longer_served) {
    WatchHistory h(2, 1u << 20);
    h.append(granted(7, "a", 1));
    h.append(granted(7, "b", 2));
    h.append(granted(7, "c", 3));  // drops a: revision 7 is incomplete
    BOOST_TEST(h.oldest_revision() == 8u);
    BOOST_TEST(h.size() == 2u);
    BOOST_TEST(h.seq_of(8) == h.end_seq());
    h.append(granted(8, "d", 4));
    BOOST_TEST(h.oldest_revision() == 8u);
    BOOST_TEST(h.at(h.seq_of(8)).key == "d");
}

BOOST_AUTO_TEST_CASE(the_byte_bound_drops_the_oldest) {
    const std::uint64_t one = event_bytes(granted(1, "key", 1));
    WatchHistory h(1000, 3 * one);
    for (raft::Index r = 1; r <= 10; ++r) h.append(granted(r, "key", r));
    BOOST_TEST(h.size() == 3u);
    BOOST_TEST(h.bytes() == 3 * one);
    BOOST_TEST(h.oldest_revision() == 8u);
    // An event larger than the bound alone is dropped too.
    h.append(granted(11, std::string(4 * one, 'x'), 11));
    BOOST_TEST(h.size() == 0u);
    BOOST_TEST(h.bytes() == 0u);
    BOOST_TEST(h.oldest_revision() == 12u);
    BOOST_CHECK_THROW(WatchHistory(0, 1), std::invalid_argument);
    BOOST_CHECK_THROW(WatchHistory(1, 0), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(a_reset_starts_after_the_snapshot) {
    WatchHistory h(100, 1u << 20);
    h.append(granted(2, "a", 2));
    h.append(granted(3, "b", 3));
    h.reset(40);
    BOOST_TEST(h.resets() == 1u);
    BOOST_TEST(h.size() == 0u);
    BOOST_TEST(h.begin_seq() == 2u);
    BOOST_TEST(h.end_seq() == 2u);
    BOOST_TEST(h.oldest_revision() == 41u);
    BOOST_CHECK_THROW(h.append(granted(40, "c", 40)), std::logic_error);
    h.append(granted(41, "c", 41));
    BOOST_TEST(h.at(2).key == "c");
}

// The core appends, as entries apply: a created grant, a release that
// removed, every expire (existed or not); nothing for a re-grant or a
// refused grant. Every member appends the same events.
BOOST_AUTO_TEST_CASE(the_core_appends_the_events_of_applied_entries_on_every_member) {
    Harness h(3);
    const raft::NodeId l = h.elect();
    const lock::Token t1 = as<Granted>(h.answer(l, h.send(l, Acquire{"k", 1000, 0, "a"}))).token;
    as<Granted>(h.answer(l, h.send(l, Acquire{"k", 1000, 0, "a"})));  // a re-grant: no event
    as<Held>(h.answer(l, h.send(l, Acquire{"k", 1000, 0, "b"})));     // refused: no event
    as<Released>(h.answer(l, h.send(l, Release{"k", t1})));
    as<NotHeld>(h.answer(l, h.send(l, Release{"k", t1})));            // not held: no event
    const lock::Token t2 = as<Granted>(h.answer(l, h.send(l, Acquire{"e", 500, 0, "c"}))).token;
    h.advance(milliseconds(2000));  // the lease runs out: Expire
    h.settle();
    const WatchHistory& w = h.core(l).watch_history();
    BOOST_REQUIRE(w.size() == 4u);
    const std::uint64_t b = w.begin_seq();
    BOOST_TEST((w.at(b).type == WatchEventType::kGranted));
    BOOST_TEST(w.at(b).revision == t1);
    BOOST_TEST(w.at(b).owner == "a");
    BOOST_TEST(w.at(b).lease_ms == 1000u);
    BOOST_TEST((w.at(b + 1).type == WatchEventType::kReleased));
    BOOST_TEST(w.at(b + 1).token == t1);
    BOOST_TEST((w.at(b + 2).type == WatchEventType::kGranted));
    BOOST_TEST(w.at(b + 2).key == "e");
    BOOST_TEST((w.at(b + 3).type == WatchEventType::kExpired));
    BOOST_TEST(w.at(b + 3).token == t2);
    BOOST_TEST(w.at(b + 3).existed);
    BOOST_TEST(w.at(b + 3).revision > w.at(b + 2).revision);
    for (raft::NodeId id : {raft::NodeId{1}, raft::NodeId{2}, raft::NodeId{3}}) {
        const WatchHistory& other = h.core(id).watch_history();
        BOOST_REQUIRE(other.size() == w.size());
        for (std::uint64_t i = 0; i < w.size(); ++i) {
            BOOST_TEST((other.at(other.begin_seq() + i) == w.at(b + i)));
        }
    }
}

// A set makes one event per key at one revision (granted, then released);
// a campaign's grant carries its value; a proclaim makes a proclaimed event
// with the new value, a refused one none.
BOOST_AUTO_TEST_CASE(sets_values_and_proclaims_make_their_events) {
    Harness h(3);
    const raft::NodeId l = h.elect();
    Acquire set{"", 1000, 0, "s"};
    set.keys = {"b", "a"};
    const lock::Token ts = as<Granted>(h.answer(l, h.send(l, set))).token;
    Release whole{"", ts};
    whole.keys = {"b", "a"};
    as<Released>(h.answer(l, h.send(l, whole)));
    Acquire campaign{"election/x", 1000, 0, "c"};
    campaign.value = "v1";
    const lock::Token tc = as<Granted>(h.answer(l, h.send(l, campaign))).token;
    as<Proclaimed>(h.answer(l, h.send(l, Proclaim{"election/x", tc, "v2"})));
    as<NotHeld>(h.answer(l, h.send(l, Proclaim{"election/x", tc + 1000, "v3"})));  // refused: no event
    h.settle();
    const WatchHistory& w = h.core(l).watch_history();
    BOOST_REQUIRE(w.size() == 6u);
    const std::uint64_t b = w.begin_seq();
    const std::vector<std::pair<WatchEventType, std::string>> want = {
        {WatchEventType::kGranted, "b"},  {WatchEventType::kGranted, "a"},
        {WatchEventType::kReleased, "b"}, {WatchEventType::kReleased, "a"},
        {WatchEventType::kGranted, "election/x"}, {WatchEventType::kProclaimed, "election/x"}};
    for (std::size_t i = 0; i < want.size(); ++i) {
        BOOST_TEST((w.at(b + i).type == want[i].first), i);
        BOOST_TEST(w.at(b + i).key == want[i].second, i);
    }
    BOOST_TEST(w.at(b).revision == w.at(b + 1).revision);
    BOOST_TEST(w.at(b + 2).revision == w.at(b + 3).revision);
    BOOST_TEST(w.at(b + 1).token == ts);
    BOOST_TEST(w.at(b + 4).value == "v1");
    BOOST_TEST(w.at(b + 5).value == "v2");
    BOOST_TEST(w.at(b + 5).token == tc);
    for (raft::NodeId id : {raft::NodeId{1}, raft::NodeId{2}, raft::NodeId{3}}) {
        const WatchHistory& other = h.core(id).watch_history();
        BOOST_REQUIRE(other.size() == w.size());
        for (std::uint64_t i = 0; i < w.size(); ++i) BOOST_TEST((other.at(other.begin_seq() + i) == w.at(b + i)));
    }
}

BOOST_AUTO_TEST_SUITE_END()
