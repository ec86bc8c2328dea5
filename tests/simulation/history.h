// What the simulated clients were told, and the check that it is linearizable.
//
// The committed log is the linearization witness: a command acknowledged at
// log index i takes effect at i, a read served at applied index r observes the
// state after r. The history is linearizable when every acknowledged operation
//   (a) is the command the committed log holds at its index (same term as the
//       proposal, same decoded command),
//   (b) got the result the sequential model (LockModel) computes replaying
//       the committed log in order (reads: the holder token at r), and
//   (c) respects real time: if A was acknowledged before B was invoked, then
//       A's index < B's index (<= when B is a read: a read may share an index).
// Operations whose outcome the client never learned are unconstrained: the
// log says whether they happened.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lock/commands.h"
#include "raft/types.h"

namespace pgfence::sim {

struct ClientOp {
    enum class Kind : std::uint8_t { kCommand, kRead };

    std::uint64_t id = 0;
    int client = 0;
    Kind kind = Kind::kCommand;
    lock::Command command;   // kCommand
    std::string read_key;    // kRead
    std::uint64_t invoked_us = 0;
    std::uint64_t acked_us = 0;
    raft::Index index = 0;   // kCommand: log index; kRead: applied index it was served at
    raft::Term term = 0;     // kCommand: term of the proposal
    lock::Result result;     // kCommand
    lock::Token read_token = 0;  // kRead: holder token seen (0 = free)
};

std::string describe(const ClientOp& op);

// Returns "" when the acknowledged operations `acked` are linearizable with
// respect to `committed` (entries of indexes 1..n, in order); else what broke.
std::string check_linearizable(const std::vector<raft::Entry>& committed,
                               const std::vector<ClientOp>& acked);

}  // namespace pgfence::sim
