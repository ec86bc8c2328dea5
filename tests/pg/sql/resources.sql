-- resources: per-resource fences with fence_advance, fence_admit and
-- fence_current over fence_resources.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_fence;
RESET client_min_messages;

-- an unknown resource has no fence (NULL)
SELECT fence_current('report:7');

-- fence_advance publishes a newer token: true; the same token again: true
-- (idempotent retry); an older token: false, nothing changes
SELECT fence_advance('report:7', 41);
SELECT fence_current('report:7');
SELECT fence_advance('report:7', 41);
SELECT fence_advance('report:7', 40);
SELECT fence_current('report:7');

-- fence_admit: newer advances, equal is admitted, older raises 55F01
SELECT fence_admit('report:7', 42);
SELECT fence_current('report:7');
SELECT fence_admit('report:7', 42);
SELECT fence_admit('report:7', 41);
\echo SQLSTATE :SQLSTATE
SELECT fence_current('report:7');
-- an unknown resource is admitted and recorded
SELECT fence_admit('report:8', 3);
SELECT resource, fence, updated_at <= now() AS updated_recently
  FROM fence_resources ORDER BY resource;

-- fence_admit is transactional: a rolled-back admission leaves no trace
BEGIN;
SELECT fence_admit('report:9', 10);
SELECT fence_current('report:9');
ROLLBACK;
SELECT fence_current('report:9');
-- a stale admission aborts the transaction it guards
BEGIN;
SELECT fence_admit('report:7', 42);
SELECT fence_admit('report:7', 1);
SELECT 1;
ROLLBACK;

-- updated_at moves only when the fence advances
UPDATE fence_resources SET updated_at = '2000-01-01' WHERE resource = 'report:8';
SELECT fence_advance('report:8', 3), fence_admit('report:8', 3);
SELECT updated_at FROM fence_resources WHERE resource = 'report:8';
SELECT fence_advance('report:8', 4);
SELECT updated_at > '2000-01-01' AS advanced FROM fence_resources WHERE resource = 'report:8';

-- tokens: NULL (22004), negative (22023), the largest bigint is valid
SELECT fence_advance('report:7', NULL);
\echo SQLSTATE :SQLSTATE
SELECT fence_admit('report:7', NULL);
\echo SQLSTATE :SQLSTATE
SELECT fence_advance('report:7', -1);
\echo SQLSTATE :SQLSTATE
SELECT fence_admit('report:7', -1);
\echo SQLSTATE :SQLSTATE
SELECT fence_advance('report:max', 9223372036854775807);
SELECT fence_admit('report:max', 9223372036854775807);
SELECT fence_advance('report:max', 9223372036854775806);

-- resource names: 1 to 512 bytes, no control characters (22023), not NULL
SELECT fence_advance('', 1);
\echo SQLSTATE :SQLSTATE
SELECT fence_admit(repeat('x', 513), 1);
\echo SQLSTATE :SQLSTATE
SELECT fence_advance(repeat('x', 512), 1);
SELECT fence_current(repeat('x', 512));
SELECT fence_advance(E'line\nbreak', 1);
\echo SQLSTATE :SQLSTATE
SELECT fence_advance(NULL, 1);
\echo SQLSTATE :SQLSTATE
SELECT fence_admit(NULL, 1);
\echo SQLSTATE :SQLSTATE
SELECT fence_current('');
\echo SQLSTATE :SQLSTATE
-- fence_current is STRICT: NULL in, NULL out
SELECT fence_current(NULL);
-- multi-byte names count bytes (ё is 2 bytes in UTF-8)
SELECT fence_advance('отчёт:7', 5);
SELECT fence_current('отчёт:7');
SELECT fence_advance(repeat('ё', 256), 1);
SELECT fence_advance(repeat('ё', 257), 1);
\echo SQLSTATE :SQLSTATE

-- the table's own constraints back the same rules
INSERT INTO fence_resources (resource, fence, updated_at) VALUES ('negative', -1, '2000-01-01 00:00:00+00');
\echo SQLSTATE :SQLSTATE
INSERT INTO fence_resources (resource, fence, updated_at) VALUES ('', 1, '2000-01-01 00:00:00+00');
\echo SQLSTATE :SQLSTATE

DELETE FROM fence_resources;
