// fencectl explain: a token's life from the coordinator, joined with what
// PostgreSQL refused, and the cause named (explain_cause.h decides it).
//
//   fencectl explain TOKEN [--dsn DSN] [--client-log FILE] [-o json]
//   fencectl explain --key K [--since T] [--until T] [--limit N] [--dsn DSN] [--client-log FILE]
//   [-o json]
//
// What it reads, each bounded:
//   - GET /v1/tokens/{token} from every member it can find (the endpoints
//     given and the members their /v1/status lists, at most kMaxEndpoints):
//     the life from the most advanced answer (ended, later end, next token
//     known), the keepalive arrivals summed over all, each member once by
//     observed_by (each counts what it saw while leading);
//   - the next token's life (its grant time), from any member;
//   - with --key: GET /v1/keys/{key}/history?limit=N, then the above per
//     token granted in the window;
//   - with --dsn: the rows of the view fence_rejections (pg_fence 1.6)
//     carrying the tokens (by token alone: tokens are unique in the
//     cluster), at most kMaxRejectionRows, and the ring's reach (its oldest
//     row, pg_fence.rejection_log_size), over one connection whose
//     statements time out with --timeout;
//   - with --client-log: the holder's log (client_log.h's limits), opened
//     first so that an unreadable one fails before any other read.
//
// Exit codes: 0 explained (whatever the cause, undetermined included);
// kExitNoSuchToken when no member issued the token (and none answered
// not_applied: then kExitUnavailable); kExitCompacted when it is
// older than the history kept; kExitDatabase when --dsn fails or the view is
// missing; kExitUsage for an unreadable --client-log; else the client's.
#pragma once

#include <ostream>

#include "cli/args.h"
#include "client/client.h"

namespace pgfence::cli {

// The most fence_rejections rows one explain reads.
constexpr int kMaxRejectionRows = 1000;

int run_explain_command(const Args& args, client::Client& client, std::ostream& out,
                        std::ostream& err);

// Whether member answer `a` tells more of the token's life than `b`: ended
// rather than held, ended at a later log index, or with the next token known
// (a member that applied less of the log tells less). explain keeps the most
// advanced answer.
bool more_advanced(const client::TokenLife& a, const client::TokenLife& b);

}  // namespace pgfence::cli
