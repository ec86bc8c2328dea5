// server/proof_signer.h: proofs signed ahead from a leader's batch and found
// ready, waited for while their batch is queued, or signed on demand; two
// take()s of one token both answered; a key or signer that does not match
// the presigned proof signs again; a token with no Grant in its batch; the
// queue limit; stop() with work queued. Every proof is checked against one
// signed directly by the same key. Where a case needs work to be queued, not
// being signed, the signing thread is parked first (Loop's gate): no case
// depends on how fast the thread signs.
#include <sys/stat.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "lock/commands.h"
#include "server/proof_signer.h"

using namespace pgfence;
using namespace pgfence::server;

namespace {

constexpr std::uint64_t kCluster = 77;

// A signer from the shared vector's key (or a fresh copy of it: another
// TokenSigner object, as a reload makes).
std::shared_ptr<const net::TokenSigner> vector_signer() {
    std::ifstream in(PGFENCE_SOURCE_DIR "/tests/vectors/token_proof_v1.key");
    std::ostringstream pem;
    pem << in.rdbuf();
    const std::string path = "/tmp/pgfence-proof-signer-test-" + std::to_string(::getpid()) + ".key";
    std::ofstream(path) << pem.str();
    ::chmod(path.c_str(), 0600);
    std::shared_ptr<net::TokenSigner> signer;
    const std::string err = net::TokenSigner::load(path, signer);
    std::remove(path.c_str());
    BOOST_TEST_REQUIRE(err == "");
    return signer;
}

// The test thread plays the event loop: posted functions wait here until
// run_until() runs them. While the gate is closed, a post() blocks: the
// signing thread parks inside it (its lock released), so work queued
// meanwhile is certainly queued, not being signed.
struct Loop {
    std::mutex mutex;
    std::condition_variable cv;
    std::deque<std::function<void()>> posted;
    bool gate_closed = false;
    bool parked = false;  // the signing thread waits at the gate

    ProofSigner::Post post() {
        return [this](std::function<void()> fn) {
            std::unique_lock<std::mutex> lock(mutex);
            parked = gate_closed;
            cv.notify_all();
            cv.wait(lock, [this] { return !gate_closed; });
            parked = false;
            posted.push_back(std::move(fn));
            cv.notify_all();
        };
    }
    void close_gate() {
        std::lock_guard<std::mutex> guard(mutex);
        gate_closed = true;
    }
    // Waits (at most 5 s) until the signing thread is parked at the gate.
    bool wait_parked() {
        std::unique_lock<std::mutex> lock(mutex);
        return cv.wait_for(lock, std::chrono::seconds(5), [this] { return parked; });
    }
    void open_gate() {
        {
            std::lock_guard<std::mutex> guard(mutex);
            gate_closed = false;
        }
        cv.notify_all();
    }
    // Runs posted functions until `done()` holds; false after 5 s without.
    bool run_until(const std::function<bool()>& done) {
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (!done()) {
            std::function<void()> fn;
            {
                std::unique_lock<std::mutex> lock(mutex);
                if (!cv.wait_until(lock, give_up, [this] { return !posted.empty(); })) return false;
                fn = std::move(posted.front());
                posted.pop_front();
            }
            fn();
        }
        return true;
    }
};

raft::Entry grant_entry(raft::Index index, const std::string& key) {
    return raft::Entry{1, index, raft::EntryType::kNormal, lock::encode(lock::Grant{key, 1000, ""})};
}

std::shared_ptr<const std::vector<raft::Entry>> batch(std::vector<raft::Entry> entries) {
    return std::make_shared<const std::vector<raft::Entry>>(std::move(entries));
}

// Answers collected by take()'s callbacks, by name.
struct Answers {
    std::vector<std::pair<std::string, std::string>> got;  // (name, proof)
    ProofSigner::Done to(const std::string& name) {
        return [this, name](std::string proof) { got.emplace_back(name, std::move(proof)); };
    }
    std::string of(const std::string& name) const {
        for (const auto& [n, p] : got) {
            if (n == name) return p;
        }
        return "<none>";
    }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(proof_signer)

// Parks the signing thread at the gate with an on-demand take() of its own.
void park(Loop& loop, ProofSigner& ps, const std::shared_ptr<const net::TokenSigner>& signer, Answers& answers) {
    loop.close_gate();
    ps.take(signer, 1'000'000, "park", answers.to("park"));
    BOOST_TEST_REQUIRE(loop.wait_parked());
}

BOOST_AUTO_TEST_CASE(presigned_proofs_are_found_ready_and_match_direct_signing) {
    Loop loop;
    const auto signer = vector_signer();
    ProofSigner ps(loop.post(), kCluster);
    Answers answers;
    park(loop, ps, signer, answers);
    // Entries 5..7 with token floor 100: tokens 105..107; entry 6 is a Release.
    std::vector<raft::Entry> entries{grant_entry(5, "a"), raft::Entry{1, 6, raft::EntryType::kNormal,
                                                                      lock::encode(lock::Release{"x", 3})},
                                     grant_entry(7, "b")};
    ps.presign(signer, batch(entries), 100);  // queued: the thread is parked
    // 106 has no Grant: its take() waits for the batch, then is signed on demand.
    ps.take(signer, 106, "x", answers.to("x"));
    loop.open_gate();
    BOOST_TEST_REQUIRE(loop.run_until([&] { return answers.got.size() == 2; }));  // park, x
    BOOST_TEST(answers.of("x") == signer->sign(kCluster, 106, "x"));
    ps.take(signer, 105, "a", answers.to("a"));
    ps.take(signer, 107, "b", answers.to("b"));
    BOOST_TEST(answers.got.size() == 4u);  // both were ready: answered inside take()
    BOOST_TEST(answers.of("a") == signer->sign(kCluster, 105, "a"));
    BOOST_TEST(answers.of("b") == signer->sign(kCluster, 107, "b"));
    const ProofSigner::Counts n = ps.counts();
    BOOST_TEST(n.ready == 2u);
    BOOST_TEST(n.waited == 0u);
    BOOST_TEST(n.on_demand == 2u);  // park's, and 106 (not a Grant)
}

BOOST_AUTO_TEST_CASE(a_take_waits_for_its_batch_and_two_takes_of_one_token_are_both_answered) {
    Loop loop;
    const auto signer = vector_signer();
    ProofSigner ps(loop.post(), kCluster);
    Answers answers;
    park(loop, ps, signer, answers);
    std::vector<raft::Entry> entries;
    for (raft::Index i = 1; i <= 20; ++i) entries.push_back(grant_entry(i, "k" + std::to_string(i)));
    entries.push_back(raft::Entry{1, 21, raft::EntryType::kNormal, lock::encode(lock::Expire{"k1", 1})});
    ps.presign(signer, batch(entries), 0);  // queued: the thread is parked
    ps.take(signer, 20, "k20", answers.to("first"));
    ps.take(signer, 20, "k20", answers.to("retry"));    // a same-owner retry with the same token
    ps.take(signer, 19, "other", answers.to("mismatch"));  // not the key entry 19 grants
    ps.take(signer, 21, "k1", answers.to("not a grant"));  // entry 21 is an Expire
    loop.open_gate();
    BOOST_TEST_REQUIRE(loop.run_until([&] { return answers.got.size() == 5; }));
    const std::string want = signer->sign(kCluster, 20, "k20");
    BOOST_TEST(answers.of("first") == want);
    BOOST_TEST(answers.of("retry") == want);
    BOOST_TEST(answers.of("mismatch") == signer->sign(kCluster, 19, "other"));
    BOOST_TEST(answers.of("not a grant") == signer->sign(kCluster, 21, "k1"));
    const ProofSigner::Counts n = ps.counts();
    BOOST_TEST(n.waited == 2u);
    BOOST_TEST(n.on_demand == 3u);  // park, mismatch, not a grant
    BOOST_TEST(n.ready == 0u);
}

BOOST_AUTO_TEST_CASE(a_token_without_a_presigned_proof_is_signed_on_demand) {
    Loop loop;
    const auto signer = vector_signer();
    ProofSigner ps(loop.post(), kCluster);
    Answers answers;
    ps.take(signer, 42, "owned", answers.to("owned"));  // e.g. a same-owner retry's existing token
    BOOST_TEST_REQUIRE(loop.run_until([&] { return answers.got.size() == 1; }));
    BOOST_TEST(answers.of("owned") == signer->sign(kCluster, 42, "owned"));
    BOOST_TEST(ps.counts().on_demand == 1u);
}

BOOST_AUTO_TEST_CASE(a_reloaded_signer_signs_again) {
    Loop loop;
    const auto old_signer = vector_signer();
    const auto new_signer = vector_signer();  // another object, as a reload makes
    ProofSigner ps(loop.post(), kCluster);
    ps.presign(old_signer, batch({grant_entry(9, "r")}), 0);
    Answers answers;
    // Let the batch be signed, then ask with the signer now in use.
    ps.take(old_signer, 1, "warm", answers.to("warm"));
    BOOST_TEST_REQUIRE(loop.run_until([&] { return answers.got.size() == 1; }));
    const auto before = ps.counts();
    ps.take(new_signer, 9, "r", answers.to("r"));
    BOOST_TEST_REQUIRE(loop.run_until([&] { return answers.got.size() == 2; }));
    BOOST_TEST(answers.of("r") == new_signer->sign(kCluster, 9, "r"));
    BOOST_TEST(ps.counts().on_demand == before.on_demand + 1);
}

BOOST_AUTO_TEST_CASE(batches_beyond_the_queue_limit_are_not_presigned) {
    Loop loop;
    const auto signer = vector_signer();
    ProofSigner ps(loop.post(), kCluster);
    Answers answers;
    park(loop, ps, signer, answers);
    const std::uint64_t first = 10'000;
    for (std::size_t b = 0; b < ProofSigner::kMaxQueuedBatches + 5; ++b) {
        ps.presign(signer, batch({grant_entry(first + b, "q")}), 0);
    }
    // The first kMaxQueuedBatches wait to be signed; the 5 after them were
    // not queued: a take() of the last queued one waits, of a dropped one is
    // signed on demand.
    const std::uint64_t last_queued = first + ProofSigner::kMaxQueuedBatches - 1;
    const std::uint64_t dropped = first + ProofSigner::kMaxQueuedBatches + 4;
    ps.take(signer, last_queued, "q", answers.to("queued"));
    ps.take(signer, dropped, "q", answers.to("dropped"));
    loop.open_gate();
    BOOST_TEST_REQUIRE(loop.run_until([&] { return answers.got.size() == 3; }));
    BOOST_TEST(answers.of("queued") == signer->sign(kCluster, last_queued, "q"));
    BOOST_TEST(answers.of("dropped") == signer->sign(kCluster, dropped, "q"));
    const ProofSigner::Counts n = ps.counts();
    BOOST_TEST(n.waited == 1u);
    BOOST_TEST(n.on_demand == 2u);  // park, dropped
}

BOOST_AUTO_TEST_CASE(stop_finishes_queued_work_and_joins) {
    Loop loop;
    const auto signer = vector_signer();
    Answers answers;
    {
        ProofSigner ps(loop.post(), kCluster);
        std::vector<raft::Entry> entries;
        for (raft::Index i = 1; i <= 500; ++i) entries.push_back(grant_entry(i, "s"));
        ps.presign(signer, batch(entries), 0);
        ps.take(signer, 5000, "s", answers.to("on demand"));
        ps.stop();
        ps.stop();  // a second stop does nothing
    }
    // The on-demand proof was signed before the thread ended; its callback was posted.
    BOOST_TEST_REQUIRE(loop.run_until([&] { return answers.got.size() == 1; }));
    BOOST_TEST(answers.of("on demand") == signer->sign(kCluster, 5000, "s"));
}

BOOST_AUTO_TEST_SUITE_END()
