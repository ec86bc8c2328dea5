/*
 * template.c
 *	  Lock key templates: which coordinator lock a row of a verifying table
 *	  belongs to, e.g. 'report:{report_id}' -> report:7.
 *
 * Syntax: literal text, and column names in braces; "{{" and "}}" stand for
 * literal braces.  A template is 1..FENCE_LOCK_KEY_MAXLEN bytes.  Columns
 * must be user columns of type smallint, integer, bigint, text, varchar or
 * uuid (their text form depends on no setting), not generated (a BEFORE
 * trigger sees a stored generated column as NULL), and not the fence column.
 * A template without columns puts every row under one lock.
 *
 * The key of a row is the template with each column replaced by the text
 * form of the row's value; a NULL value, or a key longer than
 * FENCE_LOCK_KEY_MAXLEN bytes, is refused with SQLSTATE 55F02.
 *
 * Unambiguous templates: fence_protect accepts a template only if no two
 * rows that differ in its columns can have the same key
 * (FenceCheckKeyTemplateUnambiguous).  With columns c1..cn and the literal
 * Li between ci and ci+1, the key can be read back from the left up to some
 * column ck and from the right down to it:
 *   - for i < k, Li begins with a byte that cannot occur in ci's text (ci
 *     is then the longest prefix of bytes its type can print);
 *   - for i > k, L(i-1) ends with a byte that cannot occur in ci's text;
 *   - what is left, L(k-1) ck Lk, gives ck, as the literals are fixed.
 * Integers print only "-0123456789", uuids only "-0123456789abcdef"; text
 * and varchar can print any byte, so they can only be ck.  '{a}{b}' and
 * '{a}-{b}' over integers are refused ((1, 23) and (12, 3) both give
 * "123"), 'report:{a}:{b}' and '{name}/{id}' are accepted.
 *
 * fence_lock_key(rel, row) returns the key a row of rel is locked under.
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "parser/parse_relation.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/typcache.h"

#include "pg_fence.h"
#include "proof.h"

PG_FUNCTION_INFO_V1(fence_lock_key);
PG_FUNCTION_INFO_V1(fence_lock_key_problem);

/* May a column of this type appear in a lock key template? */
static bool
IsKeyColumnType(Oid typid)
{
	return typid == INT2OID || typid == INT4OID || typid == INT8OID ||
		typid == TEXTOID || typid == VARCHAROID || typid == UUIDOID;
}

/* The bytes a key column's text can contain; NULL for any byte */
static const char *
KeyColumnBytes(Oid typid)
{
	if (typid == INT2OID || typid == INT4OID || typid == INT8OID)
		return "-0123456789";
	if (typid == UUIDOID)
		return "-0123456789abcdef";
	return NULL;
}

/* Can byte c never occur in the text of a column of type typid? */
static bool
NeverPrinted(Oid typid, char c)
{
	const char *bytes = KeyColumnBytes(typid);

	return bytes != NULL && c != '\0' && strchr(bytes, c) == NULL;
}

/* Raise 22023 for a template that does not parse */
static void
ErrorBadTemplate(const char *template, const char *problem)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid lock key template \"%s\": %s", template, problem),
			 errhint("Name columns in braces, e.g. 'report:{report_id}'; "
					 "write {{ and }} for literal braces.")));
}

/* The attribute number of a template's column, checked */
static AttrNumber
KeyColumn(Relation rel, const char *template, const char *name,
		  AttrNumber fence_attnum)
{
	int			attnum = attnameAttNum(rel, name, false);
	Oid			typid;

	if (attnum == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of lock key template \"%s\" does not exist in table \"%s\"",
						name, template, RelationGetRelationName(rel))));
	if (attnum == fence_attnum)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lock key template \"%s\" must not name the fence column \"%s\"",
						template, name),
				 errdetail("A row's lock key cannot depend on the token written with it.")));
	if (TupleDescAttr(RelationGetDescr(rel), attnum - 1)->attgenerated != '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_COLUMN_DEFINITION),
				 errmsg("column \"%s\" of lock key template \"%s\" is a generated column",
						name, template),
				 errdetail("A BEFORE trigger sees a generated column (stored or virtual) as NULL, so "
						   "no INSERT or UPDATE of table \"%s\" would have a lock key.",
						   RelationGetRelationName(rel)),
				 errhint("Name the columns it is generated from instead.")));
	typid = TupleDescAttr(RelationGetDescr(rel), attnum - 1)->atttypid;
	if (!IsKeyColumnType(typid))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"%s\" of lock key template \"%s\" is of type %s",
						name, template, format_type_be(typid)),
				 errdetail("Lock key columns must be smallint, integer, bigint, text, "
						   "varchar or uuid, whose text form depends on no setting.")));
	return (AttrNumber) attnum;
}

/* Add a part (literal when attnum is 0) to t */
static void
AddPart(FenceKeyTemplate *t, Relation rel, AttrNumber attnum, const char *literal,
		MemoryContext mcxt)
{
	FenceKeyPart *part = &t->parts[t->nparts++];

	part->attnum = attnum;
	part->literal = MemoryContextStrdup(mcxt, literal);
	if (attnum != 0)
	{
		Oid			output;
		bool		isvarlena;

		getTypeOutputInfo(TupleDescAttr(RelationGetDescr(rel), attnum - 1)->atttypid,
						  &output, &isvarlena);
		fmgr_info_cxt(output, &part->output, mcxt);
	}
}

/* Parse and check template against rel; the result lives in mcxt */
FenceKeyTemplate *
FenceParseKeyTemplate(Relation rel, const char *template, AttrNumber fence_attnum,
					  MemoryContext mcxt)
{
	size_t		len = strlen(template);
	FenceKeyTemplate *t = MemoryContextAllocZero(mcxt, sizeof(FenceKeyTemplate));
	StringInfoData literal;

	if (len == 0 || len > FENCE_LOCK_KEY_MAXLEN)
		ErrorBadTemplate(template, psprintf("it must be 1 to %d bytes long, not %zu",
											FENCE_LOCK_KEY_MAXLEN, len));
	t->parts = MemoryContextAllocZero(mcxt, sizeof(FenceKeyPart) * (len + 1));
	initStringInfo(&literal);
	for (const char *p = template; *p; p++)
	{
		const char *close;
		char	   *name;

		if ((*p == '{' || *p == '}') && p[1] == *p)
		{
			appendStringInfoChar(&literal, *p++);
			continue;
		}
		if (*p == '}')
			ErrorBadTemplate(template, "a } without its {");
		if (*p != '{')
		{
			appendStringInfoChar(&literal, *p);
			continue;
		}
		close = strchr(p + 1, '}');
		if (close == NULL || memchr(p + 1, '{', close - p - 1) != NULL)
			ErrorBadTemplate(template, "a { without its }");
		if (close == p + 1)
			ErrorBadTemplate(template, "{} names no column");
		name = pnstrdup(p + 1, close - p - 1);
		if (literal.len > 0)
			AddPart(t, rel, 0, literal.data, mcxt);
		resetStringInfo(&literal);
		AddPart(t, rel, KeyColumn(rel, template, name, fence_attnum), "", mcxt);
		p = close;
	}
	if (literal.len > 0)
		AddPart(t, rel, 0, literal.data, mcxt);
	return t;
}

/*
 * NULL when two rows that differ in t's columns always have different keys
 * (the rule is in the header comment), else why not (palloc'd).
 */
static char *
KeyTemplateAmbiguity(Relation rel, const FenceKeyTemplate *t)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);
	int			ncols = 0;
	AttrNumber *cols = palloc(sizeof(AttrNumber) * (t->nparts + 1));
	const char **between = palloc0(sizeof(char *) * (t->nparts + 1));
	int			left = 0;		/* c1..c(left) read from the left (0-based: cols[0..left-1]) */
	int			right;			/* cols[right+1..] read from the right */
	Form_pg_attribute lcol;
	Form_pg_attribute rcol;
	const char *lit;

	/* between[i]: the literal after cols[i], NULL when none */
	for (int i = 0; i < t->nparts; i++)
	{
		if (t->parts[i].attnum != 0)
			cols[ncols++] = t->parts[i].attnum;
		else if (ncols > 0)
			between[ncols - 1] = t->parts[i].literal;
	}
	while (left < ncols - 1)
	{
		lit = between[left];
		if (lit == NULL ||
			!NeverPrinted(TupleDescAttr(tupdesc, cols[left] - 1)->atttypid, lit[0]))
			break;
		left++;
	}
	right = ncols - 1;
	while (right > 0)
	{
		lit = between[right - 1];
		if (lit == NULL ||
			!NeverPrinted(TupleDescAttr(tupdesc, cols[right] - 1)->atttypid,
						  lit[strlen(lit) - 1]))
			break;
		right--;
	}
	if (right <= left)
		return NULL;
	/* neither reading gets past the pair (cols[left], cols[left + 1]) */
	lcol = TupleDescAttr(tupdesc, cols[left] - 1);
	rcol = TupleDescAttr(tupdesc, cols[left + 1] - 1);
	lit = between[left];
	return psprintf("Columns \"%s\" (%s) and \"%s\" (%s) are separated by %s%s%s, which "
					"does not tell where the first one's text ends.",
					NameStr(lcol->attname), format_type_be(lcol->atttypid),
					NameStr(rcol->attname), format_type_be(rcol->atttypid),
					lit ? "\"" : "nothing", lit ? lit : "", lit ? "\"" : "");
}

/* Raise 22023 if two different rows could have the same key under t */
void
FenceCheckKeyTemplateUnambiguous(Relation rel, const char *template,
								 const FenceKeyTemplate *t)
{
	char	   *why = KeyTemplateAmbiguity(rel, t);

	if (why != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lock key template \"%s\" is ambiguous: two different rows could "
						"have the same lock key", template),
				 errdetail_internal("%s", why),
				 errhint("Separate columns with a character their text cannot contain, "
						 "e.g. ':' or '/' ('report:{a}:{b}'); integers print digits and "
						 "'-', uuids hex digits and '-'; a text or varchar column can have "
						 "other columns on one side only.")));
}

/*
 * Append the lock key under template to key, each column's value from
 * column(arg, attnum, ...); stops at the first column that is unknown or
 * NULL and returns its attnum, else 0
 */
AttrNumber
FenceAppendLockKey(const FenceKeyTemplate *template, FenceKeyColumnFn column, void *arg,
				   StringInfo key)
{
	for (int i = 0; i < template->nparts; i++)
	{
		const FenceKeyPart *part = &template->parts[i];
		bool		isnull;
		Datum		value;

		if (part->attnum == 0)
		{
			appendStringInfoString(key, part->literal);
			continue;
		}
		if (!column(arg, part->attnum, &value, &isnull) || isnull)
			return part->attnum;
		appendStringInfoString(key, OutputFunctionCall((FmgrInfo *) &part->output, value));
	}
	return 0;
}

/* A heap tuple and its descriptor, for TupleColumn */
typedef struct KeyTuple
{
	HeapTuple	tuple;
	TupleDesc	tupdesc;
} KeyTuple;

/* FenceKeyColumnFn over a heap tuple: every column is known */
static bool
TupleColumn(void *arg, AttrNumber attnum, Datum *value, bool *isnull)
{
	KeyTuple   *kt = (KeyTuple *) arg;

	*value = heap_getattr(kt->tuple, attnum, kt->tupdesc, isnull);
	return true;
}

/* The lock key of tuple under template (palloc'd); 55F02 if it has none */
char *
FenceBuildLockKey(Relation rel, const FenceKeyTemplate *template, HeapTuple tuple,
				  const FenceProofTarget *target)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);
	KeyTuple	kt = {tuple, tupdesc};
	StringInfoData key;
	AttrNumber	null_attnum;

	initStringInfo(&key);
	null_attnum = FenceAppendLockKey(template, TupleColumn, &kt, &key);
	if (null_attnum != 0)
		FenceRefuseLockKey(target, ERRCODE_FENCE_PROOF,
						   psprintf("row of table \"%s\" has no lock key: column \"%s\" is NULL",
									RelationGetRelationName(rel),
									NameStr(TupleDescAttr(tupdesc, null_attnum - 1)->attname)),
						   "The table verifies token proofs, and its lock key template "
						   "names this column.");
	if (key.len > FENCE_LOCK_KEY_MAXLEN)
		FenceRefuseLockKey(target, ERRCODE_FENCE_PROOF,
						   psprintf("lock key of a row of table \"%s\" is %d bytes long, "
									"more than %d", RelationGetRelationName(rel),
									key.len, FENCE_LOCK_KEY_MAXLEN),
						   psprintf("The key begins \"%.64s\".", key.data));
	return key.data;
}

/* The template of rel's verifying guard, parsed; NULL if it has none */
static FenceKeyTemplate *
GuardTemplate(Relation rel, const char **template)
{
	const Trigger *guard = FenceFindGuard(rel);

	if (guard == NULL || FenceGuardTemplateArg(guard) == NULL)
		return NULL;
	*template = guard->tgargs[2];
	return FenceParseKeyTemplate(rel, guard->tgargs[2],
								 attnameAttNum(rel, guard->tgargs[0], false),
								 CurrentMemoryContext);
}

/*
 * fence_lock_key_problem(rel) -> text: NULL when rel's lock key template is
 * unambiguous (or rel does not verify proofs), else why it is not.  For the
 * upgrade to 1.3, which warns about tables protected before templates were
 * checked, and drops it again.
 */
Datum
fence_lock_key_problem(PG_FUNCTION_ARGS)
{
	Relation	rel = table_open(PG_GETARG_OID(0), AccessShareLock);
	const char *template = NULL;
	FenceKeyTemplate *t = GuardTemplate(rel, &template);
	char	   *why = t ? KeyTemplateAmbiguity(rel, t) : NULL;

	table_close(rel, AccessShareLock);
	if (why == NULL)
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(cstring_to_text(psprintf("template \"%s\": %s", template, why)));
}

/*
 * fence_lock_key(rel, row) -> text: the lock key a row of rel needs a proof
 * for, from the template of rel's guard (22023 for a row of another type,
 * 55000 for a table that does not verify proofs).
 */
Datum
fence_lock_key(PG_FUNCTION_ARGS)
{
	Oid			relid;
	Oid			rowtype = get_fn_expr_argtype(fcinfo->flinfo, 1);
	Relation	rel;
	const char *template;
	HeapTupleHeader row;
	HeapTupleData tuple;
	FenceKeyTemplate *t;
	char	   *key;

	FenceCheckNotNull(fcinfo, 0, "rel");
	FenceCheckNotNull(fcinfo, 1, "row");
	relid = PG_GETARG_OID(0);
	rel = table_open(relid, AccessShareLock);
	if (rowtype != rel->rd_rel->reltype)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("row is of type %s, not a row of table \"%s\"",
						format_type_be(rowtype), RelationGetRelationName(rel)),
				 errhint("Pass a row of the table, e.g. fence_lock_key('%s', r) FROM %s r.",
						 RelationGetRelationName(rel), RelationGetRelationName(rel))));
	t = GuardTemplate(rel, &template);
	if (t == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" does not verify token proofs",
						RelationGetRelationName(rel)),
				 errhint("Protect it with fence_protect(..., lock_key => '...').")));
	row = PG_GETARG_HEAPTUPLEHEADER(1);
	tuple.t_len = HeapTupleHeaderGetDatumLength(row);
	ItemPointerSetInvalid(&tuple.t_self);
	tuple.t_tableOid = relid;
	tuple.t_data = row;
	key = FenceBuildLockKey(rel, t, &tuple, NULL);
	table_close(rel, AccessShareLock);
	PG_RETURN_TEXT_P(cstring_to_text(key));
}
