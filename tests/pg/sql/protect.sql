-- protect: fence_protect validates the fence column and installs the guard
-- trigger idempotently; fence_unprotect removes it idempotently.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_fence;
RESET client_min_messages;

CREATE TABLE pr (id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0,
                 gen bigint NOT NULL DEFAULT 0);
CREATE VIEW pr_triggers AS
SELECT tgrelid::regclass AS rel, pg_get_triggerdef(oid) AS definition
  FROM pg_trigger
 WHERE NOT tgisinternal
   AND tgrelid NOT IN ('fence_trusted_keys'::regclass, 'fence_resources'::regclass,
                       'fence_outbox'::regclass)
 ORDER BY tgrelid::regclass::text, tgname;

-- defaults: column fence, mode strict; BEFORE UPDATE OR DELETE on every
-- UPDATE (no column list), FOR EACH ROW, named to fire after other triggers
SELECT fence_protect('pr');
SELECT * FROM pr_triggers;

-- protecting again changes nothing
SELECT fence_protect('pr');
SELECT * FROM pr_triggers;

-- protecting with another mode or column replaces the trigger
SELECT fence_protect('pr', mode => 'same_generation');
SELECT * FROM pr_triggers;
SELECT fence_protect('pr', 'gen', 'strict');
SELECT * FROM pr_triggers;

-- unprotect removes it; unprotecting again is silent
SELECT fence_unprotect('pr');
SELECT * FROM pr_triggers;
SELECT fence_unprotect('pr');
SELECT * FROM pr_triggers;

-- missing column: 42703, with the ALTER TABLE to run
CREATE TABLE pr_nofence (id int);
SELECT fence_protect('pr_nofence');
\echo SQLSTATE :SQLSTATE
SELECT fence_protect('pr', 'nosuch');
\echo SQLSTATE :SQLSTATE
-- system columns are not fence columns (22023)
SELECT fence_protect('pr', 'xmin');
\echo SQLSTATE :SQLSTATE

-- not bigint: 42804 (int, numeric, and a domain over bigint)
CREATE TABLE pr_int (id int, fence int NOT NULL DEFAULT 0);
SELECT fence_protect('pr_int');
\echo SQLSTATE :SQLSTATE
CREATE TABLE pr_numeric (id int, fence numeric NOT NULL DEFAULT 0);
SELECT fence_protect('pr_numeric');
\echo SQLSTATE :SQLSTATE
CREATE DOMAIN pr_token AS bigint;
CREATE TABLE pr_domain (id int, fence pr_token NOT NULL DEFAULT 0);
SELECT fence_protect('pr_domain');
\echo SQLSTATE :SQLSTATE

-- nullable: 55000, with the statements that fix it
CREATE TABLE pr_nullable (id int, fence bigint DEFAULT 0);
SELECT fence_protect('pr_nullable');
\echo SQLSTATE :SQLSTATE

-- generated: 42611
CREATE TABLE pr_generated (id int, fence bigint NOT NULL GENERATED ALWAYS AS (id * 2) STORED);
SELECT fence_protect('pr_generated');
\echo SQLSTATE :SQLSTATE

-- bad mode: 22023
SELECT fence_protect('pr', mode => 'lenient');
\echo SQLSTATE :SQLSTATE
SELECT fence_protect('pr', mode => 'STRICT');
\echo SQLSTATE :SQLSTATE

-- NULL arguments: 22004
SELECT fence_protect(NULL);
\echo SQLSTATE :SQLSTATE
SELECT fence_protect('pr', NULL);
\echo SQLSTATE :SQLSTATE
SELECT fence_protect('pr', 'fence', NULL);
\echo SQLSTATE :SQLSTATE
SELECT fence_unprotect(NULL);
\echo SQLSTATE :SQLSTATE

-- not a table: 42809
SELECT fence_protect('pr_triggers');
\echo SQLSTATE :SQLSTATE
CREATE SEQUENCE pr_seq;
SELECT fence_protect('pr_seq');
\echo SQLSTATE :SQLSTATE
SELECT fence_protect('no_such_table');
\echo SQLSTATE :SQLSTATE

-- failed calls left no trigger behind
SELECT * FROM pr_triggers;

-- a BEFORE trigger whose name sorts after the guard draws a WARNING
CREATE FUNCTION pr_noop() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TRIGGER zzzz_late BEFORE UPDATE ON pr FOR EACH ROW EXECUTE FUNCTION pr_noop();
CREATE TRIGGER aaa_early BEFORE UPDATE ON pr FOR EACH ROW EXECUTE FUNCTION pr_noop();
CREATE TRIGGER zzzz_after AFTER UPDATE ON pr FOR EACH ROW EXECUTE FUNCTION pr_noop();
SELECT fence_protect('pr');
SELECT * FROM pr_triggers;

-- a partitioned table: the trigger is cloned to every partition
CREATE TABLE pr_parted (id int, fence bigint NOT NULL DEFAULT 0) PARTITION BY RANGE (id);
CREATE TABLE pr_part1 PARTITION OF pr_parted FOR VALUES FROM (0) TO (100);
SELECT fence_protect('pr_parted');
SELECT * FROM pr_triggers WHERE rel::text LIKE 'pr_part%';
INSERT INTO pr_parted VALUES (1, 10);
UPDATE pr_parted SET fence = 9 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
SELECT fence_unprotect('pr_parted');
SELECT * FROM pr_triggers WHERE rel::text LIKE 'pr_part%';

DROP TABLE pr, pr_nofence, pr_int, pr_numeric, pr_domain, pr_nullable, pr_generated,
           pr_parted CASCADE;
DROP SEQUENCE pr_seq;
DROP DOMAIN pr_token;
DROP FUNCTION pr_noop();
DROP VIEW pr_triggers;
