-- security: everything runs with the caller's privileges; GRANTs and
-- row-level security apply to fenced_update as to a plain UPDATE.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_fence;
DROP ROLE IF EXISTS regress_fence_reader;
DROP ROLE IF EXISTS regress_fence_writer;
DROP ROLE IF EXISTS regress_fence_column;
RESET client_min_messages;
CREATE ROLE regress_fence_reader;
CREATE ROLE regress_fence_writer;
CREATE ROLE regress_fence_column;

CREATE TABLE sec (id int PRIMARY KEY, owner text, body text, fence bigint NOT NULL DEFAULT 0);
INSERT INTO sec VALUES (1, 'regress_fence_writer', 'a'), (2, 'someone_else', 'b');
GRANT SELECT ON sec TO regress_fence_reader;
GRANT SELECT, UPDATE ON sec TO regress_fence_writer;
GRANT SELECT ON sec TO regress_fence_column;
GRANT UPDATE (body) ON sec TO regress_fence_column;
SELECT fence_protect('sec');

-- a role without UPDATE cannot write through fenced_update (42501), nor
-- with a plain UPDATE, nor install or remove the guard
SET ROLE regress_fence_reader;
SELECT fenced_update('sec', '{"id": 1}', '{"body": "r"}', 5);
\echo SQLSTATE :SQLSTATE
UPDATE sec SET body = 'r', fence = 5 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
SELECT fence_protect('sec', mode => 'same_generation');
\echo SQLSTATE :SQLSTATE
SELECT fence_unprotect('sec');
\echo SQLSTATE :SQLSTATE
RESET ROLE;

-- column privileges: UPDATE on body alone does not cover the fence column
SET ROLE regress_fence_column;
SELECT fenced_update('sec', '{"id": 1}', '{"body": "c"}', 5);
\echo SQLSTATE :SQLSTATE
RESET ROLE;
GRANT UPDATE (fence) ON sec TO regress_fence_column;
SET ROLE regress_fence_column;
SELECT fenced_update('sec', '{"id": 1}', '{"body": "c"}', 5);
SELECT fenced_update('sec', '{"id": 1}', '{"owner": "me"}', 6);
\echo SQLSTATE :SQLSTATE
RESET ROLE;

-- a role with UPDATE can
SET ROLE regress_fence_writer;
SELECT fenced_update('sec', '{"id": 1}', '{"body": "w"}', 6);
RESET ROLE;
SELECT * FROM sec ORDER BY id;

-- row-level security: rows the policy hides are not_found, like for UPDATE
ALTER TABLE sec ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_rows ON sec USING (owner = current_user);
SET ROLE regress_fence_writer;
SELECT fenced_update('sec', '{"id": 1}', '{"body": "w2"}', 7);
SELECT fenced_update('sec', '{"id": 2}', '{"body": "w2"}', 7);
UPDATE sec SET body = 'w2', fence = 7 WHERE id = 2;
-- WITH CHECK (here: the USING clause) refuses to give the row away
SELECT fenced_update('sec', '{"id": 1}', '{"owner": "someone_else"}', 8);
\echo SQLSTATE :SQLSTATE
RESET ROLE;
SELECT * FROM sec ORDER BY id;
-- a row the caller may read but not update is reported, not called stale
DROP POLICY own_rows ON sec;
CREATE POLICY read_all ON sec FOR SELECT USING (true);
CREATE POLICY update_own ON sec FOR UPDATE USING (owner = current_user);
SET ROLE regress_fence_writer;
SELECT fenced_update('sec', '{"id": 2}', '{"body": "w3"}', 9);
\echo SQLSTATE :SQLSTATE
RESET ROLE;
ALTER TABLE sec DISABLE ROW LEVEL SECURITY;

-- resource fences need privileges on fence_resources
SET ROLE regress_fence_writer;
SELECT fence_advance('sec:resource', 1);
\echo SQLSTATE :SQLSTATE
SELECT fence_current('sec:resource');
\echo SQLSTATE :SQLSTATE
RESET ROLE;
GRANT SELECT, INSERT, UPDATE ON fence_resources TO regress_fence_writer;
SET ROLE regress_fence_writer;
SELECT fence_advance('sec:resource', 1);
SELECT fence_admit('sec:resource', 1);
SELECT fence_current('sec:resource');
RESET ROLE;
DELETE FROM fence_resources WHERE resource = 'sec:resource';

DROP TABLE sec;
REVOKE ALL ON fence_resources FROM regress_fence_writer;
DROP ROLE regress_fence_reader;
DROP ROLE regress_fence_writer;
DROP ROLE regress_fence_column;
