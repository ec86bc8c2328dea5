#include "cli/publish.h"

#include "client/exit_codes.h"
#include "pgconn/advance.h"

namespace pgfence::cli {

Publication publish_first(const Args& args, const client::Lease& lease, client::Clock::time_point publish_by) {
    if (args.advance.empty()) return {};
    const auto budget = std::chrono::duration_cast<milliseconds>(publish_by - client::Clock::now());
    if (budget.count() <= 0) {
        return {kExitLostLease, "no time left to publish token " + std::to_string(lease.token) +
                                    " before the lease's deadline"};
    }
    const auto targets = pgconn::advance_targets(args.advance, lease.keys, lease.proofs, lease.proof);
    const pgconn::PublishResult r = pgconn::publish_generation(args.dsn, "fencectl", targets, lease.token, budget);
    return {pgconn::exit_code_of(r.outcome), r.message};
}

}  // namespace pgfence::cli
