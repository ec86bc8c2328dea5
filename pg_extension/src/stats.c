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
 * Room: relations and resources have separate shares of the table
 * (pg_fence.max_tracked relations, pg_fence.max_tracked_resources
 * resources, all databases together), so resources, which anyone with the
 * documented fence_resources grants can name, never take a table's place.
 * When a kind's share is full, a new entry of that kind evicts one of that
 * kind that never rejected anything (no stale token, no refused proof: the
 * first found); when there is none, the decision is not counted.  Either
 * way fence_stats_dropped() counts it: entries evicted, and the decisions
 * no row shows any more (those of evicted entries, and those not counted),
 * so a stale rejection is never lost without a number saying so.  One LOG
 * line per kind says when a decision was first dropped since the reset.
 *
 * Locking: one LWLock guards the hash table and the shares (shared to find
 * an entry and update it, exclusive to add or remove entries); each entry
 * has a spinlock for its counters, and the dropped counters have one.
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
PG_FUNCTION_INFO_V1(fence_stats_dropped);

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

/* The two kinds of entries, each with its share of the table */
typedef enum StatsKind
{
	STATS_KIND_RELATION,
	STATS_KIND_RESOURCE
} StatsKind;

#define STATS_KINDS					2

/* Columns of fence_stats_dropped() */
#define FENCE_STATS_DROPPED_COLUMNS	5

/* One kind's share: its entries, and what it could not keep */
typedef struct FenceStatsShare
{
	int			entries;		/* tracked entries of this kind (LWLock) */
	bool		no_quiet;		/* a search found no entry to evict (LWLock) */
	bool		drop_logged;	/* first drop logged since reset (LWLock) */
	/* protected by FenceStatsState.mutex: */
	int64		evicted;		/* entries evicted to make room */
	int64		accepted;		/* accepted writes no row shows */
	int64		rejected_stale; /* stale rejections not counted */
	int64		rejected_proof; /* refused proofs not counted */
} FenceStatsShare;

/* Shared header */
typedef struct FenceStatsState
{
	LWLock	   *lock;
	slock_t		mutex;			/* protects the shares' dropped counters */
	FenceStatsShare shares[STATS_KINDS];
} FenceStatsState;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;
static FenceStatsState *stats_state = NULL;
static HTAB *stats_hash = NULL;

/* Entries of the whole table: both shares */
static long
StatsCapacity(void)
{
	return (long) fence_max_tracked + (long) fence_max_tracked_resources;
}

/* The most entries of kind the table keeps */
static int
ShareLimit(StatsKind kind)
{
	return kind == STATS_KIND_RELATION ? fence_max_tracked : fence_max_tracked_resources;
}

/* Bytes of shared memory the counters need */
static Size
StatsShmemSize(void)
{
	return add_size(MAXALIGN(sizeof(FenceStatsState)),
					hash_estimate_size(StatsCapacity(), sizeof(FenceStatsEntry)));
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
		SpinLockInit(&stats_state->mutex);
		memset(stats_state->shares, 0, sizeof(stats_state->shares));
	}
	info.keysize = sizeof(FenceStatsKey);
	info.entrysize = sizeof(FenceStatsEntry);
	stats_hash = ShmemInitHash(FENCE_STATS_HASH_NAME, StatsCapacity(),
							   StatsCapacity(), &info, HASH_ELEM | HASH_BLOBS);
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

/* The kind of an entry */
static StatsKind
EntryKind(const FenceStatsEntry *entry)
{
	return OidIsValid(entry->key.relid) ? STATS_KIND_RELATION : STATS_KIND_RESOURCE;
}

/*
 * Evict one entry of kind that never rejected anything (exclusive lock
 * held, so no counter moves); false when there is none.  Its accepted
 * writes move to the share's dropped counters.
 */
static bool
EvictQuietEntry(StatsKind kind)
{
	FenceStatsShare *share = &stats_state->shares[kind];
	HASH_SEQ_STATUS status;
	FenceStatsEntry *entry;

	if (share->no_quiet)
		return false;
	hash_seq_init(&status, stats_hash);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		int64		accepted = entry->accepted;

		if (EntryKind(entry) != kind || entry->rejected_stale != 0 ||
			entry->rejected_proof != 0)
			continue;
		hash_seq_term(&status);
		hash_search(stats_hash, &entry->key, HASH_REMOVE, NULL);
		share->entries--;
		SpinLockAcquire(&stats_state->mutex);
		share->evicted++;
		share->accepted += accepted;
		SpinLockRelease(&stats_state->mutex);
		return true;
	}
	/* entries never become quiet again: none until an entry is added or a reset */
	share->no_quiet = true;
	return false;
}

/*
 * Add an entry of kind (exclusive lock held), evicting a quiet one of its
 * kind when its share is full; NULL when there is no room
 */
static FenceStatsEntry *
CreateEntry(const FenceStatsKey *key, const char *resource, StatsKind kind)
{
	FenceStatsShare *share = &stats_state->shares[kind];
	FenceStatsEntry *entry;
	bool		found;

	entry = hash_search(stats_hash, key, HASH_FIND, NULL);
	if (entry != NULL)
		return entry;
	if (share->entries >= ShareLimit(kind) && !EvictQuietEntry(kind))
		return NULL;
	entry = hash_search(stats_hash, key, HASH_ENTER_NULL, &found);
	if (entry == NULL || found)
		return entry;
	share->entries++;
	share->no_quiet = false;
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

/*
 * Count a decision no entry could take (lock held, shared or exclusive);
 * the first of each kind since the reset is logged (only under the
 * exclusive lock, which every full share leads to)
 */
static void
CountDropped(StatsKind kind, StatsDecision decision, bool exclusive)
{
	FenceStatsShare *share = &stats_state->shares[kind];

	SpinLockAcquire(&stats_state->mutex);
	switch (decision)
	{
		case STATS_ACCEPTED:
			share->accepted++;
			break;
		case STATS_REJECTED_STALE:
			share->rejected_stale++;
			break;
		case STATS_REJECTED_PROOF:
			share->rejected_proof++;
			break;
	}
	SpinLockRelease(&stats_state->mutex);
	if (!exclusive || share->drop_logged)
		return;
	share->drop_logged = true;
	ereport(LOG,
			(errmsg("pg_fence: fence_stats has no room for another %s "
					"(pg_fence.%s = %d, every one has rejected something); "
					"decisions are counted in fence_stats_dropped() only",
					kind == STATS_KIND_RELATION ? "relation" : "resource",
					kind == STATS_KIND_RELATION ? "max_tracked" : "max_tracked_resources",
					ShareLimit(kind)),
			 errhint("Run fence_stats_reset() or raise pg_fence.%s.",
					 kind == STATS_KIND_RELATION ? "max_tracked" : "max_tracked_resources")));
}

/* Count one decision for a relation or resource; no-op without preload */
static void
CountDecision(Oid relid, const char *resource, int64 token, StatsDecision decision)
{
	FenceStatsKey key;
	FenceStatsEntry *entry;
	TimestampTz now = 0;
	StatsKind	kind = OidIsValid(relid) ? STATS_KIND_RELATION : STATS_KIND_RESOURCE;
	bool		exclusive = false;

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
		exclusive = true;
		entry = CreateEntry(&key, resource, kind);
	}
	/* a 64-bit hash collision between two resource names: do not mix them */
	if (entry != NULL && resource != NULL && strcmp(entry->resource, resource) != 0)
		entry = NULL;
	if (entry != NULL)
		CountInEntry(entry, token, decision, now);
	else
		CountDropped(kind, decision, exclusive);
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
 * Record a stale token (fence_stats, fence_rejections) and write the LOG
 * line; the caller then decides.  lock_key: a row's lock key, NULL when
 * unknown (a resource's is its name).  A pair with a sequence (sequenced
 * fences) is written "(token, seq)".
 */
void
FenceStatsRejected(Oid relid, const char *resource, const char *lock_key,
				   const FencePair *in, const FencePair *fence, FencePath path)
{
	CountDecision(relid, resource, in->token, STATS_REJECTED_STALE);
	FenceRecordRejection(path, FENCE_REASON_STALE, relid,
						 OidIsValid(relid) ? lock_key : resource, in, fence);
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
	SpinLockAcquire(&stats_state->mutex);
	memset(stats_state->shares, 0, sizeof(stats_state->shares));
	SpinLockRelease(&stats_state->mutex);
	LWLockRelease(stats_state->lock);
	FencePreemptResetCounters();
	PG_RETURN_VOID();
}

/*
 * fence_stats_dropped(): per kind (relation, resource), all databases
 * together: entries evicted to make room, and the decisions no row of
 * fence_stats shows (accepted writes of evicted entries and of entries
 * that found no room; stale rejections and refused proofs that found no
 * room).  Zeros when nothing was dropped since start or reset.
 */
Datum
fence_stats_dropped(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	FenceStatsShare shares[STATS_KINDS];

	RequireStatsShmem();
	InitMaterializedSRF(fcinfo, 0);
	SpinLockAcquire(&stats_state->mutex);
	memcpy(shares, stats_state->shares, sizeof(shares));
	SpinLockRelease(&stats_state->mutex);
	for (int kind = 0; kind < STATS_KINDS; kind++)
	{
		Datum		values[FENCE_STATS_DROPPED_COLUMNS];
		bool		nulls[FENCE_STATS_DROPPED_COLUMNS] = {false};

		values[0] = CStringGetTextDatum(kind == STATS_KIND_RELATION ? "relation" : "resource");
		values[1] = Int64GetDatum(shares[kind].evicted);
		values[2] = Int64GetDatum(shares[kind].accepted);
		values[3] = Int64GetDatum(shares[kind].rejected_stale);
		values[4] = Int64GetDatum(shares[kind].rejected_proof);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	PG_RETURN_VOID();
}
