// The tables fence-worker writes (created by `fence-worker --setup`).
#include "worker/schema.h"

namespace pgfence::worker {

const char* const kSchemaSql = R"sql(
CREATE EXTENSION IF NOT EXISTS pg_fence;
CREATE TABLE IF NOT EXISTS worker_counters (
    key   text PRIMARY KEY,
    n     bigint NOT NULL DEFAULT 0,
    fence bigint NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS worker_sequenced (
    key       text PRIMARY KEY,
    n         bigint NOT NULL DEFAULT 0,
    fence     bigint NOT NULL DEFAULT 0,
    fence_seq bigint NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS worker_ledger_a (key text PRIMARY KEY, n bigint NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS worker_ledger_b (key text PRIMARY KEY, n bigint NOT NULL DEFAULT 0);
CREATE SEQUENCE IF NOT EXISTS worker_audit_id;
CREATE TABLE IF NOT EXISTS worker_audit (
    id           bigint PRIMARY KEY,  -- nextval taken after the fenced write: commit order per key
    key          text   NOT NULL,
    fence        text   NOT NULL CHECK (fence IN ('row', 'resource', 'sequenced')),
    token        bigint NOT NULL,
    seq          bigint,              -- the write's sequence number (sequenced path only)
    worker       text   NOT NULL,
    value        bigint NOT NULL,     -- the counter after this increment
    path         text   NOT NULL,
    committed_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
-- a worker_audit made by an older fence-worker gains what the sequenced path writes
ALTER TABLE worker_audit ADD COLUMN IF NOT EXISTS seq bigint;
ALTER TABLE worker_audit DROP CONSTRAINT IF EXISTS worker_audit_fence_check;
ALTER TABLE worker_audit ADD CONSTRAINT worker_audit_fence_check
    CHECK (fence IN ('row', 'resource', 'sequenced'));
DO $do$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid
                   WHERE t.tgrelid = 'worker_counters'::regclass
                     AND p.proname = 'fence_guard') THEN
        PERFORM fence_protect('worker_counters');
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid
                   WHERE t.tgrelid = 'worker_sequenced'::regclass
                     AND p.proname = 'fence_guard') THEN
        PERFORM fence_protect('worker_sequenced', mode => 'sequenced');
    END IF;
END
$do$;
)sql";

// Protecting again with a template replaces the guard (fence_protect is
// idempotent with the same arguments): a row's lock key is its key, the key
// fence-worker acquires.
const char* const kProofSchemaSql = R"sql(
SELECT fence_protect('worker_counters', lock_key => '{key}');
SELECT fence_protect('worker_sequenced', mode => 'sequenced', lock_key => '{key}');
)sql";

const char* const kRequireProofSql =
    "SELECT fence_require_proof($1) WHERE NOT EXISTS "
    "(SELECT 1 FROM fence_resources WHERE resource = $1 AND require_proof)";

const char* const kSetProofSql = "SELECT set_config('pg_fence.proof', $1, true)";

const char* const kEnsureKeySql =
    "INSERT INTO worker_counters (key) VALUES ($1) ON CONFLICT (key) DO NOTHING";

const char* const kEnsureSequencedSql =
    "INSERT INTO worker_sequenced (key) VALUES ($1) ON CONFLICT (key) DO NOTHING";

const char* const kEnsureLedgerASql =
    "INSERT INTO worker_ledger_a (key) VALUES ($1) ON CONFLICT (key) DO NOTHING";
const char* const kEnsureLedgerBSql =
    "INSERT INTO worker_ledger_b (key) VALUES ($1) ON CONFLICT (key) DO NOTHING";

const char* const kGuardSql =
    "UPDATE worker_counters SET n = n + 1, fence = $2::bigint WHERE key = $1 RETURNING n";

const char* const kSequencedSql =
    "UPDATE worker_sequenced SET n = n + 1, fence = $2::bigint, fence_seq = $3::bigint WHERE key = $1 "
    "RETURNING n";

const char* const kReadForUpdateSql = "SELECT n FROM worker_counters WHERE key = $1 FOR UPDATE";
const char* const kFencedUpdateSql =
    "SELECT fenced_update('worker_counters'::regclass, jsonb_build_object('key', $1::text), "
    "jsonb_build_object('n', $2::bigint), $3::bigint)::text";

const char* const kFencedUpdateProofSql =
    "SELECT fenced_update('worker_counters'::regclass, jsonb_build_object('key', $1::text), "
    "jsonb_build_object('n', $2::bigint), $3::bigint, proof => $4::text)::text";

// The resource's name is the lock key: the key a proof is issued for.
const char* const kAdmitSql = "SELECT fence_admit($1, $2::bigint)";
const char* const kAdmitProofSql = "SELECT fence_admit($1, $2::bigint, proof => $3::text)";
const char* const kLedgerASql = "UPDATE worker_ledger_a SET n = n + 1 WHERE key = $1 RETURNING n";
const char* const kLedgerBSql = "UPDATE worker_ledger_b SET n = n + 1 WHERE key = $1 RETURNING n";

const char* const kAuditSql =
    "INSERT INTO worker_audit (id, key, fence, token, seq, worker, value, path) "
    "VALUES (nextval('worker_audit_id'), $1, $2, $3::bigint, NULLIF($4::bigint, 0), $5, $6::bigint, $7)";

}  // namespace pgfence::worker
