-- upgrade: a database created with version 1.0 keeps its fences, triggers
-- and resources through ALTER EXTENSION pg_fence UPDATE (to 1.1, 1.2, 1.3,
-- 1.4, 1.5, then 1.6), and ends up with the same extension objects as a
-- fresh install of 1.6.
--
-- The main value is the behaviour checks on fences that existed before the
-- update (stale and newer tokens on an old guard, old resources, the
-- fence_resources_guard of 1.1 on an old resource row, 1.2's fence_raise
-- on an old guard and old resources, 1.3's warning about an ambiguous lock
-- key template, 1.3's sequenced fences on an old resource row and an old
-- guard's table turned sequenced in place, 1.5's outbox on an old resource
-- row, 1.6's fence_rejections showing the rejections made before it).  The
-- \dx+ ... comparison guards less than it seems: a fresh CREATE EXTENSION
-- runs the 1.0 script and then the same 1.0--1.1, 1.1--1.2, 1.2--1.3,
-- 1.3--1.4, 1.4--1.5 and 1.5--1.6 scripts, so the two can differ only
-- through data the scripts meet (tables, rows, triggers of a used 1.0
-- database); it becomes a real check once a later version ships its own
-- install script.
SET client_min_messages = warning;
DROP DATABASE IF EXISTS regress_fence_upgraded;
DROP DATABASE IF EXISTS regress_fence_fresh;
RESET client_min_messages;
CREATE DATABASE regress_fence_upgraded;
CREATE DATABASE regress_fence_fresh;
\getenv tmp PG_FENCE_TMP

\c regress_fence_upgraded
CREATE EXTENSION pg_fence VERSION '1.0';
SELECT extversion FROM pg_extension WHERE extname = 'pg_fence';
CREATE TABLE up (id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0);
INSERT INTO up VALUES (1, 'a'), (2, 'b');
SELECT fence_protect('up');
UPDATE up SET body = 'a1', fence = 10 WHERE id = 1;
-- the current library serves version 1.0's functions
SELECT fenced_update('up', '{"id": 2}', '{"body": "b1"}', 5);
SELECT fence_advance('job', 20);
SELECT fence_admit('job', 20);
SELECT fence_current('job');
SELECT kind, relation, resource, accepted, rejected_stale
  FROM fence_stats ORDER BY kind, relation::text, resource;

ALTER EXTENSION pg_fence UPDATE TO '1.1';
SELECT extversion FROM pg_extension WHERE extname = 'pg_fence';
-- fences, trigger and resources are intact
SELECT * FROM up ORDER BY id;
SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = 'up'::regclass;
SELECT resource, fence, require_proof FROM fence_resources;
UPDATE up SET body = 'stale', fence = 9 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
UPDATE up SET body = 'a2', fence = 11 WHERE id = 1;
SELECT fenced_update('up', '{"id": 2}', '{"body": "stale"}', 5);
SELECT fenced_update('up', '{"id": 2}', '{"body": "b2"}', 6);
SELECT fence_admit('job', 19);
\echo SQLSTATE :SQLSTATE
SELECT fence_admit('job', 21);
SELECT fence_advance('job', 19);
-- a resource row from 1.0 is guarded once it requires proofs (42501)
SELECT fence_require_proof('job');
UPDATE fence_resources SET fence = 9223372036854775807 WHERE resource = 'job';
\echo SQLSTATE :SQLSTATE
SELECT resource, fence, require_proof FROM fence_resources;
SELECT * FROM up ORDER BY id;
SELECT kind, relation, resource, accepted, rejected_stale, rejected_proof
  FROM fence_stats ORDER BY kind, relation::text, resource;

ALTER EXTENSION pg_fence UPDATE TO '1.2';
SELECT extversion FROM pg_extension WHERE extname = 'pg_fence';
-- 1.2 re-fences the guard and resources that 1.0 created
SELECT fence_raise('up', 50);
SELECT fence_raise_resources(50);
SELECT * FROM up ORDER BY id;
SELECT resource, fence, require_proof FROM fence_resources;
UPDATE up SET body = 'stale', fence = 49 WHERE id = 2;
\echo SQLSTATE :SQLSTATE
UPDATE up SET body = 'b51', fence = 51 WHERE id = 2;

-- a guard whose template a release before 1.3 accepted, though two rows can
-- have the same key under it ((1, 23) and (12, 3) are both "123"); the
-- update to 1.3 warns about it, and the table keeps working
CREATE TABLE amb (a int, b int, fence bigint NOT NULL DEFAULT 0);
CREATE TRIGGER zzz_fence_guard BEFORE INSERT OR UPDATE OR DELETE ON amb
  FOR EACH ROW EXECUTE FUNCTION fence_guard('fence', 'strict', '{a}{b}');
INSERT INTO amb VALUES (1, 23, 0);
ALTER EXTENSION pg_fence UPDATE TO '1.4';
SELECT extversion FROM pg_extension WHERE extname = 'pg_fence';
SELECT fence_lock_key('amb', amb) FROM amb;
-- 1.3 refuses the template from now on
SELECT fence_protect('amb', lock_key => '{a}{b}');
\echo SQLSTATE :SQLSTATE
SELECT fence_protect('amb', lock_key => '{a}:{b}');
SELECT fence_lock_key('amb', amb) FROM amb;
-- 1.3's sequenced fences on what 1.0 created: the old resource rows have
-- no sequence (NULL, below every sequence of their token), and the old
-- guard's table becomes sequenced in place
SELECT resource, fence, seq FROM fence_resources ORDER BY resource;
SELECT fence_require_proof('job', false);
SELECT fence_admit('job', 50, 1);
SELECT fence_admit('job', 50, 1);
\echo SQLSTATE :SQLSTATE
SELECT fence_advance('job', 50, proof => NULL);
\echo SQLSTATE :SQLSTATE
BEGIN;
ALTER TABLE up ADD COLUMN fence_seq bigint NOT NULL DEFAULT 0;
SELECT fence_protect('up', mode => 'sequenced');
COMMIT;
UPDATE up SET body = 'b2', fence = 51, fence_seq = 2 WHERE id = 2;
UPDATE up SET body = 'b1 late', fence = 51, fence_seq = 1 WHERE id = 2;
\echo SQLSTATE :SQLSTATE
SELECT * FROM up ORDER BY id;

-- 1.5's outbox admits at a resource row made before it (job: (50, 1))
ALTER EXTENSION pg_fence UPDATE TO '1.5';
SELECT extversion FROM pg_extension WHERE extname = 'pg_fence';
SELECT fence_rejections_reset();
\echo SQLSTATE :SQLSTATE
SELECT fence_enqueue('job', 49, 'mail', 'http://127.0.0.1:9/', '{}');
\echo SQLSTATE :SQLSTATE
SELECT fence_enqueue('job', 51, 'mail', 'http://127.0.0.1:9/', '{"n": 1}')
       = fence_outbox_key('job', 51, 'mail') AS keyed;
SELECT resource, fence, seq FROM fence_resources WHERE resource = 'job';
SELECT target, token, operation_id, state FROM fence_outbox;
SELECT state, entries FROM fence_outbox_backlog;

-- 1.6 shows the rejections kept in shared memory, also those made under
-- earlier versions (the ring belongs to the library, not to the version):
-- the newest 8 of this database
ALTER EXTENSION pg_fence UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'pg_fence';
SELECT relation, resource, lock_key, token, fence, seq, fence_seq, path, reason, sqlstate
  FROM fence_rejections;
SELECT fence_rejections_reset();
SELECT count(*) FROM fence_rejections;

-- the same objects, definitions, comments and privileges as a fresh 1.6
\o :tmp/upgraded.txt
\dx+ pg_fence
\df+ fence*
\d+ fence_resources
\d+ fence_trusted_keys
\d+ fence_stats
\d+ fence_outbox
\d+ fence_outbox_backlog
\d+ fence_rejections
\dp fence*
SELECT extversion, extconfig::regclass[], extcondition FROM pg_extension WHERE extname = 'pg_fence';
\o

\c regress_fence_fresh
CREATE EXTENSION pg_fence;
\o :tmp/fresh.txt
\dx+ pg_fence
\df+ fence*
\d+ fence_resources
\d+ fence_trusted_keys
\d+ fence_stats
\d+ fence_outbox
\d+ fence_outbox_backlog
\d+ fence_rejections
\dp fence*
SELECT extversion, extconfig::regclass[], extcondition FROM pg_extension WHERE extname = 'pg_fence';
\o
\set same `diff -u "$PG_FENCE_TMP/fresh.txt" "$PG_FENCE_TMP/upgraded.txt" && echo identical`
\echo :same

\c contrib_regression
SET client_min_messages = warning;
DROP DATABASE regress_fence_upgraded;
DROP DATABASE regress_fence_fresh;
RESET client_min_messages;
