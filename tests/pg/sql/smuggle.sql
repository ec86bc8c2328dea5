-- smuggle: pg_fence.token and pg_fence.seq come only from the session
-- itself (SET, SET LOCAL, set_config, connection options).  A default is
-- refused where it is made (CREATE FUNCTION ... SET, ALTER ROLE/DATABASE
-- ... SET: 22023); one stored anyway (as while the library was not loaded;
-- made here by writing the catalogs) is refused where it is used: a
-- function's SET clause (plain, SECURITY DEFINER, a procedure's) by the
-- guard (22023, naming it), a role or database default at login (a
-- WARNING, and the session has no token).  tests/pg/sql/nopreload_smuggle.sql
-- does the same without preloading.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_fence;
DROP ROLE IF EXISTS regress_fence_smuggler;
RESET client_min_messages;
CREATE ROLE regress_fence_smuggler;
CREATE TABLE sm (id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0);
INSERT INTO sm VALUES (1, 'v0');
SELECT fence_protect('sm');
GRANT SELECT, UPDATE, DELETE ON sm TO regress_fence_smuggler;
CREATE TABLE smq (id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0,
                  fence_seq bigint NOT NULL DEFAULT 0);
INSERT INTO smq VALUES (1, 'v0');
SELECT fence_protect('smq', mode => 'sequenced');

-- refused where they are made
CREATE FUNCTION sm_set() RETURNS void LANGUAGE sql SET pg_fence.token = '77'
  AS $$ UPDATE sm SET body = 'set' WHERE id = 1 $$;
\echo SQLSTATE :SQLSTATE
CREATE FUNCTION sm_set() RETURNS void LANGUAGE sql SECURITY DEFINER SET pg_fence.token = '77'
  AS $$ UPDATE sm SET body = 'set' WHERE id = 1 $$;
\echo SQLSTATE :SQLSTATE
ALTER ROLE regress_fence_smuggler SET pg_fence.token = 77;
\echo SQLSTATE :SQLSTATE
ALTER DATABASE :"DBNAME" SET pg_fence.token = 77;
\echo SQLSTATE :SQLSTATE
ALTER ROLE regress_fence_smuggler IN DATABASE :"DBNAME" SET pg_fence.seq = 3;
\echo SQLSTATE :SQLSTATE

-- a function's SET clause stored anyway: refused where the token is used
CREATE FUNCTION sm_fn() RETURNS void LANGUAGE sql
  AS $$ UPDATE sm SET body = 'fn' WHERE id = 1 $$;
CREATE FUNCTION sm_definer() RETURNS void LANGUAGE sql SECURITY DEFINER
  AS $$ UPDATE sm SET body = 'definer' WHERE id = 1 $$;
CREATE PROCEDURE sm_proc() LANGUAGE sql AS $$ DELETE FROM sm WHERE id = 1 $$;
CREATE FUNCTION sm_seq() RETURNS void LANGUAGE sql
  AS $$ UPDATE smq SET body = 'seq' WHERE id = 1 $$;
UPDATE pg_proc SET proconfig = '{pg_fence.token=77}'
 WHERE oid IN ('sm_fn'::regproc, 'sm_definer'::regproc, 'sm_proc'::regproc);
UPDATE pg_proc SET proconfig = '{pg_fence.seq=3}' WHERE oid = 'sm_seq'::regproc;
SELECT sm_fn();
\echo SQLSTATE :SQLSTATE
SET ROLE regress_fence_smuggler;
SELECT sm_definer();
\echo SQLSTATE :SQLSTATE
RESET ROLE;
CALL sm_proc();
\echo SQLSTATE :SQLSTATE
-- the caller's own token does not make the function's acceptable
BEGIN;
SET LOCAL pg_fence.token = 78;
SELECT sm_fn();
ROLLBACK;
-- nor the session's token the function's sequence number
BEGIN;
SET LOCAL pg_fence.token = 5;
SELECT sm_seq();
\echo SQLSTATE :SQLSTATE
ROLLBACK;
SELECT * FROM sm;
SELECT * FROM smq;

-- role and database defaults stored anyway: dropped at login with a WARNING
INSERT INTO pg_db_role_setting
  VALUES (0, (SELECT oid FROM pg_roles WHERE rolname = current_user), '{pg_fence.token=77}');
\c
SHOW pg_fence.token;
UPDATE sm SET body = 'role' WHERE id = 1;
\echo SQLSTATE :SQLSTATE
DELETE FROM pg_db_role_setting
 WHERE setdatabase = 0 AND setrole = (SELECT oid FROM pg_roles WHERE rolname = current_user);
UPDATE pg_db_role_setting SET setconfig = setconfig || '{pg_fence.token=77}'::text[]
 WHERE setrole = 0 AND setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database());
\c
SHOW pg_fence.token;
UPDATE sm SET body = 'database' WHERE id = 1;
\echo SQLSTATE :SQLSTATE
UPDATE pg_db_role_setting SET setconfig = array_remove(setconfig, 'pg_fence.token=77')
 WHERE setrole = 0 AND setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database());
\c

-- the session's own token keeps working: SET LOCAL, SET, set_config in a
-- function's body
BEGIN;
SET LOCAL pg_fence.token = 10;
UPDATE sm SET body = 'local' WHERE id = 1;
COMMIT;
SET pg_fence.token = 11;
UPDATE sm SET body = 'session' WHERE id = 1;
RESET pg_fence.token;
CREATE FUNCTION sm_body(token bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM set_config('pg_fence.token', token::text, true);
  UPDATE sm SET body = 'body' WHERE id = 1;
END $$;
SELECT sm_body(12);
SELECT * FROM sm;
-- a function whose SET clause empties the token keeps the caller's token
-- out; a SET LOCAL in its body is refused too (the value could be the SET
-- clause's as far as the variable's stack tells)
CREATE FUNCTION sm_clear(token bigint) RETURNS void LANGUAGE plpgsql
  SET pg_fence.token = '' AS $$
BEGIN
  UPDATE sm SET body = 'clear' WHERE id = 1;
END $$;
BEGIN;
SET LOCAL pg_fence.token = 13;
SELECT sm_clear(13);
\echo SQLSTATE :SQLSTATE
ROLLBACK;
CREATE FUNCTION sm_clear_local(token bigint) RETURNS void LANGUAGE plpgsql
  SET pg_fence.token = '' AS $$
BEGIN
  PERFORM set_config('pg_fence.token', token::text, true);
  UPDATE sm SET body = 'clear' WHERE id = 1;
END $$;
SELECT sm_clear_local(13);
\echo SQLSTATE :SQLSTATE
SELECT * FROM sm;

DROP FUNCTION sm_fn(), sm_definer(), sm_seq(), sm_body(bigint), sm_clear(bigint),
  sm_clear_local(bigint);
DROP PROCEDURE sm_proc();
DROP TABLE sm, smq;
DROP ROLE regress_fence_smuggler;
