-- preempt: the settings of preemption (pg_fence.preempt, pg_fence.max_inflight),
-- fence_preempt_stats() and the registry of in-flight admissions in one
-- session: entries live until their transaction ends, one per target and
-- transaction, and a full registry lets admissions through unregistered
-- (scripts/pg-test.sh runs the server with pg_fence.max_inflight = 4).
-- Preemption itself needs two sessions: specs/preempt_concurrent.spec, and
-- the signals tests/e2e/lastmile.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_fence;
DELETE FROM fence_resources;
RESET client_min_messages;
SELECT fence_stats_reset();

SHOW pg_fence.preempt;
SHOW pg_fence.max_inflight;
SELECT name, context, vartype, boot_val FROM pg_settings
 WHERE name IN ('pg_fence.preempt', 'pg_fence.max_inflight') ORDER BY name;
SELECT * FROM fence_preempt_stats();

-- only a superuser sets it (ALTER DATABASE / ROLE ... SET for everyone else)
CREATE ROLE regress_preempt_user;
SET ROLE regress_preempt_user;
SET pg_fence.preempt = on;
RESET ROLE;
ALTER ROLE regress_preempt_user SET pg_fence.preempt = on;
SELECT unnest(setconfig) FROM pg_db_role_setting
 WHERE setrole = 'regress_preempt_user'::regrole;
DROP ROLE regress_preempt_user;

-- off: nothing is registered
BEGIN;
SELECT fence_admit('pre:a', 10);
SELECT inflight FROM fence_preempt_stats();
COMMIT;

-- on: each admitted target once per transaction, removed at the end
BEGIN;
SET LOCAL pg_fence.preempt = on;
SELECT fence_admit('pre:a', 11);
SELECT fence_advance('pre:b', 11);
SELECT inflight FROM fence_preempt_stats();
-- the same target again, with a newer token: still one entry; its own
-- older admission is never preempted
SELECT fence_admit('pre:a', 12);
SELECT inflight FROM fence_preempt_stats();
COMMIT;
SELECT * FROM fence_preempt_stats();
SELECT resource, fence FROM fence_resources ORDER BY resource;

-- a stale fence_advance is not registered; a stale fence_admit aborts
BEGIN;
SET LOCAL pg_fence.preempt = on;
SELECT fence_advance('pre:a', 5);
SELECT inflight FROM fence_preempt_stats();
ROLLBACK;

-- a full registry (4 entries): the fifth and sixth targets pass unregistered
BEGIN;
SET LOCAL pg_fence.preempt = on;
SELECT fence_admit('pre:' || i, 20) FROM generate_series(1, 6) AS i;
SELECT inflight, unregistered FROM fence_preempt_stats();
ROLLBACK;
SELECT inflight, unregistered FROM fence_preempt_stats();

-- a savepoint rolled back keeps the entry until the transaction ends
BEGIN;
SET LOCAL pg_fence.preempt = on;
SAVEPOINT s;
SELECT fence_admit('pre:a', 30);
ROLLBACK TO SAVEPOINT s;
SELECT inflight FROM fence_preempt_stats();
COMMIT;
SELECT inflight FROM fence_preempt_stats();

-- a row of a table with a lock key template is registered under its key;
-- a table without a template is no target
SELECT fence_trust_key('-----BEGIN PUBLIC KEY-----' || chr(10) ||
                       current_setting('pg_fence_test.pub_b64') || chr(10) ||
                       '-----END PUBLIC KEY-----' || chr(10)) AS kid \gset
CREATE TABLE pre_rows (id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0);
INSERT INTO pre_rows VALUES (8, 'a');
SELECT fence_protect('pre_rows', lock_key => 'report:{id}');
CREATE TABLE pre_plain (id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0);
INSERT INTO pre_plain VALUES (8, 'a');
SELECT fence_protect('pre_plain');
BEGIN;
SET LOCAL pg_fence.preempt = on;
SET LOCAL pg_fence.token = 900;
SELECT set_config('pg_fence.proof', current_setting('pg_fence_test.proof'), true) IS NOT NULL AS proof_set;
UPDATE pre_rows SET body = 'b' WHERE id = 8;
SELECT inflight FROM fence_preempt_stats();
UPDATE pre_plain SET body = 'b' WHERE id = 8;
SELECT inflight FROM fence_preempt_stats();
COMMIT;
SELECT * FROM pre_rows;

-- fence_stats_reset() zeroes the counters
SELECT fence_stats_reset();
SELECT * FROM fence_preempt_stats();

DROP TABLE pre_rows, pre_plain;
SELECT fence_distrust_key(:'kid');
DELETE FROM fence_resources;
