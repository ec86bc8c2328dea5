// The linearizability check: see history.h.
#include "history.h"

#include <algorithm>
#include <sstream>

#include "lock_model.h"
#include "sim_failure.h"

namespace pgfence::sim {

std::string describe(const ClientOp& op) {
    std::ostringstream out;
    out << "op#" << op.id << " client=" << op.client << " [" << op.invoked_us << "us.." << op.acked_us
        << "us] ";
    if (op.kind == ClientOp::Kind::kRead) {
        out << "read key=" << op.read_key << " -> token " << op.read_token << " at index " << op.index;
    } else {
        out << lock::describe(op.command) << " -> " << lock::describe(op.result) << " at index "
            << op.index << " term " << op.term;
    }
    return out.str();
}

namespace {

// Replays the committed log through the model; results[i] is index i+1's.
std::vector<lock::Result> replay(const std::vector<raft::Entry>& committed, LockModel& model) {
    std::vector<lock::Result> results;
    results.reserve(committed.size());
    for (const auto& e : committed) {
        require(e.index == model.applied_index() + 1, "committed log not contiguous at index ", e.index);
        if (e.type == raft::EntryType::kNoop) {
            results.push_back(model.apply_noop(e.index));
            continue;
        }
        auto decoded = lock::decode_command(e.data);
        if (const auto* cmd = std::get_if<lock::Command>(&decoded)) {
            results.push_back(model.apply(e.index, *cmd));
        } else {
            results.push_back(model.apply_noop(e.index));
        }
    }
    return results;
}

// Checks (a) and (b) for one operation.
void check_against_log(const std::vector<raft::Entry>& committed, const std::vector<lock::Result>& results,
                       const LockModel& model, const ClientOp& op) {
    require(op.index >= 1 && op.index <= committed.size(), describe(op), ": index outside the committed log (1..",
            committed.size(), ")");
    if (op.kind == ClientOp::Kind::kRead) {
        const lock::Token expected = model.token_at(op.read_key, op.index);
        require(expected == op.read_token, describe(op), ": the committed log says the holder token at index ",
                op.index, " is ", expected);
        return;
    }
    const raft::Entry& e = committed[op.index - 1];
    require(e.term == op.term, describe(op), ": committed entry at that index has term ", e.term);
    auto decoded = lock::decode_command(e.data);
    const auto* cmd = std::get_if<lock::Command>(&decoded);
    require(e.type == raft::EntryType::kNormal && cmd != nullptr && *cmd == op.command, describe(op),
            ": committed entry at that index is a different command");
    require(results[op.index - 1] == op.result, describe(op), ": the sequential model gives ",
            lock::describe(results[op.index - 1]));
}

// Checks (c): real-time order against log order.
void check_real_time(std::vector<const ClientOp*> by_invoke) {
    std::vector<const ClientOp*> by_ack = by_invoke;
    std::sort(by_invoke.begin(), by_invoke.end(),
              [](const ClientOp* a, const ClientOp* b) { return a->invoked_us < b->invoked_us; });
    std::sort(by_ack.begin(), by_ack.end(),
              [](const ClientOp* a, const ClientOp* b) { return a->acked_us < b->acked_us; });
    const ClientOp* latest = nullptr;  // largest index among ops acked so far
    std::size_t next_ack = 0;
    for (const ClientOp* b : by_invoke) {
        for (; next_ack < by_ack.size() && by_ack[next_ack]->acked_us < b->invoked_us; ++next_ack) {
            if (latest == nullptr || by_ack[next_ack]->index > latest->index) latest = by_ack[next_ack];
        }
        if (latest == nullptr) continue;
        const bool ok = b->kind == ClientOp::Kind::kRead ? latest->index <= b->index : latest->index < b->index;
        require(ok, "real-time order broken: ", describe(*latest), " was acknowledged before ", describe(*b),
                " was invoked, but its index is not earlier");
    }
}

}  // namespace

std::string check_linearizable(const std::vector<raft::Entry>& committed, const std::vector<ClientOp>& acked) {
    try {
        LockModel model;
        const std::vector<lock::Result> results = replay(committed, model);
        std::vector<const ClientOp*> ops;
        ops.reserve(acked.size());
        for (const auto& op : acked) {
            check_against_log(committed, results, model, op);
            ops.push_back(&op);
        }
        check_real_time(std::move(ops));
    } catch (const SimFailure& failure) {
        return failure.what();
    }
    return "";
}

}  // namespace pgfence::sim
