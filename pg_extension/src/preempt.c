/*
 * preempt.c
 *	  Preemption of stale in-flight transactions (pg_fence.preempt): when a
 *	  newer token reaches a fence target, the open transactions that admitted
 *	  an older token for that target are ended, and can no longer commit.
 *
 * A target is named by its coordinator lock key: a per-resource fence's
 * resource name (fence_admit, fence_advance), or the lock key a table's
 * lock key template gives a row (fence_guard, fenced_update).  Tables
 * without a template are not targets.
 *
 * The registry: a fixed-size table in shared memory (pg_fence.max_inflight
 * entries, all databases together) of the admissions of open transactions
 * whose session has pg_fence.preempt on: (database, target, token, backend,
 * virtual transaction id).  A transaction's entries are removed when it
 * ends (XACT_EVENT_COMMIT, ABORT, PREPARE).  One transaction has one entry
 * per target, holding the newest token it admitted there.  When the table
 * is full an admission proceeds unregistered (counted in
 * fence_preempt_stats().unregistered): that transaction cannot be preempted.
 *
 * FencePreempt(target, token, register): with pg_fence.preempt on, every
 * entry of target (this database) with a token older than token, of
 * another backend whose transaction is still the one that registered it,
 * is marked preempted under the registry's LWLock, and its backend is
 * signalled as pg_cancel_backend / pg_terminate_backend would: SIGTERM when
 * it waits for its client (idle in transaction, or blocked writing a result
 * to a client that does not read: a cancel is ignored there), SIGINT
 * otherwise.  Never an entry of the same or a newer token, never one
 * of another target.  Then, with register, this transaction's admission is
 * added.  When another backend's open transaction registered a newer token
 * for target, the caller is refused instead (55F01, counted in
 * refused_in_flight), before it preempts or registers anything: two rows
 * under one lock key have fences of their own, so the row's fence alone
 * would admit an older token after a newer one was admitted on the other
 * row, and the older transaction could commit after the newer one.  Who may be signalled follows pg_signal_backend's rules: a
 * superuser's backend only by a superuser; otherwise the current user must
 * have the privileges of the victim's role, or of pg_signal_backend.  When
 * not allowed: no signal, a LOG line, the denied counter; the mark stays.
 *
 * The mark: at XACT_EVENT_PRE_COMMIT a transaction with a preempted entry
 * raises 55F01 and aborts, whether or not a signal reached it.  A
 * transaction past that check is "committing": a newer admission does not
 * mark it but waits for it to end (VirtualXactLock, the few steps between
 * PRE_COMMIT and the end of the commit), so that no older generation
 * commits after a newer one was admitted.  A signalled transaction is
 * waited for too, at most PREEMPT_WAIT_MS, and terminated when it turned
 * out to be idle in transaction after all (it was between statements).
 *
 * Both refusals are recorded in fence_rejections (rejections.c) with the
 * write's table or resource and path: the admission refused in flight by
 * the refused backend, and a preempted transaction by the backend that
 * marks it, once, at the mark (a marked transaction can no longer commit,
 * so it is recorded whether it then reaches its refused COMMIT or is
 * cancelled or terminated before).  A preempted row names what the
 * victim's entry holds: its newest token for the target, the table, path
 * and client (pid, current user, application_name, address) of the write
 * that admitted that token.
 *
 * Without shared_preload_libraries = pg_fence there is no registry, and
 * pg_fence.preempt does nothing.
 */
#include "postgres.h"

#include <signal.h>

#include "access/xact.h"
#include "catalog/pg_authid_d.h"
#include "common/hashfn.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lock.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/wait_event.h"

#include "pg_fence.h"

PG_FUNCTION_INFO_V1(fence_preempt_stats);

#define PREEMPT_NAME				"pg_fence preempt"

/* How long a preemption waits for a signalled transaction to end */
#define PREEMPT_WAIT_MS				200
#define PREEMPT_POLL_MS				2

/* Columns of fence_preempt_stats() */
#define PREEMPT_STATS_COLUMNS		7

#define PREEMPT_NONE				(-1)

typedef enum PreemptState
{
	ENTRY_FREE,
	ENTRY_OPEN,					/* its transaction runs */
	ENTRY_COMMITTING			/* passed XACT_EVENT_PRE_COMMIT unmarked */
} PreemptState;

/* One admission of an open transaction */
typedef struct PreemptEntry
{
	int			next;			/* next entry of the bucket, or of the free list */
	PreemptState state;
	Oid			dbid;
	uint32		hash;			/* of the target name */
	int			procno;			/* the backend's PGPROC number */
	int			pid;
	Oid			roleid;			/* its session role, for the signal rules */
	VirtualTransactionId vxid;	/* the transaction that registered it */
	int64		token;
	Oid			relid;			/* the admitting write's table, or InvalidOid */
	uint8		path;			/* the admitting write's FencePath */
	FenceClient client;			/* the admitting write's client, for its record */
	bool		preempted;		/* marked: may no longer commit */
	int64		by_token;		/* the token that preempted it */
	int			by_pid;
	char		target[FENCE_RESOURCE_MAXLEN + 1];
} PreemptEntry;

/* Shared header, then the buckets, then the entries */
typedef struct PreemptShared
{
	LWLock	   *lock;
	int			free;			/* first free entry */
	int			inflight;		/* entries in use */
	slock_t		mutex;			/* protects the counters */
	int64		preempted;		/* transactions marked (signalled or not) */
	int64		cancelled;
	int64		terminated;
	int64		denied;			/* marked, but not ours to signal */
	int64		unregistered;	/* admissions the full registry could not take */
	int64		refused_in_flight;	/* admissions refused: a newer one is open */
} PreemptShared;

bool		fence_preempt = false;
int			fence_max_inflight = 1024;

static PreemptShared *shared = NULL;
static int *buckets = NULL;
static PreemptEntry *entries = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* This backend's entries in the current transaction */
static int *my_entries = NULL;
static int	my_count = 0;
static int	my_size = 0;

/* A transaction a preemption found, and what happened to it */
typedef struct Victim
{
	int			index;
	VirtualTransactionId vxid;
	int			pid;
	int			procno;
	Oid			roleid;
	int64		token;
	bool		allowed;
	bool		committing;		/* not marked: waited for */
	int			signal;			/* 0, SIGINT or SIGTERM */
} Victim;

static Size
PreemptShmemSize(void)
{
	Size		size = MAXALIGN(sizeof(PreemptShared));

	size = add_size(size, MAXALIGN(mul_size(sizeof(int), fence_max_inflight)));
	return add_size(size, mul_size(sizeof(PreemptEntry), fence_max_inflight));
}

static void
PreemptShmemRequest(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(PreemptShmemSize());
	RequestNamedLWLockTranche(PREEMPT_NAME, 1);
}

static void
PreemptShmemStartup(void)
{
	bool		found;
	char	   *base;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	base = ShmemInitStruct(PREEMPT_NAME, PreemptShmemSize(), &found);
	shared = (PreemptShared *) base;
	buckets = (int *) (base + MAXALIGN(sizeof(PreemptShared)));
	entries = (PreemptEntry *) (base + MAXALIGN(sizeof(PreemptShared)) +
								MAXALIGN(mul_size(sizeof(int), fence_max_inflight)));
	if (!found)
	{
		memset(shared, 0, sizeof(PreemptShared));
		shared->lock = &(GetNamedLWLockTranche(PREEMPT_NAME))->lock;
		SpinLockInit(&shared->mutex);
		for (int i = 0; i < fence_max_inflight; i++)
		{
			buckets[i] = PREEMPT_NONE;
			entries[i].state = ENTRY_FREE;
			entries[i].next = i + 1 < fence_max_inflight ? i + 1 : PREEMPT_NONE;
		}
		shared->free = 0;
	}
	LWLockRelease(AddinShmemInitLock);
}

/* Forget the current transaction's entries: free them (lock held) */
static void
FreeMyEntries(void)
{
	for (int i = 0; i < my_count; i++)
	{
		PreemptEntry *entry = &entries[my_entries[i]];
		int		   *link = &buckets[entry->hash % (uint32) fence_max_inflight];

		while (*link != PREEMPT_NONE && *link != my_entries[i])
			link = &entries[*link].next;
		if (*link == PREEMPT_NONE)
			elog(PANIC, "pg_fence: preemption registry entry %d not in its bucket",
				 my_entries[i]);
		*link = entry->next;
		entry->state = ENTRY_FREE;
		entry->next = shared->free;
		shared->free = my_entries[i];
		shared->inflight--;
	}
	my_count = 0;
}

/* The first of this transaction's entries that was preempted, or NULL (lock held) */
static PreemptEntry *
MyPreemptedEntry(void)
{
	for (int i = 0; i < my_count; i++)
		if (entries[my_entries[i]].preempted)
			return &entries[my_entries[i]];
	return NULL;
}

/*
 * Record in fence_rejections that entry (lock held) was preempted by token:
 * its own token, target, table, path and client.  Raises nothing.
 */
static void
RecordPreempted(const PreemptEntry *entry, int64 token)
{
	FencePair	in = {entry->token, false, 0};
	FencePair	by = {token, false, 0};

	FenceRecordRejectionOf(&entry->client, (FencePath) entry->path, FENCE_REASON_PREEMPTED,
						   entry->relid, entry->target, &in, &by);
}

/*
 * Refuse to commit a preempted transaction; otherwise mark this
 * transaction's entries committing
 */
static void
PreCommit(void)
{
	PreemptEntry *entry;
	PreemptEntry copy;

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	entry = MyPreemptedEntry();
	if (entry == NULL)
	{
		for (int i = 0; i < my_count; i++)
			entries[my_entries[i]].state = ENTRY_COMMITTING;
		LWLockRelease(shared->lock);
		return;
	}
	copy = *entry;
	LWLockRelease(shared->lock);
	/* recorded in fence_rejections when it was marked (RecordPreempted) */
	ereport(ERROR,
			(errcode(ERRCODE_FENCE_STALE),
			 errmsg("transaction with fencing token " INT64_FORMAT " for \"%s\" was "
					"preempted by token " INT64_FORMAT,
					copy.token, copy.target, copy.by_token),
			 errdetail("Backend %d admitted the newer token while this transaction was "
					   "open (pg_fence.preempt); it cannot commit.", copy.by_pid),
			 errhint("Stop working on this target, and acquire the lock again before "
					 "retrying.")));
}

/* Transaction callback: the pre-commit check, and removal at the end */
static void
PreemptXactCallback(XactEvent event, void *arg)
{
	if (my_count == 0 || shared == NULL)
		return;
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PRE_PREPARE:
			PreCommit();
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PREPARE:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PARALLEL_ABORT:
			LWLockAcquire(shared->lock, LW_EXCLUSIVE);
			FreeMyEntries();
			LWLockRelease(shared->lock);
			break;
		default:
			break;
	}
}

/* Install the shared-memory hooks (while preloading) and the callback */
void
FencePreemptInit(bool preloading)
{
	if (preloading)
	{
		prev_shmem_request_hook = shmem_request_hook;
		shmem_request_hook = PreemptShmemRequest;
		prev_shmem_startup_hook = shmem_startup_hook;
		shmem_startup_hook = PreemptShmemStartup;
	}
	RegisterXactCallback(PreemptXactCallback, NULL);
}

/* May the current user signal a backend of roleid?  pg_signal_backend's rules */
static bool
MaySignal(Oid roleid)
{
	if ((!OidIsValid(roleid) || superuser_arg(roleid)) && !superuser())
		return false;
	return has_privs_of_role(GetUserId(), roleid) ||
		has_privs_of_role(GetUserId(), ROLE_PG_SIGNAL_BACKEND);
}

/* Is entry's transaction still the one that registered it? (lock held) */
static bool
StillOpen(const PreemptEntry *entry, const VirtualTransactionId *vxid)
{
	PGPROC	   *proc;
	VirtualTransactionId now;

	if (entry->state == ENTRY_FREE || !VirtualTransactionIdEquals(entry->vxid, *vxid))
		return false;
	proc = GetPGProcByNumber(entry->procno);
	GET_VXID_FROM_PGPROC(now, *proc);
	return proc->pid == entry->pid && VirtualTransactionIdEquals(now, *vxid);
}

/* Does the entry belong to target in this database? */
static bool
IsTarget(const PreemptEntry *entry, uint32 hash, const char *target)
{
	return entry->state != ENTRY_FREE && entry->hash == hash &&
		entry->dbid == MyDatabaseId && strcmp(entry->target, target) == 0;
}

/* Grow the list of this transaction's entries to hold one more */
static void
ReserveMyEntry(void)
{
	if (my_count < my_size)
		return;
	if (my_entries == NULL)
	{
		my_size = 16;
		my_entries = MemoryContextAlloc(TopMemoryContext, my_size * sizeof(int));
		return;
	}
	my_size *= 2;
	my_entries = repalloc(my_entries, my_size * sizeof(int));
}

/* The newest admission of another open transaction newer than the caller's */
typedef struct Newer
{
	int64		token;			/* 0: none */
	int			pid;
} Newer;

/*
 * One pass over target's bucket (lock held, exclusive): collect the older
 * transactions of other backends into victims (at most max); find this
 * transaction's own entry, and the newest open admission of another
 * backend with a newer token than token (newer).  Returns the number of
 * victims.
 */
static int
ScanTarget(uint32 hash, const char *target, int64 token, Victim *victims, int max,
		   PreemptEntry **mine, Newer *newer)
{
	int			n = 0;
	int			procno = FenceMyProcNumber();
	VirtualTransactionId myvxid;

	GET_VXID_FROM_PGPROC(myvxid, *MyProc);
	*mine = NULL;
	newer->token = 0;
	newer->pid = 0;
	for (int i = buckets[hash % (uint32) fence_max_inflight]; i != PREEMPT_NONE;
		 i = entries[i].next)
	{
		PreemptEntry *entry = &entries[i];

		if (!IsTarget(entry, hash, target))
			continue;
		if (entry->procno == procno)
		{
			if (VirtualTransactionIdEquals(entry->vxid, myvxid))
				*mine = entry;
			continue;
		}
		if (entry->token > token)
		{
			if (entry->token > newer->token && StillOpen(entry, &entry->vxid))
			{
				newer->token = entry->token;
				newer->pid = entry->pid;
			}
			continue;
		}
		if (entry->token == token || entry->preempted || n >= max ||
			!StillOpen(entry, &entry->vxid))
			continue;
		victims[n].index = i;
		victims[n].vxid = entry->vxid;
		victims[n].pid = entry->pid;
		victims[n].procno = entry->procno;
		victims[n].roleid = entry->roleid;
		victims[n].token = entry->token;
		victims[n].committing = false;
		victims[n].signal = 0;
		n++;
	}
	return n;
}

/*
 * Add this transaction's admission of target by the write of relid (or
 * InvalidOid) on path (lock held); false when full
 */
static bool
AddEntry(uint32 hash, const char *target, int64 token, Oid relid, FencePath path)
{
	int			i = shared->free;
	PreemptEntry *entry;

	if (i == PREEMPT_NONE)
		return false;
	ReserveMyEntry();
	entry = &entries[i];
	shared->free = entry->next;
	entry->state = ENTRY_OPEN;
	entry->dbid = MyDatabaseId;
	entry->hash = hash;
	entry->procno = FenceMyProcNumber();
	entry->pid = MyProcPid;
	entry->roleid = MyProc->roleId;
	GET_VXID_FROM_PGPROC(entry->vxid, *MyProc);
	entry->token = token;
	entry->relid = relid;
	entry->path = (uint8) path;
	FenceCurrentClient(&entry->client);
	entry->preempted = false;
	entry->by_token = 0;
	entry->by_pid = 0;
	strlcpy(entry->target, target, sizeof(entry->target));
	entry->next = buckets[hash % (uint32) fence_max_inflight];
	buckets[hash % (uint32) fence_max_inflight] = i;
	shared->inflight++;
	my_entries[my_count++] = i;
	return true;
}

/*
 * Does proc wait for its client: reading its next command (idle in
 * transaction) or writing a result it does not read (a paused client)?
 * Such a backend ignores a cancel: it is terminated.
 */
static bool
WaitsForClient(const PGPROC *proc)
{
	uint32		event = proc->wait_event_info;

	return event == WAIT_EVENT_CLIENT_READ || event == WAIT_EVENT_CLIENT_WRITE;
}

/*
 * Mark the victims still open, and signal those allowed (lock held: a
 * transaction cannot finish its end while it is held, so a signal never
 * reaches the backend's next transaction).  A victim found committing is
 * left unmarked, to be waited for.  The first mark of an entry names the
 * preempting token and backend, and records it in fence_rejections.
 */
static void
MarkAndSignal(Victim *victims, int n, int64 token)
{
	for (int v = 0; v < n; v++)
	{
		PreemptEntry *entry = &entries[victims[v].index];
		PGPROC	   *proc;

		/*
		 * The lock was let go since the scan: the transaction may have ended,
		 * been marked by another backend (which signalled and counted it), or
		 * admitted a token at least ours (no longer older): none is ours to
		 * mark, record or signal.
		 */
		if (!StillOpen(entry, &victims[v].vxid) || entry->preempted || entry->token >= token)
		{
			victims[v].pid = 0;
			continue;
		}
		if (entry->state == ENTRY_COMMITTING)
		{
			victims[v].committing = true;
			continue;
		}
		entry->preempted = true;
		entry->by_token = token;
		entry->by_pid = MyProcPid;
		RecordPreempted(entry, token);
		if (!victims[v].allowed)
			continue;
		proc = GetPGProcByNumber(entry->procno);
		victims[v].signal = WaitsForClient(proc) ? SIGTERM : SIGINT;
		if (kill(entry->pid, victims[v].signal) != 0)
			victims[v].signal = 0;
	}
}

/*
 * Wait (at most PREEMPT_WAIT_MS) for a cancelled transaction to end; one
 * that went idle in transaction meanwhile ignores the cancel: terminate it
 */
static void
AwaitCancelled(Victim *victim)
{
	for (int waited = 0; waited < PREEMPT_WAIT_MS; waited += PREEMPT_POLL_MS)
	{
		PreemptEntry *entry = &entries[victim->index];
		bool		done = false;

		LWLockAcquire(shared->lock, LW_EXCLUSIVE);
		if (!StillOpen(entry, &victim->vxid))
			done = true;
		else if (WaitsForClient(GetPGProcByNumber(entry->procno)))
		{
			if (kill(entry->pid, SIGTERM) == 0)
				victim->signal = SIGTERM;
			done = true;
		}
		LWLockRelease(shared->lock);
		if (done)
			return;
		pg_usleep(PREEMPT_POLL_MS * 1000L);
		CHECK_FOR_INTERRUPTS();
	}
}

/* Count and log what happened to the victims */
static void
ReportVictims(const Victim *victims, int n, const char *target, int64 token)
{
	for (int v = 0; v < n; v++)
	{
		const Victim *victim = &victims[v];
		const char *what;

		if (victim->pid == 0 || victim->committing)
			continue;
		SpinLockAcquire(&shared->mutex);
		shared->preempted++;
		if (!victim->allowed)
			shared->denied++;
		else if (victim->signal == SIGTERM)
			shared->terminated++;
		else if (victim->signal == SIGINT)
			shared->cancelled++;
		SpinLockRelease(&shared->mutex);
		if (!victim->allowed)
			what = "not signalled: the current user may not signal its backend "
				"(pg_signal_backend's rules), its commit is refused";
		else if (victim->signal == SIGTERM)
			what = "terminated its session (waiting for its client)";
		else if (victim->signal == SIGINT)
			what = "cancelled its statement";
		else
			what = "its backend could not be signalled, its commit is refused";
		ereport(LOG,
				(errmsg("pg_fence: token " INT64_FORMAT " (backend %d) preempted token "
						INT64_FORMAT " (backend %d) on \"%s\": %s",
						token, MyProcPid, victim->token, victim->pid, target, what),
				 errhidestmt(true), errhidecontext(true)));
	}
}

/*
 * Refuse an admission of token for target by the write of relid (or
 * InvalidOid) on path: another backend's open transaction admitted the
 * newer token newer->token there (counted and recorded)
 */
static void
RefuseInFlight(const char *target, int64 token, const Newer *newer, Oid relid,
			   FencePath path)
{
	FencePair	in = {token, false, 0};
	FencePair	by = {newer->token, false, 0};

	SpinLockAcquire(&shared->mutex);
	shared->refused_in_flight++;
	SpinLockRelease(&shared->mutex);
	FenceRecordRejection(path, FENCE_REASON_IN_FLIGHT, relid, target, &in, &by);
	ereport(ERROR,
			(errcode(ERRCODE_FENCE_STALE),
			 errmsg("stale fencing token " INT64_FORMAT " for \"%s\": a newer token "
					INT64_FORMAT " is in flight for it", token, target, newer->token),
			 errdetail("The open transaction of backend pid %d admitted the newer token "
					   "for this target (pg_fence.preempt); an older one is not admitted "
					   "while that one may still commit.", newer->pid),
			 errhint("Stop working on this target, and acquire the lock again before "
					 "retrying.")));
}

/* The most victims one preemption handles at once; more: another pass */
#define PREEMPT_MAX_VICTIMS			32
#define PREEMPT_MAX_PASSES			64

/*
 * A newer admission by the write of relid (InvalidOid: the resource
 * target) on path: preempt target's older open transactions; with
 * register, record this transaction's admission (see the file comment)
 */
void
FencePreempt(const char *target, int64 token, bool register_it, Oid relid,
			 FencePath path)
{
	uint32		hash;
	Victim		victims[PREEMPT_MAX_VICTIMS];
	PreemptEntry *mine;
	Newer		newer;
	int			n;
	bool		full = false;

	if (!fence_preempt || shared == NULL || !IsTransactionState())
		return;
	hash = hash_bytes((const unsigned char *) target, strlen(target)) ^
		(uint32) MyDatabaseId;
	for (int pass = 0;; pass++)
	{
		/* each pass ends its victims; a flood of new ones is not waited out */
		LWLockAcquire(shared->lock, LW_EXCLUSIVE);
		n = ScanTarget(hash, target, token, victims, PREEMPT_MAX_VICTIMS, &mine, &newer);
		if (newer.token != 0)
		{
			LWLockRelease(shared->lock);
			RefuseInFlight(target, token, &newer, relid, path);
		}
		if (n == 0 || pass == PREEMPT_MAX_PASSES)
		{
			if (register_it && mine != NULL)
			{
				/* the newest token, with its write's table, path and client */
				if (token >= mine->token)
				{
					mine->token = token;
					mine->relid = relid;
					mine->path = (uint8) path;
					FenceCurrentClient(&mine->client);
				}
			}
			else if (register_it)
				full = !AddEntry(hash, target, token, relid, path);
			LWLockRelease(shared->lock);
			break;
		}
		LWLockRelease(shared->lock);

		/* privileges read the catalogs: outside the lock */
		for (int v = 0; v < n; v++)
			victims[v].allowed = MaySignal(victims[v].roleid);
		LWLockAcquire(shared->lock, LW_EXCLUSIVE);
		MarkAndSignal(victims, n, token);
		LWLockRelease(shared->lock);

		for (int v = 0; v < n; v++)
		{
			if (victims[v].committing)
				VirtualXactLock(victims[v].vxid, true);
			else if (victims[v].signal == SIGINT)
				AwaitCancelled(&victims[v]);
		}
		ReportVictims(victims, n, target, token);
	}
	if (full)
	{
		SpinLockAcquire(&shared->mutex);
		shared->unregistered++;
		SpinLockRelease(&shared->mutex);
	}
}

/* Zero the counters (fence_stats_reset) */
void
FencePreemptResetCounters(void)
{
	if (shared == NULL)
		return;
	SpinLockAcquire(&shared->mutex);
	shared->preempted = shared->cancelled = shared->terminated = 0;
	shared->denied = shared->unregistered = shared->refused_in_flight = 0;
	SpinLockRelease(&shared->mutex);
}

/*
 * fence_preempt_stats() -> (preempted, cancelled, terminated, denied,
 * unregistered, inflight, refused_in_flight): all databases together,
 * since start or fence_stats_reset()
 */
Datum
fence_preempt_stats(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[PREEMPT_STATS_COLUMNS];
	bool		nulls[PREEMPT_STATS_COLUMNS] = {false};

	if (shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("fence_preempt_stats requires pg_fence to be loaded via "
						"shared_preload_libraries"),
				 errdetail("Without it there is no registry of in-flight admissions, "
						   "and pg_fence.preempt does nothing."),
				 errhint("Add pg_fence to shared_preload_libraries in postgresql.conf "
						 "and restart the server.")));
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "pg_fence: fence_preempt_stats must return a record");
	LWLockAcquire(shared->lock, LW_SHARED);
	values[5] = Int32GetDatum(shared->inflight);
	LWLockRelease(shared->lock);
	SpinLockAcquire(&shared->mutex);
	values[0] = Int64GetDatum(shared->preempted);
	values[1] = Int64GetDatum(shared->cancelled);
	values[2] = Int64GetDatum(shared->terminated);
	values[3] = Int64GetDatum(shared->denied);
	values[4] = Int64GetDatum(shared->unregistered);
	values[6] = Int64GetDatum(shared->refused_in_flight);
	SpinLockRelease(&shared->mutex);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}
