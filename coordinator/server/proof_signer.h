// The member's signing thread: token proofs (net/token_signer.h) are signed
// off the event loop, and mostly before they are needed.
//
// A grant's token is known when the leader proposes it: lock::grant_token()
// of its entry's index and the token floor, the rule the table assigns with
// (lock/commands.h). So the leader hands each batch of entries it writes to
// this thread (presign()), which signs every Grant in it while the batch is
// being made durable and replicated. When the grant is
// answered, take() finds its proof ready and the loop writes the answer at
// once: the signature costs the loop neither CPU nor a thread hand-off.
// A proof not presigned (a same-owner retry answered with its existing
// token, a batch proposed before this member led) is signed on demand: take()
// queues it, and the answer is written when the thread posts it back.
//
// A presigned proof is handed out only for the exact (key, token) it signs,
// by the signer it was signed with being the one in use now (a reload signs
// again); a proof for an entry that never commits, or a Grant that is
// refused, is dropped, never sent. Grants are answered in token order, so
// take(T) drops the presigned proofs below T.
//
// Limits: at most kMaxQueuedBatches batches wait to be presigned (beyond
// that a batch is not presigned: its answers are signed on demand) and at
// most kMaxPresigned proofs wait to be taken (beyond that new ones are not
// kept). The take()s waiting or queued are at most the grants being
// answered, which the member's connection limit bounds. Two take()s may ask
// for one token (a same-owner retry answered with the token its first
// attempt is being granted); each gets its answer.
//
// Thread: presign() and take() on the loop; callbacks run on the loop
// (take()'s directly when the proof is ready, else posted). stop() finishes
// what is queued and joins; callbacks posted after the loop stopped are
// dropped with it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "net/token_signer.h"
#include "raft/types.h"

namespace pgfence::server {

class ProofSigner {
public:
    using Post = std::function<void(std::function<void()>)>;  // runs a function on the loop
    using Done = std::function<void(std::string proof)>;      // runs on the loop
    using SignerPtr = std::shared_ptr<const net::TokenSigner>;

    static constexpr std::size_t kMaxPresigned = 16384;
    static constexpr std::size_t kMaxQueuedBatches = 64;

    ProofSigner(Post post, std::uint64_t cluster_id);
    ~ProofSigner();
    ProofSigner(const ProofSigner&) = delete;
    ProofSigner& operator=(const ProofSigner&) = delete;

    // Signs, ahead of time, the Grants among `entries` (a leader's batch),
    // each with the token lock::grant_token(its index, token_floor) would
    // create its lock with.
    void presign(const SignerPtr& signer, std::shared_ptr<const std::vector<raft::Entry>> entries,
                 std::uint64_t token_floor);
    // The proof of (key, token) by `signer`, to done(): at once when it is
    // ready, else once signed.
    void take(const SignerPtr& signer, std::uint64_t token, const std::string& key, Done done);
    void stop();

    // Counters, for tests and metrics: take()s whose proof was ready, that
    // waited for their batch to be signed, and that were signed on demand.
    struct Counts {
        std::uint64_t ready = 0, waited = 0, on_demand = 0;
    };
    Counts counts() const;

private:
    struct Signed {
        SignerPtr signer;
        std::string key;
        std::string proof;
    };
    struct OnDemand {
        SignerPtr signer;
        std::uint64_t token = 0;
        std::string key;
        Done done;
    };
    struct Batch {
        SignerPtr signer;
        std::shared_ptr<const std::vector<raft::Entry>> entries;
        std::uint64_t token_floor = 0;
    };
    void run();
    void sign_batch(const Batch& batch);

    const Post post_;
    const std::uint64_t cluster_id_;
    mutable std::mutex mutex_;
    std::condition_variable cv_;
    std::vector<Batch> batches_;        // queued presign work
    std::vector<OnDemand> on_demand_;   // queued take()s whose proof was not presigned
    std::map<std::uint64_t, Signed> signed_;  // presigned, by token
    // take()s waiting for a batch queued or being signed (token -> who waits)
    std::multimap<std::uint64_t, OnDemand> waiting_;
    std::uint64_t signing_from_ = 0, signing_to_ = 0;  // the tokens of the batch being signed: [from, to)
    Counts counts_;
    bool stopping_ = false;
    std::thread thread_;
};

}  // namespace pgfence::server
