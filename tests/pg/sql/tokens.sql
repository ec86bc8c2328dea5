-- tokens: the pg_fence.token setting accepts '' or a bigint >= 0 and
-- follows SET / SET LOCAL / RESET; the other settings keep their contexts.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_fence;
RESET client_min_messages;
-- make sure the module is loaded in this session
SELECT fence_current('tokens test');

SHOW pg_fence.token;
SET pg_fence.token = 42;
SHOW pg_fence.token;
SET pg_fence.token = '9223372036854775807';
SHOW pg_fence.token;
SET pg_fence.token = '0';
SHOW pg_fence.token;
SET pg_fence.token = '';
SHOW pg_fence.token;

-- invalid values: 22023, and the previous value stays
SET pg_fence.token = 7;
SET pg_fence.token = -1;
\echo SQLSTATE :SQLSTATE
SET pg_fence.token = '9223372036854775808';
\echo SQLSTATE :SQLSTATE
SET pg_fence.token = 'abc';
\echo SQLSTATE :SQLSTATE
SET pg_fence.token = '42abc';
\echo SQLSTATE :SQLSTATE
SET pg_fence.token = '4.2';
\echo SQLSTATE :SQLSTATE
SET pg_fence.token = '0x2a';
\echo SQLSTATE :SQLSTATE
SHOW pg_fence.token;
RESET pg_fence.token;
SHOW pg_fence.token;

-- SET LOCAL lasts until the end of the transaction
BEGIN;
SET LOCAL pg_fence.token = 5;
SHOW pg_fence.token;
COMMIT;
SHOW pg_fence.token;
-- set_config works too (is_local = true)
BEGIN;
SELECT set_config('pg_fence.token', '6', true);
SHOW pg_fence.token;
ROLLBACK;
SHOW pg_fence.token;

-- the pg_fence prefix is reserved
SET pg_fence.tokn = 5;
\echo SQLSTATE :SQLSTATE
-- max_tracked needs a restart (55P02)
SET pg_fence.max_tracked = 100;
\echo SQLSTATE :SQLSTATE
-- a token is never a server, database, role or function default (22023):
-- it would give every tokenless UPDATE and DELETE a token
ALTER ROLE CURRENT_USER SET pg_fence.token = 5;
\echo SQLSTATE :SQLSTATE
ALTER SYSTEM SET pg_fence.token = 5;
\echo SQLSTATE :SQLSTATE
CREATE FUNCTION tokens_fn() RETURNS int LANGUAGE sql SET pg_fence.token = 5 AS 'SELECT 1';
\echo SQLSTATE :SQLSTATE
-- ... but clearing it there is allowed
ALTER ROLE CURRENT_USER SET pg_fence.token = '';
ALTER ROLE CURRENT_USER RESET pg_fence.token;
