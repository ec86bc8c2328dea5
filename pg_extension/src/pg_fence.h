/*
 * pg_fence.h
 *	  Shared declarations of the pg_fence extension: fencing tokens checked
 *	  by PostgreSQL itself, atomically with the write they protect.
 *
 * A fencing token is a non-negative bigint handed out by the coordinator
 * with every lease; tokens only grow.  A write carrying a token that is not
 * newer than the fence already stored is a stale write and is refused.
 */
#ifndef PG_FENCE_H
#define PG_FENCE_H

#include "postgres.h"

#include "compat.h"
#include "fmgr.h"
#include "executor/spi.h"
#include "utils/relcache.h"

/* SQLSTATE of every stale rejection (class 55: object not in prerequisite state) */
#define ERRCODE_FENCE_STALE			MAKE_SQLSTATE('5','5','F','0','1')

/* SQLSTATE of every refused token proof (missing, malformed, untrusted, ...) */
#define ERRCODE_FENCE_PROOF			MAKE_SQLSTATE('5','5','F','0','2')

/* Name of the guard trigger; sorts after ordinary names so it fires last */
#define FENCE_TRIGGER_NAME			"zzz_fence_guard"

/* Default name of the fence column */
#define FENCE_DEFAULT_COLUMN		"fence"

/* Default name of the sequence column of a sequenced table */
#define FENCE_DEFAULT_SEQ_COLUMN	"fence_seq"

/* Resource names are 1..FENCE_RESOURCE_MAXLEN bytes, like coordinator keys */
#define FENCE_RESOURCE_MAXLEN		512

/* Which tokens a fence admits besides strictly newer ones */
typedef enum FenceMode
{
	FENCE_MODE_STRICT,			/* stored fence < token */
	FENCE_MODE_SAME_GENERATION, /* stored fence <= token */
	FENCE_MODE_SEQUENCED		/* (fence, seq) < (token, seq), lexicographic */
} FenceMode;

/*
 * A write's place in the order of a sequenced fence: the token, and the
 * holder's own sequence number under that token.  has_seq is false for a
 * write (or a stored resource fence) without a sequence.
 */
typedef struct FencePair
{
	int64		token;
	bool		has_seq;
	int64		seq;
} FencePair;

/*
 * Where a fence decision was taken; named in the LOG line and in
 * fence_rejections.  FENCE_PATH_GUARD is 0: the default of a zeroed target.
 */
typedef enum FencePath
{
	FENCE_PATH_GUARD,
	FENCE_PATH_FENCED_UPDATE,
	FENCE_PATH_ADMIT,
	FENCE_PATH_ADVANCE,
	FENCE_PATH_ENQUEUE
} FencePath;

#define FENCE_PATHS					5

/* Why a write was refused (fence_rejections.reason) */
typedef enum FenceReason
{
	FENCE_REASON_STALE,			/* token not newer than the fence (55F01) */
	FENCE_REASON_IN_FLIGHT,		/* a newer token's transaction is open (55F01) */
	FENCE_REASON_PREEMPTED,		/* a newer token preempted it: commit refused (55F01) */
	FENCE_REASON_PROOF			/* token proof or lock key refused (55F02) */
} FenceReason;

#define FENCE_REASONS				4

/* Who made a refused write, as fence_rejections shows it */
typedef struct FenceClient
{
	int			pid;
	Oid			roleid;			/* the current user of the write */
	Oid			dbid;
	uint8		addr_family;	/* AF_INET, AF_INET6, or 0: no address */
	uint8		addr[16];		/* network byte order */
	char		appname[NAMEDATALEN];	/* as pg_stat_activity keeps it */
} FenceClient;

/* pg_fence.c: settings and helpers shared by every feature */
struct Trigger;
extern bool fence_log_rejections;
extern int	fence_max_tracked;
extern int	fence_max_tracked_resources;

extern bool FenceSessionToken(int64 *token);
extern bool FenceSessionSeq(int64 *seq);
extern void FenceCheckProofOrigin(void);
extern void FenceCheckToken(int64 token, const char *argname);
extern void FenceCheckSeq(int64 seq, const char *argname);
extern FenceMode FenceParseMode(const char *mode);
extern const char *FenceModeName(FenceMode mode);
extern bool FenceAdmits(FenceMode mode, int64 fence, int64 token);
extern bool FencePairAfter(const FencePair *incoming, const FencePair *stored);
extern char *FencePairString(const FencePair *pair);
extern const struct Trigger *FenceFindGuard(Relation rel);
extern const char *FenceGuardTemplateArg(const struct Trigger *guard);
extern const char *FencePathName(FencePath path);
extern const char *FencePathShortName(FencePath path);
extern char *FenceQualifiedRelName(Relation rel);
extern void FenceCheckNotNull(FunctionCallInfo fcinfo, int argno,
							  const char *argname);
extern SPIPlanPtr FencePrepareKeptPlan(const char *sql, int nargs,
									   Oid *argtypes);
extern bool FenceParseUint64(const char *text, size_t len, uint64 *value);
/* the checks of a raise (fence_raise in raise.c, fence_raise_resources in resources.c) */
extern void FenceCheckOwner(Oid relid);
extern void FenceCheckRowSecurity(Oid relid);

/* protect.c: validation shared with fenced_update */
extern void FenceCheckRelkind(Relation rel);
extern AttrNumber FenceValidateColumn(Relation rel, const char *colname);
extern AttrNumber FenceValidateSeqColumn(Relation rel, const char *colname,
										 AttrNumber fence_attnum);

/* raise.c: re-fencing after a failover (fence_raise, fence_raise_resources) */
struct TriggerData;
extern bool FenceRaiseAdmits(Relation rel, struct TriggerData *trigdata,
							 AttrNumber attnum, int64 token);

/* guard.c: abort callbacks; lets fenced_update avoid counting one write twice */
extern void FenceGuardInit(void);
extern Oid	FenceGuardSuppressAcceptStats(Oid relid);

/* resources.c: lets fence_resources_guard (resources_guard.c) admit pg_fence's own writes */
extern bool FenceResourcesOwnWrite(void);
extern void FenceAdmitResource(FunctionCallInfo fcinfo, int proof_argno);

/* outbox.c: defines pg_fence.max_outbox_payload */
extern void FenceOutboxInit(void);

/* preempt.c: stale in-flight transactions ended (pg_fence.preempt) */
extern bool fence_preempt;
extern int	fence_max_inflight;
extern void FencePreemptInit(bool preloading);
extern void FencePreempt(const char *target, int64 token, bool register_it,
						 Oid relid, FencePath path);
extern void FencePreemptResetCounters(void);

/* stats.c: shared-memory counters and the rejection LOG line */
extern void FenceStatsInit(void);
extern void FenceStatsAccepted(Oid relid, const char *resource, int64 token);
extern void FenceStatsRejected(Oid relid, const char *resource, const char *lock_key,
							   const FencePair *in, const FencePair *fence, FencePath path);
extern void FenceStatsRejectedProof(Oid relid, const char *resource);

/* rejections.c: the ring of recent rejections and the counts by reason */
extern int	fence_rejection_log_size;
extern void FenceRejectionsInit(void);
extern void FenceCurrentClient(FenceClient *client);
extern void FenceRecordRejection(FencePath path, FenceReason reason, Oid relid,
								 const char *key, const FencePair *in,
								 const FencePair *fence);
extern void FenceRecordRejectionOf(const FenceClient *client, FencePath path,
								   FenceReason reason, Oid relid, const char *key,
								   const FencePair *in, const FencePair *fence);

#endif							/* PG_FENCE_H */
