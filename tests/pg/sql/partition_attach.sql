-- partition_attach: a partition that joins a protected partitioned table
-- after fence_protect is guarded like the others.  PostgreSQL clones the
-- table's guard to a partition made by CREATE TABLE ... PARTITION OF and to a
-- table attached by ALTER TABLE ... ATTACH PARTITION (also one with its
-- columns in another order, and a partitioned one with partitions of its
-- own); the rows an attached table brings keep their fences.  A table with a
-- guard of its own is attached after fence_unprotect, in the same
-- transaction; a partition's guard is its table's, so fence_protect and
-- fence_unprotect refuse a partition.  DETACH PARTITION drops the clone: the
-- detached table keeps its fences but is unguarded until protected again.
-- A generated fence column never lets a write through: PostgreSQL 15
-- attaches such a table and the guard refuses its writes (42611), 16 and
-- later refuse the ATTACH.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_fence;
RESET client_min_messages;
CREATE TABLE att (id int, region int, body text, fence bigint NOT NULL DEFAULT 0,
                  PRIMARY KEY (id, region)) PARTITION BY LIST (region);
CREATE TABLE att_1 PARTITION OF att FOR VALUES IN (1);
INSERT INTO att VALUES (11, 1, 'a', 10);
SELECT fence_protect('att');

-- Joining after fence_protect ------------------------------------------------

-- a partition created afterwards
CREATE TABLE att_2 PARTITION OF att FOR VALUES IN (2);
INSERT INTO att VALUES (21, 2, 'b', 0);
-- an existing table without fences (every fence 0)
CREATE TABLE att_3 (id int, region int, body text, fence bigint NOT NULL DEFAULT 0,
                    PRIMARY KEY (id, region));
INSERT INTO att_3 VALUES (31, 3, 'c', 0);
ALTER TABLE att ATTACH PARTITION att_3 FOR VALUES IN (3);
-- an existing table with fences, its columns in another order (the fence
-- column is its second, the table's fourth)
CREATE TABLE att_4 (body text, fence bigint NOT NULL DEFAULT 0, region int, id int,
                    PRIMARY KEY (id, region));
INSERT INTO att_4 VALUES ('d', 50, 4, 41), ('e', 60, 4, 42);
ALTER TABLE att ATTACH PARTITION att_4 FOR VALUES IN (4);
-- a partitioned table with a partition of its own
CREATE TABLE att_5 (id int, region int, body text, fence bigint NOT NULL DEFAULT 0,
                    PRIMARY KEY (id, region)) PARTITION BY RANGE (id);
CREATE TABLE att_5a PARTITION OF att_5 FOR VALUES FROM (50) TO (60);
INSERT INTO att_5 VALUES (51, 5, 'f', 70);
ALTER TABLE att ATTACH PARTITION att_5 FOR VALUES IN (5);
-- every partition has the table's guard, as a clone with the same arguments
SELECT tgrelid::regclass AS rel, tgparentid <> 0 AS cloned, encode(tgargs, 'escape') AS args
  FROM pg_trigger WHERE tgname = 'zzz_fence_guard' AND tgrelid::regclass::text ~ '^att'
 ORDER BY 1::text;

-- Stale tokens are refused, through the table and on the partition ---------

UPDATE att SET body = 'stale', fence = 50 WHERE id = 41;
\echo SQLSTATE :SQLSTATE
UPDATE att_4 SET body = 'stale', fence = 40 WHERE id = 41;
\echo SQLSTATE :SQLSTATE
BEGIN;
SET LOCAL pg_fence.token = 59;
DELETE FROM att WHERE id = 42;
\echo SQLSTATE :SQLSTATE
ROLLBACK;
-- strict: an equal token is stale, also against an attached fence of 0
UPDATE att_3 SET body = 'stale', fence = 0 WHERE id = 31;
\echo SQLSTATE :SQLSTATE
-- without a token
UPDATE att SET body = 'no token' WHERE id = 31;
\echo SQLSTATE :SQLSTATE
-- the partition of the attached partitioned table
UPDATE att SET body = 'stale', fence = 69 WHERE id = 51;
\echo SQLSTATE :SQLSTATE
UPDATE att_5a SET body = 'stale', fence = 70 WHERE id = 51;
\echo SQLSTATE :SQLSTATE
SELECT fenced_update('att', '{"id": 41, "region": 4}', '{"body": "stale"}', 45);
SELECT tableoid::regclass AS part, * FROM att ORDER BY id;

-- Newer tokens are accepted --------------------------------------------------

-- the token in the SET list, through the table and directly (the reordered
-- partition: the guard finds the SET list's fence column by name)
UPDATE att SET body = 'd51', fence = 51 WHERE id = 41;
UPDATE att_4 SET body = 'd52', fence = 52 WHERE id = 41;
-- pg_fence.token, stamped into the row
BEGIN;
SET LOCAL pg_fence.token = 61;
UPDATE att SET body = 'e61' WHERE id = 42;
COMMIT;
UPDATE att SET body = 'b1', fence = 1 WHERE id = 21;
UPDATE att_3 SET body = 'c1', fence = 1 WHERE id = 31;
UPDATE att SET body = 'f71', fence = 71 WHERE id = 51;
SELECT fenced_update('att', '{"id": 41, "region": 4}', '{"body": "d53"}', 53);
-- a row moved out of the reordered partition, judged there once
UPDATE att SET region = 3, body = 'e62', fence = 62 WHERE id = 42;
SELECT tableoid::regclass AS part, * FROM att ORDER BY id;

-- A verifying table: the partition attached later asks for proofs ----------

\set pub `cat "$PG_FENCE_VECTORS/token_proof_v1.pub"`
-- the vector's proof: token 900 for report:8
\set proof `sed -n 's/^proof=//p' "$PG_FENCE_VECTORS/token_proof_v1.txt"`
SELECT fence_trust_key(:'pub', 12345678901234567890) AS kid \gset
\echo trusted key :kid
CREATE TABLE vatt (id int, region int, body text, fence bigint NOT NULL DEFAULT 0)
  PARTITION BY LIST (region);
CREATE TABLE vatt_1 PARTITION OF vatt FOR VALUES IN (1);
SELECT fence_protect('vatt', lock_key => 'report:{id}');
CREATE TABLE vatt_2 (fence bigint NOT NULL DEFAULT 0, body text, region int, id int);
INSERT INTO vatt_2 VALUES (0, 'v', 2, 8);
ALTER TABLE vatt ATTACH PARTITION vatt_2 FOR VALUES IN (2);
-- no proof: refused (55F02), for UPDATE and for an INSERT with a fence
UPDATE vatt SET body = 'v900', fence = 900 WHERE id = 8;
\echo SQLSTATE :SQLSTATE
INSERT INTO vatt_2 VALUES (5, 'w', 2, 9);
\echo SQLSTATE :SQLSTATE
-- the proof for (report:8, 900): accepted on the partition
BEGIN;
SET LOCAL pg_fence.proof = :'proof';
UPDATE vatt_2 SET body = 'v900', fence = 900 WHERE id = 8;
COMMIT;
-- a stale token with a valid proof is still stale
BEGIN;
SET LOCAL pg_fence.proof = :'proof';
UPDATE vatt SET body = 'again', fence = 900 WHERE id = 8;
\echo SQLSTATE :SQLSTATE
ROLLBACK;
SELECT tableoid::regclass AS part, * FROM vatt ORDER BY id;

-- A table with a guard of its own --------------------------------------------

CREATE TABLE att_6 (id int, region int, body text, fence bigint NOT NULL DEFAULT 0,
                    PRIMARY KEY (id, region));
INSERT INTO att_6 VALUES (61, 6, 'g', 80);
SELECT fence_protect('att_6', mode => 'same_generation');
-- its trigger has the guard's name: ATTACH fails
ALTER TABLE att ATTACH PARTITION att_6 FOR VALUES IN (6);
\echo SQLSTATE :SQLSTATE
-- unprotected and attached in one transaction, no write passes unguarded
BEGIN;
SELECT fence_unprotect('att_6');
ALTER TABLE att ATTACH PARTITION att_6 FOR VALUES IN (6);
COMMIT;
-- now guarded the table's way: strict, an equal token is stale
UPDATE att SET body = 'equal', fence = 80 WHERE id = 61;
\echo SQLSTATE :SQLSTATE
-- a partition's guard is its table's (also two levels down)
SELECT fence_protect('att_6', mode => 'same_generation');
\echo SQLSTATE :SQLSTATE
SELECT fence_unprotect('att_6');
\echo SQLSTATE :SQLSTATE
SELECT fence_unprotect('att_5a');
\echo SQLSTATE :SQLSTATE
-- protecting the table again changes every partition's guard
SELECT fence_protect('att', mode => 'same_generation');
SELECT DISTINCT encode(tgargs, 'escape') AS args FROM pg_trigger
 WHERE tgname = 'zzz_fence_guard' AND tgrelid::regclass::text ~ '^att';
UPDATE att SET body = 'equal', fence = 80 WHERE id = 61;
SELECT fence_protect('att');

-- DETACH PARTITION -------------------------------------------------------------

-- the detached table keeps its fences and loses the guard: a stale token
-- gets through
ALTER TABLE att DETACH PARTITION att_4;
SELECT count(*) AS guards FROM pg_trigger WHERE tgrelid = 'att_4'::regclass;
SELECT * FROM att_4 ORDER BY id;
BEGIN;
UPDATE att_4 SET body = 'unguarded', fence = 1 WHERE id = 41;
\echo SQLSTATE :SQLSTATE
ROLLBACK;
-- detached and protected in one transaction, it stays guarded
BEGIN;
ALTER TABLE att DETACH PARTITION att_3;
SELECT fence_protect('att_3');
COMMIT;
UPDATE att_3 SET body = 'stale', fence = 1 WHERE id = 31;
\echo SQLSTATE :SQLSTATE
-- DETACH ... CONCURRENTLY drops the clone as well
ALTER TABLE att DETACH PARTITION att_2 CONCURRENTLY;
SELECT count(*) AS guards FROM pg_trigger WHERE tgrelid = 'att_2'::regclass;

-- A generated fence column ---------------------------------------------------

-- the guard refuses writes to a table whose fence column is generated
-- (here: dropped and added again as generated after fence_protect)
CREATE TABLE gatt (id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0);
INSERT INTO gatt VALUES (1, 'a', 5);
SELECT fence_protect('gatt');
ALTER TABLE gatt DROP COLUMN fence;
ALTER TABLE gatt ADD COLUMN fence bigint NOT NULL GENERATED ALWAYS AS (id * 0) STORED;
UPDATE gatt SET body = 'b';
\echo SQLSTATE :SQLSTATE
-- a table whose fence column is generated: 15 attaches it and the guard
-- refuses its writes (42611); 16 and later refuse the ATTACH (42804)
CREATE TABLE att_g (id int, region int, body text,
                    fence bigint NOT NULL GENERATED ALWAYS AS (id * 0) STORED,
                    PRIMARY KEY (id, region));
INSERT INTO att_g (id, region, body) VALUES (71, 7, 'h');
DO $$
DECLARE
  attached boolean := true;
  written text := 'no write';
BEGIN
  BEGIN
    ALTER TABLE att ATTACH PARTITION att_g FOR VALUES IN (7);
  EXCEPTION WHEN SQLSTATE '42804' THEN
    attached := false;
  END;
  IF attached THEN
    BEGIN
      UPDATE att SET body = 'h90', fence = 90 WHERE id = 71;
      written := 'accepted';
    EXCEPTION WHEN OTHERS THEN
      written := SQLSTATE;
    END;
  END IF;
  IF attached = (current_setting('server_version_num')::int < 160000)
     AND written = (CASE WHEN attached THEN '42611' ELSE 'no write' END) THEN
    RAISE NOTICE 'generated fence column: no write gets through';
  ELSE
    RAISE NOTICE 'unexpected: attached %, write %', attached, written;
  END IF;
END $$;

DROP TABLE att, att_2, att_3, att_4, att_g, vatt, gatt;
SELECT fence_distrust_key(:'kid');
