/* pg_fence--1.3--1.4.sql: fence_stats says what it could not keep:
   fence_stats_dropped() counts, per kind, the entries evicted to make room
   and the decisions no row shows; fence_stats gains a row of kind 'dropped'
   with those decisions whenever there are any */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pg_fence UPDATE TO '1.4'" to load this file. \quit

CREATE FUNCTION fence_stats_dropped(
    OUT kind text,
    OUT evicted bigint,
    OUT accepted bigint,
    OUT rejected_stale bigint,
    OUT rejected_proof bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'fence_stats_dropped'
LANGUAGE C;
COMMENT ON FUNCTION fence_stats_dropped() IS
'Per kind (relation, resource), all databases together: entries fence_stats evicted to make room, and the decisions no row shows (needs shared_preload_libraries = pg_fence)';

CREATE OR REPLACE VIEW fence_stats AS
SELECT CASE WHEN s.relid IS NOT NULL THEN 'relation' ELSE 'resource' END AS kind,
       s.relid::regclass AS relation,
       s.resource,
       s.accepted,
       s.rejected_stale,
       s.rejected_proof,
       s.last_accepted_token,
       s.last_rejected_token,
       s.last_rejected_at
  FROM fence_stats_entries() AS s
 WHERE s.dbid = (SELECT d.oid FROM pg_catalog.pg_database AS d
                  WHERE d.datname = pg_catalog.current_database())
UNION ALL
SELECT 'dropped', NULL::regclass, NULL::text,
       pg_catalog.sum(d.accepted)::bigint,
       pg_catalog.sum(d.rejected_stale)::bigint,
       pg_catalog.sum(d.rejected_proof)::bigint,
       NULL::bigint, NULL::bigint, NULL::timestamptz
  FROM fence_stats_dropped() AS d
HAVING pg_catalog.sum(d.evicted + d.accepted + d.rejected_stale + d.rejected_proof) > 0;
COMMENT ON VIEW fence_stats IS
'Accepted writes, stale-rejected writes and refused token proofs per relation and resource of the current database, since server start or fence_stats_reset(); a row of kind dropped counts what no other row shows (all databases together)';
