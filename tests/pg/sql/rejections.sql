-- rejections: fence_rejections records every write pg_fence refuses, where
-- it refuses it: a stale token on the guard (plain, with a lock key, and
-- sequenced), fenced_update, fence_advance, fence_admit and fence_enqueue,
-- and refused proofs (55F02); the ring keeps the newest entries
-- (scripts/pg-test.sh runs the server with pg_fence.rejection_log_size = 8);
-- fence_rejections_reset() empties it (superuser only unless granted);
-- names are kept whole (application_name as pg_stat_activity has it) and
-- shown, with the client address, only to who may see the role's sessions;
-- fence_rejection_counts() counts by path and reason.  In-flight refusals
-- and preempted commits need two sessions: specs/rejections_concurrent.spec.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_fence;
DELETE FROM fence_resources;
DELETE FROM fence_outbox;
RESET client_min_messages;
SELECT fence_rejections_reset() >= 0 AS reset;
CREATE TEMP TABLE counts_before AS SELECT * FROM fence_rejection_counts();

SHOW pg_fence.rejection_log_size;
SELECT name, context, vartype, boot_val, min_val, max_val FROM pg_settings
 WHERE name = 'pg_fence.rejection_log_size';
\d fence_rejections

-- the guard, a table without a lock key template: no lock key
CREATE TABLE rj (id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0);
INSERT INTO rj VALUES (1, 'a');
SELECT fence_protect('rj');
UPDATE rj SET body = 'b', fence = 10 WHERE id = 1;
SET application_name = 'rejections-test';
UPDATE rj SET body = 'c', fence = 9 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
-- a DELETE takes its token from pg_fence.token
BEGIN;
SET LOCAL pg_fence.token = 3;
DELETE FROM rj WHERE id = 1;
ROLLBACK;
-- fenced_update returns 'stale': recorded with the SQLSTATE of a stale token
SELECT fenced_update('rj', '{"id": 1}', '{"body": "d"}', 8);
SELECT pid = pg_backend_pid() AS mine, role = current_user AS my_role,
       application_name, client_addr IS NOT DISTINCT FROM inet_client_addr() AS my_addr,
       datname = current_database() AS my_db,
       at BETWEEN now() - interval '1 hour' AND clock_timestamp() AS recent,
       relation, resource, lock_key, token, fence, seq, fence_seq, path, reason, sqlstate, id
  FROM fence_rejections;

-- sequenced: the sequence numbers of the write and of the fence
CREATE TABLE rs (id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0,
                 fence_seq bigint NOT NULL DEFAULT 0);
INSERT INTO rs VALUES (1, 'a');
SELECT fence_protect('rs', mode => 'sequenced');
UPDATE rs SET body = 'b', fence = 5, fence_seq = 2 WHERE id = 1;
UPDATE rs SET body = 'late', fence = 5, fence_seq = 1 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
SELECT fenced_update('rs', '{"id": 1}', '{"body": "late"}', 4, 9);

-- per-resource fences: the resource is its own lock key
SELECT fence_advance('rj:res', 5);
SELECT fence_advance('rj:res', 4);
SELECT fence_admit('rj:res', 3);
\echo SQLSTATE :SQLSTATE
SELECT fence_enqueue('rj:res', 2, 'op', 'http://127.0.0.1:9/', '{}');
\echo SQLSTATE :SQLSTATE
SELECT fence_advance('rj:seq', 5, 2);
SELECT fence_admit('rj:seq', 5, 1);
\echo SQLSTATE :SQLSTATE
SELECT relation, resource, lock_key, token, fence, seq, fence_seq, path, reason, sqlstate, id
  FROM fence_rejections;
SELECT fence_rejections_reset();
SELECT count(*) FROM fence_rejections;

-- proofs: a table with a lock key template records the row's key, for a
-- refused proof (55F02) and for a stale token with a proof that verifies
SELECT fence_trust_key('-----BEGIN PUBLIC KEY-----' || chr(10) ||
                       current_setting('pg_fence_test.pub_b64') || chr(10) ||
                       '-----END PUBLIC KEY-----' || chr(10)) IS NOT NULL AS trusted;
CREATE TABLE rk (id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0);
INSERT INTO rk VALUES (8, 'a');
SELECT fence_protect('rk', lock_key => 'report:{id}');
BEGIN;
SELECT set_config('pg_fence.proof', current_setting('pg_fence_test.proof902'), true) <> '' AS proof902;
UPDATE rk SET body = 'b', fence = 902 WHERE id = 8;
COMMIT;
BEGIN;
SELECT set_config('pg_fence.proof', current_setting('pg_fence_test.proof901'), true) <> '' AS proof901;
UPDATE rk SET body = 'old', fence = 901 WHERE id = 8;
\echo SQLSTATE :SQLSTATE
ROLLBACK;
-- no proof; then a proof for another token
UPDATE rk SET body = 'c', fence = 903 WHERE id = 8;
\echo SQLSTATE :SQLSTATE
BEGIN;
SELECT set_config('pg_fence.proof', current_setting('pg_fence_test.proof901'), true) <> '' AS proof901;
UPDATE rk SET body = 'c', fence = 903 WHERE id = 8;
\echo SQLSTATE :SQLSTATE
ROLLBACK;
-- a row whose lock key cannot be built: no key, no token
INSERT INTO rk VALUES (NULL, 'null key', 5);
\echo SQLSTATE :SQLSTATE
-- fenced_update's 'stale' names the row's key when its key columns give it
SELECT fenced_update('rk', '{"id": 8}', '{"body": "d"}', 5);
-- a resource that requires proofs
SELECT fence_require_proof('rj:proof');
SELECT fence_advance('rj:proof', 5);
\echo SQLSTATE :SQLSTATE
SELECT relation, resource, lock_key, token, fence, path, reason, sqlstate, id
  FROM fence_rejections;

-- the ring keeps the newest 8: ten rejections, the first two are gone
SELECT fence_rejections_reset();
SELECT fence_advance('rj:wrap', 100);
SELECT count(*) FILTER (WHERE NOT fence_advance('rj:wrap', i)) AS stale
  FROM generate_series(1, 10) AS i;
SELECT resource, token, fence, path, id FROM fence_rejections;
SELECT fence_rejections_reset();
SELECT fence_rejections_reset();

-- a resource name or lock key is kept whole: one of the longest (512
-- bytes, ending in a two-byte character)
SELECT fence_advance(repeat('x', 510) || 'é', 5);
SELECT fence_advance(repeat('x', 510) || 'é', 4);
SELECT octet_length(resource) AS bytes, resource = repeat('x', 510) || 'é' AS whole,
       lock_key = resource AS keyed
  FROM fence_rejections;
SELECT fence_rejections_reset();

-- application_name: PostgreSQL keeps its first 63 bytes (a name), and so
-- does the ring, as pg_stat_activity shows it
SET application_name = 'a-very-long-application-name-0123456789-0123456789-0123456789-0123456789-end';
SELECT fence_advance('rj:wrap', 1);
SELECT application_name, octet_length(application_name) AS bytes,
       application_name = (SELECT a.application_name FROM pg_stat_activity AS a
                            WHERE a.pid = pg_backend_pid()) AS as_pg_stat_activity
  FROM fence_rejections;
RESET application_name;

-- another role: reads the view (its own rows in full, the others' without
-- application_name and client_addr, and without the lock key of a row of
-- a table it may not SELECT: the key is made of the row's columns), may
-- not reset it unless granted
CREATE ROLE regress_rejections_reader;
GRANT SELECT, INSERT, UPDATE ON fence_resources TO regress_rejections_reader;
SELECT fenced_update('rk', '{"id": 8}', '{"body": "d"}', 6);
SET ROLE regress_rejections_reader;
SET application_name = 'reader';
SELECT fence_advance('rj:wrap', 2);
SELECT CASE WHEN role = session_user THEN 'the superuser' ELSE role END AS role,
       application_name, relation, resource, lock_key, token
  FROM fence_rejections;
RESET ROLE;
GRANT SELECT ON rk TO regress_rejections_reader;
SET ROLE regress_rejections_reader;
SELECT relation, lock_key, token FROM fence_rejections WHERE relation IS NOT NULL;
RESET ROLE;
REVOKE SELECT ON rk FROM regress_rejections_reader;
SET ROLE regress_rejections_reader;
SELECT fence_rejections_reset();
\echo SQLSTATE :SQLSTATE
RESET ROLE;
GRANT EXECUTE ON FUNCTION fence_rejections_reset() TO regress_rejections_reader;
SET ROLE regress_rejections_reader;
SELECT fence_rejections_reset();
RESET ROLE;
RESET application_name;
REVOKE ALL ON fence_resources FROM regress_rejections_reader;
REVOKE EXECUTE ON FUNCTION fence_rejections_reset() FROM regress_rejections_reader;
DROP ROLE regress_rejections_reader;

-- the counts by path and reason: every pair, monotonic (a reset of the ring
-- or of fence_stats does not touch them)
SELECT fence_stats_reset();
SELECT c.path, c.reason, c.sqlstate, c.rejections - b.rejections AS counted
  FROM fence_rejection_counts() AS c
  JOIN counts_before AS b USING (path, reason)
 ORDER BY c.path, c.reason;

SELECT fence_require_proof('rj:proof', false);
DELETE FROM fence_resources;
DELETE FROM fence_outbox;
DELETE FROM fence_trusted_keys;
DROP TABLE rj, rs, rk;
