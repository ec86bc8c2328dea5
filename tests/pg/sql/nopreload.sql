-- nopreload: without shared_preload_libraries fencing works the same, and
-- fence_stats and fence_rejections say what to configure.  (Run on a
-- server without preload.)
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_fence;
RESET client_min_messages;
SHOW shared_preload_libraries;

CREATE TABLE np (id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0);
INSERT INTO np VALUES (7, 'v0');
SELECT fence_protect('np');
UPDATE np SET body = 'v2', fence = 42 WHERE id = 7;
UPDATE np SET body = 'v1', fence = 41 WHERE id = 7;
\echo SQLSTATE :SQLSTATE
SELECT fenced_update('np', '{"id": 7}', '{"body": "v1"}', 41);
SELECT fence_advance('np:res', 2), fence_advance('np:res', 1);
SELECT fence_admit('np:res', 1);
\echo SQLSTATE :SQLSTATE
SELECT * FROM np;

-- a fresh session: pg_fence.token set before the module is loaded is a
-- placeholder that the guard picks up when it loads the module
\c
SELECT count(*) AS module_settings_before_load
  FROM pg_settings WHERE name = 'pg_fence.log_rejections';
BEGIN;
SET LOCAL pg_fence.token = 50;
UPDATE np SET body = 'v3' WHERE id = 7;
COMMIT;
SELECT * FROM np;
-- an invalid placeholder is reported when the module loads, and ignored
\c
BEGIN;
SET LOCAL pg_fence.token = 'fifty';
UPDATE np SET body = 'v4' WHERE id = 7;
ROLLBACK;

-- the settings exist once the module is loaded
SELECT name, setting FROM pg_settings WHERE name LIKE 'pg_fence.%' ORDER BY name;

-- statistics need the preload: a clear error with the fix (55000)
SELECT * FROM fence_stats;
\echo SQLSTATE :SQLSTATE
SELECT fence_stats_reset();
\echo SQLSTATE :SQLSTATE
-- so does the record of rejections (55000); pg_fence.rejection_log_size
-- does not exist
SELECT * FROM fence_rejections;
\echo SQLSTATE :SQLSTATE
SELECT fence_rejections_reset();
\echo SQLSTATE :SQLSTATE
SELECT * FROM fence_rejection_counts();
\echo SQLSTATE :SQLSTATE
SELECT count(*) FROM pg_settings WHERE name = 'pg_fence.rejection_log_size';

DROP TABLE np;
DELETE FROM fence_resources;
