#include "server/proof_signer.h"

#include <utility>
#include <variant>

#include "lock/commands.h"

namespace pgfence::server {

namespace {

// The tokens a batch's Grants would create their locks with, under the
// floor the batch was handed with: [first, end); {0, 0} when none can be
// granted. Tokens grow with the index, up to kMaxToken.
std::pair<std::uint64_t, std::uint64_t> token_range(const std::vector<raft::Entry>& entries, std::uint64_t floor) {
    if (entries.empty()) return {0, 0};
    const lock::Token first = lock::grant_token(entries.front().index, floor);
    if (first == 0) return {0, 0};
    const lock::Token last = lock::grant_token(entries.back().index, floor);
    return {first, (last == 0 ? lock::kMaxToken : last) + 1};
}

}  // namespace

ProofSigner::ProofSigner(Post post, std::uint64_t cluster_id)
    : post_(std::move(post)), cluster_id_(cluster_id), thread_([this] { run(); }) {}

ProofSigner::~ProofSigner() { stop(); }

void ProofSigner::presign(const SignerPtr& signer, std::shared_ptr<const std::vector<raft::Entry>> entries,
                          std::uint64_t token_floor) {
    if (entries == nullptr || entries->empty()) return;
    bool wake = false;
    {
        std::lock_guard<std::mutex> guard(mutex_);
        if (batches_.size() >= kMaxQueuedBatches) return;  // its answers are signed on demand
        wake = batches_.empty() && on_demand_.empty();
        batches_.push_back(Batch{signer, std::move(entries), token_floor});
    }
    // Work queued before means the thread is awake or about to take it all.
    if (wake) cv_.notify_one();
}

void ProofSigner::take(const SignerPtr& signer, std::uint64_t token, const std::string& key, Done done) {
    std::unique_lock<std::mutex> lock(mutex_);
    signed_.erase(signed_.begin(), signed_.lower_bound(token));  // answered in token order: never asked for
    auto it = signed_.find(token);
    if (it != signed_.end()) {
        Signed s = std::move(it->second);
        signed_.erase(it);
        if (s.key == key && s.signer == signer) {
            ++counts_.ready;
            lock.unlock();
            done(std::move(s.proof));
            return;
        }
    }
    bool queued = token >= signing_from_ && token < signing_to_;
    for (const Batch& b : batches_) {
        const auto [from, to] = token_range(*b.entries, b.token_floor);
        queued = queued || (token >= from && token < to);
    }
    if (queued) {  // its batch is queued or being signed: wait for it
        waiting_.emplace(token, OnDemand{signer, token, key, std::move(done)});
        return;
    }
    ++counts_.on_demand;
    const bool wake = batches_.empty() && on_demand_.empty();
    on_demand_.push_back(OnDemand{signer, token, key, std::move(done)});
    lock.unlock();
    if (wake) cv_.notify_one();
}

void ProofSigner::stop() {
    {
        std::lock_guard<std::mutex> guard(mutex_);
        if (stopping_ && !thread_.joinable()) return;
        stopping_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable()) thread_.join();
}

ProofSigner::Counts ProofSigner::counts() const {
    std::lock_guard<std::mutex> guard(mutex_);
    return counts_;
}

// Signs one presign batch; hands each proof to a take() already waiting for
// it, or keeps it for the take() to come.
void ProofSigner::sign_batch(const Batch& batch) {
    std::vector<std::pair<std::uint64_t, Signed>> out;
    for (const raft::Entry& e : *batch.entries) {
        if (e.type != raft::EntryType::kNormal) continue;
        auto decoded = lock::decode_command(e.data);
        const auto* cmd = std::get_if<lock::Command>(&decoded);
        const auto* grant = cmd != nullptr ? std::get_if<lock::Grant>(cmd) : nullptr;
        if (grant == nullptr) continue;
        const lock::Token token = lock::grant_token(e.index, batch.token_floor);
        if (token == 0) continue;  // refused on apply (GrantRejected{0})
        out.emplace_back(token, Signed{batch.signer, grant->key, batch.signer->sign(cluster_id_, token, grant->key)});
    }
    std::vector<std::pair<Done, std::string>> ready;
    {
        std::lock_guard<std::mutex> guard(mutex_);
        for (auto& [token, s] : out) {
            auto [first, last] = waiting_.equal_range(token);
            if (first == last) {
                if (signed_.size() < kMaxPresigned || signed_.contains(token)) {
                    signed_.insert_or_assign(token, std::move(s));
                }
                continue;
            }
            for (auto w = first; w != last; ++w) {
                if (w->second.key == s.key && w->second.signer == s.signer) {
                    ++counts_.waited;
                    ready.emplace_back(std::move(w->second.done), s.proof);
                } else {
                    ++counts_.on_demand;
                    on_demand_.push_back(std::move(w->second));
                }
            }
            waiting_.erase(first, last);
        }
        // A take() that waited on this batch for a token it has no Grant for.
        const auto [from, to] = token_range(*batch.entries, batch.token_floor);
        for (auto w = waiting_.lower_bound(from); w != waiting_.end() && w->first < to;) {
            ++counts_.on_demand;
            on_demand_.push_back(std::move(w->second));
            w = waiting_.erase(w);
        }
        signing_from_ = signing_to_ = 0;
    }
    if (!ready.empty()) {
        post_([ready = std::make_shared<decltype(ready)>(std::move(ready))] {
            for (auto& [done, proof] : *ready) done(std::move(proof));
        });
    }
}

void ProofSigner::run() {
    for (;;) {
        Batch batch;
        std::vector<OnDemand> demanded;
        {
            std::unique_lock<std::mutex> lock(mutex_);
            cv_.wait(lock, [this] { return stopping_ || !batches_.empty() || !on_demand_.empty(); });
            if (batches_.empty() && on_demand_.empty()) return;
            demanded.swap(on_demand_);
            if (!batches_.empty()) {
                batch = std::move(batches_.front());
                batches_.erase(batches_.begin());
                std::tie(signing_from_, signing_to_) = token_range(*batch.entries, batch.token_floor);
            }
        }
        // Answers waiting on demand first: a client is waiting for each.
        if (!demanded.empty()) {
            auto signed_now = std::make_shared<std::vector<std::pair<Done, std::string>>>();
            for (OnDemand& d : demanded) {
                signed_now->emplace_back(std::move(d.done), d.signer->sign(cluster_id_, d.token, d.key));
            }
            post_([signed_now] {
                for (auto& [done, proof] : *signed_now) done(std::move(proof));
            });
        }
        if (batch.entries != nullptr) sign_batch(batch);
    }
}

}  // namespace pgfence::server
