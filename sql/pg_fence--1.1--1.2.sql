/* pg_fence--1.1--1.2.sql: re-fencing after a database failover */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pg_fence UPDATE TO '1.2'" to load this file. \quit

-- An administrative act of the table's owner: the C function also checks
-- ownership, so a GRANT of EXECUTE alone does not let a non-owner raise.

CREATE FUNCTION fence_raise(rel regclass, token bigint)
RETURNS bigint
AS 'MODULE_PATHNAME', 'fence_raise'
LANGUAGE C;
COMMENT ON FUNCTION fence_raise(regclass, bigint) IS
'Re-fences a protected table after a failover: sets every fence below token to token (no token proof needed, also on a verifying table); returns the number of rows raised; owner or superuser only';
REVOKE ALL ON FUNCTION fence_raise(regclass, bigint) FROM PUBLIC;

CREATE FUNCTION fence_raise_resources(token bigint)
RETURNS bigint
AS 'MODULE_PATHNAME', 'fence_raise_resources'
LANGUAGE C;
COMMENT ON FUNCTION fence_raise_resources(bigint) IS
'Re-fences every resource in fence_resources after a failover: sets every fence below token to token (also of resources that require proofs); returns the number of resources raised; owner of fence_resources or superuser only';
REVOKE ALL ON FUNCTION fence_raise_resources(bigint) FROM PUBLIC;
