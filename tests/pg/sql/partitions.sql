-- partitions: a protected partitioned table is fenced in every partition,
-- and an UPDATE that moves a row to another partition is judged once, on
-- the UPDATE (PostgreSQL turns the move into DELETE + INSERT; the DELETE
-- half does not ask for a second token).
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_fence;
RESET client_min_messages;
CREATE TABLE pa (id int, region int, body text, fence bigint NOT NULL DEFAULT 0)
  PARTITION BY LIST (region);
CREATE TABLE pa_1 PARTITION OF pa FOR VALUES IN (1);
CREATE TABLE pa_2 PARTITION OF pa FOR VALUES IN (2);
INSERT INTO pa VALUES (1, 1, 'a', 10), (2, 1, 'b', 10), (3, 1, 'c', 10);
SELECT fence_protect('pa');
-- a move with the token in the SET list: no pg_fence.token needed
UPDATE pa SET region = 2, fence = 11 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
SELECT tableoid::regclass AS part, * FROM pa ORDER BY id;
-- a stale move is refused on the source partition; the row stays put
UPDATE pa SET region = 1, fence = 11 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
UPDATE pa SET region = 1, fence = 5 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
-- a move with pg_fence.token: the token is stamped into the moved row
BEGIN;
SET LOCAL pg_fence.token = 12;
UPDATE pa SET region = 1 WHERE id = 1;
COMMIT;
-- a tokenless move is refused like any tokenless UPDATE
UPDATE pa SET region = 2 WHERE id = 2;
\echo SQLSTATE :SQLSTATE
-- a stale pg_fence.token is refused on a move
BEGIN;
SET LOCAL pg_fence.token = 10;
UPDATE pa SET region = 2 WHERE id = 2;
\echo SQLSTATE :SQLSTATE
ROLLBACK;
SELECT tableoid::regclass AS part, * FROM pa ORDER BY id;
-- a plain DELETE still needs its own token, also right after an UPDATE of
-- the same row in the same transaction, and after a failed move
BEGIN;
UPDATE pa SET body = 'b1', fence = 20 WHERE id = 2;
DELETE FROM pa WHERE id = 2;
\echo SQLSTATE :SQLSTATE
ROLLBACK;
BEGIN;
SAVEPOINT s;
UPDATE pa SET region = 3, fence = 20 WHERE id = 3;
ROLLBACK TO s;
DELETE FROM pa WHERE id = 3;
\echo SQLSTATE :SQLSTATE
ROLLBACK;
-- fenced_update moves rows too
SELECT fenced_update('pa', '{"id": 3}', '{"region": 2}', 30);
SELECT fenced_update('pa', '{"id": 3}', '{"region": 1}', 29);
SELECT tableoid::regclass AS part, * FROM pa ORDER BY id;
-- the 55F01 error names the partition
DO $$
DECLARE tab text;
BEGIN
  UPDATE pa SET region = 1, fence = 1 WHERE id = 3;
EXCEPTION WHEN SQLSTATE '55F01' THEN
  GET STACKED DIAGNOSTICS tab = TABLE_NAME;
  RAISE NOTICE 'refused in table %', tab;
END $$;
DROP TABLE pa;
