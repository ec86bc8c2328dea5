/* pg_fence--1.4--1.5.sql: see each section's header */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pg_fence UPDATE TO '1.5'" to load this file. \quit

-- preemption
-- pg_fence.preempt (a setting, no SQL object) ends the open transactions
-- that admitted an older token for a target a newer token reaches;
-- fence_preempt_stats() counts what it did, all databases together.
CREATE FUNCTION fence_preempt_stats(
    OUT preempted bigint,
    OUT cancelled bigint,
    OUT terminated bigint,
    OUT denied bigint,
    OUT unregistered bigint,
    OUT inflight integer)
RETURNS record
AS 'MODULE_PATHNAME', 'fence_preempt_stats'
LANGUAGE C;
COMMENT ON FUNCTION fence_preempt_stats() IS
'Preemptions by pg_fence.preempt, all databases together, since server start or fence_stats_reset(): transactions preempted (marked so they cannot commit), cancelled, terminated, denied a signal by the signal rules; admissions the full registry could not take; admissions registered now (needs shared_preload_libraries = pg_fence)';
