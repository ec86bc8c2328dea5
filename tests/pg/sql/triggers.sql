-- triggers: the guard fires after the table's other BEFORE triggers and
-- sees their changes; misuse of fence_guard is reported.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_fence;
RESET client_min_messages;

CREATE TABLE tr (id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0,
                 seen text);
INSERT INTO tr VALUES (1, 'a', 10);

-- an earlier BEFORE trigger that records the fence it saw and, for body
-- 'lower', rewrites the token to a stale value
CREATE FUNCTION tr_early() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.seen := 'early saw ' || NEW.fence;
  IF NEW.body = 'lower' THEN
    NEW.fence := 1;
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER aaa_early BEFORE UPDATE ON tr FOR EACH ROW EXECUTE FUNCTION tr_early();
SELECT fence_protect('tr');

-- firing order is name order: aaa_early, then zzz_fence_guard
SELECT tgname FROM pg_trigger WHERE tgrelid = 'tr'::regclass ORDER BY tgname COLLATE "C";

-- the guard checks the row as the earlier trigger left it
UPDATE tr SET body = 'lower', fence = 50 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
UPDATE tr SET body = 'ok', fence = 50 WHERE id = 1;
SELECT * FROM tr;

-- with pg_fence.token the guard stamps the token last, over the earlier
-- trigger's value
BEGIN;
SET LOCAL pg_fence.token = 60;
UPDATE tr SET body = 'lower' WHERE id = 1;
SELECT * FROM tr;
ROLLBACK;

-- why the name matters: a trigger that fires after the guard can undo its
-- work (fence_protect warns about it)
CREATE FUNCTION tr_late() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.fence := 2;
  RETURN NEW;
END $$;
CREATE TRIGGER zzzz_late BEFORE UPDATE ON tr FOR EACH ROW EXECUTE FUNCTION tr_late();
SELECT fence_protect('tr');
UPDATE tr SET body = 'overwritten', fence = 70 WHERE id = 1;
SELECT * FROM tr;
DROP TRIGGER zzzz_late ON tr;
UPDATE tr SET fence = 50 WHERE id = 1;

-- a fence column changed after fence_protect is reported when the guard fires
SELECT fence_unprotect('tr');
CREATE TABLE tr_bad (id int PRIMARY KEY, fence bigint NOT NULL DEFAULT 0, other int);
INSERT INTO tr_bad VALUES (1, 0, 0);
SELECT fence_protect('tr_bad');
ALTER TABLE tr_bad ALTER COLUMN fence TYPE int;
UPDATE tr_bad SET fence = 5 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
ALTER TABLE tr_bad ALTER COLUMN fence TYPE bigint;
ALTER TABLE tr_bad RENAME COLUMN fence TO old_fence;
UPDATE tr_bad SET old_fence = 5 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
ALTER TABLE tr_bad RENAME COLUMN old_fence TO fence;
-- a NULL stored after NOT NULL was dropped: 22004, with the way out
ALTER TABLE tr_bad ALTER COLUMN fence DROP NOT NULL;
INSERT INTO tr_bad VALUES (2, NULL, 0);
UPDATE tr_bad SET fence = 5 WHERE id = 2;
\echo SQLSTATE :SQLSTATE
SELECT fence_unprotect('tr_bad');

-- hand-made triggers that misuse fence_guard: 39P01 (or 22023 for a bad mode)
CREATE TRIGGER bad_after AFTER UPDATE ON tr_bad FOR EACH ROW EXECUTE FUNCTION fence_guard();
UPDATE tr_bad SET other = 1 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
DROP TRIGGER bad_after ON tr_bad;
CREATE TRIGGER bad_statement BEFORE UPDATE ON tr_bad EXECUTE FUNCTION fence_guard();
UPDATE tr_bad SET other = 1 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
DROP TRIGGER bad_statement ON tr_bad;
CREATE TRIGGER bad_insert BEFORE INSERT ON tr_bad FOR EACH ROW EXECUTE FUNCTION fence_guard();
INSERT INTO tr_bad VALUES (3, 0, 0);
\echo SQLSTATE :SQLSTATE
DROP TRIGGER bad_insert ON tr_bad;
CREATE TRIGGER bad_args BEFORE UPDATE ON tr_bad FOR EACH ROW
  EXECUTE FUNCTION fence_guard('fence', 'strict', 'extra', 'more');
UPDATE tr_bad SET other = 1 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
DROP TRIGGER bad_args ON tr_bad;
CREATE TRIGGER bad_args BEFORE UPDATE ON tr_bad FOR EACH ROW
  EXECUTE FUNCTION fence_guard('fence', 'sequenced', 'key', 'fence_seq', 'more');
UPDATE tr_bad SET other = 1 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
DROP TRIGGER bad_args ON tr_bad;
CREATE TRIGGER bad_mode BEFORE UPDATE ON tr_bad FOR EACH ROW
  EXECUTE FUNCTION fence_guard('fence', 'sometimes');
UPDATE tr_bad SET other = 1 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
DROP TRIGGER bad_mode ON tr_bad;
CREATE TRIGGER bad_column BEFORE UPDATE ON tr_bad FOR EACH ROW
  EXECUTE FUNCTION fence_guard('other');
UPDATE tr_bad SET other = 1 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
DROP TRIGGER bad_column ON tr_bad;
-- a hand-made trigger without arguments uses column fence, mode strict
CREATE TRIGGER by_hand BEFORE UPDATE ON tr_bad FOR EACH ROW EXECUTE FUNCTION fence_guard();
UPDATE tr_bad SET fence = 1 WHERE id = 1;
UPDATE tr_bad SET fence = 1 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
-- a trigger function cannot be called directly
SELECT fence_guard();
\echo SQLSTATE :SQLSTATE

DROP TABLE tr, tr_bad;
DROP FUNCTION tr_early(), tr_late();
