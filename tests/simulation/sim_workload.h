// Simulated clients of the member core's API (member/api.h): each runs one
// request at a time against whoever it thinks is leader, following
// Unavailable{leader} hints, giving up after a timeout. Acquires (some that
// wait in the FIFO queue, some of a set of keys under one lease), releases
// and keepalives (of a held set mostly whole, sometimes of one of its keys:
// part_of_set) on a small key space so they conflict, often with stale
// tokens; lists of one key are the reads.
// Every answer decided by a log entry (or, for a list, at an applied index)
// goes into the history the linearizability check reads; keepalives and
// answers such as "wait timed out" are not in the log and stay out of it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "history.h"
#include "fenced_resource.h"
#include "lease_checker.h"
#include "lock_model.h"
#include "token_checker.h"
#include "sim_shell.h"
#include "sim_random.h"

namespace pgfence::sim {

class Workload {
public:
    // Leases and waits are drawn in heartbeat ticks of `tick_us`.
    // rho_ppm: the clients' (and cores') rho; `strict_leases`: the clocks run
    // within it, so overlapping leases fail the seed (else they are counted).
    // `model` (the safety checker's, of the committed log) tells a fresh
    // grant from an idempotent re-grant.
    Workload(int clients, std::size_t members, std::uint64_t tick_us, std::uint64_t rho_ppm, bool strict_leases,
             const LockModel& model, SimRandom random);

    int clients() const { return static_cast<int>(clients_.size()); }
    // Members started so far (ids 1..members): whom a client may guess leads.
    void set_members(std::size_t members) {
        members_ = members;
        stopped_.resize(members, false);
    }
    // The member at `position` stopped for good (removed): clients guess
    // among the others when they start their next operation.
    void member_stopped(std::size_t position);

    struct Send {
        std::size_t member = 0;  // position of the member to send to
        ClientRequest request;
        // A twin acquire: the same request also went, as this earlier attempt,
        // over a connection the client abandons at once (an HTTP client that
        // retried on a new connection before the first answer came). Both
        // reach the member in one turn of its loop, so their Grants commit in
        // one batch; the twin's answer is never written. 0: no twin.
        int twin_attempt = 0;
        bool twin_gone_first = false;  // the member notices the closed connection before the Grants apply
    };
    // Twin acquires in this seed: a share of the acquires of clients with an
    // owner, drawn from `random` (its own stream: seeds without twins draw
    // everything else exactly as a seed without them).
    void set_twins(double share, SimRandom random) {
        twin_share_ = share;
        twin_random_ = random;
    }
    // Elections in this seed: acquires that publish a value and proclaims in
    // place of a share of keepalives, drawn from `random` (their own stream,
    // as twins').
    void set_elections(SimRandom random) {
        elections_ = true;
        election_random_ = random;
    }
    // Holders that keep their leases alive (checkpoint churn, swarm.h
    // make_checkpoint_churn): leases of 20..60 ticks, and a client holding
    // a key mostly keeps one of its leases alive (with its token).
    void set_keepalive_heavy() { keepalive_heavy_ = true; }
    std::uint64_t proclaimed() const { return proclaimed_; }  // proclaims answered Proclaimed
    // Leases answered to a client must run to their deadline: the leader
    // proposed Expire{key, token} at now_us.
    void expire_proposed(const std::string& key, lock::Token token, std::uint64_t now_us) {
        leases_.expire_proposed(key, token, now_us);
    }

    // Starts the client's next operation (it must be idle).
    Send begin(int client, std::uint64_t now_us);

    // What the client does with a reply: nothing (stale or done), or resend.
    enum class Next : std::uint8_t { kIgnore, kResend, kDone };
    // A holder's write to the fenced resource, due after delay_us (some come
    // after the lease ran out: a paused holder).
    struct Write {
        std::string key;
        lock::Token token = 0;
        std::uint64_t delay_us = 0;
    };
    struct Reaction {
        Next next = Next::kIgnore;
        Send send;                   // kResend
        std::optional<Write> write;  // after a grant
    };
    // The write is carried out (true: accepted).
    bool write(const Write& w) { return resource_.write(w.key, w.token); }
    const FencedResource& resource() const { return resource_; }
    Reaction on_reply(const ClientReply& reply, std::uint64_t now_us);

    // The client's deadline for op_id passed: gives up if still waiting.
    bool on_timeout(int client, std::uint64_t op_id);

    bool idle(int client) const { return !clients_[static_cast<std::size_t>(client)].waiting; }

    const std::vector<ClientOp>& acked() const { return acked_; }
    std::uint64_t invoked() const { return invoked_; }
    std::uint64_t unknown() const { return unknown_; }
    std::uint64_t unlogged() const { return unlogged_; }
    const LeaseChecker& leases() const { return leases_; }
    const TokenChecker& tokens() const { return tokens_; }

private:
    static constexpr int kMaxAttempts = 12;
    static constexpr std::size_t kMaxTokensPerKey = 32;

    struct Client {
        bool waiting = false;
        ClientOp op;
        int attempt = 0;
        std::size_t leader_guess = 0;
        std::string owner;
        std::string user;  // "" : no authentication
        std::map<std::string, lock::Token> held;  // keys this client holds, by its knowledge
        std::map<lock::Token, std::vector<std::string>> sets;  // of them, the sets it holds, by token
        std::optional<member::Request> retry;     // a request whose outcome stayed unknown
        member::Request request;                  // the one in flight
        std::uint64_t sent_us = 0;                // when its latest attempt was sent
    };

    member::Request next_request(Client& c);
    std::string random_key();
    std::string election_value();  // "" or one of a few values, from election_random_
    std::vector<std::string> random_set();  // 2..3 distinct keys, in a random order (keys_ >= 2)
    lock::Token stale_or_known_token(const std::string& key);
    std::optional<Write> record_answer(Client& c, const member::Answer& answer, std::uint64_t now_us);
    Send resend(Client& c, std::size_t member, std::uint64_t now_us);
    std::size_t guess();  // a random member, one not stopped

    double twin_share_ = 0;
    SimRandom twin_random_{0};
    bool elections_ = false;
    bool keepalive_heavy_ = false;
    SimRandom election_random_{0};
    std::uint64_t proclaimed_ = 0;
    std::size_t members_;
    std::vector<bool> stopped_;  // by position
    bool any_stopped_ = false;
    std::uint64_t tick_ms_;
    SimRandom random_;
    std::vector<Client> clients_;
    int keys_;
    std::map<std::string, std::vector<lock::Token>> tokens_seen_;  // per key, bounded
    std::vector<ClientOp> acked_;
    std::uint64_t next_op_id_ = 1;
    std::uint64_t invoked_ = 0;
    std::uint64_t unknown_ = 0;
    std::uint64_t unlogged_ = 0;
    const LockModel& model_;
    LeaseChecker leases_;
    TokenChecker tokens_;
    FencedResource resource_;
};

}  // namespace pgfence::sim
