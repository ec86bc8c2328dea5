-- nopreload_smuggle: without shared_preload_libraries, a session loads
-- pg_fence at its first fenced write; until then pg_fence.token is a
-- placeholder that PostgreSQL stores and applies unchecked (a superuser's
-- CREATE FUNCTION ... SET, ALTER ROLE/DATABASE ... SET).  Such a function's
-- token is refused where it is used (22023, naming the SET clause), loaded
-- or not; a role or database default is dropped with a WARNING when the
-- library loads.  A session's own SET before the load keeps working.
-- (Run on a server without preload; tests/pg/sql/smuggle.sql with it.)
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_fence;
DROP ROLE IF EXISTS regress_fence_np_smuggler;
RESET client_min_messages;
CREATE ROLE regress_fence_np_smuggler;
CREATE TABLE nps (id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0);
INSERT INTO nps VALUES (1, 'v0');
SELECT fence_protect('nps');
GRANT SELECT, UPDATE, DELETE ON nps TO regress_fence_np_smuggler;

-- a fresh session: not loaded, so the SET clauses are stored unchecked
\c
SELECT count(*) AS module_loaded FROM pg_settings WHERE name = 'pg_fence.log_rejections';
CREATE FUNCTION nps_fn() RETURNS void LANGUAGE sql SET pg_fence.token = '77'
  AS $$ UPDATE nps SET body = 'fn' WHERE id = 1 $$;
CREATE FUNCTION nps_definer() RETURNS void LANGUAGE sql SECURITY DEFINER
  SET pg_fence.token = '77' AS $$ UPDATE nps SET body = 'definer' WHERE id = 1 $$;
CREATE PROCEDURE nps_proc() LANGUAGE sql SET pg_fence.token = '77'
  AS $$ DELETE FROM nps WHERE id = 1 $$;
SELECT count(*) AS module_loaded FROM pg_settings WHERE name = 'pg_fence.log_rejections';
-- the call loads the library inside the function: refused
SELECT nps_fn();
\echo SQLSTATE :SQLSTATE
SELECT count(*) AS module_loaded FROM pg_settings WHERE name = 'pg_fence.log_rejections';
-- loaded: refused the same
SELECT nps_fn();
\echo SQLSTATE :SQLSTATE
SET ROLE regress_fence_np_smuggler;
SELECT nps_definer();
\echo SQLSTATE :SQLSTATE
RESET ROLE;
CALL nps_proc();
\echo SQLSTATE :SQLSTATE
-- loaded, a new SET clause is refused where it is made
CREATE FUNCTION nps_set() RETURNS void LANGUAGE sql SET pg_fence.token = '77'
  AS $$ UPDATE nps SET body = 'set' WHERE id = 1 $$;
\echo SQLSTATE :SQLSTATE
SELECT * FROM nps;

-- a role default stored unchecked: dropped with a WARNING when the
-- library loads, and the UPDATE has no token
\c
ALTER ROLE CURRENT_USER SET pg_fence.token = 77;
\c
SHOW pg_fence.token;
UPDATE nps SET body = 'role' WHERE id = 1;
\echo SQLSTATE :SQLSTATE
SHOW pg_fence.token;
ALTER ROLE CURRENT_USER RESET pg_fence.token;
-- a database default: the same
\c
ALTER DATABASE :"DBNAME" SET pg_fence.token = 77;
\c
UPDATE nps SET body = 'database' WHERE id = 1;
\echo SQLSTATE :SQLSTATE
ALTER DATABASE :"DBNAME" RESET pg_fence.token;

-- the session's own SET before the load keeps working
\c
SET pg_fence.token = 51;
UPDATE nps SET body = 'session' WHERE id = 1;
RESET pg_fence.token;
SELECT * FROM nps;

DROP FUNCTION nps_fn(), nps_definer();
DROP PROCEDURE nps_proc();
DROP TABLE nps;
DROP ROLE regress_fence_np_smuggler;
