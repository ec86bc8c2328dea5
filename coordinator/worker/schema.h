// SQL text used by fence-worker (one place, so the schema and the statements
// that use it are read together). Parameters are $n, sent as text.
#pragma once

namespace pgfence::worker {

extern const char* const kSchemaSql;         // idempotent: extension, tables, guard trigger
// --setup --proof: the tables verify token proofs under the lock key = the row's key
extern const char* const kProofSchemaSql;
extern const char* const kEnsureKeySql;      // $1 key
extern const char* const kEnsureSequencedSql;  // $1 key
extern const char* const kEnsureLedgerASql;  // $1 key
extern const char* const kEnsureLedgerBSql;  // $1 key
extern const char* const kRequireProofSql;   // $1 key: its resource needs proofs (--setup --proof)
extern const char* const kSetProofSql;       // $1 proof: SET LOCAL pg_fence.proof
extern const char* const kGuardSql;          // $1 key, $2 token -> n
extern const char* const kSequencedSql;      // $1 key, $2 token, $3 seq -> n
extern const char* const kReadForUpdateSql;  // $1 key -> n
extern const char* const kFencedUpdateSql;   // $1 key, $2 new n, $3 token -> fence_outcome
extern const char* const kFencedUpdateProofSql;  // kFencedUpdateSql, $4 proof
extern const char* const kAdmitSql;          // $1 key, $2 token
extern const char* const kAdmitProofSql;     // $1 key, $2 token, $3 proof
extern const char* const kLedgerASql;        // $1 key -> n
extern const char* const kLedgerBSql;        // $1 key -> n
// $1 key, $2 fence, $3 token, $4 seq (0: none, stored as NULL), $5 worker, $6 value, $7 path
extern const char* const kAuditSql;

}  // namespace pgfence::worker
