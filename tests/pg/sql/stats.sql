-- stats: fence_stats counts accepted and stale writes per relation and
-- resource in shared memory; rejections survive the rollback they cause;
-- fence_stats_reset; the LOG line of pg_fence.log_rejections; the
-- pg_fence.max_tracked_resources bound (any setting; scripts/pg-test.sh runs
-- it with 16; stats_flood floods it).
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_fence;
DROP ROLE IF EXISTS regress_fence_stats;
RESET client_min_messages;
CREATE ROLE regress_fence_stats;

SELECT fence_stats_reset();
SELECT count(*) FROM fence_stats;

CREATE VIEW st_view AS
SELECT kind, relation, resource, accepted, rejected_stale, last_accepted_token,
       last_rejected_token, last_rejected_at IS NOT NULL AS has_rejected_at
  FROM fence_stats ORDER BY kind, relation::text, resource;

CREATE TABLE st (id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0);
INSERT INTO st VALUES (1, 'a'), (2, 'b');
SELECT fence_protect('st');

-- one accepted row
UPDATE st SET fence = 5 WHERE id = 1;
SELECT * FROM st_view;
-- a stale row: counted although its error rolls the statement back
UPDATE st SET fence = 3 WHERE id = 1;
SELECT * FROM st_view;
-- ... and although the whole transaction rolls back
BEGIN;
UPDATE st SET fence = 4 WHERE id = 1;
ROLLBACK;
SELECT * FROM st_view;
-- an accepted row counts even when its transaction aborts later:
-- "accepted" means "passed the fence check", not "committed"
BEGIN;
UPDATE st SET fence = 6 WHERE id = 1;
ROLLBACK;
SELECT * FROM st_view;
SELECT fence FROM st WHERE id = 1;
-- a multi-row UPDATE counts every row
UPDATE st SET fence = 7;
SELECT * FROM st_view;

-- fenced_update on a protected table counts each call once
SELECT fenced_update('st', '{"id": 1}', '{"body": "fu"}', 8);
SELECT fenced_update('st', '{"id": 1}', '{"body": "fu"}', 8);
SELECT fenced_update('st', '{"id": 9}', '{"body": "fu"}', 8);
SELECT * FROM st_view;
-- and on an unprotected table too
CREATE TABLE st_plain (id int PRIMARY KEY, fence bigint NOT NULL DEFAULT 0, body text);
INSERT INTO st_plain VALUES (1, 0);
SELECT fenced_update('st_plain', '{"id": 1}', '{"body": "x"}', 2);
SELECT fenced_update('st_plain', '{"id": 1}', '{"body": "x"}', 1);
SELECT * FROM st_view;

-- resources: fence_advance and fence_admit decisions
SELECT fence_advance('st:res', 10);
SELECT fence_advance('st:res', 9);
SELECT fence_admit('st:res', 10);
SELECT fence_admit('st:res', 8);
SELECT * FROM st_view;

-- anyone can read fence_stats; only superusers can reset it
SET ROLE regress_fence_stats;
SELECT count(*) FROM fence_stats;
SELECT fence_stats_reset();
\echo SQLSTATE :SQLSTATE
RESET ROLE;
SELECT fence_stats_reset();
SELECT * FROM st_view;

-- pg_fence.log_rejections: one LOG line per stale token (shown here by
-- client_min_messages = log)
SHOW pg_fence.log_rejections;
SET client_min_messages = log;
UPDATE st SET fence = 1 WHERE id = 1;
SELECT fenced_update('st', '{"id": 1}', '{"body": "late"}', 2);
SELECT fence_advance('st:res', 1);
SELECT fence_admit('st:res', 1);
SET pg_fence.log_rejections = off;
UPDATE st SET fence = 1 WHERE id = 1;
SELECT fenced_update('st', '{"id": 1}', '{"body": "late"}', 2);
SELECT fence_admit('st:res', 1);
RESET pg_fence.log_rejections;
RESET client_min_messages;
-- the rejections were counted either way
SELECT * FROM st_view;
-- only superusers may change it (42501)
SET ROLE regress_fence_stats;
SET pg_fence.log_rejections = off;
\echo SQLSTATE :SQLSTATE
RESET ROLE;

-- at most pg_fence.max_tracked_resources resources (whatever the server's
-- setting: scripts/pg-test.sh runs it with 16); each new one beyond evicts
-- one that never rejected anything, and the dropped row counts the accepted
-- writes evicted with them
SELECT current_setting('pg_fence.max_tracked_resources')::int AS max_resources \gset
SELECT fence_stats_reset();
SELECT count(*) FILTER (WHERE fence_advance('st:many:' || i, 1)) = :max_resources + 4 AS all_advanced
  FROM generate_series(1, :max_resources + 4) AS i;
SELECT count(*) FILTER (WHERE kind = 'resource') = :max_resources AS tracked_max,
       sum(accepted) FILTER (WHERE kind = 'dropped') AS dropped_accepted
  FROM fence_stats;
SELECT * FROM fence_stats_dropped() ORDER BY kind;
-- known entries keep counting
SELECT fence_advance('st:many:' || (:max_resources + 4), 2);
SELECT accepted FROM fence_stats WHERE resource = 'st:many:' || (:max_resources + 4);
SELECT fence_stats_reset();
SELECT count(*) FROM fence_stats;
SELECT * FROM fence_stats_dropped() ORDER BY kind;

DELETE FROM fence_resources;
DROP VIEW st_view;
DROP TABLE st, st_plain;
DROP ROLE regress_fence_stats;
-- fence_stats and fence_stats_entries() show the current database only
\set home_db :DBNAME
SET client_min_messages = warning;
DROP DATABASE IF EXISTS regress_fence_other;
RESET client_min_messages;
CREATE DATABASE regress_fence_other;
\c regress_fence_other
SET client_min_messages = warning;
CREATE EXTENSION pg_fence;
RESET client_min_messages;
SELECT fence_advance('other:db', 1);
SELECT resource, accepted FROM fence_stats;
\c :home_db
SELECT fence_advance('home:db', 1);
SELECT resource, accepted FROM fence_stats;
SELECT count(*) AS other_db_entries FROM fence_stats_entries()
 WHERE resource = 'other:db';
DROP DATABASE regress_fence_other;
SELECT fence_stats_reset();
DELETE FROM fence_resources;
