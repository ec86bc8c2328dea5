-- raise: fence_raise and fence_raise_resources re-fence after a database
-- failover.  Every fence below the token becomes the token (also on a
-- verifying table and on resources that require proofs, without a proof,
-- for the raise's own row changes only);
-- fences at or above it are untouched; the result counts what was raised;
-- afterwards tokens issued before are refused as if a write with the token
-- had been accepted.  Owner or superuser only.  Refused rather than done
-- in part: row level security that applies to the caller (42501), a
-- verifying table partitioned on its fence column (0A000).
-- Runs in a database of its own: fence_raise_resources raises every
-- resource of the database.
SET client_min_messages = warning;
DROP DATABASE IF EXISTS regress_fence_raise;
DROP ROLE IF EXISTS regress_raise_owner;
DROP ROLE IF EXISTS regress_raise_app;
RESET client_min_messages;
CREATE DATABASE regress_fence_raise;
CREATE ROLE regress_raise_owner;
CREATE ROLE regress_raise_app;
\c regress_fence_raise
CREATE EXTENSION pg_fence;
\set pub `cat "$PG_FENCE_VECTORS/token_proof_v1.pub"`
\set p7_900 `"$PG_FENCE_SIGN" "$PG_FENCE_VECTORS/token_proof_v1.key" 12345678901234567890 900 report:7`
\set p7_990 `"$PG_FENCE_SIGN" "$PG_FENCE_VECTORS/token_proof_v1.key" 12345678901234567890 990 report:7`
\set p8_900 `"$PG_FENCE_SIGN" "$PG_FENCE_VECTORS/token_proof_v1.key" 12345678901234567890 900 report:8`

-- PUBLIC may not execute either function
SELECT has_function_privilege('public', 'fence_raise(regclass,bigint)', 'EXECUTE') AS public_raises,
       has_function_privilege('public', 'fence_raise_resources(bigint)', 'EXECUTE') AS public_raises_resources;

-- A strict table ----------------------------------------------------------

CREATE TABLE t (id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0);
INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c');
SELECT fence_protect('t');
UPDATE t SET fence = 5 WHERE id = 1;
UPDATE t SET fence = 20 WHERE id = 3;
SELECT fence_stats_reset();
-- rows 1 (5) and 2 (0) are raised; row 3 (20) is above the token
SELECT fence_raise('t', 10);
SELECT * FROM t ORDER BY id;
-- raising again changes nothing
SELECT fence_raise('t', 10);
-- the raise is not a fenced write: fence_stats does not count it
SELECT count(*) AS stats_entries FROM fence_stats;
-- tokens issued before the raise are refused: 9, and 10 in strict mode
UPDATE t SET body = 'stale', fence = 9 WHERE id = 2;
\echo SQLSTATE :SQLSTATE
UPDATE t SET body = 'stale', fence = 10 WHERE id = 2;
\echo SQLSTATE :SQLSTATE
BEGIN;
SET LOCAL pg_fence.token = 10;
DELETE FROM t WHERE id = 1;
\echo SQLSTATE :SQLSTATE
ROLLBACK;
SELECT fenced_update('t', '{"id": 2}', '{"body": "stale"}', 10);
-- the next holder's newer token is accepted
UPDATE t SET body = 'b11', fence = 11 WHERE id = 2;
SELECT fenced_update('t', '{"id": 1}', '{"body": "a11"}', 11);
-- row 3 still refuses what its own fence refuses
UPDATE t SET body = 'stale', fence = 15 WHERE id = 3;
\echo SQLSTATE :SQLSTATE
SELECT * FROM t ORDER BY id;
-- a raise in a transaction that rolls back leaves the fences as they were
BEGIN;
SELECT fence_raise('t', 100);
ROLLBACK;
SELECT * FROM t ORDER BY id;

-- same_generation: the row behaves as if the token had written it, so the
-- token itself is still admitted there, and anything older is not
CREATE TABLE sg (id int PRIMARY KEY, body text, gen bigint NOT NULL DEFAULT 0);
INSERT INTO sg VALUES (1, 'a');
SELECT fence_protect('sg', 'gen', 'same_generation');
SELECT fence_raise('sg', 10);
UPDATE sg SET body = 'stale', gen = 9 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
UPDATE sg SET body = 'a10', gen = 10 WHERE id = 1;
SELECT * FROM sg;

-- A verifying table ---------------------------------------------------------

SELECT fence_trust_key(:'pub', 12345678901234567890) AS kid;
CREATE TABLE v (report_id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0);
INSERT INTO v VALUES (7, 'a'), (8, 'b');
SELECT fence_protect('v', lock_key => 'report:{report_id}');
-- no proof is needed for the raise
SELECT fence_raise('v', 899);
SELECT * FROM v ORDER BY report_id;
-- writes still need proofs (55F02) and newer tokens (55F01)
UPDATE v SET body = 'no proof', fence = 900 WHERE report_id = 7;
\echo SQLSTATE :SQLSTATE
BEGIN;
SET LOCAL pg_fence.proof = :'p7_900';
UPDATE v SET body = 'a900', fence = 900 WHERE report_id = 7;
COMMIT;
SELECT fence_raise('v', 950);
SELECT fenced_update('v', '{"report_id": 8}', '{"body": "stale"}', 900, proof => :'p8_900');
SELECT fenced_update('v', '{"report_id": 7}', '{"body": "a990"}', 990, proof => :'p7_990');
SELECT * FROM v ORDER BY report_id;
-- the exemption covers fence_raise's own statement on its own table: a
-- trigger that writes another verifying table during the raise still
-- needs a proof there
CREATE TABLE w (report_id int PRIMARY KEY, fence bigint NOT NULL DEFAULT 0);
INSERT INTO w VALUES (7);
SELECT fence_protect('w', lock_key => 'report:{report_id}');
CREATE FUNCTION copy_fence_to_w() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE w SET fence = NEW.fence WHERE report_id = NEW.report_id;
  RETURN NEW;
END $$;
CREATE TRIGGER copy_fence BEFORE UPDATE ON v FOR EACH ROW EXECUTE FUNCTION copy_fence_to_w();
SELECT fence_raise('v', 2000);
\echo SQLSTATE :SQLSTATE
DROP TRIGGER copy_fence ON v;
SELECT * FROM v ORDER BY report_id;
SELECT * FROM w;
-- on its own table, too, only the changes the raise makes itself are
-- exempt: an UPDATE that only raises a fence below the token to the token.
-- A trigger that, during the raise, moves another row to another lock key
-- and writes the token into it needs a proof (55F02) -- also in
-- same_generation mode, where the token is admitted by the order rule
CREATE TABLE sgv (report_id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0);
INSERT INTO sgv VALUES (7, 'a'), (9, 'b');
SELECT fence_protect('sgv', mode => 'same_generation', lock_key => 'report:{report_id}');
CREATE FUNCTION move_report_9() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE sgv SET body = 'x', report_id = 99, fence = NEW.fence WHERE report_id = 9;
  RETURN NULL;
END $$;
CREATE TRIGGER move_9 AFTER UPDATE ON sgv FOR EACH ROW EXECUTE FUNCTION move_report_9();
SELECT fence_raise('sgv', 100);
\echo SQLSTATE :SQLSTATE
DROP TRIGGER move_9 ON sgv;
-- so does the raise's own row when a BEFORE trigger of the table changes
-- another column of it
CREATE FUNCTION stamp_body() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.body := NEW.body || '!';
  RETURN NEW;
END $$;
CREATE TRIGGER stamp BEFORE UPDATE ON sgv FOR EACH ROW EXECUTE FUNCTION stamp_body();
SELECT fence_raise('sgv', 100);
\echo SQLSTATE :SQLSTATE
DROP TRIGGER stamp ON sgv;
SELECT * FROM sgv ORDER BY report_id;
SELECT fence_raise('sgv', 100);
SELECT * FROM sgv ORDER BY report_id;

-- A partitioned table -------------------------------------------------------

CREATE TABLE p (id int, fence bigint NOT NULL DEFAULT 0) PARTITION BY RANGE (id);
CREATE TABLE p1 PARTITION OF p FOR VALUES FROM (1) TO (10);
CREATE TABLE p2 PARTITION OF p FOR VALUES FROM (10) TO (20);
INSERT INTO p VALUES (1), (2), (15);
SELECT fence_protect('p', lock_key => 'p:{id}');
-- through the parent: every partition (their guards verify proofs too)
SELECT fence_raise('p', 50);
-- one partition alone
SELECT fence_raise('p1', 60);
SELECT tableoid::regclass AS partition, * FROM p ORDER BY id;

-- every protected table at once (partitions through their parent)
SELECT t.tgrelid::regclass AS rel, fence_raise(t.tgrelid, 70) AS raised
  FROM pg_trigger AS t
 WHERE t.tgname = 'zzz_fence_guard' AND t.tgparentid = 0
 ORDER BY t.tgrelid::regclass::text;

-- Partitioned on the fence column: raising moves rows between partitions.
-- A table that does not verify proofs is raised; a verifying one is
-- refused up front (0A000): its guard would ask a proof for each move's
-- INSERT.  Also when a partition under it is partitioned on the fence.
CREATE TABLE pf (id int, fence bigint NOT NULL DEFAULT 0) PARTITION BY RANGE (fence);
CREATE TABLE pf_low PARTITION OF pf FOR VALUES FROM (0) TO (100);
CREATE TABLE pf_high PARTITION OF pf FOR VALUES FROM (100) TO (MAXVALUE);
INSERT INTO pf VALUES (1, 0), (2, 150);
SELECT fence_protect('pf');
SELECT fence_raise('pf', 120);
SELECT tableoid::regclass AS partition, * FROM pf ORDER BY id;
CREATE TABLE pfv (id int, fence bigint NOT NULL DEFAULT 0) PARTITION BY RANGE (fence);
CREATE TABLE pfv_low PARTITION OF pfv FOR VALUES FROM (0) TO (100);
CREATE TABLE pfv_high PARTITION OF pfv FOR VALUES FROM (100) TO (MAXVALUE);
INSERT INTO pfv VALUES (1);
SELECT fence_protect('pfv', lock_key => 'pf:{id}');
SELECT fence_raise('pfv', 120);
\echo SQLSTATE :SQLSTATE
CREATE TABLE pfs (id int, fence bigint NOT NULL DEFAULT 0) PARTITION BY RANGE (id);
CREATE TABLE pfs1 PARTITION OF pfs FOR VALUES FROM (0) TO (10) PARTITION BY RANGE ((fence / 100));
CREATE TABLE pfs1a PARTITION OF pfs1 FOR VALUES FROM (0) TO (1);
CREATE TABLE pfs1b PARTITION OF pfs1 FOR VALUES FROM (1) TO (MAXVALUE);
INSERT INTO pfs VALUES (1);
SELECT fence_protect('pfs', lock_key => 'pf:{id}');
SELECT fence_raise('pfs', 120);
\echo SQLSTATE :SQLSTATE
SELECT tableoid::regclass AS partition, * FROM pfv UNION ALL
SELECT tableoid::regclass, * FROM pfs ORDER BY 1;

-- Resources -----------------------------------------------------------------

SELECT fence_advance('job:a', 5);
SELECT fence_advance('job:b', 20);
SELECT fence_require_proof('report:7');
SELECT fence_raise_resources(10);
SELECT resource, fence, require_proof FROM fence_resources ORDER BY resource;
SELECT fence_raise_resources(10);
-- older tokens are refused; the token itself is admitted, as fence_admit
-- admits the holder of the stored fence
SELECT fence_admit('job:a', 9);
\echo SQLSTATE :SQLSTATE
SELECT fence_advance('job:a', 9);
BEGIN;
SELECT fence_admit('job:a', 10);
COMMIT;
SELECT fence_advance('job:a', 11);
-- a resource that requires proofs still requires them
SELECT fence_advance('report:7', 11);
\echo SQLSTATE :SQLSTATE
SELECT resource, fence, require_proof FROM fence_resources ORDER BY resource;

-- Arguments -----------------------------------------------------------------

SELECT fence_raise(NULL, 10);
\echo SQLSTATE :SQLSTATE
SELECT fence_raise('t', NULL);
\echo SQLSTATE :SQLSTATE
SELECT fence_raise('t', -1);
\echo SQLSTATE :SQLSTATE
SELECT fence_raise_resources(NULL);
\echo SQLSTATE :SQLSTATE
SELECT fence_raise_resources(-5);
\echo SQLSTATE :SQLSTATE
-- not protected
CREATE TABLE plain (id int, fence bigint NOT NULL DEFAULT 0);
SELECT fence_raise('plain', 10);
\echo SQLSTATE :SQLSTATE
-- a trigger named like the guard that runs another function
CREATE FUNCTION not_the_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RETURN NEW;
END $$;
CREATE TRIGGER zzz_fence_guard BEFORE UPDATE ON plain
  FOR EACH ROW EXECUTE FUNCTION not_the_guard();
SELECT fence_raise('plain', 10);
\echo SQLSTATE :SQLSTATE
-- not a table
CREATE VIEW tv AS SELECT * FROM t;
SELECT fence_raise('tv', 10);
\echo SQLSTATE :SQLSTATE
-- the guard's column is gone
ALTER TABLE sg RENAME COLUMN gen TO generation;
SELECT fence_raise('sg', 10);
\echo SQLSTATE :SQLSTATE

-- Privileges ----------------------------------------------------------------

-- EXECUTE alone is not enough: only the owner may raise (42501)
GRANT EXECUTE ON FUNCTION fence_raise(regclass, bigint) TO regress_raise_app;
GRANT EXECUTE ON FUNCTION fence_raise_resources(bigint) TO regress_raise_app;
GRANT SELECT, UPDATE ON t, fence_resources TO regress_raise_app;
SET ROLE regress_raise_app;
SELECT fence_raise('t', 1000);
\echo SQLSTATE :SQLSTATE
SELECT fence_raise_resources(1000);
\echo SQLSTATE :SQLSTATE
RESET ROLE;
-- an owner without EXECUTE cannot either; with it, it can
CREATE TABLE owned (id int, fence bigint NOT NULL DEFAULT 0);
INSERT INTO owned VALUES (1);
SELECT fence_protect('owned');
ALTER TABLE owned OWNER TO regress_raise_owner;
SET ROLE regress_raise_owner;
SELECT fence_raise('owned', 10);
\echo SQLSTATE :SQLSTATE
RESET ROLE;
GRANT EXECUTE ON FUNCTION fence_raise(regclass, bigint) TO regress_raise_owner;
SET ROLE regress_raise_owner;
SELECT fence_raise('owned', 10);
RESET ROLE;
SELECT * FROM owned;
-- row level security that applies to the owner (FORCE) would hide rows
-- from the raise: refused (42501) rather than raising the visible ones
CREATE TABLE secret (id int, fence bigint NOT NULL DEFAULT 0);
INSERT INTO secret VALUES (1), (2);
SELECT fence_protect('secret');
ALTER TABLE secret OWNER TO regress_raise_owner;
CREATE POLICY only_1 ON secret USING (id = 1);
ALTER TABLE secret ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
SET ROLE regress_raise_owner;
SELECT fence_raise('secret', 10);
\echo SQLSTATE :SQLSTATE
RESET ROLE;
SELECT * FROM secret ORDER BY id;
-- a superuser bypasses it: every row is raised
SELECT fence_raise('secret', 10);
-- without FORCE the owner sees every row
ALTER TABLE secret NO FORCE ROW LEVEL SECURITY;
SET ROLE regress_raise_owner;
SELECT fence_raise('secret', 20);
RESET ROLE;
SELECT * FROM secret ORDER BY id;
SELECT max(fence) AS t_fence_after_refusals FROM t;

\c contrib_regression
SET client_min_messages = warning;
DROP DATABASE regress_fence_raise;
DROP ROLE regress_raise_owner;
DROP ROLE regress_raise_app;
RESET client_min_messages;
