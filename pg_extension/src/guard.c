/*
 * guard.c
 *	  fence_guard(): the BEFORE UPDATE OR DELETE row trigger that refuses
 *	  stale writes to a protected table, and on a verifying table (one
 *	  protected with a lock key template; BEFORE INSERT OR UPDATE OR DELETE)
 *	  writes without a valid token proof.
 *
 * Trigger arguments: (fence column, mode[, lock key template[, sequence
 * column]]), defaults ('fence', 'strict', none, 'fence_seq').  A sequenced
 * guard (mode 'sequenced') has all four; its template is '' when the table
 * does not verify proofs.  The columns are found by name in the relation
 * the trigger fires on, and checked there: a partition's guard is a clone of
 * its partitioned table's, and a partition attached later may order its
 * columns differently or, on PostgreSQL 15, which lets ATTACH PARTITION take
 * one, have a generated column of that name (refused: the expression would
 * overwrite the fence after the guard).
 *
 * Where the incoming token comes from:
 *	  UPDATE whose SET list names the fence column  -> NEW.<fence column>
 *	  any other UPDATE                              -> pg_fence.token, which
 *	                                                   is stamped into NEW
 *	  DELETE                                        -> pg_fence.token
 * TriggerData->tg_updatedcols tells whether the statement named the column.
 * Comparing NEW with OLD could not tell "not set" from "set to the same
 * value", and would let a tokenless UPDATE through in same_generation mode.
 *
 * Sequenced tables order the writes of one token too: a write is admitted
 * when its (token, sequence) pair is after the row's (fence, sequence
 * column) in lexicographic order (FencePairAfter), and both are stamped.
 * The sequence comes, like the token, from the sequence column in the SET
 * list, else from pg_fence.seq (stamped into NEW); a DELETE takes
 * pg_fence.seq.  No sequence is an error (55000), as no token is.
 *
 * Concurrency: the executor locks the target row and, under READ COMMITTED,
 * re-fetches its latest committed version before BEFORE ROW triggers run,
 * so OLD is what a concurrent writer committed; under REPEATABLE READ or
 * SERIALIZABLE a concurrent change raises 40001 before we are called.
 * The check and the write are therefore one atomic step.
 *
 * Verifying tables (proof.h, template.c): the proof (pg_fence.proof, or
 * fenced_update's proof argument) must verify for the token and
 *	  UPDATE   OLD's lock key; an UPDATE that changes the key is refused
 *	           (55F02, counted as a refused proof) before any proof is
 *	           checked: a row moves to another lock by a DELETE under the
 *	           old lock and an INSERT under the new one
 *	  DELETE   OLD's lock key
 *	  INSERT   NEW's lock key, with NEW.<fence column> as the token; a row
 *	           inserted with fence 0 needs no proof (fence 0 grants
 *	           nothing: every real token is newer)
 * The proof is checked before the token's order, so a stale token with a
 * valid proof still gets 55F01.
 *
 * Row movement: an UPDATE that moves a row to another partition fires
 * BEFORE UPDATE on the source partition (the guard judges the token there)
 * and then BEFORE DELETE for the same row version.  The guard remembers the
 * row version it last admitted for UPDATE (transaction, command, relation,
 * ctid); a DELETE of exactly that version by the same command is the move,
 * already judged, and is not asked for a token again.  The memo is cleared
 * when a (sub)transaction aborts.
 *
 * Re-fencing (raise.c): while fence_raise runs, an UPDATE of the raised
 * table that only raises a row's fence (below the token) to the token --
 * what fence_raise's own statement does -- is judged by the same order
 * rule but asks for no token proof and is not counted in fence_stats.
 * FenceRaiseAdmits returns at once when no raise is running.
 *
 * Preemption (preempt.c): with pg_fence.preempt on, an admitted write to a
 * verifying table preempts the open transactions that admitted an older
 * token for the row's lock key, and registers its own admission.  Tables
 * without a template are no preemption targets.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/sysattr.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "nodes/bitmapset.h"
#include "storage/itemptr.h"
#include "storage/proc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "pg_fence.h"
#include "proof.h"

PG_FUNCTION_INFO_V1(fence_guard);

/* Most arguments fence_guard accepts: (fence column, mode, template, sequence column) */
#define GUARD_MAX_ARGS	4

/* Per-statement cache of the trigger's parsed arguments (in fn_extra) */
typedef struct GuardConfig
{
	Oid			tgoid;			/* trigger this was computed for */
	AttrNumber	attnum;			/* fence column */
	AttrNumber	seq_attnum;		/* sequence column; 0 unless sequenced */
	FenceMode	mode;
	FenceKeyTemplate *template; /* NULL: the table does not verify proofs */
	Oid			nspid;			/* schema of the extension */
} GuardConfig;

/* The row version the guard last admitted for UPDATE (see row movement) */
typedef struct GuardAdmittedRow
{
	bool		valid;
	LocalTransactionId lxid;	/* transaction of the UPDATE */
	CommandId	cid;			/* command of the UPDATE */
	Oid			relid;			/* partition (or table) the row was in */
	ItemPointerData tid;		/* the admitted row version */
} GuardAdmittedRow;

static GuardAdmittedRow admitted_row = {false};

/* The (token, sequence) of one UPDATE or DELETE, and what to stamp into NEW */
typedef struct GuardWrite
{
	FencePair	in;				/* has_seq only on a sequenced table */
	bool		stamp_token;	/* the token came from pg_fence.token */
	bool		stamp_seq;		/* the sequence came from pg_fence.seq (or a raise) */
	bool		raising;		/* fence_raise's own change (raise.c) */
} GuardWrite;

/*
 * Relation whose accepted writes fenced_update is already counting: while
 * its one UPDATE runs, the guard on that relation does not count accepts
 * (rejections are always counted).
 */
static Oid	suppress_accept_relid = InvalidOid;

/* Tell the guard not to count accepts on relid; returns the previous value */
Oid
FenceGuardSuppressAcceptStats(Oid relid)
{
	Oid			previous = suppress_accept_relid;

	suppress_accept_relid = relid;
	return previous;
}

/* Forget the admitted row when a (sub)transaction aborts */
static void
ForgetAdmittedRowOnAbort(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		admitted_row.valid = false;
}

/* Subtransaction variant of ForgetAdmittedRowOnAbort */
static void
ForgetAdmittedRowOnSubAbort(SubXactEvent event, SubTransactionId mySubid,
							SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		admitted_row.valid = false;
}

/* Register the abort callbacks; called once from _PG_init */
void
FenceGuardInit(void)
{
	RegisterXactCallback(ForgetAdmittedRowOnAbort, NULL);
	RegisterSubXactCallback(ForgetAdmittedRowOnSubAbort, NULL);
}

/* Remember the row version just admitted for UPDATE */
static void
RememberAdmittedRow(Relation rel, HeapTuple oldtuple)
{
	admitted_row.valid = true;
	admitted_row.lxid = FenceLocalXid();
	admitted_row.cid = GetCurrentCommandId(false);
	admitted_row.relid = RelationGetRelid(rel);
	admitted_row.tid = oldtuple->t_self;
}

/* Is this DELETE the second half of the UPDATE that admitted the row? */
static bool
IsAdmittedRowMove(Relation rel, HeapTuple oldtuple)
{
	bool		match;

	match = admitted_row.valid &&
		admitted_row.lxid == FenceLocalXid() &&
		admitted_row.cid == GetCurrentCommandId(false) &&
		admitted_row.relid == RelationGetRelid(rel) &&
		ItemPointerIsValid(&oldtuple->t_self) &&
		ItemPointerEquals(&admitted_row.tid, &oldtuple->t_self);
	if (match)
		admitted_row.valid = false;		/* one move per admitted row */
	return match;
}

/* Raise 39P01 unless we run as a BEFORE ROW INSERT/UPDATE/DELETE trigger */
static void
CheckGuardProtocol(FunctionCallInfo fcinfo)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("fence_guard: not called by trigger manager")));
	if (!TRIGGER_FIRED_FOR_ROW(trigdata->tg_event) ||
		!TRIGGER_FIRED_BEFORE(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("fence_guard: must be fired BEFORE, FOR EACH ROW"),
				 errhint("Use fence_protect() to create the trigger.")));
	if (TRIGGER_FIRED_BY_TRUNCATE(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("fence_guard: must be fired for INSERT, UPDATE or DELETE"),
				 errhint("Use fence_protect() to create the trigger.")));
}

/*
 * Attribute number of the guard's column name (what: "fence", "sequence")
 * in the relation the trigger fires on, checked there: fence_protect
 * checked the table it protected, not this relation
 */
static AttrNumber
GuardColumn(Relation rel, const char *name, const char *what)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);
	int			attnum = SPI_fnumber(tupdesc, name);

	if (attnum <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("%s column \"%s\" of table \"%s\" does not exist",
						what, name, RelationGetRelationName(rel)),
				 errhint("Protect the table again with fence_protect().")));
	if (TupleDescAttr(tupdesc, attnum - 1)->atttypid != INT8OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("%s column \"%s\" of table \"%s\" is not of type bigint",
						what, name, RelationGetRelationName(rel)),
				 errhint("%s columns must be bigint NOT NULL.",
						 strcmp(what, "fence") == 0 ? "Fence" : "Sequence")));
	if (TupleDescAttr(tupdesc, attnum - 1)->attgenerated != '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_COLUMN_DEFINITION),
				 errmsg("%s column \"%s\" of table \"%s\" is a generated column",
						what, name, RelationGetRelationName(rel)),
				 errdetail("PostgreSQL computes a generated column after BEFORE triggers, "
						   "so the %s the guard checks and stamps would be replaced "
						   "by the column's expression.", what),
				 errhint("Make the %s column a plain bigint NOT NULL column (a partition: "
						 "detach it and attach a table whose %s column is plain).",
						 what, what)));
	return (AttrNumber) attnum;
}

/* Parse the trigger's arguments and find the fence (and sequence) column */
static void
ReadGuardConfig(FunctionCallInfo fcinfo, Relation rel, Trigger *trigger,
				GuardConfig *config)
{
	const char *column = FENCE_DEFAULT_COLUMN;
	const char *mode = "strict";
	const char *template = FenceGuardTemplateArg(trigger);

	if (trigger->tgnargs > GUARD_MAX_ARGS)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("fence_guard: expected at most %d arguments, got %d",
						GUARD_MAX_ARGS, trigger->tgnargs),
				 errhint("Arguments are (fence column, mode, lock key template, "
						 "sequence column); use fence_protect().")));
	if (trigger->tgnargs >= 1)
		column = trigger->tgargs[0];
	if (trigger->tgnargs >= 2)
		mode = trigger->tgargs[1];

	config->tgoid = trigger->tgoid;
	config->mode = FenceParseMode(mode);
	config->attnum = GuardColumn(rel, column, "fence");
	config->seq_attnum = 0;
	if (config->mode == FENCE_MODE_SEQUENCED)
		config->seq_attnum = GuardColumn(rel, trigger->tgnargs >= 4 ?
										 trigger->tgargs[3] : FENCE_DEFAULT_SEQ_COLUMN,
										 "sequence");
	else if (trigger->tgnargs >= 4)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("fence_guard: a sequence column is only for mode 'sequenced'"),
				 errhint("Use fence_protect() to create the trigger.")));
	config->template = NULL;
	if (template != NULL)
		config->template = FenceParseKeyTemplate(rel, template, config->attnum,
												 fcinfo->flinfo->fn_mcxt);
	config->nspid = get_func_namespace(fcinfo->flinfo->fn_oid);
}

/* The trigger's configuration, parsed once per statement */
static GuardConfig *
GetGuardConfig(FunctionCallInfo fcinfo, Relation rel, Trigger *trigger)
{
	GuardConfig *config = (GuardConfig *) fcinfo->flinfo->fn_extra;

	if (config == NULL || config->tgoid != trigger->tgoid)
	{
		config = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt, sizeof(GuardConfig));
		ReadGuardConfig(fcinfo, rel, trigger, config);
		fcinfo->flinfo->fn_extra = config;
	}
	return config;
}

/* The fence (or sequence: what) stored in the row about to be changed (never NULL) */
static int64
StoredValue(Relation rel, HeapTuple oldtuple, AttrNumber attnum, const char *what)
{
	bool		isnull;
	Datum		value;

	value = heap_getattr(oldtuple, attnum, RelationGetDescr(rel), &isnull);
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s column \"%s\" of table \"%s\" is NULL in the row being changed",
						what,
						NameStr(TupleDescAttr(RelationGetDescr(rel), attnum - 1)->attname),
						RelationGetRelationName(rel)),
				 errhint("Run fence_unprotect(), set NULL %ss to 0, make the column "
						 "NOT NULL, then fence_protect() again.",
						 strcmp(what, "fence") == 0 ? "fence" : "sequence")));
	return DatumGetInt64(value);
}

/* The row's (fence, sequence) pair; the sequence only on a sequenced table */
static FencePair
StoredPair(Relation rel, GuardConfig *config, HeapTuple oldtuple)
{
	FencePair	stored = {0, false, 0};

	stored.token = StoredValue(rel, oldtuple, config->attnum, "fence");
	if (config->seq_attnum != 0)
	{
		stored.has_seq = true;
		stored.seq = StoredValue(rel, oldtuple, config->seq_attnum, "sequence");
	}
	return stored;
}

/* pg_fence.token, or a clear error naming what is missing */
static int64
RequireSessionToken(Relation rel, const char *column, bool is_delete)
{
	int64		token;

	if (FenceSessionToken(&token))
		return token;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("no fencing token for %s on protected table \"%s\"",
					is_delete ? "DELETE" : "UPDATE", RelationGetRelationName(rel)),
			 is_delete ?
			 errdetail("A DELETE takes its token from pg_fence.token, which is not set.") :
			 errdetail("The UPDATE does not set the fence column \"%s\" and "
					   "pg_fence.token is not set.", column),
			 errhint("Run SET LOCAL pg_fence.token = <your token> in the transaction first%s.",
					 is_delete ? "" : ", or set the fence column in the UPDATE")));
	pg_unreachable();
}

/* NEW.<fence column> of an UPDATE that named it in its SET list */
static int64
TokenFromNewRow(Relation rel, HeapTuple newtuple, AttrNumber attnum)
{
	bool		isnull;
	Datum		value;

	value = heap_getattr(newtuple, attnum, RelationGetDescr(rel), &isnull);
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("fencing token must not be NULL"),
				 errdetail("The UPDATE sets fence column \"%s\" of table \"%s\" to NULL.",
						   NameStr(TupleDescAttr(RelationGetDescr(rel), attnum - 1)->attname),
						   RelationGetRelationName(rel)),
				 errhint("Set the fence column to the token of your lease.")));
	return DatumGetInt64(value);
}

/* pg_fence.seq, or a clear error: a sequenced table orders every write */
static int64
RequireSessionSeq(Relation rel, GuardConfig *config, bool is_delete)
{
	const char *column =
		NameStr(TupleDescAttr(RelationGetDescr(rel), config->seq_attnum - 1)->attname);
	int64		seq;

	if (FenceSessionSeq(&seq))
		return seq;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("no fencing sequence number for %s on sequenced table \"%s\"",
					is_delete ? "DELETE" : "UPDATE", RelationGetRelationName(rel)),
			 is_delete ?
			 errdetail("A DELETE takes its sequence number from pg_fence.seq, which is "
					   "not set.") :
			 errdetail("The UPDATE does not set the sequence column \"%s\" and "
					   "pg_fence.seq is not set.", column),
			 errhint("Number your writes under one token: run SET LOCAL pg_fence.seq = "
					 "<next number> in the transaction first%s.",
					 is_delete ? "" : ", or set the sequence column in the UPDATE")));
	pg_unreachable();
}

/* NEW.<sequence column> of an UPDATE that named it in its SET list */
static int64
SeqFromNewRow(Relation rel, HeapTuple newtuple, AttrNumber attnum)
{
	bool		isnull;
	Datum		value;

	value = heap_getattr(newtuple, attnum, RelationGetDescr(rel), &isnull);
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("fencing sequence number must not be NULL"),
				 errdetail("The UPDATE sets sequence column \"%s\" of table \"%s\" to NULL.",
						   NameStr(TupleDescAttr(RelationGetDescr(rel), attnum - 1)->attname),
						   RelationGetRelationName(rel)),
				 errhint("Set the sequence column to the number of this write under "
						 "your token.")));
	return DatumGetInt64(value);
}

/*
 * Count, record, log and raise 55F01 for a (token, sequence) not after the
 * row's; key: the row's lock key, NULL without a template
 */
static void
RejectStalePair(Relation rel, GuardConfig *config, const FencePair *in,
				const FencePair *stored, const char *key)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);

	FenceStatsRejected(RelationGetRelid(rel), NULL, key, in, stored, FENCE_PATH_GUARD);
	ereport(ERROR,
			(errcode(ERRCODE_FENCE_STALE),
			 errmsg("stale fencing token %s for table \"%s\" (fence is %s)",
					FencePairString(in), RelationGetRelationName(rel),
					FencePairString(stored)),
			 errdetail("Columns \"%s\", \"%s\" of the row hold %s; mode sequenced admits "
					   "only a newer token, or token " INT64_FORMAT " with a sequence "
					   "number greater than " INT64_FORMAT ".",
					   NameStr(TupleDescAttr(tupdesc, config->attnum - 1)->attname),
					   NameStr(TupleDescAttr(tupdesc, config->seq_attnum - 1)->attname),
					   FencePairString(stored), stored->token, stored->seq),
			 in->token == stored->token ?
			 errhint("This write is older than, or a replay of, one already accepted "
					 "under your token: drop it. A write that is really new needs the "
					 "next sequence number (after 9223372036854775807, a new token).") :
			 errhint("A newer lock holder has written this row: stop writing, "
					 "and acquire the lock again before retrying."),
			 errtablecol(rel, config->attnum)));
}

/* Count, record, log and raise 55F01 for a stale token (key as above) */
static void
RejectStaleRow(Relation rel, GuardConfig *config, int64 token, int64 fence,
			   const char *key)
{
	const char *column =
		NameStr(TupleDescAttr(RelationGetDescr(rel), config->attnum - 1)->attname);
	FencePair	in = {token, false, 0};
	FencePair	stored = {fence, false, 0};

	/* Shared-memory counters are not transactional: count before raising. */
	FenceStatsRejected(RelationGetRelid(rel), NULL, key, &in, &stored, FENCE_PATH_GUARD);
	ereport(ERROR,
			(errcode(ERRCODE_FENCE_STALE),
			 errmsg("stale fencing token " INT64_FORMAT " for table \"%s\" (fence is "
					INT64_FORMAT ")", token, RelationGetRelationName(rel), fence),
			 errdetail("Column \"%s\" of the row holds " INT64_FORMAT "; mode %s admits "
					   "only tokens %s " INT64_FORMAT ".",
					   column, fence, FenceModeName(config->mode),
					   config->mode == FENCE_MODE_STRICT ?
					   "greater than" : "greater than or equal to", fence),
			 errhint("A newer lock holder has written this row: stop writing, "
					 "and acquire the lock again before retrying."),
			 errtablecol(rel, config->attnum)));
}

/* NEW with the token and sequence the guard took from the settings (palloc'd copy) */
static HeapTuple
StampRow(Relation rel, GuardConfig *config, HeapTuple newtuple, const GuardWrite *write)
{
	int			columns[2];
	Datum		values[2];
	bool		nulls[2] = {false, false};
	int			n = 0;

	if (write->stamp_token)
	{
		columns[n] = config->attnum;
		values[n++] = Int64GetDatum(write->in.token);
	}
	if (write->stamp_seq)
	{
		columns[n] = config->seq_attnum;
		values[n++] = Int64GetDatum(write->in.seq);
	}
	if (n == 0)
		return newtuple;
	return heap_modify_tuple_by_cols(newtuple, RelationGetDescr(rel),
									 n, columns, values, nulls);
}

/*
 * Check the current proof for the changed row's lock key and token; an
 * UPDATE that would change the key is refused before any proof is checked.
 * Returns the row's lock key.
 */
static char *
CheckRowProof(Relation rel, GuardConfig *config, TriggerData *trigdata,
			  int64 token, bool is_delete)
{
	FenceProofTarget target = {config->nspid, RelationGetRelid(rel), NULL};
	char	   *oldkey;
	char	   *newkey;

	oldkey = FenceBuildLockKey(rel, config->template, trigdata->tg_trigtuple, &target);
	if (!is_delete)
	{
		newkey = FenceBuildLockKey(rel, config->template, trigdata->tg_newtuple, &target);
		if (strcmp(oldkey, newkey) != 0)
			FenceRefuseLockKey(&target, ERRCODE_FENCE_PROOF,
							   psprintf("UPDATE of table \"%s\" would change the row's lock "
										"key from \"%s\" to \"%s\"",
										RelationGetRelationName(rel), oldkey, newkey),
							   "A row moves between locks by a DELETE under the old lock "
							   "and an INSERT under the new one.");
	}
	FenceCheckProof(&target, FenceCurrentProof(), oldkey, token);
	return oldkey;
}

/*
 * INSERT into a verifying table: a row with a fence > 0 needs a proof.  An
 * accepted INSERT is not counted in fence_stats: it passed no fence (1.0's
 * guard does not fire on INSERT); a refused proof is counted.
 */
static Datum
GuardInsert(Relation rel, GuardConfig *config, HeapTuple newtuple)
{
	FenceProofTarget target = {config->nspid, RelationGetRelid(rel), NULL};
	bool		isnull;
	Datum		value;
	int64		token;
	char	   *key;

	if (config->template == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("fence_guard: fired for INSERT on table \"%s\", which has no "
						"lock key template", RelationGetRelationName(rel)),
				 errhint("Use fence_protect() to create the trigger.")));
	value = heap_getattr(newtuple, config->attnum, RelationGetDescr(rel), &isnull);
	/* a NULL fence: the column's NOT NULL constraint refuses the row */
	if (isnull)
		return PointerGetDatum(newtuple);
	token = DatumGetInt64(value);
	FenceCheckToken(token, "fence of the inserted row");
	/* fence 0 grants nothing: every real token is newer */
	if (token == 0)
		return PointerGetDatum(newtuple);
	key = FenceBuildLockKey(rel, config->template, newtuple, &target);
	FenceCheckProof(&target, FenceCurrentProof(), key, token);
	if (fence_preempt)
		FencePreempt(key, token, true, RelationGetRelid(rel), FENCE_PATH_GUARD);
	return PointerGetDatum(newtuple);
}

/* Does the UPDATE's SET list name column attnum? */
static bool
SetListNames(TriggerData *trigdata, AttrNumber attnum)
{
	return bms_is_member(attnum - FirstLowInvalidHeapAttributeNumber,
						 trigdata->tg_updatedcols);
}

/*
 * The token of an UPDATE or DELETE and, on a sequenced table, its
 * sequence number: from NEW when the SET list names the column, else from
 * the setting (stamped into NEW by an UPDATE).  fence_raise's own change
 * brings no sequence: it is stamped 0, as if (token, 0) had been written.
 */
static GuardWrite
IncomingWrite(Relation rel, GuardConfig *config, TriggerData *trigdata, bool is_delete)
{
	GuardWrite	write = {{0, false, 0}, false, false, false};

	if (!is_delete && SetListNames(trigdata, config->attnum))
	{
		write.in.token = TokenFromNewRow(rel, trigdata->tg_newtuple, config->attnum);
		/* a change fence_raise's statement makes: the owner's act, no proof */
		write.raising = FenceRaiseAdmits(rel, trigdata, config->attnum, write.in.token);
	}
	else
	{
		const char *column =
			NameStr(TupleDescAttr(RelationGetDescr(rel), config->attnum - 1)->attname);

		write.in.token = RequireSessionToken(rel, column, is_delete);
		write.stamp_token = !is_delete;
	}
	FenceCheckToken(write.in.token, "incoming token");
	if (config->seq_attnum == 0)
		return write;
	write.in.has_seq = true;
	if (write.raising)
		write.stamp_seq = true; /* seq 0 */
	else if (!is_delete && SetListNames(trigdata, config->seq_attnum))
		write.in.seq = SeqFromNewRow(rel, trigdata->tg_newtuple, config->seq_attnum);
	else
	{
		write.in.seq = RequireSessionSeq(rel, config, is_delete);
		write.stamp_seq = !is_delete;
	}
	FenceCheckSeq(write.in.seq, "incoming sequence number");
	return write;
}

/*
 * Raise 55F01 (after counting it) unless the write passes the row's fence;
 * key: the row's lock key, NULL when not built
 */
static void
CheckOrder(Relation rel, GuardConfig *config, const GuardWrite *write, HeapTuple oldtuple,
		   const char *key)
{
	FencePair	stored = StoredPair(rel, config, oldtuple);

	if (config->mode == FENCE_MODE_SEQUENCED)
	{
		if (!FencePairAfter(&write->in, &stored))
			RejectStalePair(rel, config, &write->in, &stored, key);
	}
	else if (!FenceAdmits(config->mode, stored.token, write->in.token))
		RejectStaleRow(rel, config, write->in.token, stored.token, key);
}

/* Trigger: admit the change only if its token passes the row's fence */
Datum
fence_guard(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Relation	rel;
	GuardConfig *config;
	GuardWrite	write;
	bool		is_delete;
	char	   *key = NULL;

	CheckGuardProtocol(fcinfo);
	rel = trigdata->tg_relation;
	config = GetGuardConfig(fcinfo, rel, trigdata->tg_trigger);
	if (TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
		return GuardInsert(rel, config, trigdata->tg_trigtuple);
	is_delete = TRIGGER_FIRED_BY_DELETE(trigdata->tg_event);
	/* the row movement of a row this command's UPDATE already admitted */
	if (is_delete && IsAdmittedRowMove(rel, trigdata->tg_trigtuple))
		return PointerGetDatum(trigdata->tg_trigtuple);

	write = IncomingWrite(rel, config, trigdata, is_delete);
	if (config->template != NULL && !write.raising)
		key = CheckRowProof(rel, config, trigdata, write.in.token, is_delete);
	CheckOrder(rel, config, &write, trigdata->tg_trigtuple, key);
	/* the row's lock key is a preemption target (preempt.c) */
	if (fence_preempt && key != NULL)
		FencePreempt(key, write.in.token, true, RelationGetRelid(rel), FENCE_PATH_GUARD);

	if (!write.raising && suppress_accept_relid != RelationGetRelid(rel))
		FenceStatsAccepted(RelationGetRelid(rel), NULL, write.in.token);

	if (is_delete)
		return PointerGetDatum(trigdata->tg_trigtuple);
	RememberAdmittedRow(rel, trigdata->tg_trigtuple);
	return PointerGetDatum(StampRow(rel, config, trigdata->tg_newtuple, &write));
}
