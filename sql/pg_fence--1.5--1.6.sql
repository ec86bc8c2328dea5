/* pg_fence--1.5--1.6.sql: what PostgreSQL refused, queryable: the view
   fence_rejections over a ring of recent rejections in shared memory
   (pg_fence.rejection_log_size entries), fence_rejections_reset(), and
   fence_rejection_counts(), the rejections by path and reason since server
   start */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pg_fence UPDATE TO '1.6'" to load this file. \quit

CREATE FUNCTION fence_rejections(
    OUT at timestamptz,
    OUT pid integer,
    OUT role name,
    OUT application_name text,
    OUT client_addr inet,
    OUT datname name,
    OUT relid oid,
    OUT resource text,
    OUT lock_key text,
    OUT token bigint,
    OUT fence bigint,
    OUT path text,
    OUT reason text,
    OUT sqlstate text,
    OUT seq bigint,
    OUT fence_seq bigint,
    OUT id bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'fence_rejections'
LANGUAGE C;
COMMENT ON FUNCTION fence_rejections() IS
'Raw ring of recent rejections of the current database, oldest first (needs shared_preload_libraries = pg_fence); use the fence_rejections view';

CREATE VIEW fence_rejections AS
SELECT r.at,
       r.pid,
       r.role,
       r.application_name,
       r.client_addr,
       r.datname,
       r.relid::regclass AS relation,
       r.resource,
       r.lock_key,
       r.token,
       r.fence,
       r.path,
       r.reason,
       r.sqlstate,
       r.seq,
       r.fence_seq,
       r.id
  FROM fence_rejections() AS r
 ORDER BY r.id;
COMMENT ON VIEW fence_rejections IS
'The most recent writes pg_fence refused in the current database (pg_fence.rejection_log_size entries, all databases together), newest last: who, what, which token and which fence refused it, on which path and why';
GRANT SELECT ON fence_rejections TO PUBLIC;

CREATE FUNCTION fence_rejections_reset()
RETURNS bigint
AS 'MODULE_PATHNAME', 'fence_rejections_reset'
LANGUAGE C;
COMMENT ON FUNCTION fence_rejections_reset() IS
'Empties the ring of fence_rejections (all databases); returns the entries cleared; superuser only unless granted';
REVOKE ALL ON FUNCTION fence_rejections_reset() FROM PUBLIC;

CREATE FUNCTION fence_rejection_counts(
    OUT path text,
    OUT reason text,
    OUT sqlstate text,
    OUT rejections bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'fence_rejection_counts'
LANGUAGE C;
COMMENT ON FUNCTION fence_rejection_counts() IS
'Writes pg_fence refused, by path and reason, all databases together, since server start (never reset; needs shared_preload_libraries = pg_fence)';
