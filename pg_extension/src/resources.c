/*
 * resources.c
 *	  Per-resource fences for work that is not one row: fence_advance(),
 *	  fence_admit() and fence_current() over the table fence_resources.
 *
 * Both fence_advance and fence_admit run one upsert:
 *	  INSERT ... ON CONFLICT (resource) DO UPDATE SET fence = token
 *	  WHERE fence < token
 * ON CONFLICT DO UPDATE locks the existing row even when its WHERE is false,
 * so after the upsert the caller's transaction holds the resource's row
 * lock until it ends, and the fence cannot change under it.  A concurrent
 * caller blocks on that lock; under READ COMMITTED it then sees the
 * committed fence, under REPEATABLE READ it gets 40001.
 *
 * Outcome by stored fence F and token T:
 *	  F < T or unknown  advanced to T     advance: true   admit: admitted
 *	  F = T             unchanged         advance: true   admit: admitted
 *	  F > T             stale             advance: false  admit: ERROR 55F01
 * fence_advance reports a stale token through its result (and counts and
 * logs it) so a worker can stop cleanly; fence_admit guards a transaction
 * and therefore raises, which aborts that transaction.
 *
 * Sequences (1.3: fence_admit/fence_advance(resource, token, seq[, proof]),
 * C functions fence_admit_seq and fence_advance_seq; the column seq, NULL
 * when the stored fence came without one) order one token's calls:
 *	  stored (F, s0) and (T, s)    advanced iff T > F, or T = F and s > s0
 *	  stored (F, NULL) and (T, s)  advanced iff T >= F: no sequence ranks
 *	                               below every sequence of its token
 *	  stored (F, s0) and T alone   T > F advances to (T, NULL); T = F is
 *	                               refused (55000): a call without a
 *	                               sequence cannot be ordered among
 *	                               sequenced ones; T < F is stale
 * An equal pair is a replay: stale, unlike an equal token alone.  The
 * upsert's WHERE is that rule; the row it returns, or reads when the WHERE
 * refused, tells which case it was.
 *
 * A resource with require_proof (set by fence_require_proof) also needs a
 * token proof for (resource name, token): the proof argument, else
 * pg_fence.proof.  The upsert returns require_proof with the fence, from
 * the row it locked; a refused proof raises 55F02 in both functions, and
 * the abort undoes the upsert.  The proof is checked before the token's
 * order.  Version 1.0 of the SQL functions (two arguments, no
 * require_proof column yet) runs the 1.0 statements.
 *
 * The application role may write fence_resources directly (the functions
 * are SECURITY INVOKER and need INSERT and UPDATE on it), so in 1.1 the
 * row trigger fence_resources_guard (resources_guard.c) keeps it from
 * undoing require_proof, except while one of pg_fence's statements below
 * is running (own_write_depth, FenceResourcesOwnWrite).
 *
 * Preemption (preempt.c): with pg_fence.preempt on, fence_admit and
 * fence_advance first end the open transactions that admitted an older
 * token for the resource (before the upsert, which would wait for their
 * row lock; on a resource requiring proofs only with a proof that
 * verifies), and register their own admission once it is admitted.
 *
 * fence_raise_resources (1.2) re-fences every resource after a database
 * failover, as fence_raise (raise.c) does a table: one UPDATE that sets
 * every fence below the token to the token (and, from 1.3, its seq to
 * NULL), run under own_write_depth so
 * that resources requiring proofs are raised too.  Only the owner of
 * fence_resources (or a superuser) may run it, and not while row level
 * security applies to the caller there (FenceCheckRowSecurity).
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "pg_fence.h"
#include "proof.h"

PG_FUNCTION_INFO_V1(fence_advance);
PG_FUNCTION_INFO_V1(fence_admit);
PG_FUNCTION_INFO_V1(fence_advance_seq);
PG_FUNCTION_INFO_V1(fence_admit_seq);
PG_FUNCTION_INFO_V1(fence_current);
PG_FUNCTION_INFO_V1(fence_current_seq);
PG_FUNCTION_INFO_V1(fence_require_proof);
PG_FUNCTION_INFO_V1(fence_raise_resources);

/* The extension's table of per-resource fences */
#define RESOURCE_TABLE		"fence_resources"

/* Which columns fence_resources has: what the installed version's script made */
typedef enum ResourceColumns
{
	RESOURCE_COLUMNS_1_0,		/* resource, fence, updated_at */
	RESOURCE_COLUMNS_1_1,		/* + require_proof */
	RESOURCE_COLUMNS_1_3		/* + seq */
} ResourceColumns;

/* Prepared statements over fence_resources, kept for the session */
typedef struct ResourcePlans
{
	Oid			nspid;			/* schema the plans were built for */
	ResourceColumns columns;	/* the table they were built for */
	SPIPlanPtr	upsert;			/* ($1 resource, $2 token, $3 seq) -> fence, require_proof, seq */
	SPIPlanPtr	current;		/* ($1 resource) -> fence, require_proof, seq */
} ResourcePlans;

/* A resource's row as the plans return it */
typedef struct ResourceState
{
	FencePair	fence;			/* has_seq: seq is not NULL */
	bool		require_proof;
	bool		advanced;		/* the upsert wrote the row */
} ResourceState;

/* Where the arguments of the two SQL forms of fence_admit/fence_advance are */
typedef struct ResourceArgPositions
{
	int			seq;			/* -1: the form without a sequence */
	int			proof;
} ResourceArgPositions;

static const ResourceArgPositions token_args = {-1, 2};
static const ResourceArgPositions seq_args = {2, 3};

static ResourcePlans plans = {InvalidOid, RESOURCE_COLUMNS_1_0, NULL, NULL};

/*
 * How many of pg_fence's own statements on fence_resources are running in
 * this backend; fence_resources_guard admits every change while it is > 0.
 * Raised around one SPI statement, and restored by PG_FINALLY also when
 * that statement fails.
 */
static int	own_write_depth = 0;

/* Is one of pg_fence's own statements on fence_resources running? */
bool
FenceResourcesOwnWrite(void)
{
	return own_write_depth > 0;
}

/* Raise 22023 unless name is 1..FENCE_RESOURCE_MAXLEN bytes, no controls */
static void
CheckResourceName(const char *name)
{
	size_t		len = strlen(name);

	if (len == 0 || len > FENCE_RESOURCE_MAXLEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("resource name must be 1 to %d bytes long, not %zu",
						FENCE_RESOURCE_MAXLEN, len),
				 errhint("Use the coordinator's lock key, e.g. 'report:7'.")));
	for (const unsigned char *p = (const unsigned char *) name; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("resource name must not contain control characters"),
					 errdetail("Byte 0x%02x at offset %d.", *p,
							   (int) (p - (const unsigned char *) name))));
}

/* The validated resource argument (argument 0) */
static char *
ResourceArg(FunctionCallInfo fcinfo)
{
	char	   *resource;

	FenceCheckNotNull(fcinfo, 0, "resource");
	resource = text_to_cstring(PG_GETARG_TEXT_PP(0));
	CheckResourceName(resource);
	return resource;
}

/* The validated token (argument 1) and, in the sequenced form, sequence */
static FencePair
PairArgs(FunctionCallInfo fcinfo, const ResourceArgPositions *pos)
{
	FencePair	in = {0, false, 0};

	FenceCheckNotNull(fcinfo, 1, "token");
	in.token = PG_GETARG_INT64(1);
	FenceCheckToken(in.token, "token argument");
	if (pos->seq < 0)
		return in;
	FenceCheckNotNull(fcinfo, pos->seq, "seq");
	in.has_seq = true;
	in.seq = PG_GETARG_INT64(pos->seq);
	FenceCheckSeq(in.seq, "seq argument");
	return in;
}

/* Which columns fence_resources in schema nspid has */
static ResourceColumns
InstalledColumns(Oid nspid)
{
	Oid			relid = get_relname_relid(RESOURCE_TABLE, nspid);

	if (!OidIsValid(relid) || get_attnum(relid, "require_proof") == InvalidAttrNumber)
		return RESOURCE_COLUMNS_1_0;
	if (get_attnum(relid, "seq") == InvalidAttrNumber)
		return RESOURCE_COLUMNS_1_1;
	return RESOURCE_COLUMNS_1_3;
}

/* Build the session's plans for the extension installed in schema nspid */
static void
EnsurePlans(Oid nspid)
{
	Oid			argtypes[3] = {TEXTOID, INT8OID, INT8OID};
	ResourceColumns columns = InstalledColumns(nspid);
	char	   *table;
	const char *require = columns >= RESOURCE_COLUMNS_1_1 ? "r.require_proof" : "false";
	bool		with_seq = columns >= RESOURCE_COLUMNS_1_3;

	if (plans.nspid == nspid && plans.columns == columns &&
		plans.upsert != NULL && plans.current != NULL)
		return;
	if (plans.upsert != NULL)
		SPI_freeplan(plans.upsert);
	if (plans.current != NULL)
		SPI_freeplan(plans.current);
	plans.upsert = plans.current = NULL;
	plans.nspid = InvalidOid;

	table = quote_qualified_identifier(get_namespace_name(nspid), RESOURCE_TABLE);
	/* the rule of the file comment; before 1.3, fence < token alone */
	plans.upsert = FencePrepareKeptPlan(psprintf(
		"INSERT INTO %s AS r (resource, fence, updated_at%s) "
		"VALUES ($1, $2, pg_catalog.now()%s) "
		"ON CONFLICT (resource) DO UPDATE "
		"SET fence = EXCLUDED.fence, updated_at = EXCLUDED.updated_at%s "
		"WHERE r.fence OPERATOR(pg_catalog.<) EXCLUDED.fence%s "
		"RETURNING r.fence, %s, %s", table,
		with_seq ? ", seq" : "", with_seq ? ", $3" : "",
		with_seq ? ", seq = EXCLUDED.seq" : "",
		with_seq ? " OR (r.fence OPERATOR(pg_catalog.=) EXCLUDED.fence "
		"AND EXCLUDED.seq IS NOT NULL "
		"AND (r.seq IS NULL OR r.seq OPERATOR(pg_catalog.<) EXCLUDED.seq))" :
		"",
		require, with_seq ? "r.seq" : "NULL::pg_catalog.int8"), 3, argtypes);
	plans.current = FencePrepareKeptPlan(psprintf(
		"SELECT r.fence, %s, %s FROM %s AS r WHERE r.resource OPERATOR(pg_catalog.=) $1",
		require, with_seq ? "r.seq" : "NULL::pg_catalog.int8", table), 1, argtypes);
	plans.nspid = nspid;
	plans.columns = columns;
}

/* Fence, require_proof and seq from the first row of SPI_tuptable */
static void
ReadState(ResourceState *state)
{
	HeapTuple	row = SPI_tuptable->vals[0];
	TupleDesc	tupdesc = SPI_tuptable->tupdesc;
	bool		isnull;
	Datum		seq;

	state->fence.token = DatumGetInt64(SPI_getbinval(row, tupdesc, 1, &isnull));
	state->require_proof = DatumGetBool(SPI_getbinval(row, tupdesc, 2, &isnull));
	seq = SPI_getbinval(row, tupdesc, 3, &isnull);
	state->fence.has_seq = !isnull;
	state->fence.seq = isnull ? 0 : DatumGetInt64(seq);
}

/* Run plans.current; true and *state set if the resource is known */
static bool
ReadFence(const char *resource, bool read_only, ResourceState *state)
{
	Datum		values[1];
	int			ret;

	values[0] = CStringGetTextDatum(resource);
	ret = SPI_execute_plan(plans.current, values, NULL, read_only, 1);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "pg_fence: reading fence_resources failed: %s",
			 SPI_result_code_string(ret));
	if (SPI_processed == 0)
		return false;
	ReadState(state);
	return true;
}

/* The proof argument, else pg_fence.proof */
static const char *
ProofArgOrSetting(FunctionCallInfo fcinfo, const ResourceArgPositions *pos)
{
	if (PG_NARGS() > pos->proof && !PG_ARGISNULL(pos->proof))
		return text_to_cstring(PG_GETARG_TEXT_PP(pos->proof));
	return FenceCurrentProof();
}

/*
 * With pg_fence.preempt on: end the older transactions admitted on the
 * resource before the upsert, which would wait for their row lock.  Not
 * when the fence (as last committed) is already newer than the token: the
 * caller is refused anyway.  On a resource that requires proofs (an
 * unknown resource requires none), only with a proof that verifies.
 */
static void
PreemptBeforeUpsert(FunctionCallInfo fcinfo, const char *resource, const FencePair *in,
					const ResourceArgPositions *pos, FencePath path)
{
	ResourceState state;
	FenceProofTarget target = {get_func_namespace(fcinfo->flinfo->fn_oid), InvalidOid,
	resource, path};

	if (ReadFence(resource, false, &state) &&
		(state.fence.token > in->token ||
		 (state.require_proof &&
		  !FenceProofVerifies(&target, ProofArgOrSetting(fcinfo, pos), resource,
							  in->token))))
		return;
	FencePreempt(resource, in->token, false, InvalidOid, path);
}

/*
 * Advance the resource's fence to the incoming pair if it is after it, lock
 * the row until the end of the transaction, and return the row now stored;
 * path: the calling function, for a refusal's record
 */
static ResourceState
LockAndAdvance(FunctionCallInfo fcinfo, const char *resource, const FencePair *in,
			   const ResourceArgPositions *pos, FencePath path)
{
	Datum		values[3];
	char		nulls[3] = {' ', ' ', ' '};
	ResourceState state;
	int			ret;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pg_fence: SPI_connect failed");
	EnsurePlans(get_func_namespace(fcinfo->flinfo->fn_oid));
	if (fence_preempt)
		PreemptBeforeUpsert(fcinfo, resource, in, pos, path);

	values[0] = CStringGetTextDatum(resource);
	values[1] = Int64GetDatum(in->token);
	values[2] = Int64GetDatum(in->seq);
	if (!in->has_seq)
		nulls[2] = 'n';
	own_write_depth++;
	PG_TRY();
	{
		ret = SPI_execute_plan(plans.upsert, values, nulls, false, 1);
	}
	PG_FINALLY();
	{
		own_write_depth--;
	}
	PG_END_TRY();
	if (ret != SPI_OK_INSERT_RETURNING)
		elog(ERROR, "pg_fence: updating fence_resources failed: %s",
			 SPI_result_code_string(ret));
	state.advanced = SPI_processed > 0;
	if (state.advanced)
		ReadState(&state);
	/* not advanced: the row exists and we hold its lock, so read it */
	else if (!ReadFence(resource, false, &state))
		elog(ERROR, "pg_fence: resource \"%s\" vanished while locked", resource);
	SPI_finish();
	return state;
}

/*
 * Raise 22023 for a proof argument that is a number: a sequence number
 * passed as an untyped parameter (or a literal in quotes) resolves to the
 * form without a sequence, where it would be taken for a proof, and
 * ignored on a resource that requires none
 */
static void
CheckProofNotSeq(const char *proof)
{
	size_t		len = strlen(proof);

	if (len == 0 || strspn(proof, "0123456789") != len)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("proof argument \"%s\" is a number, not a token proof", proof),
			 errdetail("A sequence number given as an untyped parameter or a quoted "
					   "literal is taken for the proof argument of the form without "
					   "a sequence."),
			 errhint("Pass the sequence number as a bigint: seq => $3, or $3::bigint.")));
}

/*
 * Lock and advance as above, then, if the resource requires proofs, check
 * the proof argument (NULL or absent: pg_fence.proof)
 */
static ResourceState
LockAdvanceAndVerify(FunctionCallInfo fcinfo, const ResourceArgPositions *pos,
					 const char *resource, const FencePair *in, FencePath path)
{
	ResourceState state;
	FenceProofTarget target;
	const char *proof;

	if (pos->seq < 0 && PG_NARGS() > pos->proof && !PG_ARGISNULL(pos->proof))
		CheckProofNotSeq(text_to_cstring(PG_GETARG_TEXT_PP(pos->proof)));
	state = LockAndAdvance(fcinfo, resource, in, pos, path);
	if (!state.require_proof)
		return state;
	target.nspid = get_func_namespace(fcinfo->flinfo->fn_oid);
	target.relid = InvalidOid;
	target.resource = resource;
	target.path = path;
	proof = ProofArgOrSetting(fcinfo, pos);
	FenceCheckProof(&target, proof, resource, in->token);
	return state;
}

/*
 * Is the call admitted?  Advanced, or an equal token without a sequence
 * on a fence stored without one; 55000 for a call without a sequence
 * under a token the resource has a sequence for (see the file comment)
 */
static bool
ResourceAdmits(const char *resource, const FencePair *in, const ResourceState *state)
{
	if (state->advanced)
		return true;
	if (in->has_seq || state->fence.token != in->token)
		return false;
	if (!state->fence.has_seq)
		return true;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("no fencing sequence number for token " INT64_FORMAT
					" on resource \"%s\"", in->token, resource),
			 errdetail("The resource's fence is %s: calls under token " INT64_FORMAT
					   " are ordered by their sequence numbers, and this one has none.",
					   FencePairString(&state->fence), in->token),
			 errhint("Pass the next sequence number: fence_admit(resource, token, seq) "
					 "or fence_advance(resource, token, seq).")));
	pg_unreachable();
}

/* fence_advance's two forms: publish a generation; false if stale */
static Datum
Advance(FunctionCallInfo fcinfo, const ResourceArgPositions *pos)
{
	char	   *resource = ResourceArg(fcinfo);
	FencePair	in = PairArgs(fcinfo, pos);
	ResourceState state = LockAdvanceAndVerify(fcinfo, pos, resource, &in,
											   FENCE_PATH_ADVANCE);

	if (!ResourceAdmits(resource, &in, &state))
	{
		FenceStatsRejected(InvalidOid, resource, NULL, &in, &state.fence, FENCE_PATH_ADVANCE);
		PG_RETURN_BOOL(false);
	}
	FenceStatsAccepted(InvalidOid, resource, in.token);
	if (fence_preempt)
		FencePreempt(resource, in.token, true, InvalidOid, FENCE_PATH_ADVANCE);
	PG_RETURN_BOOL(true);
}

/*
 * Raise 55F01 for a stale fence_admit (already counted).  A fence stored
 * with a sequence is stated as a pair whatever the caller's token, as the
 * guard states a sequenced row's.
 */
static void
RejectStaleAdmit(const char *resource, const FencePair *in, const FencePair *fence)
{
	ereport(ERROR,
			(errcode(ERRCODE_FENCE_STALE),
			 errmsg("stale fencing token %s for resource \"%s\" (fence is %s)",
					FencePairString(in), resource, FencePairString(fence)),
			 fence->has_seq ?
			 errdetail("fence_admit admits only a newer token, or token " INT64_FORMAT
					   " with a sequence number greater than " INT64_FORMAT ".",
					   fence->token, fence->seq) :
			 errdetail("fence_admit admits only tokens greater than or equal "
					   "to the resource's fence " INT64_FORMAT ".", fence->token),
			 fence->token == in->token ?
			 errhint("This call is older than, or a replay of, one already admitted "
					 "under your token: drop it. A call that is really new needs the "
					 "next sequence number (after 9223372036854775807, a new token).") :
			 errhint("A newer lock holder has been admitted: stop working on "
					 "this resource, and acquire the lock again before retrying.")));
}

/*
 * Admit this transaction under the call's token or raise 55F01; path:
 * fence_admit or fence_enqueue
 */
static void
AdmitOrRaise(FunctionCallInfo fcinfo, const ResourceArgPositions *pos, FencePath path)
{
	char	   *resource = ResourceArg(fcinfo);
	FencePair	in = PairArgs(fcinfo, pos);
	ResourceState state = LockAdvanceAndVerify(fcinfo, pos, resource, &in, path);

	if (!ResourceAdmits(resource, &in, &state))
	{
		/* Shared-memory counters are not transactional: count first. */
		FenceStatsRejected(InvalidOid, resource, NULL, &in, &state.fence, path);
		RejectStaleAdmit(resource, &in, &state.fence);
	}
	FenceStatsAccepted(InvalidOid, resource, in.token);
	if (fence_preempt)
		FencePreempt(resource, in.token, true, InvalidOid, path);
}

/* fence_admit's two forms: admit this transaction or raise 55F01 */
static Datum
Admit(FunctionCallInfo fcinfo, const ResourceArgPositions *pos)
{
	AdmitOrRaise(fcinfo, pos, FENCE_PATH_ADMIT);
	PG_RETURN_VOID();
}

/*
 * fence_admit(resource, token, proof) for a function whose arguments 0 and
 * 1 are the resource and the token and argument proof_argno the proof
 * (fence_enqueue): the same rule, counters and errors
 */
void
FenceAdmitResource(FunctionCallInfo fcinfo, int proof_argno)
{
	ResourceArgPositions pos = {-1, proof_argno};

	AdmitOrRaise(fcinfo, &pos, FENCE_PATH_ENQUEUE);
}

/* fence_advance(resource, token[, proof]): publish a generation; false if stale */
Datum
fence_advance(PG_FUNCTION_ARGS)
{
	return Advance(fcinfo, &token_args);
}

/* fence_admit(resource, token[, proof]): admit this transaction or raise 55F01 */
Datum
fence_admit(PG_FUNCTION_ARGS)
{
	return Admit(fcinfo, &token_args);
}

/* fence_advance(resource, token, seq[, proof]) (1.3) */
Datum
fence_advance_seq(PG_FUNCTION_ARGS)
{
	return Advance(fcinfo, &seq_args);
}

/* fence_admit(resource, token, seq[, proof]) (1.3) */
Datum
fence_admit_seq(PG_FUNCTION_ARGS)
{
	return Admit(fcinfo, &seq_args);
}

/* The resource's stored row (read-only, the statement's snapshot); false if unknown */
static bool
ReadCurrent(FunctionCallInfo fcinfo, ResourceState *state)
{
	char	   *resource = ResourceArg(fcinfo);
	bool		found;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pg_fence: SPI_connect failed");
	EnsurePlans(get_func_namespace(fcinfo->flinfo->fn_oid));
	found = ReadFence(resource, true, state);
	SPI_finish();
	return found;
}

/* fence_current(resource): the stored fence, NULL if the resource is unknown */
Datum
fence_current(PG_FUNCTION_ARGS)
{
	ResourceState state;

	if (!ReadCurrent(fcinfo, &state))
		PG_RETURN_NULL();
	PG_RETURN_INT64(state.fence.token);
}

/*
 * fence_current_seq(resource) (1.3): the stored sequence number, NULL if
 * the resource is unknown or its fence was stored without one
 */
Datum
fence_current_seq(PG_FUNCTION_ARGS)
{
	ResourceState state;

	if (!ReadCurrent(fcinfo, &state) || !state.fence.has_seq)
		PG_RETURN_NULL();
	PG_RETURN_INT64(state.fence.seq);
}

/*
 * Run one of pg_fence's own statements on fence_resources, which
 * fence_resources_guard lets through (own_write_depth); the SPI result
 */
static int
ExecuteOwnWrite(const char *sql, int nargs, Oid *argtypes, Datum *values)
{
	int			ret;

	own_write_depth++;
	PG_TRY();
	{
		ret = SPI_execute_with_args(sql, nargs, argtypes, values, NULL, false, 0);
	}
	PG_FINALLY();
	{
		own_write_depth--;
	}
	PG_END_TRY();
	return ret;
}

/*
 * fence_require_proof(resource, required): whether fence_admit and
 * fence_advance need a token proof for the resource; creates the
 * resource (fence 0) if it has no row yet
 */
Datum
fence_require_proof(PG_FUNCTION_ARGS)
{
	char	   *resource = ResourceArg(fcinfo);
	Oid			nspid = get_func_namespace(fcinfo->flinfo->fn_oid);
	Oid			argtypes[2] = {TEXTOID, BOOLOID};
	Datum		values[2];
	char	   *sql;
	int			ret;

	FenceCheckNotNull(fcinfo, 1, "required");
	values[0] = CStringGetTextDatum(resource);
	values[1] = PG_GETARG_DATUM(1);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pg_fence: SPI_connect failed");
	sql = psprintf("INSERT INTO %s AS r (resource, fence, require_proof) VALUES ($1, 0, $2) "
				   "ON CONFLICT (resource) DO UPDATE SET require_proof = EXCLUDED.require_proof",
				   quote_qualified_identifier(get_namespace_name(nspid), RESOURCE_TABLE));
	ret = ExecuteOwnWrite(sql, 2, argtypes, values);
	if (ret != SPI_OK_INSERT)
		elog(ERROR, "pg_fence: updating fence_resources failed: %s",
			 SPI_result_code_string(ret));
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * fence_raise_resources(token): set every resource fence below token to
 * token; returns the number of resources raised
 */
Datum
fence_raise_resources(PG_FUNCTION_ARGS)
{
	Oid			nspid = get_func_namespace(fcinfo->flinfo->fn_oid);
	Oid			relid;
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1];
	int64		token;
	uint64		raised;
	char	   *sql;
	int			ret;

	FenceCheckNotNull(fcinfo, 0, "token");
	token = PG_GETARG_INT64(0);
	FenceCheckToken(token, "token argument");
	relid = get_relname_relid(RESOURCE_TABLE, nspid);
	FenceCheckOwner(relid);
	FenceCheckRowSecurity(relid);

	values[0] = Int64GetDatum(token);
	/* as if a call with token and no sequence had been admitted */
	sql = psprintf("UPDATE %s AS r SET fence = $1, updated_at = pg_catalog.now()%s "
				   "WHERE r.fence OPERATOR(pg_catalog.<) $1",
				   quote_qualified_identifier(get_namespace_name(nspid), RESOURCE_TABLE),
				   InstalledColumns(nspid) >= RESOURCE_COLUMNS_1_3 ? ", seq = NULL" : "");
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pg_fence: SPI_connect failed");
	ret = ExecuteOwnWrite(sql, 1, argtypes, values);
	if (ret != SPI_OK_UPDATE)
		elog(ERROR, "pg_fence: updating fence_resources failed: %s",
			 SPI_result_code_string(ret));
	raised = SPI_processed;
	SPI_finish();
	PG_RETURN_INT64((int64) raised);
}
