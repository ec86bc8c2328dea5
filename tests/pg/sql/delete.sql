-- delete: DELETE on a protected table is fenced with pg_fence.token.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_fence;
RESET client_min_messages;

CREATE TABLE d (id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0);
INSERT INTO d VALUES (1, 'a', 10), (2, 'b', 20), (3, 'c', 30);
SELECT fence_protect('d');

-- without a token: 55000, nothing deleted
DELETE FROM d WHERE id = 1;
\echo SQLSTATE :SQLSTATE
-- stale token (equal in strict mode, and older): 55F01
BEGIN;
SET LOCAL pg_fence.token = 10;
DELETE FROM d WHERE id = 1;
\echo SQLSTATE :SQLSTATE
ROLLBACK;
BEGIN;
SET LOCAL pg_fence.token = 9;
DELETE FROM d WHERE id = 1;
\echo SQLSTATE :SQLSTATE
ROLLBACK;
SELECT * FROM d ORDER BY id;

-- newer token: deleted
BEGIN;
SET LOCAL pg_fence.token = 11;
DELETE FROM d WHERE id = 1;
COMMIT;
SELECT * FROM d ORDER BY id;

-- one stale row makes a multi-row DELETE fail as a whole
BEGIN;
SET LOCAL pg_fence.token = 25;
DELETE FROM d;
\echo SQLSTATE :SQLSTATE
ROLLBACK;
SELECT * FROM d ORDER BY id;
BEGIN;
SET LOCAL pg_fence.token = 31;
DELETE FROM d;
COMMIT;
SELECT * FROM d ORDER BY id;

DROP TABLE d;
