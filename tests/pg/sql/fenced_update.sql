-- fenced_update: one conditional UPDATE returning applied / stale /
-- not_found; values converted through each column's type; every misuse is
-- an error that writes nothing.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_fence;
RESET client_min_messages;

CREATE TABLE fu (id int PRIMARY KEY, body text, n int, price numeric(6,2),
                 flag boolean, doc jsonb, at timestamptz, tags text[], pos point,
                 fence bigint NOT NULL DEFAULT 0);
INSERT INTO fu (id, body) VALUES (1, 'a'), (2, 'b');

-- applied: the changes and fence = token are written
SELECT fenced_update('fu', '{"id": 1}', '{"body": "v1", "n": 5}', 10);
SELECT id, body, n, fence FROM fu ORDER BY id;
-- stale: the same token and an older one; the row is unchanged
SELECT fenced_update('fu', '{"id": 1}', '{"body": "late"}', 10);
SELECT fenced_update('fu', '{"id": 1}', '{"body": "late"}', 9);
SELECT id, body, n, fence FROM fu ORDER BY id;
-- not_found
SELECT fenced_update('fu', '{"id": 3}', '{"body": "x"}', 10);
-- a stale outcome does not abort the transaction
BEGIN;
SELECT fenced_update('fu', '{"id": 1}', '{"body": "late"}', 1);
SELECT fenced_update('fu', '{"id": 2}', '{"body": "b1"}', 1);
COMMIT;
SELECT id, body, n, fence FROM fu ORDER BY id;

-- values go through each column's type input function
SELECT fenced_update('fu', '{"id": 1}',
  '{"price": 12.5, "flag": true, "doc": {"a": [1, 2]}, "at": "2024-01-02 03:04:05+00",
    "tags": "{x,\"y z\"}", "n": "7", "body": "it''s \"quoted\""}', 11);
SELECT id, body, n, price, flag, doc, at AT TIME ZONE 'UTC' AS at_utc, tags, fence
  FROM fu WHERE id = 1;
-- a JSON string for a jsonb column stays a JSON string; JSON null is NULL
SELECT fenced_update('fu', '{"id": 1}', '{"doc": "plain", "body": null, "flag": false}', 12);
SELECT id, body, flag, doc, jsonb_typeof(doc) FROM fu WHERE id = 1;
-- the key is converted too
SELECT fenced_update('fu', '{"id": "2"}', '{"n": 3}', 13);
SELECT id, n, fence FROM fu WHERE id = 2;

-- a value the column's type rejects: the type's own error, with context
SELECT fenced_update('fu', '{"id": 1}', '{"n": "abc"}', 20);
\echo SQLSTATE :SQLSTATE
SELECT fenced_update('fu', '{"id": 1}', '{"n": 99999999999}', 20);
\echo SQLSTATE :SQLSTATE
-- (as for a quoted literal: 3.0 is not integer input)
SELECT fenced_update('fu', '{"id": 1}', '{"n": 3.0}', 20);
\echo SQLSTATE :SQLSTATE
SELECT fenced_update('fu', '{"id": 1}', '{"price": 123456.7}', 20);
\echo SQLSTATE :SQLSTATE
SELECT fenced_update('fu', '{"id": 1}', '{"flag": "maybe"}', 20);
\echo SQLSTATE :SQLSTATE
SELECT fenced_update('fu', '{"id": 1}', '{"tags": ["x", "y"]}', 20);
\echo SQLSTATE :SQLSTATE
SELECT fenced_update('fu', '{"id": "one"}', '{"n": 1}', 20);
\echo SQLSTATE :SQLSTATE

-- key and changes must be non-empty JSON objects (22023)
SELECT fenced_update('fu', '[1]', '{"n": 1}', 20);
\echo SQLSTATE :SQLSTATE
SELECT fenced_update('fu', '1', '{"n": 1}', 20);
\echo SQLSTATE :SQLSTATE
SELECT fenced_update('fu', '{}', '{"n": 1}', 20);
\echo SQLSTATE :SQLSTATE
SELECT fenced_update('fu', '{"id": 1}', '{}', 20);
\echo SQLSTATE :SQLSTATE
SELECT fenced_update('fu', '{"id": 1}', '"n"', 20);
\echo SQLSTATE :SQLSTATE
-- unknown columns (42703), system columns, and names are exact
SELECT fenced_update('fu', '{"nosuch": 1}', '{"n": 1}', 20);
\echo SQLSTATE :SQLSTATE
SELECT fenced_update('fu', '{"id": 1}', '{"nosuch": 1}', 20);
\echo SQLSTATE :SQLSTATE
SELECT fenced_update('fu', '{"ctid": "(0,1)"}', '{"n": 1}', 20);
\echo SQLSTATE :SQLSTATE
SELECT fenced_update('fu', '{"ID": 1}', '{"n": 1}', 20);
\echo SQLSTATE :SQLSTATE
SELECT fenced_update('fu', '{"id": 1}', jsonb_build_object(repeat('n', 70), 1), 20);
\echo SQLSTATE :SQLSTATE
-- changes must not set the fence column (22023); a NULL key value (22004)
SELECT fenced_update('fu', '{"id": 1}', '{"fence": 100}', 20);
\echo SQLSTATE :SQLSTATE
SELECT fenced_update('fu', '{"id": null}', '{"n": 1}', 20);
\echo SQLSTATE :SQLSTATE
-- NULL arguments (22004) and a negative token (22023)
SELECT fenced_update('fu', '{"id": 1}', '{"n": 1}', NULL);
\echo SQLSTATE :SQLSTATE
SELECT fenced_update(NULL, '{"id": 1}', '{"n": 1}', 20);
\echo SQLSTATE :SQLSTATE
SELECT fenced_update('fu', NULL, '{"n": 1}', 20);
\echo SQLSTATE :SQLSTATE
SELECT fenced_update('fu', '{"id": 1}', NULL, 20);
\echo SQLSTATE :SQLSTATE
SELECT fenced_update('fu', '{"id": 1}', '{"n": 1}', 20, NULL);
\echo SQLSTATE :SQLSTATE
SELECT fenced_update('fu', '{"id": 1}', '{"n": 1}', -5);
\echo SQLSTATE :SQLSTATE
-- a key column whose type has no equality operator (42883)
SELECT fenced_update('fu', '{"pos": "(1,2)"}', '{"n": 1}', 20);
\echo SQLSTATE :SQLSTATE
-- at most 100 key + change columns (54011)
SELECT fenced_update('fu', '{"id": 1}',
  (SELECT jsonb_object_agg('c' || i, i) FROM generate_series(1, 100) AS i), 20);
\echo SQLSTATE :SQLSTATE
-- a generated column cannot be changed: PostgreSQL's own error (428C9)
ALTER TABLE fu ADD COLUMN twice int GENERATED ALWAYS AS (n * 2) STORED;
SELECT fenced_update('fu', '{"id": 1}', '{"twice": 4}', 20);
\echo SQLSTATE :SQLSTATE
ALTER TABLE fu DROP COLUMN twice;
-- the fence column is validated like fence_protect does
SELECT fenced_update('fu', '{"id": 1}', '{"n": 1}', 20, 'nosuch');
\echo SQLSTATE :SQLSTATE
SELECT fenced_update('fu', '{"id": 1}', '{"n": 1}', 20, 'body');
\echo SQLSTATE :SQLSTATE
SELECT fenced_update('fu', '{"id": 1}', '{"body": "x"}', 20, 'n');
\echo SQLSTATE :SQLSTATE
CREATE VIEW fu_view AS SELECT * FROM fu;
SELECT fenced_update('fu_view', '{"id": 1}', '{"n": 1}', 20);
\echo SQLSTATE :SQLSTATE
DROP VIEW fu_view;
-- none of the failed calls wrote anything
SELECT id, body, n, fence FROM fu ORDER BY id;

-- the largest bigint is a valid token; afterwards every token is stale
SELECT fenced_update('fu', '{"id": 2}', '{"body": "max"}', 9223372036854775807);
SELECT fenced_update('fu', '{"id": 2}', '{"body": "after max"}', 9223372036854775807);
SELECT id, body, fence FROM fu WHERE id = 2;

-- a key that matches several rows is an error (21000), never a partial write
CREATE TABLE fu_multi (grp int, id int, body text, fence bigint NOT NULL DEFAULT 0);
INSERT INTO fu_multi VALUES (1, 1, 'a', 0), (1, 2, 'b', 0);
SELECT fenced_update('fu_multi', '{"grp": 1}', '{"body": "both"}', 5);
\echo SQLSTATE :SQLSTATE
-- only one of them would pass the fence: still an error, nothing written
UPDATE fu_multi SET fence = 10 WHERE id = 2;
SELECT fenced_update('fu_multi', '{"grp": 1}', '{"body": "one"}', 5);
\echo SQLSTATE :SQLSTATE
-- neither would
SELECT fenced_update('fu_multi', '{"grp": 1}', '{"body": "none"}', 0);
\echo SQLSTATE :SQLSTATE
SELECT * FROM fu_multi ORDER BY id;
-- several key columns that match one row are fine without an index
SELECT fenced_update('fu_multi', '{"grp": 1, "id": 1}', '{"body": "a1"}', 5);
SELECT * FROM fu_multi ORDER BY id;

-- the plan cache follows DDL: a new column, a changed type, a dropped index
ALTER TABLE fu ADD COLUMN extra text;
SELECT fenced_update('fu', '{"id": 1}', '{"extra": "new column"}', 30);
ALTER TABLE fu ALTER COLUMN n TYPE bigint;
SELECT fenced_update('fu', '{"id": 1}', '{"n": 99999999999}', 31);
SELECT id, n, extra, fence FROM fu WHERE id = 1;
CREATE TABLE fu_idx (id int, body text, fence bigint NOT NULL DEFAULT 0);
CREATE UNIQUE INDEX fu_idx_id ON fu_idx (id);
INSERT INTO fu_idx VALUES (1, 'a', 0);
SELECT fenced_update('fu_idx', '{"id": 1}', '{"body": "a1"}', 1);
DROP INDEX fu_idx_id;
INSERT INTO fu_idx VALUES (1, 'twin', 100);
SELECT fenced_update('fu_idx', '{"id": 1}', '{"body": "a2"}', 2);
\echo SQLSTATE :SQLSTATE
SELECT * FROM fu_idx ORDER BY body;

-- an UPDATE suppressed by a BEFORE trigger is an error, not "stale"
CREATE FUNCTION fu_skip() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
CREATE TRIGGER fu_skip BEFORE UPDATE ON fu_multi FOR EACH ROW EXECUTE FUNCTION fu_skip();
SELECT fenced_update('fu_multi', '{"grp": 1, "id": 1}', '{"body": "skipped"}', 50);
\echo SQLSTATE :SQLSTATE
DROP TRIGGER fu_skip ON fu_multi;
-- when the look after an UPDATE that changed nothing finds a row the UPDATE
-- should have changed (under READ COMMITTED: committed in between), the
-- whole conditional UPDATE runs again; here a trigger skips only the first
-- attempt
CREATE TABLE fu_skips (n int);
INSERT INTO fu_skips VALUES (1);
CREATE FUNCTION fu_skip_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF (SELECT n FROM fu_skips) > 0 THEN
    UPDATE fu_skips SET n = n - 1;
    RETURN NULL;
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER fu_skip_once BEFORE UPDATE ON fu_multi FOR EACH ROW
  EXECUTE FUNCTION fu_skip_once();
SELECT fenced_update('fu_multi', '{"grp": 1, "id": 1}', '{"body": "second try"}', 6);
-- three attempts, then the error
UPDATE fu_skips SET n = 3;
SELECT fenced_update('fu_multi', '{"grp": 1, "id": 1}', '{"body": "never"}', 7);
\echo SQLSTATE :SQLSTATE
UPDATE fu_skips SET n = 2;
SELECT fenced_update('fu_multi', '{"grp": 1, "id": 1}', '{"body": "third try"}', 7);
SELECT * FROM fu_multi ORDER BY id;
DROP TRIGGER fu_skip_once ON fu_multi;
DROP FUNCTION fu_skip_once();
DROP TABLE fu_skips;

-- on a protected table the guard agrees with fenced_update
SELECT fence_protect('fu');
SELECT fenced_update('fu', '{"id": 1}', '{"body": "guarded"}', 40);
SELECT fenced_update('fu', '{"id": 1}', '{"body": "guarded late"}', 39);
SELECT id, body, fence FROM fu WHERE id = 1;
-- fenced_update is strict even when the table is protected in same_generation
SELECT fence_protect('fu', mode => 'same_generation');
SELECT fenced_update('fu', '{"id": 1}', '{"body": "same token"}', 40);
SELECT id, body, fence FROM fu WHERE id = 1;

-- a caller's error handler sees the error and the row is untouched
DO $$
BEGIN
  PERFORM fenced_update('fu_multi', '{"grp": 1}', '{"body": "x"}', 1000);
EXCEPTION WHEN cardinality_violation THEN
  RAISE NOTICE 'caught %', SQLERRM;
END $$;
SELECT * FROM fu_multi ORDER BY id;

DROP TABLE fu, fu_multi, fu_idx;
DROP FUNCTION fu_skip();
