-- proof: verifiable tokens.  A table protected with a lock key template and
-- a resource with require_proof accept a token only with a proof that the
-- coordinator signed for (lock key, token); every refusal is SQLSTATE 55F02.
-- The proofs come from the shared test vector (tests/vectors) and from
-- tests/pg/sign-proof.sh, which signs with the vector's private key or with
-- a second key (scripts/pg-test.sh exports the paths).
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_fence;
DROP ROLE IF EXISTS regress_fence_app;
RESET client_min_messages;
CREATE ROLE regress_fence_app;
SELECT fence_stats_reset();

\set pub `cat "$PG_FENCE_VECTORS/token_proof_v1.pub"`
\set proof `sed -n 's/^proof=//p' "$PG_FENCE_VECTORS/token_proof_v1.txt"`
\set pub2 `openssl pkey -in "$PG_FENCE_KEYS/second.key" -pubout`
-- proofs of cluster 12345678901234567890 (the vector's) unless named otherwise
\set p7_900 `"$PG_FENCE_SIGN" "$PG_FENCE_VECTORS/token_proof_v1.key" 12345678901234567890 900 report:7`
\set p7_950 `"$PG_FENCE_SIGN" "$PG_FENCE_VECTORS/token_proof_v1.key" 12345678901234567890 950 report:7`
\set p8_800 `"$PG_FENCE_SIGN" "$PG_FENCE_VECTORS/token_proof_v1.key" 12345678901234567890 800 report:8`
\set p8_1000 `"$PG_FENCE_SIGN" "$PG_FENCE_VECTORS/token_proof_v1.key" 12345678901234567890 1000 report:8`
\set p8_1100 `"$PG_FENCE_SIGN" "$PG_FENCE_VECTORS/token_proof_v1.key" 12345678901234567890 1100 report:8`
\set p8_950 `"$PG_FENCE_SIGN" "$PG_FENCE_VECTORS/token_proof_v1.key" 12345678901234567890 950 report:8`
\set p8_1400 `"$PG_FENCE_SIGN" "$PG_FENCE_VECTORS/token_proof_v1.key" 12345678901234567890 1400 report:8`
\set p8_1200 `"$PG_FENCE_SIGN" "$PG_FENCE_VECTORS/token_proof_v1.key" 12345678901234567890 1200 report:8`
\set p9_950 `"$PG_FENCE_SIGN" "$PG_FENCE_VECTORS/token_proof_v1.key" 12345678901234567890 950 report:9`
\set p9_960 `"$PG_FENCE_SIGN" "$PG_FENCE_VECTORS/token_proof_v1.key" 12345678901234567890 960 report:9`
\set p8_901_c42 `"$PG_FENCE_SIGN" "$PG_FENCE_VECTORS/token_proof_v1.key" 42 901 report:8`
\set q8_901 `"$PG_FENCE_SIGN" "$PG_FENCE_KEYS/second.key" 12345678901234567890 901 report:8`
\set q8_950 `"$PG_FENCE_SIGN" "$PG_FENCE_KEYS/second.key" 12345678901234567890 950 report:8`
\set q7_990 `"$PG_FENCE_SIGN" "$PG_FENCE_KEYS/second.key" 12345678901234567890 990 report:7`
-- the vector's proof (kid, cluster and token 900 for report:8) with its
-- signature's first bytes replaced: still well-formed base64url
SELECT overlay(:'proof' PLACING 'AAAA' FROM 42 FOR 4) AS forged \gset

-- Trusted keys ---------------------------------------------------------------

-- the vector's key, bound to the vector's cluster; its key id is the vector's
SELECT fence_trust_key(:'pub', 12345678901234567890) AS kid;
SELECT key_id, cluster_id, public_key = :'pub' || E'\n' AS same_pem FROM fence_trusted_keys;
-- trusting it again replaces the binding (NULL: any cluster), and back
SELECT fence_trust_key(:'pub');
SELECT key_id, cluster_id FROM fence_trusted_keys;
SELECT fence_trust_key(:'pub', 12345678901234567890);
SELECT key_id, cluster_id FROM fence_trusted_keys;
-- refused: not PEM, not Ed25519 (an X25519 key), bad cluster ids (22023)
SELECT fence_trust_key('not a key');
\echo SQLSTATE :SQLSTATE
SELECT fence_trust_key(E'-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VuAyEAhSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=\n-----END PUBLIC KEY-----\n');
\echo SQLSTATE :SQLSTATE
SELECT fence_trust_key(:'pub', 0);
SELECT fence_trust_key(:'pub', -5);
SELECT fence_trust_key(:'pub', 18446744073709551616);
SELECT fence_trust_key(:'pub', 1.5);
\echo SQLSTATE :SQLSTATE
SELECT fence_trust_key(NULL);
SELECT key_id, cluster_id FROM fence_trusted_keys;

-- A verifying table ----------------------------------------------------------

CREATE TABLE reports (report_id int PRIMARY KEY, body text,
                      fence bigint NOT NULL DEFAULT 0, note numeric);
-- rows inserted with fence 0 need no proof: fence 0 grants nothing
INSERT INTO reports VALUES (7, 'a', 0), (8, 'b', 0);
-- templates are checked when the table is protected
SELECT fence_protect('reports', lock_key => 'report:{nope}');
\echo SQLSTATE :SQLSTATE
SELECT fence_protect('reports', lock_key => 'report:{note}');
\echo SQLSTATE :SQLSTATE
SELECT fence_protect('reports', lock_key => 'report:{fence}');
SELECT fence_protect('reports', lock_key => 'report:{report_id');
SELECT fence_protect('reports', lock_key => 'report:}');
SELECT fence_protect('reports', lock_key => 'report:{}');
SELECT fence_protect('reports', lock_key => '');
SELECT fence_protect('reports', lock_key => repeat('x', 513));
-- a stored generated column is NULL in a BEFORE trigger: refused (42611)
ALTER TABLE reports ADD COLUMN slug text GENERATED ALWAYS AS ('r' || report_id) STORED;
SELECT fence_protect('reports', lock_key => 'report:{slug}');
\echo SQLSTATE :SQLSTATE
ALTER TABLE reports DROP COLUMN slug;
SELECT fence_protect('reports', lock_key => 'report:{report_id}');
SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = 'reports'::regclass;
-- still no proof for rows inserted with fence 0
INSERT INTO reports VALUES (10, 'z', 0);

-- accepted: the vector's proof, for report:8 and token 900
BEGIN;
SET LOCAL pg_fence.proof = :'proof';
UPDATE reports SET body = 'v', fence = 900 WHERE report_id = 8;
COMMIT;
SELECT * FROM reports ORDER BY report_id;

-- a valid proof does not make a stale token fresh: 55F01
BEGIN;
SET LOCAL pg_fence.proof = :'p8_800';
UPDATE reports SET body = 's', fence = 800 WHERE report_id = 8;
\echo SQLSTATE :SQLSTATE
ROLLBACK;
BEGIN;
SET LOCAL pg_fence.proof = :'proof';
UPDATE reports SET body = 's', fence = 900 WHERE report_id = 8;
\echo SQLSTATE :SQLSTATE
ROLLBACK;

-- refused (55F02): missing
UPDATE reports SET body = 'x', fence = 901 WHERE report_id = 8;
\echo SQLSTATE :SQLSTATE
-- malformed: pg_fence.proof checks the shape when set (22023) ...
SET pg_fence.proof = 'v1.21fe31dfa154a261.0.abc';
\echo SQLSTATE :SQLSTATE
SET pg_fence.proof = 'v2.x';
SHOW pg_fence.proof;
-- ... the proof argument when it is used (55F02)
SELECT fenced_update('reports', '{"report_id": 8}', '{"body": "x"}', 901, proof => 'v1.21fe31dfa154a261');
\echo SQLSTATE :SQLSTATE
-- untrusted: the second key is not trusted yet
BEGIN;
SET LOCAL pg_fence.proof = :'q8_901';
UPDATE reports SET body = 'x', fence = 901 WHERE report_id = 8;
\echo SQLSTATE :SQLSTATE
ROLLBACK;
-- other cluster: the vector's key is trusted for cluster 12345678901234567890 only
BEGIN;
SET LOCAL pg_fence.proof = :'p8_901_c42';
UPDATE reports SET body = 'x', fence = 901 WHERE report_id = 8;
\echo SQLSTATE :SQLSTATE
ROLLBACK;
-- wrong lock key: report:8's proof on report 7
BEGIN;
SET LOCAL pg_fence.proof = :'proof';
UPDATE reports SET body = 'x', fence = 900 WHERE report_id = 7;
\echo SQLSTATE :SQLSTATE
ROLLBACK;
-- wrong token: the proof is for 900; the largest bigint does not help either
BEGIN;
SET LOCAL pg_fence.proof = :'proof';
UPDATE reports SET body = 'x', fence = 901 WHERE report_id = 8;
\echo SQLSTATE :SQLSTATE
ROLLBACK;
BEGIN;
SET LOCAL pg_fence.proof = :'proof';
UPDATE reports SET body = 'x', fence = 9223372036854775807 WHERE report_id = 8;
\echo SQLSTATE :SQLSTATE
ROLLBACK;
-- forged signature: the vector's kid, cluster, lock key and token, altered
-- signature bytes (a check that skipped the signature would say 55F01 here:
-- row 8's fence is already 900)
BEGIN;
SET LOCAL pg_fence.proof = :'forged';
UPDATE reports SET body = 'x', fence = 900 WHERE report_id = 8;
\echo SQLSTATE :SQLSTATE
ROLLBACK;
BEGIN;
SET LOCAL pg_fence.proof = :'forged';
SET LOCAL pg_fence.token = 900;
DELETE FROM reports WHERE report_id = 8;
\echo SQLSTATE :SQLSTATE
ROLLBACK;
SELECT * FROM reports ORDER BY report_id;

-- INSERT: fence 0 needs no proof; fence > 0 needs one for NEW's key
INSERT INTO reports VALUES (9, 'n', 950);
\echo SQLSTATE :SQLSTATE
BEGIN;
SET LOCAL pg_fence.proof = :'p9_950';
INSERT INTO reports VALUES (9, 'n', 950);
COMMIT;
-- a NULL key column has no lock key
INSERT INTO reports VALUES (NULL, 'n', 5);
\echo SQLSTATE :SQLSTATE

-- text and uuid key columns, literal braces; a key longer than 512 bytes is refused
CREATE TABLE tenant_docs (tenant text, id uuid, fence bigint NOT NULL DEFAULT 0);
SELECT fence_protect('tenant_docs', lock_key => '{{{tenant}}}/{id}');
INSERT INTO tenant_docs VALUES ('acme', 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', 0);
UPDATE tenant_docs SET fence = 1;
\echo SQLSTATE :SQLSTATE
INSERT INTO tenant_docs VALUES (repeat('x', 600), 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 1);
\echo SQLSTATE :SQLSTATE

-- an UPDATE that changes the lock key is refused before any proof is
-- checked, with or without one: the row moves by DELETE and INSERT
BEGIN;
SET LOCAL pg_fence.proof = :'p7_900';
UPDATE reports SET report_id = 70, fence = 900 WHERE report_id = 7;
\echo SQLSTATE :SQLSTATE
ROLLBACK;
UPDATE reports SET report_id = 70, fence = 900 WHERE report_id = 7;
\echo SQLSTATE :SQLSTATE
-- the same proof, key unchanged: accepted
BEGIN;
SET LOCAL pg_fence.proof = :'p7_900';
UPDATE reports SET body = 'k', fence = 900 WHERE report_id = 7;
COMMIT;
-- a tokenless UPDATE: the token and the proof both come from the settings
BEGIN;
SET LOCAL pg_fence.token = 950;
SET LOCAL pg_fence.proof = :'p7_950';
UPDATE reports SET body = 't' WHERE report_id = 7;
COMMIT;

-- DELETE: OLD's key, the token from pg_fence.token
BEGIN;
SET LOCAL pg_fence.token = 960;
DELETE FROM reports WHERE report_id = 9;
\echo SQLSTATE :SQLSTATE
ROLLBACK;
BEGIN;
SET LOCAL pg_fence.token = 960;
SET LOCAL pg_fence.proof = :'p9_960';
DELETE FROM reports WHERE report_id = 9;
COMMIT;
SELECT * FROM reports ORDER BY report_id;

-- fenced_update: the proof argument ...
SELECT fenced_update('reports', '{"report_id": 8}', '{"body": "fu"}', 1000, proof => :'p8_1000');
-- ... or pg_fence.proof
BEGIN;
SET LOCAL pg_fence.proof = :'p8_1100';
SELECT fenced_update('reports', '{"report_id": 8}', '{"body": "fs"}', 1100);
COMMIT;
-- the argument wins over the setting
BEGIN;
SET LOCAL pg_fence.proof = :'p8_1200';
SELECT fenced_update('reports', '{"report_id": 8}', '{"body": "fa"}', 1200, proof => :'proof');
\echo SQLSTATE :SQLSTATE
ROLLBACK;
-- and lasts only for its UPDATE, also after an error
BEGIN;
SET LOCAL pg_fence.proof = :'p8_1200';
SELECT fenced_update('reports', '{"report_id": 8}', '{"body": "fa"}', 1200, proof => 'v1.bad');
\echo SQLSTATE :SQLSTATE
ROLLBACK;
BEGIN;
SET LOCAL pg_fence.proof = :'p8_1200';
SELECT fenced_update('reports', '{"report_id": 8}', '{"body": "fb"}', 1200);
COMMIT;
-- stale is a result, and the row is never written: no proof needed
SELECT fenced_update('reports', '{"report_id": 8}', '{"body": "st"}', 5);
SELECT * FROM reports ORDER BY report_id;

-- protecting the table again without lock_key turns verification off
SELECT fence_protect('reports');
SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = 'reports'::regclass;
UPDATE reports SET body = 'off', fence = 1300 WHERE report_id = 8;
SELECT fence_protect('reports', lock_key => 'report:{report_id}');

-- a plain table still accepts any newer token, without a proof
CREATE TABLE plain (id int PRIMARY KEY, fence bigint NOT NULL DEFAULT 0);
INSERT INTO plain VALUES (1);
SELECT fence_protect('plain');
UPDATE plain SET fence = 9223372036854775807 WHERE id = 1;
SELECT * FROM plain;

-- Resources ------------------------------------------------------------------

-- require_proof creates the resource with fence 0
SELECT fence_require_proof('report:8');
SELECT resource, fence, require_proof FROM fence_resources WHERE resource = 'report:8';
SELECT fence_admit('report:8', 900);
\echo SQLSTATE :SQLSTATE
BEGIN;
SELECT fence_admit('report:8', 900, :'proof');
COMMIT;
BEGIN;
SET LOCAL pg_fence.proof = :'proof';
SELECT fence_admit('report:8', 900);
COMMIT;
SELECT fence_advance('report:8', 900, :'proof');
-- fence_advance returns false for a stale token, but raises for a refused proof
SELECT fence_advance('report:8', 800, :'p8_800');
SELECT fence_advance('report:8', 901, :'proof');
\echo SQLSTATE :SQLSTATE
-- the forged proof with its own token, 900 (equal to the fence: a check
-- that skipped the signature would return true)
SELECT fence_advance('report:8', 900, :'forged');
\echo SQLSTATE :SQLSTATE
SELECT fence_admit('report:8', 800, :'p8_800');
\echo SQLSTATE :SQLSTATE
-- a resource without require_proof needs none
SELECT fence_admit('report:other', 5);
SELECT fence_require_proof('report:8', false);
SELECT fence_advance('report:8', 901);
SELECT fence_require_proof('report:8');
SELECT resource, fence, require_proof FROM fence_resources ORDER BY resource;

-- An application role with the documented grants on fence_resources
-- (SELECT, INSERT, UPDATE) cannot undo require_proof by writing the table
-- directly (42501); pg_fence's own functions still write it for that role.
GRANT SELECT, INSERT, UPDATE ON fence_resources TO regress_fence_app;
SET ROLE regress_fence_app;
UPDATE fence_resources SET require_proof = false WHERE resource = 'report:8';
\echo SQLSTATE :SQLSTATE
UPDATE fence_resources SET fence = 9223372036854775807 WHERE resource = 'report:8';
\echo SQLSTATE :SQLSTATE
UPDATE fence_resources SET resource = 'report:8x' WHERE resource = 'report:8';
\echo SQLSTATE :SQLSTATE
INSERT INTO fence_resources (resource, fence) VALUES ('report:8', 9223372036854775807)
    ON CONFLICT (resource) DO UPDATE SET fence = EXCLUDED.fence;
\echo SQLSTATE :SQLSTATE
-- nor turn require_proof on: only fence_require_proof does
UPDATE fence_resources SET require_proof = true WHERE resource = 'report:other';
\echo SQLSTATE :SQLSTATE
-- DELETE and TRUNCATE are not granted
DELETE FROM fence_resources WHERE resource = 'report:8';
\echo SQLSTATE :SQLSTATE
TRUNCATE fence_resources;
\echo SQLSTATE :SQLSTATE
-- allowed: other columns, rows without require_proof, new rows, the functions
UPDATE fence_resources SET updated_at = now() WHERE resource = 'report:8';
UPDATE fence_resources SET fence = 6 WHERE resource = 'report:other';
INSERT INTO fence_resources (resource, fence, require_proof) VALUES ('report:new', 3, true);
-- (rolled back: key rotation below continues from fence 901)
BEGIN;
SELECT fence_advance('report:8', 1000, :'p8_1000');
SELECT fence FROM fence_resources WHERE resource = 'report:8';
ROLLBACK;
SELECT fence_advance('report:8', 1100);
\echo SQLSTATE :SQLSTATE
RESET ROLE;
-- the trigger also stops the table's owner; it names the way that works
DELETE FROM fence_resources WHERE resource = 'report:new';
\echo SQLSTATE :SQLSTATE
SELECT fence_require_proof('report:new', false);
DELETE FROM fence_resources WHERE resource = 'report:new';
-- pg_fence's own statement failing inside (here: a trigger of the owner's)
-- leaves direct writes refused afterwards
CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS
  $$ BEGIN RAISE EXCEPTION 'boom for %', NEW.resource; END $$;
CREATE TRIGGER boom BEFORE INSERT ON fence_resources
  FOR EACH ROW WHEN (NEW.resource = 'boom') EXECUTE FUNCTION boom();
SELECT fence_advance('boom', 1);
SELECT fence_require_proof('boom');
DROP TRIGGER boom ON fence_resources;
DROP FUNCTION boom();
UPDATE fence_resources SET require_proof = false WHERE resource = 'report:8';
\echo SQLSTATE :SQLSTATE
REVOKE ALL ON fence_resources FROM regress_fence_app;
SELECT resource, fence, require_proof FROM fence_resources ORDER BY resource;

-- Key rotation -----------------------------------------------------------------

-- trust the new key; proofs of both keys are accepted (and now verified)
SELECT fence_trust_key(:'pub2', 12345678901234567890);
SELECT fence_advance('report:8', 950, :'q8_950');
SELECT fence_advance('report:8', 950, :'p8_950');
-- distrust the old key: its proofs are refused, also one verified before
SELECT fence_distrust_key('21fe31dfa154a261');
SELECT fence_distrust_key('21fe31dfa154a261');
SELECT fence_advance('report:8', 950, :'p8_950');
\echo SQLSTATE :SQLSTATE
-- the new key's proofs still are, also one verified before
SELECT fence_advance('report:8', 950, :'q8_950');
BEGIN;
SET LOCAL pg_fence.proof = :'q7_990';
UPDATE reports SET body = 'r', fence = 990 WHERE report_id = 7;
COMMIT;
-- a superuser's direct DELETE also reaches the cache (the table's trigger)
DELETE FROM fence_trusted_keys;
SELECT fence_advance('report:8', 950, :'q8_950');
\echo SQLSTATE :SQLSTATE
SELECT fence_trust_key(:'pub', 12345678901234567890);

-- Settings and privileges ----------------------------------------------------------

-- a proof is never a database, role or function default (22023)
ALTER ROLE CURRENT_USER SET pg_fence.proof = :'proof';
\echo SQLSTATE :SQLSTATE
ALTER DATABASE contrib_regression SET pg_fence.proof = :'proof';
\echo SQLSTATE :SQLSTATE
CREATE FUNCTION proof_fn() RETURNS int LANGUAGE sql SET pg_fence.proof = :'proof' AS 'SELECT 1';
\echo SQLSTATE :SQLSTATE

-- an application role may read the trusted keys and write with proofs, but
-- not change which keys are trusted nor which resources need proofs (42501)
GRANT SELECT, UPDATE ON reports TO regress_fence_app;
SET ROLE regress_fence_app;
SELECT key_id, cluster_id FROM fence_trusted_keys;
SELECT fence_trust_key(:'pub2');
\echo SQLSTATE :SQLSTATE
SELECT fence_distrust_key('21fe31dfa154a261');
\echo SQLSTATE :SQLSTATE
SELECT fence_require_proof('report:8', false);
\echo SQLSTATE :SQLSTATE
INSERT INTO fence_trusted_keys (key_id, public_key) VALUES ('x', 'y');
\echo SQLSTATE :SQLSTATE
DELETE FROM fence_trusted_keys;
\echo SQLSTATE :SQLSTATE
SELECT fenced_update('reports', '{"report_id": 8}', '{"body": "app"}', 1400, proof => :'p8_1400');
RESET ROLE;
SELECT has_table_privilege('public', 'fence_trusted_keys', 'SELECT') AS public_reads,
       has_table_privilege('public', 'fence_trusted_keys', 'INSERT, UPDATE, DELETE, TRUNCATE') AS public_writes;

-- fence_stats counts refused proofs, although their statements aborted
SELECT kind, relation, resource, accepted, rejected_stale, rejected_proof
  FROM fence_stats ORDER BY kind, relation::text, resource;

SET client_min_messages = warning;
DROP TABLE reports, plain, tenant_docs;
SELECT fence_require_proof(resource, false) FROM fence_resources WHERE require_proof;
DELETE FROM fence_resources;
DELETE FROM fence_trusted_keys;
DROP OWNED BY regress_fence_app;
DROP ROLE regress_fence_app;
RESET client_min_messages;
