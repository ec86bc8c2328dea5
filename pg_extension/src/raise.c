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
 * (and fence_stats) for an UPDATE of that relation, or one of its
 * partitions, that sets the fence column to exactly that token
 * (FenceRaiseAdmits).  Such an UPDATE, by whatever trigger code it comes
 * from, does nothing the re-fence does not do itself.  raising is restored
 * in PG_FINALLY, also when the statement fails.
 *
 * Only the table's owner (or a superuser) may raise its fences: the SQL
 * function is also REVOKEd from PUBLIC.
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "pg_fence.h"

PG_FUNCTION_INFO_V1(fence_raise);

/* The re-fence statement running in this backend, if any */
typedef struct RaiseState
{
	bool		active;
	Oid			relid;			/* table named in fence_raise */
	int64		token;			/* the token its fences are raised to */
} RaiseState;

static RaiseState raising = {false, InvalidOid, 0};

/*
 * Is this UPDATE, which sets the fence column of rel to token in its SET
 * list, fence_raise's own statement (see the file comment)?
 */
bool
FenceRaiseAdmits(Relation rel, int64 token)
{
	Oid			relid = RelationGetRelid(rel);

	if (!raising.active || raising.token != token)
		return false;
	if (relid == raising.relid)
		return true;
	return rel->rd_rel->relispartition &&
		list_member_oid(get_partition_ancestors(relid), raising.relid);
}

/* Raise 42501 unless the current user owns relid (superusers do) */
void
FenceCheckOwner(Oid relid)
{
	if (!pg_class_ownercheck(relid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER,
					   get_relkind_objtype(get_rel_relkind(relid)),
					   get_rel_name(relid));
}

/* The fence column named by rel's guard trigger; 55000 if it has none */
static char *
GuardColumn(Relation rel)
{
	TriggerDesc *trigdesc = rel->trigdesc;

	for (int i = 0; trigdesc != NULL && i < trigdesc->numtriggers; i++)
	{
		Trigger    *trigger = &trigdesc->triggers[i];

		if (strcmp(trigger->tgname, FENCE_TRIGGER_NAME) != 0)
			continue;
		return pstrdup(trigger->tgnargs >= 1 ?
					   trigger->tgargs[0] : FENCE_DEFAULT_COLUMN);
	}
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("table \"%s\" is not protected by pg_fence",
					RelationGetRelationName(rel)),
			 errdetail("It has no trigger \"%s\".", FENCE_TRIGGER_NAME),
			 errhint("Protect it with fence_protect() first.")));
	pg_unreachable();
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
	column = GuardColumn(rel);
	(void) FenceValidateColumn(rel, column);
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
