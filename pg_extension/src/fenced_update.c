/*
 * fenced_update.c
 *	  fenced_update(rel, key jsonb, changes jsonb, token, fence_column):
 *	  change one row only if its fence is older than token, in ONE
 *	  conditional UPDATE (never a read followed by a separate write):
 *
 *	  UPDATE rel SET <changes>, fence = token WHERE <key> AND fence < token
 *
 * Outcome: 'applied' (the row was written), 'stale' (the row's fence is
 * token or newer), 'not_found' (no row matches the key).  Only when the
 * UPDATE changed no row does a second statement look at the row, to tell
 * 'stale' from 'not_found'; the write itself was already decided.  If that
 * look finds a row the UPDATE should have changed (committed in between,
 * under READ COMMITTED), the conditional UPDATE runs again, at most
 * FU_MAX_ATTEMPTS times in all.
 *
 * Stale is a result, not an error, here: fenced_update exists for callers
 * that want an outcome they can branch on without catching an exception,
 * and its transaction stays usable.  A stale outcome is still counted in
 * fence_stats and logged like every other rejection.  The paths without a
 * result channel (the fence_guard trigger, fence_admit) raise 55F01.
 *
 * fenced_update is always strict (fence < token), whatever mode the table
 * is protected with.  Its sequenced form (1.3, C function fenced_update_seq:
 * a seq argument after the token, and seq_column) is always lexicographic:
 * the row is written when (fence, seq column) < (token, seq), and both are
 * set.  It runs with the caller's privileges: GRANTs and
 * row-level security apply as for a hand-written UPDATE.
 *
 * Token proofs: on a table that verifies them (fence_protect with a lock
 * key template) the guard trigger that the UPDATE fires checks the proof
 * argument, or pg_fence.proof when it is NULL.  The argument reaches the
 * trigger as the current proof (FenceSetProofOverride) for the duration of
 * the UPDATE; a refused proof raises 55F02.  A stale row is not written,
 * so the trigger never sees it: 'stale' needs no proof.
 *
 * Preemption (preempt.c): with pg_fence.preempt on, a call on a table
 * with a lock key template whose columns the key argument names, and a
 * proof that verifies, ends the older transactions admitted under the
 * row's lock key before its UPDATE (PreemptBeforeUpdate); the guard then
 * registers the admission.
 *
 * Errors (the transaction aborts, so nothing is written): a NULL argument,
 * a negative token, key or changes not a non-empty JSON object, a column
 * that does not exist, changes naming the fence column, a NULL key value,
 * a value its column's type does not accept, a key matching several rows.
 */
#include "postgres.h"

#include "access/table.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "parser/parse_relation.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/numeric.h"
#include "utils/rel.h"

#include "fenced_update.h"
#include "pg_fence.h"
#include "proof.h"

PG_FUNCTION_INFO_V1(fenced_update);
PG_FUNCTION_INFO_V1(fenced_update_seq);

/* Conditional UPDATEs one call runs before calling the row suppressed */
#define FU_MAX_ATTEMPTS			3

/* One "column": value pair of the key or changes argument */
typedef struct FuPair
{
	const char *name;
	JsonbValue	value;
} FuPair;

/* The parsed arguments of one call */
typedef struct FuCall
{
	Relation	rel;
	int64		token;
	bool		has_seq;		/* the sequenced form */
	int64		seq;
	FuPlanKey	key;
	FuPair		pairs[FU_MAX_COLUMNS];	/* key pairs, then change pairs */
} FuCall;

/* Where the arguments of the two SQL forms are (-1: absent) */
typedef struct FuArgPositions
{
	int			seq;
	int			fence_column;
	int			seq_column;
	int			proof;
} FuArgPositions;

/* fenced_update(rel, key, changes, token, fence_column[, proof]) */
static const FuArgPositions strict_args = {-1, 4, -1, 5};

/* fenced_update(rel, key, changes, token, seq, fence_column, seq_column, proof) */
static const FuArgPositions seq_args = {4, 5, 6, 7};

/* Context of an error while converting a value, for errcontext() */
typedef struct FuConvertContext
{
	const char *argname;
	const char *column;
} FuConvertContext;

/* Raise 42501 unless the caller may UPDATE the table or some column of it */
static void
CheckUpdatePrivilege(Oid relid)
{
	Oid			userid = GetUserId();

	if (pg_class_aclcheck(relid, userid, ACL_UPDATE) == ACLCHECK_OK ||
		pg_attribute_aclcheck_all(relid, userid, ACL_UPDATE, ACLMASK_ANY) == ACLCHECK_OK)
		return;
	aclcheck_error(ACLCHECK_NO_PRIV, get_relkind_objtype(get_rel_relkind(relid)),
				   get_rel_name(relid));
}

/* Append the pairs of a jsonb object argument to call->pairs */
static int
ReadObject(FuCall *call, Jsonb *jb, const char *argname, int used)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			n = used;

	if (!JB_ROOT_IS_OBJECT(jb) || JB_ROOT_COUNT(jb) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be a non-empty JSON object", argname),
				 errhint("Pass column names and values, e.g. '{\"id\": 7}'.")));
	if (used + (int) JB_ROOT_COUNT(jb) > FU_MAX_COLUMNS)
		ereport(ERROR,
				(errcode(ERRCODE_TOO_MANY_COLUMNS),
				 errmsg("fenced_update accepts at most %d key and change columns",
						FU_MAX_COLUMNS)));
	it = JsonbIteratorInit(&jb->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
			call->pairs[n].name = pnstrdup(v.val.string.val, v.val.string.len);
		else if (tok == WJB_VALUE)
			call->pairs[n++].value = v;
	}
	return n - used;
}

/* Attribute number of a user column named by argname, or 42703 */
static AttrNumber
ResolveColumn(Relation rel, const char *name, const char *argname)
{
	int			attnum = InvalidAttrNumber;

	if (strlen(name) < NAMEDATALEN)
		attnum = attnameAttNum(rel, name, false);
	if (attnum == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of table \"%s\" does not exist",
						name, RelationGetRelationName(rel)),
				 errdetail("The column is named in the %s argument of fenced_update.",
						   argname)));
	return (AttrNumber) attnum;
}

/* Resolve every named column into call->key; reject misuse of the fence */
static void
ResolveColumns(FuCall *call)
{
	FuPlanKey  *key = &call->key;

	for (int i = 0; i < key->nkeys + key->nchanges; i++)
	{
		bool		is_key = i < key->nkeys;
		const char *argname = is_key ? "key" : "changes";

		key->attnums[i] = ResolveColumn(call->rel, call->pairs[i].name, argname);
		if (!is_key && key->attnums[i] == key->fence_attnum)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("changes must not set the fence column \"%s\"",
							call->pairs[i].name),
					 errhint("fenced_update sets the fence column to the token argument.")));
		if (!is_key && key->seq_attnum != 0 && key->attnums[i] == key->seq_attnum)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("changes must not set the sequence column \"%s\"",
							call->pairs[i].name),
					 errhint("fenced_update sets the sequence column to the seq argument.")));
		if (is_key && call->pairs[i].value.type == jbvNull)
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("key value for column \"%s\" must not be null",
							call->pairs[i].name),
					 errdetail("A key compares with =, which never matches NULL.")));
	}
}

/* The token and, in the sequenced form, the sequence argument */
static void
ReadTokenArguments(FunctionCallInfo fcinfo, const FuArgPositions *pos, FuCall *call)
{
	FenceCheckNotNull(fcinfo, 3, "token");
	call->token = PG_GETARG_INT64(3);
	FenceCheckToken(call->token, "token argument");
	call->has_seq = pos->seq >= 0;
	if (!call->has_seq)
		return;
	FenceCheckNotNull(fcinfo, pos->seq, "seq");
	call->seq = PG_GETARG_INT64(pos->seq);
	FenceCheckSeq(call->seq, "seq argument");
}

/* Open the table and parse all arguments into call */
static void
ReadArguments(FunctionCallInfo fcinfo, const FuArgPositions *pos, FuCall *call)
{
	Oid			relid;
	int			nkeys;

	FenceCheckNotNull(fcinfo, 0, "rel");
	FenceCheckNotNull(fcinfo, 1, "key");
	FenceCheckNotNull(fcinfo, 2, "changes");
	ReadTokenArguments(fcinfo, pos, call);
	FenceCheckNotNull(fcinfo, pos->fence_column, "fence_column");
	if (pos->seq_column >= 0)
		FenceCheckNotNull(fcinfo, pos->seq_column, "seq_column");
	relid = PG_GETARG_OID(0);

	CheckUpdatePrivilege(relid);
	/* the lock the UPDATE takes anyway; keep it until the end of the transaction */
	call->rel = table_open(relid, RowExclusiveLock);
	FenceCheckRelkind(call->rel);

	memset(&call->key, 0, sizeof(FuPlanKey));
	call->key.relid = relid;
	call->key.fence_attnum = FenceValidateColumn(call->rel,
												 NameStr(*PG_GETARG_NAME(pos->fence_column)));
	if (pos->seq_column >= 0)
		call->key.seq_attnum = FenceValidateSeqColumn(call->rel,
													  NameStr(*PG_GETARG_NAME(pos->seq_column)),
													  call->key.fence_attnum);
	nkeys = ReadObject(call, PG_GETARG_JSONB_P(1), "key", 0);
	call->key.nkeys = (int16) nkeys;
	call->key.nchanges = (int16) ReadObject(call, PG_GETARG_JSONB_P(2), "changes", nkeys);
	ResolveColumns(call);
}

/* The text a column's input function gets for a JSON value */
static char *
JsonValueAsText(JsonbValue *v, bool as_json)
{
	if (v->type == jbvBinary)
		return JsonbToCString(NULL, v->val.binary.data, v->val.binary.len);
	if (as_json)
	{
		Jsonb	   *jb = JsonbValueToJsonb(v);

		return JsonbToCString(NULL, &jb->root, VARSIZE(jb));
	}
	switch (v->type)
	{
		case jbvString:
			return pnstrdup(v->val.string.val, v->val.string.len);
		case jbvNumeric:
			return DatumGetCString(DirectFunctionCall1(numeric_out,
													   NumericGetDatum(v->val.numeric)));
		case jbvBool:
			return pstrdup(v->val.boolean ? "true" : "false");
		default:
			elog(ERROR, "pg_fence: unexpected jsonb value type %d", (int) v->type);
	}
	pg_unreachable();
}

/* errcontext callback naming the column whose value failed to convert */
static void
ConvertErrorCallback(void *arg)
{
	FuConvertContext *ctx = (FuConvertContext *) arg;

	errcontext("fenced_update: value of column \"%s\" in %s", ctx->column, ctx->argname);
}

/* Convert every JSON value through its column's type input function */
static void
ConvertValues(FuCall *call, FuPlan *plan, Datum *values, char *nulls)
{
	int			ncolumns = call->key.nkeys + call->key.nchanges;
	FuConvertContext ctx;
	ErrorContextCallback errcallback;

	errcallback.callback = ConvertErrorCallback;
	errcallback.arg = &ctx;
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;
	for (int i = 0; i < ncolumns; i++)
	{
		FuColumn   *col = &plan->columns[i];
		JsonbValue *v = &call->pairs[i].value;

		ctx.argname = i < call->key.nkeys ? "key" : "changes";
		ctx.column = call->pairs[i].name;
		nulls[i] = (v->type == jbvNull) ? 'n' : ' ';
		values[i] = (Datum) 0;
		if (v->type != jbvNull)
			values[i] = InputFunctionCall(&col->input, JsonValueAsText(v, col->is_json),
										  col->typioparam, col->typmod);
	}
	error_context_stack = errcallback.previous;
	values[ncolumns] = Int64GetDatum(call->token);
	nulls[ncolumns] = ' ';
	values[ncolumns + 1] = Int64GetDatum(call->seq);
	nulls[ncolumns + 1] = ' ';
}

/* Run the conditional UPDATE; returns the number of rows it changed */
static uint64
RunUpdate(FuCall *call, FuPlan *plan, Datum *values, char *nulls)
{
	Oid			relid = RelationGetRelid(call->rel);
	Oid			previous;
	int			ret;

	/* this call counts its own outcome; the guard must not count it again */
	previous = FenceGuardSuppressAcceptStats(relid);
	PG_TRY();
	{
		ret = SPI_execute_plan(plan->update, values, nulls, false, 0);
	}
	PG_FINALLY();
	{
		FenceGuardSuppressAcceptStats(previous);
	}
	PG_END_TRY();
	if (ret != SPI_OK_UPDATE)
		elog(ERROR, "pg_fence: fenced_update's UPDATE failed: %s",
			 SPI_result_code_string(ret));
	return SPI_processed;
}

/*
 * Run the probe: number of rows matching the key (0..2); the fence (and
 * sequence) of the first
 */
static uint64
RunProbe(FuPlan *plan, Datum *values, char *nulls, FencePair *stored)
{
	bool		isnull;
	int			ret;

	ret = SPI_execute_plan(plan->probe, values, nulls, false, 0);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "pg_fence: fenced_update's probe failed: %s",
			 SPI_result_code_string(ret));
	if (SPI_processed == 0)
		return 0;
	stored->token = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
												SPI_tuptable->tupdesc, 1, &isnull));
	stored->has_seq = plan->key.seq_attnum != 0;
	if (stored->has_seq)
		stored->seq = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
												  SPI_tuptable->tupdesc, 2, &isnull));
	return SPI_processed;
}

/* Does the call's token (and sequence) pass the stored fence? */
static bool
CallPasses(FuCall *call, const FencePair *stored)
{
	FencePair	in = {call->token, call->has_seq, call->seq};

	if (!call->has_seq)
		return FenceAdmits(FENCE_MODE_STRICT, stored->token, call->token);
	return FencePairAfter(&in, stored);
}

/* Raise 21000: the key matched several rows (the abort undoes any write) */
static void
ErrorKeyNotUnique(Relation rel)
{
	ereport(ERROR,
			(errcode(ERRCODE_CARDINALITY_VIOLATION),
			 errmsg("key matches more than one row of table \"%s\"",
					RelationGetRelationName(rel)),
			 errdetail("fenced_update changes exactly one row; nothing was written."),
			 errhint("Name the columns of a primary key or unique constraint in key.")));
}

/* The key columns of a fenced_update call and their values, for KeyArgColumn */
typedef struct KeyArgs
{
	const FuCall *call;
	const Datum *values;
	const char *nulls;
} KeyArgs;

/* FenceKeyColumnFn over fenced_update's key: known when key names the column */
static bool
KeyArgColumn(void *arg, AttrNumber attnum, Datum *value, bool *isnull)
{
	KeyArgs    *args = (KeyArgs *) arg;

	for (int i = 0; i < args->call->key.nkeys; i++)
		if (args->call->key.attnums[i] == attnum)
		{
			*value = args->values[i];
			*isnull = args->nulls[i] == 'n';
			return true;
		}
	return false;
}

/*
 * The row's lock key as the call's key columns give it (values, nulls as
 * RunUpdate has them), palloc'd; NULL when the table has no lock key
 * template, or one of its columns is not in key or is NULL, or the key is
 * longer than FENCE_LOCK_KEY_MAXLEN
 */
static char *
KeyArgsLockKey(FuCall *call, Datum *values, char *nulls)
{
	const Trigger *guard = FenceFindGuard(call->rel);
	const char *template = guard != NULL ? FenceGuardTemplateArg(guard) : NULL;
	KeyArgs		args = {call, values, nulls};
	StringInfoData key;

	if (template == NULL)
		return NULL;
	initStringInfo(&key);
	if (FenceAppendLockKey(FenceParseKeyTemplate(call->rel, template, call->key.fence_attnum,
												 CurrentMemoryContext),
						   KeyArgColumn, &args, &key) != 0 ||
		key.len > FENCE_LOCK_KEY_MAXLEN)
		return NULL;
	return key.data;
}

/*
 * The outcome after the UPDATE changed processed rows; NULL when the probe
 * saw a row that the UPDATE should have changed (the caller tries again).
 */
static const char *
DecideOutcome(FuCall *call, FuPlan *plan, uint64 processed,
			  Datum *values, char *nulls, FencePair *stored)
{
	Oid			relid = RelationGetRelid(call->rel);
	uint64		matching;

	if (processed > 1)
		ErrorKeyNotUnique(call->rel);
	if (processed == 1)
	{
		if (!plan->key_is_unique && RunProbe(plan, values, nulls, stored) > 1)
			ErrorKeyNotUnique(call->rel);
		FenceStatsAccepted(relid, NULL, call->token);
		return "applied";
	}
	matching = RunProbe(plan, values, nulls, stored);
	if (matching == 0)
		return "not_found";
	if (matching > 1)
		ErrorKeyNotUnique(call->rel);
	if (!CallPasses(call, stored))
	{
		FencePair	in = {call->token, call->has_seq, call->seq};

		FenceStatsRejected(relid, NULL, KeyArgsLockKey(call, values, nulls), &in, stored,
						   FENCE_PATH_FENCED_UPDATE);
		return "stale";
	}
	return NULL;
}

/* Raise 55000: the row passes the fence, yet the UPDATE never changed it */
static void
ErrorUpdateSuppressed(FuCall *call, const FencePair *stored)
{
	FencePair	in = {call->token, call->has_seq, call->seq};

	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("fenced_update did not change the row of table \"%s\" although "
					"its fence %s is older than token %s",
					RelationGetRelationName(call->rel), FencePairString(stored),
					FencePairString(&in)),
			 errdetail("The UPDATE was tried %d times.  A BEFORE trigger that returned "
					   "NULL, or a row-level security policy that allows reading but "
					   "not updating the row, suppressed it.", FU_MAX_ATTEMPTS),
			 errhint("Check the table's BEFORE UPDATE triggers and UPDATE policies.")));
}

/*
 * Run the conditional UPDATE until the outcome is clear.  Under READ
 * COMMITTED the probe sees a newer snapshot than the UPDATE did: a row with
 * an older fence may have been committed in between (inserted, or its key
 * changed).  Each attempt is one whole conditional UPDATE, so trying again
 * never writes on the strength of a read.
 */
static const char *
RunUntilDecided(FuCall *call, FuPlan *plan, Datum *values, char *nulls)
{
	FencePair	stored = {0, false, 0};

	for (int attempt = 1; attempt <= FU_MAX_ATTEMPTS; attempt++)
	{
		uint64		processed = RunUpdate(call, plan, values, nulls);
		const char *outcome = DecideOutcome(call, plan, processed, values, nulls,
											&stored);

		if (outcome != NULL)
			return outcome;
		CHECK_FOR_INTERRUPTS();
	}
	ErrorUpdateSuppressed(call, &stored);
	pg_unreachable();
}

/* The fence_outcome enum value with the given label */
static Datum
OutcomeDatum(FunctionCallInfo fcinfo, const char *label)
{
	Oid			typid = get_func_rettype(fcinfo->flinfo->fn_oid);

	return DirectFunctionCall2(enum_in, CStringGetDatum(label),
							   ObjectIdGetDatum(typid));
}

/* The proof argument (version 1.1), or NULL: use pg_fence.proof */
static const char *
ProofArg(FunctionCallInfo fcinfo, const FuArgPositions *pos)
{
	if (PG_NARGS() <= pos->proof || PG_ARGISNULL(pos->proof))
		return NULL;
	return text_to_cstring(PG_GETARG_TEXT_PP(pos->proof));
}

/* The mode argument of rel's guard, or NULL when it has none */
static const char *
GuardModeOf(Relation rel)
{
	const Trigger *guard = FenceFindGuard(rel);

	if (guard == NULL)
		return NULL;
	return guard->tgnargs >= 2 ? guard->tgargs[1] : "strict";
}

/*
 * Raise 55000 when the form called does not match rel's guard: the form
 * without seq on a sequenced table (its WHERE would judge by the token
 * alone and report a holder's next write as stale), the form with seq on a
 * table guarded in another mode (the guard would refuse what the WHERE
 * admitted, raising instead of returning stale).
 */
static void
CheckFormMatchesGuard(Relation rel, const FuArgPositions *pos)
{
	const char *mode = GuardModeOf(rel);
	bool		sequenced = mode != NULL && strcmp(mode, "sequenced") == 0;

	if (pos->seq < 0 && sequenced)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("no fencing sequence number for fenced_update on sequenced table \"%s\"",
						RelationGetRelationName(rel)),
				 errdetail("The table orders writes by (token, sequence number); this form "
						   "of fenced_update passes a token only."),
				 errhint("Pass the sequence number: fenced_update(rel, key, changes, token, "
						 "seq => <next number>).")));
	if (pos->seq >= 0 && mode != NULL && !sequenced)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("fenced_update with a sequence number on table \"%s\", which is "
						"protected in mode %s", RelationGetRelationName(rel), mode),
				 errhint("Call fenced_update without seq, or protect the table with "
						 "mode => 'sequenced'.")));
}

/*
 * With pg_fence.preempt on, on a table with a lock key template whose
 * columns are all in key: end the older transactions admitted under the
 * row's lock key before the UPDATE, which would wait for their row lock.
 * Only with a proof that verifies for that key and the token.  (Otherwise
 * the guard preempts them when the UPDATE reaches the row.)
 */
static void
PreemptBeforeUpdate(FunctionCallInfo fcinfo, FuCall *call, Datum *values, char *nulls,
					const char *proof)
{
	FenceProofTarget target = {get_func_namespace(fcinfo->flinfo->fn_oid),
	RelationGetRelid(call->rel), NULL, FENCE_PATH_FENCED_UPDATE};
	char	   *key = KeyArgsLockKey(call, values, nulls);

	if (key == NULL ||
		!FenceProofVerifies(&target, proof != NULL ? proof : FenceCurrentProof(),
							key, call->token))
		return;
	FencePreempt(key, call->token, false, RelationGetRelid(call->rel),
				 FENCE_PATH_FENCED_UPDATE);
}

/* Both SQL forms of fenced_update; pos says where their arguments are */
static Datum
FencedUpdate(FunctionCallInfo fcinfo, const FuArgPositions *pos)
{
	FuCall	   *call = palloc0(sizeof(FuCall));
	Datum		values[FU_MAX_COLUMNS + 2];
	char		nulls[FU_MAX_COLUMNS + 2];
	FuPlan	   *plan;
	const char *outcome;
	const char *proof = ProofArg(fcinfo, pos);
	const char *previous_proof = NULL;

	ReadArguments(fcinfo, pos, call);
	CheckFormMatchesGuard(call->rel, pos);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pg_fence: SPI_connect failed");
	plan = FuLookupPlan(call->rel, &call->key);
	FuPinPlan(plan);
	if (proof != NULL)
		previous_proof = FenceSetProofOverride(proof);
	PG_TRY();
	{
		ConvertValues(call, plan, values, nulls);
		if (fence_preempt)
			PreemptBeforeUpdate(fcinfo, call, values, nulls, proof);
		outcome = RunUntilDecided(call, plan, values, nulls);
	}
	PG_FINALLY();
	{
		if (proof != NULL)
			FenceSetProofOverride(previous_proof);
		FuUnpinPlan(plan);
	}
	PG_END_TRY();
	SPI_finish();
	table_close(call->rel, NoLock);
	PG_RETURN_DATUM(OutcomeDatum(fcinfo, outcome));
}

/* fenced_update(rel, key, changes, token, fence_column, proof) -> fence_outcome */
Datum
fenced_update(PG_FUNCTION_ARGS)
{
	return FencedUpdate(fcinfo, &strict_args);
}

/*
 * fenced_update(rel, key, changes, token, seq, fence_column, seq_column,
 * proof) -> fence_outcome (1.3)
 */
Datum
fenced_update_seq(PG_FUNCTION_ARGS)
{
	return FencedUpdate(fcinfo, &seq_args);
}
