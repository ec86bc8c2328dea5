/*
 * raise.c
 *	  fence_raise(): re-fencing a protected table after a database failover.
 *
 * With asynchronous replication a promoted standby can miss the last fences
 * the old primary accepted, and would then accept a token older than one
 * already accepted.  The table's owner re-fences it with a token at least
 * as large as the coordinator's last issued token: every row whose fence
 * is below the token gets fence = token, in one statement
 *	  UPDATE [ONLY] rel SET <fence column> = token
 *	   WHERE <fence column> OPERATOR(pg_catalog.<) token
 * which leaves every row as if a write with that token had been accepted.
 * (fence_raise_resources, in resources.c, does the same for
 * fence_resources.)
 *
 * The statement fires the table's triggers like any UPDATE, the guard
 * included.  The guard admits it by the usual rule (the fence is below the
 * token), but a verifying table would also ask for a token proof, which an
 * administrative act has none of.  So while the statement runs, raising
 * names the relation and the token, and the guard skips the proof check
 * (and fence_stats) for exactly the row changes the re-fence makes itself
 * (FenceRaiseAdmits): an UPDATE of that relation, or of one of its
 * partitions, whose OLD fence is below the token, whose NEW fence is the
 * token, and whose OLD and NEW are equal in every other column (dropped
 * and generated columns aside).  Such a change does nothing the re-fence
 * does not do itself, whichever code makes it.  Anything else while the
 * raise runs -- a trigger's UPDATE that changes another column or a lock
 * key, or that writes a row already at the token -- is checked as usual;
 * so is the raise's own row if a BEFORE trigger of the table changed
 * another column of it.  raising is restored in PG_FINALLY, also
 * when the statement fails.
 *
 * Refused up front rather than done in part:
 *	  - row level security that applies to the caller (FORCE ROW LEVEL
 *		SECURITY on the owner's table, without BYPASSRLS): its policies
 *		would hide rows from the UPDATE, which would stay below the token
 *		without a word (42501);
 *	  - a verifying table partitioned on its fence column: raising a fence
 *		moves the row to another partition, and the guard asks a proof for
 *		that INSERT (0A000).
 *
 * Only the table's owner (or a superuser) may raise its fences: the SQL
 * function is also REVOKEd from PUBLIC.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/sysattr.h"
#include "access/table.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/bitmapset.h"
#include "nodes/pg_list.h"
#include "optimizer/optimizer.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/partcache.h"
#include "utils/regproc.h"
#include "utils/rel.h"

#include "pg_fence.h"

PG_FUNCTION_INFO_V1(fence_raise);

/* Name of the guard's trigger function, in the extension's schema */
#define FENCE_GUARD_FUNCTION	"fence_guard"

/*
 * The re-fence statement running in this backend, if any.  Invariant:
 * cached_relid is InvalidOid or a relation looked up during this raise.
 */
typedef struct RaiseState
{
	bool		active;
	Oid			relid;			/* table named in fence_raise */
	int64		token;			/* the token its fences are raised to */
	Oid			cached_relid;	/* last partition asked about ... */
	bool		cached_covered; /* ... and whether relid is its ancestor */
} RaiseState;

static RaiseState raising = {false, InvalidOid, 0, InvalidOid, false};

/* Is rel the raised table or one of its partitions (cached per raise)? */
static bool
RaiseCovers(Relation rel)
{
	Oid			relid = RelationGetRelid(rel);

	if (relid == raising.relid)
		return true;
	if (!rel->rd_rel->relispartition)
		return false;
	if (relid != raising.cached_relid)
	{
		raising.cached_covered =
			list_member_oid(get_partition_ancestors(relid), raising.relid);
		raising.cached_relid = relid;
	}
	return raising.cached_covered;
}

/* Are OLD and NEW equal in every column but attnum (dropped, generated aside)? */
static bool
OnlyColumnChanged(Relation rel, HeapTuple oldtuple, HeapTuple newtuple,
				  AttrNumber attnum)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);

	for (int i = 0; i < tupdesc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(tupdesc, i);
		bool		oldnull;
		bool		newnull;
		Datum		oldvalue;
		Datum		newvalue;

		if (att->attisdropped || att->attgenerated || att->attnum == attnum)
			continue;
		oldvalue = heap_getattr(oldtuple, att->attnum, tupdesc, &oldnull);
		newvalue = heap_getattr(newtuple, att->attnum, tupdesc, &newnull);
		if (oldnull != newnull)
			return false;
		if (!oldnull && !datumIsEqual(oldvalue, newvalue, att->attbyval, att->attlen))
			return false;
	}
	return true;
}

/*
 * Is this UPDATE, whose SET list names the fence column attnum and whose
 * NEW fence is token, a change fence_raise's statement makes itself: rel is
 * the raised table or one of its partitions, OLD's fence is below token,
 * and nothing else changes (see the file comment)?  Returns at once unless
 * a raise is running.
 */
bool
FenceRaiseAdmits(Relation rel, TriggerData *trigdata, AttrNumber attnum,
				 int64 token)
{
	bool		isnull;
	Datum		oldfence;

	if (!raising.active || raising.token != token || !RaiseCovers(rel))
		return false;
	oldfence = heap_getattr(trigdata->tg_trigtuple, attnum,
							RelationGetDescr(rel), &isnull);
	if (isnull || DatumGetInt64(oldfence) >= token)
		return false;
	return OnlyColumnChanged(rel, trigdata->tg_trigtuple, trigdata->tg_newtuple,
							 attnum);
}

/* Is trigger's function pg_fence's fence_guard (in the schema nspid)? */
static bool
RunsFenceGuard(const Trigger *trigger, Oid nspid)
{
	char	   *name = get_func_name(trigger->tgfoid);

	return name != NULL && strcmp(name, FENCE_GUARD_FUNCTION) == 0 &&
		get_func_namespace(trigger->tgfoid) == nspid;
}

/*
 * rel's guard trigger; 55000 if it has none, or if its trigger of that name
 * runs another function than pg_fence's fence_guard (in the schema nspid)
 */
static const Trigger *
GuardTrigger(Relation rel, Oid nspid)
{
	const Trigger *trigger = FenceFindGuard(rel);

	if (trigger == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" is not protected by pg_fence",
						RelationGetRelationName(rel)),
				 errdetail("It has no trigger \"%s\".", FENCE_TRIGGER_NAME),
				 errhint("Protect it with fence_protect() first.")));
	if (!RunsFenceGuard(trigger, nspid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" is not protected by pg_fence",
						RelationGetRelationName(rel)),
				 errdetail("Its trigger \"%s\" runs %s, not pg_fence's %s().",
						   FENCE_TRIGGER_NAME, format_procedure(trigger->tgfoid),
						   FENCE_GUARD_FUNCTION),
				 errhint("Drop that trigger and protect the table with "
						 "fence_protect().")));
	return trigger;
}

/* Does the partition key of the partitioned table rel use column attnum? */
static bool
PartitionKeyUses(Relation rel, AttrNumber attnum)
{
	PartitionKey key = RelationGetPartitionKey(rel);
	Bitmapset  *exprattrs = NULL;

	for (int i = 0; i < key->partnatts; i++)
	{
		if (key->partattrs[i] == attnum)
			return true;
	}
	pull_varattnos((Node *) key->partexprs, 1, &exprattrs);
	return bms_is_member(attnum - FirstLowInvalidHeapAttributeNumber, exprattrs);
}

/*
 * Raise 0A000 if rel, or a partitioned table under it, is partitioned on
 * the fence column: raising would move rows between partitions, and a
 * verifying table's guard asks a token proof for the INSERT of such a move
 */
static void
CheckNotPartitionedOnFence(Relation rel, const char *column)
{
	ListCell   *lc;

	if (rel->rd_rel->relkind != RELKIND_PARTITIONED_TABLE)
		return;
	/* the UPDATE takes this lock on every partition anyway */
	foreach(lc, find_all_inheritors(RelationGetRelid(rel), RowExclusiveLock, NULL))
	{
		Oid			partid = lfirst_oid(lc);
		Relation	part;
		bool		keyed;

		if (get_rel_relkind(partid) != RELKIND_PARTITIONED_TABLE)
			continue;
		part = table_open(partid, NoLock);
		keyed = PartitionKeyUses(part, get_attnum(partid, column));
		table_close(part, NoLock);
		if (keyed)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot raise the fences of table \"%s\": table \"%s\" is "
							"partitioned on the fence column \"%s\"",
							RelationGetRelationName(rel), get_rel_name(partid), column),
					 errdetail("Raising a fence would move the row to another partition, "
							   "and the table verifies token proofs, also for the "
							   "INSERT of such a move."),
					 errhint("Use synchronous replication for this table, or partition "
							 "it on another column.")));
	}
}

/* Run the re-fence statement with raising set; the number of rows raised */
static uint64
RunRaise(const char *sql, Oid relid, int64 token)
{
	RaiseState	saved = raising;
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1];
	uint64		raised;
	int			ret;

	values[0] = Int64GetDatum(token);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pg_fence: SPI_connect failed");
	raising.active = true;
	raising.relid = relid;
	raising.token = token;
	raising.cached_relid = InvalidOid;
	PG_TRY();
	{
		ret = SPI_execute_with_args(sql, 1, argtypes, values, NULL, false, 0);
	}
	PG_FINALLY();
	{
		raising = saved;
	}
	PG_END_TRY();
	if (ret != SPI_OK_UPDATE)
		elog(ERROR, "pg_fence: \"%s\" failed: %s", sql, SPI_result_code_string(ret));
	raised = SPI_processed;
	SPI_finish();
	return raised;
}

/*
 * fence_raise(rel, token): set every fence of rel below token to token;
 * returns the number of rows raised
 */
Datum
fence_raise(PG_FUNCTION_ARGS)
{
	Oid			relid;
	int64		token;
	Relation	rel;
	const Trigger *guard;
	char	   *column;
	char	   *sql;

	FenceCheckNotNull(fcinfo, 0, "rel");
	FenceCheckNotNull(fcinfo, 1, "token");
	relid = PG_GETARG_OID(0);
	token = PG_GETARG_INT64(1);
	FenceCheckToken(token, "token argument");
	FenceCheckOwner(relid);

	/* the lock the UPDATE takes anyway */
	rel = table_open(relid, RowExclusiveLock);
	FenceCheckRelkind(rel);
	guard = GuardTrigger(rel, get_func_namespace(fcinfo->flinfo->fn_oid));
	column = pstrdup(guard->tgnargs >= 1 ? guard->tgargs[0] : FENCE_DEFAULT_COLUMN);
	(void) FenceValidateColumn(rel, column);
	FenceCheckRowSecurity(relid);
	/* a lock key template, the third argument, makes the guard verify proofs */
	if (FenceGuardTemplateArg(guard) != NULL)
		CheckNotPartitionedOnFence(rel, column);
	/*
	 * A partitioned table's UPDATE reaches its partitions, whose guards are
	 * clones of its own; inheritance children have guards of their own and
	 * are raised on their own (ONLY).
	 */
	sql = psprintf("UPDATE %s%s SET %s = $1 WHERE %s OPERATOR(pg_catalog.<) $1",
				   rel->rd_rel->relkind == RELKIND_RELATION ? "ONLY " : "",
				   FenceQualifiedRelName(rel), quote_identifier(column),
				   quote_identifier(column));
	table_close(rel, NoLock);
	PG_RETURN_INT64((int64) RunRaise(sql, relid, token));
}
