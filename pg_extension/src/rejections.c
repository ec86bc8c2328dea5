/*
 * rejections.c
 *	  fence_rejections: a fixed-size ring in shared memory of the most recent
 *	  writes pg_fence refused, and fence_rejection_counts: how many it
 *	  refused, by path and reason, since server start.
 *
 * Every refusal is recorded where it is decided, just before its ERROR is
 * raised (or its 'stale' / false result returned): a stale token on every
 * path (55F01, reason stale), an admission refused because another open
 * transaction admitted a newer token for the target (55F01, in_flight), a
 * transaction a newer token preempted (55F01, preempted: recorded when the
 * newer admission marks it, since from then on it cannot commit, whether
 * it then reaches its refused COMMIT or is cancelled or terminated first),
 * and a refused token proof or lock key (55F02, proof).
 *
 * The ring holds pg_fence.rejection_log_size entries (all databases
 * together; 0 = no ring); a new entry overwrites the oldest.  An entry
 * keeps what identifies the write: time, backend pid, role, the first
 * NAMEDATALEN - 1 bytes of application_name (as pg_stat_activity keeps
 * it), client address, database, relation or resource, the lock key
 * when known (a resource's name; a row's key under its table's lock key
 * template), token and sequence number, the fence that refused it, path,
 * reason.  Names are cut at a character boundary of the database encoding
 * (a resource or lock key is at most FENCE_RESOURCE_MAXLEN bytes, so only
 * application_name is ever cut).  Roles and databases are kept as OIDs and
 * named when read.  A preempted transaction is recorded once, by the
 * backend that marks it (preempt.c), with the client it had when it
 * registered its admission; its refused COMMIT adds no second entry.
 *
 * Recording costs one clock read, the string copies into a stack entry,
 * and one exclusive LWLock for the copy into the slot; it allocates
 * nothing and raises nothing, so a refusal is never turned into another
 * error.  The counters are atomics, kept whenever pg_fence is preloaded
 * (also with the ring off), never reset: monotonic, for Prometheus.
 *
 * Reading shows the current database's entries, oldest first (other
 * databases' relation OIDs and resource names stay private, as in
 * fence_stats).  application_name and client_addr are shown only to a
 * reader with the privileges of the writer's role or of pg_read_all_stats
 * (pg_stat_activity shows application_name to everyone; here it names the
 * writer of a refused write, so it is gated with client_addr).  A row's
 * lock key is built from the row's columns, so it is shown only to a
 * reader with SELECT on the table, or who may see the writer's client;
 * resource names are shown to every reader, as in fence_resources.
 * Without shared_preload_libraries there is neither ring nor counters, and
 * reading either raises 55000 saying what to configure.
 */
#include "postgres.h"

#include <sys/socket.h>
#include <netinet/in.h>

#include "catalog/pg_authid_d.h"
#include "commands/dbcommands.h"
#include "fmgr.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/acl.h"
#include "utils/backend_status.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inet.h"
#include "utils/timestamp.h"

#include "pg_fence.h"

PG_FUNCTION_INFO_V1(fence_rejections);
PG_FUNCTION_INFO_V1(fence_rejections_reset);
PG_FUNCTION_INFO_V1(fence_rejection_counts);

#define REJECTIONS_NAME				"pg_fence rejections"

/* Columns of fence_rejections() and fence_rejection_counts() */
#define REJECTIONS_COLUMNS			17
#define REJECTION_COUNTS_COLUMNS	4

/* Marks an unknown token or sequence number (they are never negative) */
#define REJECTION_NONE				(-1)

/* One refused write */
typedef struct RejectionEntry
{
	TimestampTz at;
	FenceClient client;			/* pid, role, database, application_name, address */
	Oid			relid;			/* InvalidOid for a resource */
	int64		token;			/* REJECTION_NONE: unknown */
	int64		seq;			/* REJECTION_NONE: none */
	int64		fence;			/* REJECTION_NONE: none */
	int64		fence_seq;		/* REJECTION_NONE: none */
	uint8		path;			/* FencePath */
	uint8		reason;			/* FenceReason */
	bool		has_key;		/* key holds the resource or lock key */
	char		key[FENCE_RESOURCE_MAXLEN + 1];
} RejectionEntry;

/* Shared header, then the ring's entries */
typedef struct RejectionShared
{
	LWLock	   *lock;			/* guards written and the entries */
	uint64		written;		/* entries written since start or reset */
	pg_atomic_uint64 counts[FENCE_PATHS][FENCE_REASONS];
} RejectionShared;

int			fence_rejection_log_size = 1024;

static RejectionShared *shared = NULL;
static RejectionEntry *ring = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* Bytes of shared memory: the header and the ring */
static Size
RejectionsShmemSize(void)
{
	return add_size(MAXALIGN(sizeof(RejectionShared)),
					mul_size(sizeof(RejectionEntry), fence_rejection_log_size));
}

/* shmem_request_hook: reserve the ring and its LWLock */
static void
RejectionsShmemRequest(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(RejectionsShmemSize());
	RequestNamedLWLockTranche(REJECTIONS_NAME, 1);
}

/* shmem_startup_hook: create or attach to the ring */
static void
RejectionsShmemStartup(void)
{
	bool		found;
	char	   *base;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	base = ShmemInitStruct(REJECTIONS_NAME, RejectionsShmemSize(), &found);
	shared = (RejectionShared *) base;
	ring = (RejectionEntry *) (base + MAXALIGN(sizeof(RejectionShared)));
	if (!found)
	{
		shared->lock = &(GetNamedLWLockTranche(REJECTIONS_NAME))->lock;
		shared->written = 0;
		for (int p = 0; p < FENCE_PATHS; p++)
			for (int r = 0; r < FENCE_REASONS; r++)
				pg_atomic_init_u64(&shared->counts[p][r], 0);
	}
	LWLockRelease(AddinShmemInitLock);
}

/* Install the shared-memory hooks; called from _PG_init while preloading */
void
FenceRejectionsInit(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = RejectionsShmemRequest;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = RejectionsShmemStartup;
}

/* Copy src into dst (size bytes with the NUL), cut at a character boundary */
static void
CopyBounded(char *dst, size_t size, const char *src)
{
	size_t		len = strlen(src);

	if (len >= size)
		len = pg_mbcliplen(src, (int) len, (int) size - 1);
	memcpy(dst, src, len);
	dst[len] = '\0';
}

/* The client's IP address as pg_stat_activity has it, if any (not a Unix socket) */
static void
CopyClientAddr(FenceClient *client)
{
	const struct sockaddr_storage *addr;

	client->addr_family = 0;
	if (MyBEEntry == NULL)
		return;
	addr = &MyBEEntry->st_clientaddr.addr;
	if (addr->ss_family == AF_INET)
	{
		client->addr_family = AF_INET;
		memcpy(client->addr, &((const struct sockaddr_in *) addr)->sin_addr, 4);
	}
	else if (addr->ss_family == AF_INET6)
	{
		client->addr_family = AF_INET6;
		memcpy(client->addr, &((const struct sockaddr_in6 *) addr)->sin6_addr, 16);
	}
}

/*
 * Who this backend writes as, for a rejection's record: pid, current user,
 * database, application_name, client address.  Allocates nothing, raises
 * nothing.
 */
void
FenceCurrentClient(FenceClient *client)
{
	client->pid = MyProcPid;
	client->roleid = GetUserId();
	client->dbid = MyDatabaseId;
	CopyBounded(client->appname, sizeof(client->appname),
				application_name != NULL ? application_name : "");
	CopyClientAddr(client);
}

/*
 * Record a refused write of client (and count it).  key: the resource's
 * name when relid is InvalidOid, else the row's lock key or NULL when
 * unknown; in: the write's token and sequence number, NULL when unknown;
 * fence: what refused it, NULL for a refused proof.  Allocates nothing,
 * raises nothing, so it may be called with another LWLock held
 * (preempt.c records the transactions it marks).
 */
void
FenceRecordRejectionOf(const FenceClient *client, FencePath path, FenceReason reason,
					   Oid relid, const char *key, const FencePair *in,
					   const FencePair *fence)
{
	RejectionEntry entry;

	Assert(path >= 0 && path < FENCE_PATHS);
	Assert(reason >= 0 && reason < FENCE_REASONS);
	if (shared == NULL)
		return;
	pg_atomic_fetch_add_u64(&shared->counts[path][reason], 1);
	if (fence_rejection_log_size == 0)
		return;

	entry.at = GetCurrentTimestamp();
	entry.client = *client;
	entry.relid = relid;
	entry.token = in != NULL ? in->token : REJECTION_NONE;
	entry.seq = in != NULL && in->has_seq ? in->seq : REJECTION_NONE;
	entry.fence = fence != NULL ? fence->token : REJECTION_NONE;
	entry.fence_seq = fence != NULL && fence->has_seq ? fence->seq : REJECTION_NONE;
	entry.path = (uint8) path;
	entry.reason = (uint8) reason;
	entry.has_key = key != NULL;
	CopyBounded(entry.key, sizeof(entry.key), key != NULL ? key : "");

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	ring[shared->written % (uint64) fence_rejection_log_size] = entry;
	shared->written++;
	LWLockRelease(shared->lock);
}

/* FenceRecordRejectionOf for this backend's own write */
void
FenceRecordRejection(FencePath path, FenceReason reason, Oid relid, const char *key,
					 const FencePair *in, const FencePair *fence)
{
	FenceClient client;

	if (shared == NULL)
		return;
	FenceCurrentClient(&client);
	FenceRecordRejectionOf(&client, path, reason, relid, key, in, fence);
}

/* Raise 55000 with a hint when shared memory was not set up */
static void
RequireRejectionsShmem(const char *what)
{
	if (shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s requires pg_fence to be loaded via shared_preload_libraries",
						what),
				 errdetail("Fencing works without it; only the record of rejections is "
						   "unavailable."),
				 errhint("Add pg_fence to shared_preload_libraries in postgresql.conf "
						 "and restart the server.")));
}

/* fence_rejections.reason */
static const char *
ReasonName(FenceReason reason)
{
	switch (reason)
	{
		case FENCE_REASON_STALE:
			return "stale";
		case FENCE_REASON_IN_FLIGHT:
			return "in_flight";
		case FENCE_REASON_PREEMPTED:
			return "preempted";
		case FENCE_REASON_PROOF:
			return "proof";
	}
	return "unknown";
}

/* The SQLSTATE a refusal of reason raises */
static const char *
ReasonSqlstate(FenceReason reason)
{
	return reason == FENCE_REASON_PROOF ? "55F02" : "55F01";
}

/* A bigint column, NULL for REJECTION_NONE */
static void
SetInt64Column(Datum *values, bool *nulls, int column, int64 value)
{
	nulls[column] = (value == REJECTION_NONE);
	values[column] = Int64GetDatum(value);
}

/* A name column, NULL for a NULL string */
static void
SetNameColumn(Datum *values, bool *nulls, int column, const char *value)
{
	NameData   *name;

	nulls[column] = (value == NULL);
	if (value == NULL)
		return;
	name = (NameData *) palloc0(NAMEDATALEN);
	namestrcpy(name, value);
	values[column] = NameGetDatum(name);
}

/* An inet Datum of an entry's client address */
static Datum
ClientAddrDatum(const RejectionEntry *entry)
{
	inet	   *addr = (inet *) palloc0(sizeof(inet));
	bool		v4 = entry->client.addr_family == AF_INET;

	ip_family(addr) = v4 ? PGSQL_AF_INET : PGSQL_AF_INET6;
	ip_bits(addr) = v4 ? 32 : 128;
	memcpy(ip_addr(addr), entry->client.addr, v4 ? 4 : 16);
	SET_INET_VARSIZE(addr);
	return InetPGetDatum(addr);
}

/*
 * May the current user see the lock key of a row of relid: with SELECT on
 * the table (the key is built from the row's columns), or when it sees the
 * writer's client (see_client).  A dropped table's keys stay hidden.
 */
static bool
SeesRowKey(Oid relid, bool see_client)
{
	bool		missing = false;

	return see_client ||
		(pg_class_aclcheck_ext(relid, GetUserId(), ACL_SELECT, &missing) == ACLCHECK_OK &&
		 !missing);
}

/*
 * One output row of fence_rejections(); id: the entry's number since start
 * or reset; see_client: the reader may see the writer's application_name,
 * client_addr, and row lock keys of any table
 */
static void
EmitRejection(ReturnSetInfo *rsinfo, const RejectionEntry *entry, uint64 id,
			  bool see_client)
{
	Datum		values[REJECTIONS_COLUMNS];
	bool		nulls[REJECTIONS_COLUMNS] = {false};
	bool		is_relation = OidIsValid(entry->relid);

	values[0] = TimestampTzGetDatum(entry->at);
	values[1] = Int32GetDatum(entry->client.pid);
	SetNameColumn(values, nulls, 2, GetUserNameFromId(entry->client.roleid, true));
	values[3] = CStringGetTextDatum(entry->client.appname);
	nulls[3] = !see_client;
	nulls[4] = !see_client || entry->client.addr_family == 0;
	if (!nulls[4])
		values[4] = ClientAddrDatum(entry);
	SetNameColumn(values, nulls, 5, get_database_name(entry->client.dbid));
	values[6] = ObjectIdGetDatum(entry->relid);
	nulls[6] = !is_relation;
	values[7] = CStringGetTextDatum(entry->key);
	nulls[7] = is_relation || !entry->has_key;
	values[8] = CStringGetTextDatum(entry->key);
	nulls[8] = !entry->has_key ||
		(is_relation && !SeesRowKey(entry->relid, see_client));
	SetInt64Column(values, nulls, 9, entry->token);
	SetInt64Column(values, nulls, 10, entry->fence);
	values[11] = CStringGetTextDatum(FencePathShortName((FencePath) entry->path));
	values[12] = CStringGetTextDatum(ReasonName((FenceReason) entry->reason));
	values[13] = CStringGetTextDatum(ReasonSqlstate((FenceReason) entry->reason));
	SetInt64Column(values, nulls, 14, entry->seq);
	SetInt64Column(values, nulls, 15, entry->fence_seq);
	values[16] = Int64GetDatum((int64) id);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/*
 * May the current user see application_name and client_addr of roleid's
 * writes: with the privileges of that role, or of pg_read_all_stats
 */
static bool
SeesClient(Oid roleid)
{
	return has_privs_of_role(GetUserId(), roleid) ||
		has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS);
}

/*
 * A copy of the ring, oldest first (palloc'd; the lock is held only for
 * the copy); *count entries, the first of them number *first
 */
static RejectionEntry *
CopyRing(int *count, uint64 *first)
{
	uint64		size = (uint64) fence_rejection_log_size;
	RejectionEntry *copy;
	uint64		written;
	uint64		n;

	copy = palloc(mul_size(sizeof(RejectionEntry), Max(fence_rejection_log_size, 1)));
	LWLockAcquire(shared->lock, LW_SHARED);
	written = shared->written;
	n = Min(written, size);
	for (uint64 i = 0; i < n; i++)
		copy[i] = ring[(written - n + i) % size];
	LWLockRelease(shared->lock);
	*count = (int) n;
	*first = written - n + 1;
	return copy;
}

/*
 * fence_rejections(): the ring's entries of the current database, oldest
 * first (see the file comment); no rows when pg_fence.rejection_log_size = 0
 */
Datum
fence_rejections(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	RejectionEntry *copy;
	uint64		first;
	int			count;
	Oid			last_role = InvalidOid;
	bool		last_sees = false;

	RequireRejectionsShmem("fence_rejections");
	InitMaterializedSRF(fcinfo, 0);
	if (fence_rejection_log_size == 0)
		return (Datum) 0;
	copy = CopyRing(&count, &first);
	for (int i = 0; i < count; i++)
	{
		if (copy[i].client.dbid != MyDatabaseId)
			continue;
		if (copy[i].client.roleid != last_role)
		{
			last_role = copy[i].client.roleid;
			last_sees = SeesClient(last_role);
		}
		EmitRejection(rsinfo, &copy[i], first + (uint64) i, last_sees);
	}
	return (Datum) 0;
}

/* fence_rejections_reset(): empty the ring (all databases); entries cleared */
Datum
fence_rejections_reset(PG_FUNCTION_ARGS)
{
	uint64		cleared;

	RequireRejectionsShmem("fence_rejections_reset");
	if (fence_rejection_log_size == 0)
		PG_RETURN_INT64(0);
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	cleared = Min(shared->written, (uint64) fence_rejection_log_size);
	shared->written = 0;
	LWLockRelease(shared->lock);
	PG_RETURN_INT64((int64) cleared);
}

/*
 * fence_rejection_counts() -> (path, reason, sqlstate, rejections): every
 * path and reason, all databases together, since server start
 */
Datum
fence_rejection_counts(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	RequireRejectionsShmem("fence_rejection_counts");
	InitMaterializedSRF(fcinfo, 0);
	for (int p = 0; p < FENCE_PATHS; p++)
		for (int r = 0; r < FENCE_REASONS; r++)
		{
			Datum		values[REJECTION_COUNTS_COLUMNS];
			bool		nulls[REJECTION_COUNTS_COLUMNS] = {false};

			values[0] = CStringGetTextDatum(FencePathShortName((FencePath) p));
			values[1] = CStringGetTextDatum(ReasonName((FenceReason) r));
			values[2] = CStringGetTextDatum(ReasonSqlstate((FenceReason) r));
			values[3] = Int64GetDatum((int64) pg_atomic_read_u64(&shared->counts[p][r]));
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	return (Datum) 0;
}
