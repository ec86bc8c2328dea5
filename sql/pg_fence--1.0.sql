/* pg_fence--1.0.sql: install script of the pg_fence extension, version 1.0 */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION pg_fence" to load this file. \quit

-- Every function runs with the caller's privileges (SECURITY INVOKER, the
-- default): a fencing token is not a credential.

CREATE TYPE fence_outcome AS ENUM ('applied', 'stale', 'not_found');
COMMENT ON TYPE fence_outcome IS
'Result of fenced_update: applied (row written), stale (row fence >= token), not_found (no row matches the key)';

-- Row fences -------------------------------------------------------------

CREATE FUNCTION fence_guard()
RETURNS trigger
AS 'MODULE_PATHNAME', 'fence_guard'
LANGUAGE C;
COMMENT ON FUNCTION fence_guard() IS
'Trigger (BEFORE UPDATE OR DELETE, FOR EACH ROW; args: fence column, mode) that raises 55F01 for a stale token; installed by fence_protect';

CREATE FUNCTION fence_protect(rel regclass,
                              fence_column name DEFAULT 'fence',
                              mode text DEFAULT 'strict')
RETURNS void
AS 'MODULE_PATHNAME', 'fence_protect'
LANGUAGE C;
COMMENT ON FUNCTION fence_protect(regclass, name, text) IS
'Validates the fence column (bigint NOT NULL) and installs or replaces the zzz_fence_guard trigger; mode is strict or same_generation';

CREATE FUNCTION fence_unprotect(rel regclass)
RETURNS void
AS 'MODULE_PATHNAME', 'fence_unprotect'
LANGUAGE C;
COMMENT ON FUNCTION fence_unprotect(regclass) IS
'Drops the zzz_fence_guard trigger if present; does nothing otherwise';

CREATE FUNCTION fenced_update(rel regclass,
                              key jsonb,
                              changes jsonb,
                              token bigint,
                              fence_column name DEFAULT 'fence')
RETURNS fence_outcome
AS 'MODULE_PATHNAME', 'fenced_update'
LANGUAGE C;
COMMENT ON FUNCTION fenced_update(regclass, jsonb, jsonb, bigint, name) IS
'One conditional UPDATE: sets changes and fence = token on the row matching key if its fence < token; returns applied, stale or not_found (stale is returned, counted and logged, not raised)';

-- Resource fences ----------------------------------------------------------

CREATE TABLE fence_resources (
    resource   text PRIMARY KEY
               CHECK (octet_length(resource) BETWEEN 1 AND 512),
    fence      bigint NOT NULL CHECK (fence >= 0),
    updated_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE fence_resources IS
'Per-resource fences (latest admitted token per resource), kept by fence_advance and fence_admit';
-- The fences are data: pg_dump must keep them, or a restored database
-- would accept tokens it has already refused.
SELECT pg_catalog.pg_extension_config_dump('fence_resources', '');

CREATE FUNCTION fence_advance(resource text, token bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'fence_advance'
LANGUAGE C;
COMMENT ON FUNCTION fence_advance(text, bigint) IS
'Publishes token as the resource''s fence if it is newer; true if the fence is now token, false (counted and logged) if a newer token is already stored; locks the resource row until the transaction ends';

CREATE FUNCTION fence_admit(resource text, token bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'fence_admit'
LANGUAGE C;
COMMENT ON FUNCTION fence_admit(text, bigint) IS
'Admits the transaction under token: locks the resource row until commit, advances the fence if token is newer, raises 55F01 if the stored fence is newer than token';

CREATE FUNCTION fence_current(resource text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'fence_current'
LANGUAGE C STABLE STRICT;
COMMENT ON FUNCTION fence_current(text) IS
'The resource''s stored fence, or NULL if no token was ever admitted for it';

-- Statistics ---------------------------------------------------------------

CREATE FUNCTION fence_stats_entries(
    OUT dbid oid,
    OUT relid oid,
    OUT resource text,
    OUT accepted bigint,
    OUT rejected_stale bigint,
    OUT last_accepted_token bigint,
    OUT last_rejected_token bigint,
    OUT last_rejected_at timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'fence_stats_entries'
LANGUAGE C;
COMMENT ON FUNCTION fence_stats_entries() IS
'Raw shared-memory counters of the current database (needs shared_preload_libraries = pg_fence); use the fence_stats view';

CREATE VIEW fence_stats AS
SELECT CASE WHEN s.relid IS NOT NULL THEN 'relation' ELSE 'resource' END AS kind,
       s.relid::regclass AS relation,
       s.resource,
       s.accepted,
       s.rejected_stale,
       s.last_accepted_token,
       s.last_rejected_token,
       s.last_rejected_at
  FROM fence_stats_entries() AS s
 WHERE s.dbid = (SELECT d.oid FROM pg_catalog.pg_database AS d
                  WHERE d.datname = pg_catalog.current_database());
COMMENT ON VIEW fence_stats IS
'Accepted and stale-rejected writes per relation and resource of the current database, since server start or fence_stats_reset()';
GRANT SELECT ON fence_stats TO PUBLIC;

CREATE FUNCTION fence_stats_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'fence_stats_reset'
LANGUAGE C;
COMMENT ON FUNCTION fence_stats_reset() IS
'Forgets all fence_stats counters (all databases); superuser only unless granted';
REVOKE ALL ON FUNCTION fence_stats_reset() FROM PUBLIC;
