-- guard: fence_guard in strict mode on UPDATE, with the token in the SET
-- list or in pg_fence.token; the 55F01 error and its fields.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_fence;
RESET client_min_messages;

CREATE TABLE g (id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0);
INSERT INTO g VALUES (1, 'a'), (2, 'b');
SELECT fence_protect('g');

-- a newer token in the SET list is accepted and stored
UPDATE g SET body = 'a1', fence = 5 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
-- strict: the same token again is stale (55F01), and so is an older one
UPDATE g SET body = 'a2', fence = 5 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
UPDATE g SET body = 'a2', fence = 4 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
-- the row still holds the accepted write
SELECT * FROM g ORDER BY id;

-- "SET fence = fence" names the column: the unchanged value is a stale token
UPDATE g SET body = 'b1', fence = fence WHERE id = 2;
\echo SQLSTATE :SQLSTATE
-- a token computed in the statement works like any other
UPDATE g SET body = 'b1', fence = fence + 1 WHERE id = 2;
SELECT * FROM g ORDER BY id;

-- without the column in the SET list the token comes from pg_fence.token,
-- and the trigger stamps it into the fence column
BEGIN;
SET LOCAL pg_fence.token = 9;
UPDATE g SET body = 'a3' WHERE id = 1;
SELECT * FROM g WHERE id = 1;
COMMIT;
-- SET LOCAL ended with the transaction: no token at all is an error (55000)
UPDATE g SET body = 'a4' WHERE id = 1;
\echo SQLSTATE :SQLSTATE
-- a stale pg_fence.token is refused like a stale SET list value
BEGIN;
SET LOCAL pg_fence.token = 9;
UPDATE g SET body = 'a4' WHERE id = 1;
\echo SQLSTATE :SQLSTATE
ROLLBACK;
-- a session-wide SET works too
SET pg_fence.token = 12;
UPDATE g SET body = 'a5' WHERE id = 1;
RESET pg_fence.token;
SELECT * FROM g ORDER BY id;

-- the SET list wins over pg_fence.token, in both directions
BEGIN;
SET LOCAL pg_fence.token = 100;
UPDATE g SET body = 'a6', fence = 13 WHERE id = 1;
SELECT fence FROM g WHERE id = 1;
UPDATE g SET body = 'a7', fence = 13 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
ROLLBACK;
SELECT * FROM g ORDER BY id;

-- one stale row makes a multi-row UPDATE fail as a whole
UPDATE g SET fence = 10;
\echo SQLSTATE :SQLSTATE
SELECT * FROM g ORDER BY id;
UPDATE g SET fence = 20;
SELECT * FROM g ORDER BY id;

-- bad tokens: NULL (22004), negative (22023)
UPDATE g SET fence = NULL WHERE id = 1;
\echo SQLSTATE :SQLSTATE
UPDATE g SET fence = -1 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
-- the largest bigint is a valid token; afterwards nothing is newer
UPDATE g SET fence = 9223372036854775807 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
UPDATE g SET fence = 9223372036854775807 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
SELECT * FROM g ORDER BY id;

-- INSERT is not fenced; an UPDATE that matches no row checks nothing
INSERT INTO g VALUES (3, 'c');
UPDATE g SET body = 'nobody' WHERE id = 99;
\echo SQLSTATE :SQLSTATE

-- the error carries the table and column (errtablecol), token and fence
DO $$
DECLARE
  state text; msg text; detail text; hint text; sch text; tab text; col text;
BEGIN
  UPDATE g SET body = 'late', fence = 3 WHERE id = 2;
EXCEPTION WHEN SQLSTATE '55F01' THEN
  GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
    detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT,
    sch = SCHEMA_NAME, tab = TABLE_NAME, col = COLUMN_NAME;
  RAISE NOTICE 'sqlstate=% schema=% table=% column=%', state, sch, tab, col;
  RAISE NOTICE 'message: %', msg;
  RAISE NOTICE 'detail: %', detail;
  RAISE NOTICE 'hint: %', hint;
END $$;

-- a fence column that is not called "fence"
CREATE TABLE g2 (id int PRIMARY KEY, generation bigint NOT NULL DEFAULT 0, fence text);
INSERT INTO g2 VALUES (1, 0, 'not the fence');
SELECT fence_protect('g2', 'generation');
UPDATE g2 SET fence = 'x', generation = 3 WHERE id = 1;
UPDATE g2 SET generation = 3 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
BEGIN;
SET LOCAL pg_fence.token = 4;
UPDATE g2 SET fence = 'y' WHERE id = 1;
COMMIT;
SELECT * FROM g2;

-- other statements that update rows fire the guard too: INSERT ... ON
-- CONFLICT DO UPDATE, MERGE, and UPDATE through a view
INSERT INTO g2 VALUES (1, 5, 'upsert') ON CONFLICT (id) DO UPDATE
  SET fence = EXCLUDED.fence, generation = EXCLUDED.generation;
INSERT INTO g2 VALUES (1, 3, 'stale upsert') ON CONFLICT (id) DO UPDATE
  SET fence = EXCLUDED.fence, generation = EXCLUDED.generation;
\echo SQLSTATE :SQLSTATE
MERGE INTO g2 USING (VALUES (1, 6)) AS v(id, gen) ON g2.id = v.id
  WHEN MATCHED THEN UPDATE SET generation = v.gen, fence = 'merged';
MERGE INTO g2 USING (VALUES (1, 6)) AS v(id, gen) ON g2.id = v.id
  WHEN MATCHED THEN UPDATE SET generation = v.gen, fence = 'stale merge';
\echo SQLSTATE :SQLSTATE
CREATE VIEW g2_view AS SELECT id, generation, fence AS note FROM g2;
UPDATE g2_view SET note = 'via view', generation = 7 WHERE id = 1;
UPDATE g2_view SET note = 'stale via view', generation = 7 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
UPDATE g2_view SET note = 'tokenless via view' WHERE id = 1;
\echo SQLSTATE :SQLSTATE
DROP VIEW g2_view;
SELECT * FROM g2;

-- after fence_unprotect writes are no longer checked
SELECT fence_unprotect('g');
UPDATE g SET body = 'free', fence = 0 WHERE id = 1;
SELECT * FROM g ORDER BY id;

DROP TABLE g, g2;
