/*
 * stats.c
 *	  fence_stats: per-relation and per-resource counters of accepted and
 *	  stale writes and of refused token proofs, kept in shared memory, and
 *	  the rejection LOG line.
 *
 * Shared memory exists only when pg_fence is in shared_preload_libraries
 * (requested through shmem_request_hook, PostgreSQL 15).  Without it,
 * fencing works exactly the same; counting is skipped and reading
 * fence_stats raises an error that says what to configure.
 *
 * last_rejected_token and last_rejected_at describe stale rejections only;
 * a refused proof (55F02) only increments rejected_proof.
 *
 * The counters are not transactional.  A rejection is counted before the
 * ERROR that rolls its transaction back, so it survives the rollback.  For
 * the same reason an accepted write is counted even if its transaction
 * later aborts: "accepted" means "passed the fence check", not "committed".
 *
 * Locking: one LWLock guards the hash table (shared to find an entry and
 * update it, exclusive to add or remove entries); each entry has a spinlock
 * for its counters.  The table holds at most pg_fence.max_tracked entries;
 * once full, new relations/resources are not tracked (logged once).
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "pg_fence.h"

PG_FUNCTION_INFO_V1(fence_stats_entries);
PG_FUNCTION_INFO_V1(fence_stats_reset);

/* Name of the LWLock tranche and of the shared structures */
#define FENCE_STATS_NAME			"pg_fence"
#define FENCE_STATS_HASH_NAME		"pg_fence stats"

/* Columns of fence_stats_entries(): 9 since 1.1 (rejected_proof), 8 in 1.0 */
#define FENCE_STATS_COLUMNS			9

/* Marks "no token yet" in last_*_token (tokens are never negative) */
#define FENCE_STATS_NO_TOKEN		(-1)

/* Hash key: a relation (resource_hash 0) or a resource (relid 0) */
typedef struct FenceStatsKey
{
	Oid			dbid;
	Oid			relid;
	uint64		resource_hash;
} FenceStatsKey;

/* One tracked relation or resource */
typedef struct FenceStatsEntry
{
	FenceStatsKey key;			/* must be first */
	slock_t		mutex;			/* protects the counters below */
	int64		accepted;
	int64		rejected_stale;
	int64		rejected_proof;
	int64		last_accepted_token;
	int64		last_rejected_token;
	TimestampTz last_rejected_at;	/* 0 = never */
	char		resource[FENCE_RESOURCE_MAXLEN + 1];	/* "" for relations */
} FenceStatsEntry;

/* Shared header */
typedef struct FenceStatsState
{
	LWLock	   *lock;
	bool		full_logged;	/* "table full" already logged since reset */
} FenceStatsState;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;
static FenceStatsState *stats_state = NULL;
static HTAB *stats_hash = NULL;

/* Bytes of shared memory the counters need */
static Size
StatsShmemSize(void)
{
	return add_size(MAXALIGN(sizeof(FenceStatsState)),
					hash_estimate_size(fence_max_tracked, sizeof(FenceStatsEntry)));
}

/* shmem_request_hook: reserve our memory and LWLock */
static void
StatsShmemRequest(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(StatsShmemSize());
	RequestNamedLWLockTranche(FENCE_STATS_NAME, 1);
}

/* shmem_startup_hook: create or attach to the shared structures */
static void
StatsShmemStartup(void)
{
	HASHCTL		info;
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	stats_state = ShmemInitStruct(FENCE_STATS_NAME, sizeof(FenceStatsState), &found);
	if (!found)
	{
		stats_state->lock = &(GetNamedLWLockTranche(FENCE_STATS_NAME))->lock;
		stats_state->full_logged = false;
	}
	info.keysize = sizeof(FenceStatsKey);
	info.entrysize = sizeof(FenceStatsEntry);
	stats_hash = ShmemInitHash(FENCE_STATS_HASH_NAME, fence_max_tracked,
							   fence_max_tracked, &info, HASH_ELEM | HASH_BLOBS);
	LWLockRelease(AddinShmemInitLock);
}

/* Install the shared-memory hooks; called from _PG_init while preloading */
void
FenceStatsInit(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = StatsShmemRequest;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = StatsShmemStartup;
}

/* Raise 55000 with a hint when shared memory was not set up */
static void
RequireStatsShmem(void)
{
	if (stats_state == NULL || stats_hash == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("fence_stats requires pg_fence to be loaded via shared_preload_libraries"),
				 errdetail("Fencing works without it; only the statistics are unavailable."),
				 errhint("Add pg_fence to shared_preload_libraries in postgresql.conf "
						 "and restart the server.")));
}

/* Fill a hash key for a relation or a resource of the current database */
static void
MakeKey(FenceStatsKey *key, Oid relid, const char *resource)
{
	memset(key, 0, sizeof(FenceStatsKey));
	key->dbid = MyDatabaseId;
	key->relid = relid;
	if (resource != NULL)
		key->resource_hash = hash_bytes_extended((const unsigned char *) resource,
												 strlen(resource), 0);
}

/* Add an entry (exclusive lock held); NULL when the table is full */
static FenceStatsEntry *
CreateEntry(const FenceStatsKey *key, const char *resource)
{
	FenceStatsEntry *entry;
	bool		found;

	entry = hash_search(stats_hash, key, HASH_FIND, NULL);
	if (entry != NULL)
		return entry;
	if (hash_get_num_entries(stats_hash) >= fence_max_tracked)
	{
		if (!stats_state->full_logged)
			ereport(LOG,
					(errmsg("pg_fence: fence_stats is full (pg_fence.max_tracked = %d); "
							"new relations and resources are not counted",
							fence_max_tracked),
					 errhint("Run fence_stats_reset() or raise pg_fence.max_tracked.")));
		stats_state->full_logged = true;
		return NULL;
	}
	entry = hash_search(stats_hash, key, HASH_ENTER_NULL, &found);
	if (entry == NULL || found)
		return entry;
	SpinLockInit(&entry->mutex);
	entry->accepted = 0;
	entry->rejected_stale = 0;
	entry->rejected_proof = 0;
	entry->last_accepted_token = FENCE_STATS_NO_TOKEN;
	entry->last_rejected_token = FENCE_STATS_NO_TOKEN;
	entry->last_rejected_at = 0;
	strlcpy(entry->resource, resource ? resource : "", sizeof(entry->resource));
	return entry;
}

/* The decisions fence_stats counts */
typedef enum StatsDecision
{
	STATS_ACCEPTED,
	STATS_REJECTED_STALE,
	STATS_REJECTED_PROOF
} StatsDecision;

/* Apply one decision to an entry's counters (lock held; now: stale rejections) */
static void
CountInEntry(FenceStatsEntry *entry, int64 token, StatsDecision decision,
			 TimestampTz now)
{
	SpinLockAcquire(&entry->mutex);
	switch (decision)
	{
		case STATS_ACCEPTED:
			entry->accepted++;
			entry->last_accepted_token = token;
			break;
		case STATS_REJECTED_STALE:
			entry->rejected_stale++;
			entry->last_rejected_token = token;
			entry->last_rejected_at = now;
			break;
		case STATS_REJECTED_PROOF:
			entry->rejected_proof++;
			break;
	}
	SpinLockRelease(&entry->mutex);
}

/* Count one decision for a relation or resource; no-op without preload */
static void
CountDecision(Oid relid, const char *resource, int64 token, StatsDecision decision)
{
	FenceStatsKey key;
	FenceStatsEntry *entry;
	TimestampTz now = 0;

	if (stats_state == NULL || stats_hash == NULL)
		return;
	MakeKey(&key, relid, resource);
	/* read the clock before, not under, the spinlock */
	if (decision == STATS_REJECTED_STALE)
		now = GetCurrentTimestamp();

	LWLockAcquire(stats_state->lock, LW_SHARED);
	entry = hash_search(stats_hash, &key, HASH_FIND, NULL);
	if (entry == NULL)
	{
		LWLockRelease(stats_state->lock);
		LWLockAcquire(stats_state->lock, LW_EXCLUSIVE);
		entry = CreateEntry(&key, resource);
	}
	/* a 64-bit hash collision between two resource names: do not mix them */
	if (entry != NULL && resource != NULL && strcmp(entry->resource, resource) != 0)
		entry = NULL;
	if (entry != NULL)
		CountInEntry(entry, token, decision, now);
	LWLockRelease(stats_state->lock);
}

/* Record a write that passed the fence check */
void
FenceStatsAccepted(Oid relid, const char *resource, int64 token)
{
	CountDecision(relid, resource, token, STATS_ACCEPTED);
}

/* Record a refused token proof (no LOG line: the ERROR is logged) */
void
FenceStatsRejectedProof(Oid relid, const char *resource)
{
	CountDecision(relid, resource, FENCE_STATS_NO_TOKEN, STATS_REJECTED_PROOF);
}

/*
 * Record a stale token and write the LOG line; the caller then decides.
 * A pair with a sequence (sequenced fences) is written "(token, seq)".
 */
void
FenceStatsRejected(Oid relid, const char *resource, const FencePair *in,
				   const FencePair *fence, FencePath path)
{
	CountDecision(relid, resource, in->token, STATS_REJECTED_STALE);
	if (!fence_log_rejections)
		return;
	if (OidIsValid(relid))
		ereport(LOG,
				(errmsg("pg_fence: %s rejected stale token %s for relation %s: fence is %s",
						FencePathName(path), FencePairString(in),
						quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
												   get_rel_name(relid)),
						FencePairString(fence)),
				 errhidestmt(true), errhidecontext(true)));
	else
		ereport(LOG,
				(errmsg("pg_fence: %s rejected stale token %s for resource \"%s\": fence is %s",
						FencePathName(path), FencePairString(in), resource,
						FencePairString(fence)),
				 errhidestmt(true), errhidecontext(true)));
}

/* A token column: NULL for "none yet" */
static void
SetTokenColumn(Datum *values, bool *nulls, int column, int64 token)
{
	nulls[column] = (token == FENCE_STATS_NO_TOKEN);
	values[column] = Int64GetDatum(token);
}

/* One output row of fence_stats_entries() from a copy of an entry */
static void
EmitEntry(ReturnSetInfo *rsinfo, const FenceStatsEntry *entry)
{
	Datum		values[FENCE_STATS_COLUMNS];
	bool		nulls[FENCE_STATS_COLUMNS];
	bool		is_relation = OidIsValid(entry->key.relid);

	memset(nulls, 0, sizeof(nulls));
	values[0] = ObjectIdGetDatum(entry->key.dbid);
	values[1] = ObjectIdGetDatum(entry->key.relid);
	nulls[1] = !is_relation;
	values[2] = CStringGetTextDatum(entry->resource);
	nulls[2] = is_relation;
	values[3] = Int64GetDatum(entry->accepted);
	values[4] = Int64GetDatum(entry->rejected_stale);
	SetTokenColumn(values, nulls, 5, entry->last_accepted_token);
	SetTokenColumn(values, nulls, 6, entry->last_rejected_token);
	values[7] = TimestampTzGetDatum(entry->last_rejected_at);
	nulls[7] = (entry->last_rejected_at == 0);
	/* version 1.0 of fence_stats_entries() has 8 columns */
	values[8] = Int64GetDatum(entry->rejected_proof);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/*
 * fence_stats_entries(): every tracked relation and resource of the current
 * database (other databases' relation OIDs and resource names stay private)
 */
Datum
fence_stats_entries(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	HASH_SEQ_STATUS status;
	FenceStatsEntry *entry;

	RequireStatsShmem();
	InitMaterializedSRF(fcinfo, 0);

	LWLockAcquire(stats_state->lock, LW_SHARED);
	hash_seq_init(&status, stats_hash);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		FenceStatsEntry copy;

		if (entry->key.dbid != MyDatabaseId)
			continue;
		SpinLockAcquire(&entry->mutex);
		copy = *entry;
		SpinLockRelease(&entry->mutex);
		EmitEntry(rsinfo, &copy);
	}
	LWLockRelease(stats_state->lock);
	return (Datum) 0;
}

/* fence_stats_reset(): forget every counter */
Datum
fence_stats_reset(PG_FUNCTION_ARGS)
{
	HASH_SEQ_STATUS status;
	FenceStatsEntry *entry;

	RequireStatsShmem();
	LWLockAcquire(stats_state->lock, LW_EXCLUSIVE);
	hash_seq_init(&status, stats_hash);
	while ((entry = hash_seq_search(&status)) != NULL)
		hash_search(stats_hash, &entry->key, HASH_REMOVE, NULL);
	stats_state->full_logged = false;
	LWLockRelease(stats_state->lock);
	PG_RETURN_VOID();
}
