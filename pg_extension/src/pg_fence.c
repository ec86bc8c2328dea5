/*
 * pg_fence.c
 *	  Module entry point: settings (GUCs) and helpers shared by all features
 *	  (token and mode rules, argument and permission checks, parsing).
 *
 * Settings:
 *	  pg_fence.token           the session's fencing token ('' = none),
 *	                           normally set with SET LOCAL per transaction;
 *	                           never a server/database/role/function default
 *	  pg_fence.seq             the write's sequence number under its token
 *	                           ('' = none), for sequenced tables; the same
 *	                           rules as the token
 *	  pg_fence.proof           the token proof of the session or transaction
 *	                           ('' = none; proof.h), same rules as the token
 *	  pg_fence.log_rejections  one LOG line per stale rejection (superuser)
 *	  pg_fence.max_tracked     fence_stats capacity for relations, and
 *	  pg_fence.max_tracked_resources  for resources (exist only when preloaded)
 *	  pg_fence.preempt         end stale in-flight transactions (superuser;
 *	                           preempt.c)
 *	  pg_fence.max_inflight    entries of the preemption registry (exists
 *	                           only when preloaded)
 *
 * Where a token, sequence or proof may come from: only the session itself
 * (SET, SET LOCAL, set_config, connection options).  Checked twice: by the
 * check hooks, whenever a value is set while the library is loaded (they see
 * where it comes from, and PGC_S_TEST when CREATE FUNCTION or ALTER
 * ROLE/DATABASE ... SET validates it), and where the value is used
 * (FenceCheckSettingOrigin), because a value stored while the library was
 * not loaded is never validated, and a function's SET clause is applied as
 * an ordinary session value: only the variable's stack says it came from
 * the function.
 */
#include "postgres.h"

#include <errno.h>

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/reltrigger.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/rls.h"

#include "pg_fence.h"
#include "proof.h"
#include "trusted_keys.h"

PG_MODULE_MAGIC;

/* Bounds of pg_fence.max_tracked and pg_fence.max_tracked_resources */
#define FENCE_MAX_TRACKED_DEFAULT	1000
#define FENCE_MAX_TRACKED_MIN		16
#define FENCE_MAX_TRACKED_MAX		100000

/* Bounds of pg_fence.max_inflight */
#define FENCE_MAX_INFLIGHT_DEFAULT	1024
#define FENCE_MAX_INFLIGHT_MIN		1
#define FENCE_MAX_INFLIGHT_MAX		100000

/* pg_fence.rejection_log_size: entries of the ring of recent rejections */
#define FENCE_REJECTION_LOG_DEFAULT	1024
#define FENCE_REJECTION_LOG_MAX		65536

/* Parsed value of pg_fence.token, kept as the GUC's "extra" */
typedef struct FenceTokenSetting
{
	bool		is_set;
	int64		token;
} FenceTokenSetting;

bool		fence_log_rejections = true;
int			fence_max_tracked = FENCE_MAX_TRACKED_DEFAULT;
int			fence_max_tracked_resources = FENCE_MAX_TRACKED_DEFAULT;

static char *fence_token_string = NULL;
static char *fence_seq_string = NULL;
static char *fence_proof_string = NULL;
static FenceTokenSetting fence_token = {false, 0};
static FenceTokenSetting fence_seq = {false, 0};

/* The variables of pg_fence.token, .seq and .proof, found after defining them */
static struct config_generic *token_variable = NULL;
static struct config_generic *seq_variable = NULL;
static struct config_generic *proof_variable = NULL;

void		_PG_init(void);

/* Parse a token string; true when it is '' (unset) or a bigint >= 0 */
static bool
ParseTokenString(const char *value, FenceTokenSetting *result)
{
	const char *p = value;
	char	   *end;
	int64		token;

	result->is_set = false;
	result->token = 0;
	while (*p == ' ')
		p++;
	if (*p == '\0')
		return true;
	if (*p < '0' || *p > '9')
		return false;
	errno = 0;
	token = strtoi64(p, &end, 10);
	if (errno != 0)
		return false;
	while (*end == ' ')
		end++;
	if (*end != '\0')
		return false;
	result->is_set = true;
	result->token = token;
	return true;
}

/*
 * May a token come from this source?  Only from the session itself (SET,
 * SET LOCAL, set_config, connection options), never from a server, database,
 * role or function default: such a default would give every tokenless UPDATE
 * and DELETE a token, and defeat "no token, no write".
 */
static bool
IsSessionTokenSource(GucSource source)
{
	switch (source)
	{
		case PGC_S_ENV_VAR:
		case PGC_S_FILE:
		case PGC_S_ARGV:
		case PGC_S_GLOBAL:
		case PGC_S_DATABASE:
		case PGC_S_USER:
		case PGC_S_DATABASE_USER:
		case PGC_S_TEST:
			return false;
		default:
			return true;
	}
}

/*
 * Check a pg_fence.token or pg_fence.seq value (what names it in messages):
 * '' or a non-negative bigint, and never a default of the server, database,
 * role or function
 */
static bool
CheckNumberSetting(char **newval, void **extra, GucSource source,
				   const char *what, const char *example)
{
	FenceTokenSetting parsed;
	FenceTokenSetting *copy;

	if (!ParseTokenString(*newval ? *newval : "", &parsed))
	{
		GUC_check_errdetail("pg_fence.%s must be empty or an integer "
							"between 0 and 9223372036854775807.", what);
		GUC_check_errhint("Use the %s, e.g. SET LOCAL pg_fence.%s = %s.",
						  strcmp(what, "seq") == 0 ?
						  "sequence number of this write under its token" :
						  "fencing token your lease was granted with",
						  what, example);
		return false;
	}
	if (parsed.is_set && !IsSessionTokenSource(source))
	{
		GUC_check_errdetail("A fencing %s belongs to one lock grant; it cannot be a "
							"default in postgresql.conf, ALTER SYSTEM, ALTER DATABASE/ROLE "
							"... SET or a function's SET clause.",
							strcmp(what, "seq") == 0 ? "sequence" : "token");
		GUC_check_errhint("Set it in the transaction that writes: "
						  "SET LOCAL pg_fence.%s = %s.", what, example);
		return false;
	}
	/* released by the GUC machinery: allocated as this major frees it */
	copy = (FenceTokenSetting *) FenceGucMalloc(sizeof(FenceTokenSetting));
	if (copy == NULL)
	{
		GUC_check_errcode(ERRCODE_OUT_OF_MEMORY);
		return false;
	}
	*copy = parsed;
	*extra = copy;
	return true;
}

/* GUC check hook of pg_fence.token: accept '' or a non-negative bigint */
static bool
CheckTokenSetting(char **newval, void **extra, GucSource source)
{
	return CheckNumberSetting(newval, extra, source, "token", "42");
}

/* GUC check hook of pg_fence.seq: accept '' or a non-negative bigint */
static bool
CheckSeqSetting(char **newval, void **extra, GucSource source)
{
	return CheckNumberSetting(newval, extra, source, "seq", "3");
}

/* GUC check hook of pg_fence.proof: accept '' or a well-formed v1 proof */
static bool
CheckProofSetting(char **newval, void **extra, GucSource source)
{
	FenceProof	parsed;
	const char *reason;

	if (*newval == NULL || (*newval)[0] == '\0')
		return true;
	reason = FenceParseProof(*newval, &parsed);
	if (reason != NULL)
	{
		GUC_check_errdetail("pg_fence.proof must be empty or a token proof "
							"v1.<key id>.<cluster id>.<signature>; this one is "
							"malformed: %s.", reason);
		GUC_check_errhint("Use the proof the coordinator granted with your token.");
		return false;
	}
	if (!IsSessionTokenSource(source))
	{
		GUC_check_errdetail("A token proof belongs to one lock grant; it cannot be a "
							"default in postgresql.conf, ALTER SYSTEM, ALTER DATABASE/ROLE "
							"... SET or a function's SET clause.");
		GUC_check_errhint("Set it in the transaction that writes: "
						  "SET LOCAL pg_fence.proof = '<proof>'.");
		return false;
	}
	return true;
}

/* GUC assign hook of pg_fence.proof: publish the value */
static void
AssignProofSetting(const char *newval, void *extra)
{
	FenceSetProofSetting(newval);
}

/* GUC assign hook of pg_fence.token: publish the parsed value */
static void
AssignTokenSetting(const char *newval, void *extra)
{
	if (extra != NULL)
		fence_token = *(FenceTokenSetting *) extra;
	else
		fence_token.is_set = false;
}

/* GUC assign hook of pg_fence.seq: publish the parsed value */
static void
AssignSeqSetting(const char *newval, void *extra)
{
	if (extra != NULL)
		fence_seq = *(FenceTokenSetting *) extra;
	else
		fence_seq.is_set = false;
}

/* Define the module's settings and, when preloaded, its shared memory */
void
_PG_init(void)
{
	DefineCustomStringVariable("pg_fence.token",
							   "Fencing token of the current session or transaction.",
							   "Used by fence_guard when an UPDATE does not set the "
							   "fence column, and by every DELETE. Empty means no token.",
							   &fence_token_string,
							   "",
							   PGC_USERSET,
							   0,
							   CheckTokenSetting,
							   AssignTokenSetting,
							   NULL);

	DefineCustomStringVariable("pg_fence.seq",
							   "Sequence number of the current transaction's writes under its token.",
							   "Used by fence_guard on tables protected in mode sequenced when an "
							   "UPDATE does not set the sequence column, and by every DELETE. "
							   "Empty means no sequence.",
							   &fence_seq_string,
							   "",
							   PGC_USERSET,
							   0,
							   CheckSeqSetting,
							   AssignSeqSetting,
							   NULL);

	DefineCustomStringVariable("pg_fence.proof",
							   "Token proof of the current session or transaction.",
							   "Checked with the token on tables protected with a lock key "
							   "and on resources that require proofs. Empty means no proof.",
							   &fence_proof_string,
							   "",
							   PGC_USERSET,
							   0,
							   CheckProofSetting,
							   AssignProofSetting,
							   NULL);

	DefineCustomBoolVariable("pg_fence.log_rejections",
							 "Writes one LOG line for every stale token rejected.",
							 NULL,
							 &fence_log_rejections,
							 true,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("pg_fence.preempt",
							 "Ends open transactions that admitted an older token for a "
							 "target a newer token reaches.",
							 "Needs shared_preload_libraries = 'pg_fence'. Both sessions need it: "
							 "the older one to be registered, the newer one to preempt.",
							 &fence_preempt,
							 false,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	/*
	 * PostgreSQL refuses (FATAL) to create a PGC_POSTMASTER setting after
	 * startup, and the statistics need preloading anyway: define it and the
	 * shared memory only while shared_preload_libraries is processed.
	 */
	if (process_shared_preload_libraries_in_progress)
	{
		DefineCustomIntVariable("pg_fence.max_tracked",
								"Maximum number of relations tracked by fence_stats, all databases together.",
								"Exists only with shared_preload_libraries = 'pg_fence'.",
								&fence_max_tracked,
								FENCE_MAX_TRACKED_DEFAULT,
								FENCE_MAX_TRACKED_MIN,
								FENCE_MAX_TRACKED_MAX,
								PGC_POSTMASTER,
								0,
								NULL, NULL, NULL);
		DefineCustomIntVariable("pg_fence.max_tracked_resources",
								"Maximum number of resources tracked by fence_stats, all databases together.",
								"Exists only with shared_preload_libraries = 'pg_fence'.",
								&fence_max_tracked_resources,
								FENCE_MAX_TRACKED_DEFAULT,
								FENCE_MAX_TRACKED_MIN,
								FENCE_MAX_TRACKED_MAX,
								PGC_POSTMASTER,
								0,
								NULL, NULL, NULL);
		DefineCustomIntVariable("pg_fence.max_inflight",
								"Maximum number of in-flight admissions pg_fence.preempt registers, all databases together.",
								"Exists only with shared_preload_libraries = 'pg_fence'. "
								"An admission that finds the registry full cannot be preempted.",
								&fence_max_inflight,
								FENCE_MAX_INFLIGHT_DEFAULT,
								FENCE_MAX_INFLIGHT_MIN,
								FENCE_MAX_INFLIGHT_MAX,
								PGC_POSTMASTER,
								0,
								NULL, NULL, NULL);
		DefineCustomIntVariable("pg_fence.rejection_log_size",
								"Number of recent rejections fence_rejections keeps, all databases together.",
								"Exists only with shared_preload_libraries = 'pg_fence'. "
								"0 keeps none (fence_rejection_counts still counts).",
								&fence_rejection_log_size,
								FENCE_REJECTION_LOG_DEFAULT,
								0,
								FENCE_REJECTION_LOG_MAX,
								PGC_POSTMASTER,
								0,
								NULL, NULL, NULL);
		FenceStatsInit();
		FenceRejectionsInit();
	}

	token_variable = FenceFindGucVariable("pg_fence.token");
	seq_variable = FenceFindGucVariable("pg_fence.seq");
	proof_variable = FenceFindGucVariable("pg_fence.proof");
	if (token_variable == NULL || seq_variable == NULL || proof_variable == NULL)
		elog(ERROR, "pg_fence: settings pg_fence.token, .seq and .proof not found after defining them");

	FenceOutboxInit();
	MarkGUCPrefixReserved("pg_fence");
	FenceGuardInit();
	FencePreemptInit(process_shared_preload_libraries_in_progress);
	FenceTrustedKeysInit();
}

/*
 * Where a stored default came from, for the message that refuses it; NULL
 * for the session's own sources (SET, SET LOCAL, set_config, a function's
 * SET clause, connection options)
 */
static const char *
DefaultSourceName(GucSource source)
{
	switch (source)
	{
		case PGC_S_ENV_VAR:
			return "an environment variable of the server";
		case PGC_S_FILE:
			return "postgresql.conf or ALTER SYSTEM";
		case PGC_S_ARGV:
			return "the server's command line";
		case PGC_S_GLOBAL:
			return "ALTER ROLE ALL ... SET";
		case PGC_S_DATABASE:
			return "ALTER DATABASE ... SET";
		case PGC_S_USER:
			return "ALTER ROLE ... SET";
		case PGC_S_DATABASE_USER:
			return "ALTER ROLE ... IN DATABASE ... SET";
		default:
			return NULL;
	}
}

/*
 * Raise 22023 unless the current value of variable (pg_fence.<what>, set)
 * is the session's own: not a server, database or role default (its
 * source), and not a function's SET clause.  A SET clause is applied at
 * function entry as GUC_ACTION_SAVE, which leaves a GUC_SAVE entry on top of
 * the variable's stack for as long as that value is current: a SET at that
 * level turns the entry into GUC_SET, and any other SET pushes a newer
 * entry.  (A SET LOCAL in the body of such a function keeps the GUC_SAVE
 * entry on top, so it is refused too.)
 */
static void
CheckSettingOrigin(const struct config_generic *variable, const char *what,
				   const char *example)
{
	const char *from = NULL;

	if (variable->stack != NULL && variable->stack->state == GUC_SAVE)
		from = "a function's SET clause";
	else
		from = DefaultSourceName(variable->source);
	if (from == NULL)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("pg_fence.%s is set by %s", what, from),
			 errdetail("A fencing %s belongs to one lock grant; it cannot be a "
					   "default of the server, a database, a role or a function.",
					   strcmp(what, "seq") == 0 ? "sequence number" :
					   strcmp(what, "proof") == 0 ? "token proof" : "token"),
			 errhint("Remove it there (ALTER ... RESET pg_fence.%s) and set it in the "
					 "transaction that writes: SET LOCAL pg_fence.%s = %s.",
					 what, what, example)));
}

/* The session token from pg_fence.token; false when none is set */
bool
FenceSessionToken(int64 *token)
{
	if (!fence_token.is_set)
		return false;
	CheckSettingOrigin(token_variable, "token", "42");
	*token = fence_token.token;
	return true;
}

/* The session's sequence number from pg_fence.seq; false when none is set */
bool
FenceSessionSeq(int64 *seq)
{
	if (!fence_seq.is_set)
		return false;
	CheckSettingOrigin(seq_variable, "seq", "3");
	*seq = fence_seq.token;
	return true;
}

/* Raise 22023 unless pg_fence.proof (set) is the session's own */
void
FenceCheckProofOrigin(void)
{
	CheckSettingOrigin(proof_variable, "proof", "'<proof>'");
}

/* Raise 22023 unless seq is a valid (non-negative) sequence number */
void
FenceCheckSeq(int64 seq, const char *argname)
{
	if (seq < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("fencing sequence number must not be negative"),
				 errdetail("The %s is " INT64_FORMAT ".", argname, seq),
				 errhint("Number the writes under one token 1, 2, 3, ...; "
						 "sequence numbers are 0 or greater.")));
}

/* Raise 22023 unless token is a valid (non-negative) fencing token */
void
FenceCheckToken(int64 token, const char *argname)
{
	if (token < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("fencing token must not be negative"),
				 errdetail("The %s is " INT64_FORMAT ".", argname, token),
				 errhint("Pass the token the coordinator granted; tokens are 0 or greater.")));
}

/* Parse a mode name; 22023 for anything but strict / same_generation */
FenceMode
FenceParseMode(const char *mode)
{
	if (strcmp(mode, "strict") == 0)
		return FENCE_MODE_STRICT;
	if (strcmp(mode, "same_generation") == 0)
		return FENCE_MODE_SAME_GENERATION;
	if (strcmp(mode, "sequenced") == 0)
		return FENCE_MODE_SEQUENCED;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid fence mode \"%s\"", mode),
			 errhint("Use 'strict' (only newer tokens), 'same_generation' "
					 "(newer or equal tokens) or 'sequenced' (newer (token, sequence) "
					 "pairs).")));
	pg_unreachable();
}

/* The SQL spelling of a mode */
const char *
FenceModeName(FenceMode mode)
{
	switch (mode)
	{
		case FENCE_MODE_STRICT:
			return "strict";
		case FENCE_MODE_SAME_GENERATION:
			return "same_generation";
		case FENCE_MODE_SEQUENCED:
			return "sequenced";
	}
	return "strict";
}

/* The fence rule itself: does a row or resource at fence admit token? */
bool
FenceAdmits(FenceMode mode, int64 fence, int64 token)
{
	Assert(mode != FENCE_MODE_SEQUENCED);	/* FencePairAfter decides those */
	if (mode == FENCE_MODE_SAME_GENERATION)
		return fence <= token;
	return fence < token;
}

/*
 * The sequenced rule: is incoming after stored in (token, seq) order?  A
 * newer token with any sequence, or the same token with a larger one.  A
 * stored pair without a sequence (a resource written without one) ranks
 * below every sequence of its token; an incoming pair without one is never
 * after a stored pair of its own token (it cannot be ordered there).
 */
bool
FencePairAfter(const FencePair *incoming, const FencePair *stored)
{
	if (incoming->token != stored->token)
		return incoming->token > stored->token;
	if (!incoming->has_seq)
		return false;
	return !stored->has_seq || incoming->seq > stored->seq;
}

/* "(42, 3)", or "42" for a pair without a sequence (palloc'd) */
char *
FencePairString(const FencePair *pair)
{
	if (!pair->has_seq)
		return psprintf(INT64_FORMAT, pair->token);
	return psprintf("(" INT64_FORMAT ", " INT64_FORMAT ")", pair->token, pair->seq);
}

/* rel's trigger named FENCE_TRIGGER_NAME (its guard), or NULL */
const Trigger *
FenceFindGuard(Relation rel)
{
	for (int i = 0; rel->trigdesc != NULL && i < rel->trigdesc->numtriggers; i++)
		if (strcmp(rel->trigdesc->triggers[i].tgname, FENCE_TRIGGER_NAME) == 0)
			return &rel->trigdesc->triggers[i];
	return NULL;
}

/*
 * The lock key template argument of a guard trigger, or NULL: the third
 * argument, which a sequenced guard without a template leaves empty (its
 * fourth is the sequence column)
 */
const char *
FenceGuardTemplateArg(const Trigger *guard)
{
	if (guard->tgnargs < 3 || guard->tgargs[2][0] == '\0')
		return NULL;
	return guard->tgargs[2];
}

/* Name of the code path that took a decision, for the LOG line */
const char *
FencePathName(FencePath path)
{
	switch (path)
	{
		case FENCE_PATH_GUARD:
			return "fence_guard";
		case FENCE_PATH_FENCED_UPDATE:
			return "fenced_update";
		case FENCE_PATH_ADMIT:
			return "fence_admit";
		case FENCE_PATH_ADVANCE:
			return "fence_advance";
		case FENCE_PATH_ENQUEUE:
			return "fence_enqueue";
	}
	return "pg_fence";
}

/* Name of a path in fence_rejections and fence_rejection_counts */
const char *
FencePathShortName(FencePath path)
{
	switch (path)
	{
		case FENCE_PATH_GUARD:
			return "guard";
		case FENCE_PATH_FENCED_UPDATE:
			return "fenced_update";
		case FENCE_PATH_ADMIT:
			return "admit";
		case FENCE_PATH_ADVANCE:
			return "advance";
		case FENCE_PATH_ENQUEUE:
			return "enqueue";
	}
	return "unknown";
}

/* schema.table, each part quoted only if needed (palloc'd) */
char *
FenceQualifiedRelName(Relation rel)
{
	return quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
									  RelationGetRelationName(rel));
}

/* Raise 22004 if SQL argument argno (0-based) is NULL */
void
FenceCheckNotNull(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be NULL", argname)));
}

/* SPI_prepare + SPI_keepplan (inside an SPI connection), or an error naming the statement */
SPIPlanPtr
FencePrepareKeptPlan(const char *sql, int nargs, Oid *argtypes)
{
	SPIPlanPtr	plan = SPI_prepare(sql, nargs, argtypes);

	if (plan == NULL)
		elog(ERROR, "pg_fence: could not prepare \"%s\": %s",
			 sql, SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "pg_fence: could not keep plan for \"%s\"", sql);
	return plan;
}

/* Parse 1..20 decimal digits, no leading zero, into a u64 in 1..2^64-1 */
bool
FenceParseUint64(const char *text, size_t len, uint64 *value)
{
	uint64		result = 0;

	if (len == 0 || len > 20 || text[0] == '0')
		return false;
	for (size_t i = 0; i < len; i++)
	{
		unsigned	digit;

		if (text[i] < '0' || text[i] > '9')
			return false;
		digit = (unsigned) (text[i] - '0');
		if (result > (PG_UINT64_MAX - digit) / 10)
			return false;
		result = result * 10 + digit;
	}
	*value = result;
	return true;
}

/* Raise 42501 unless the current user owns relid (superusers do) */
void
FenceCheckOwner(Oid relid)
{
	if (!FenceOwnsRelation(relid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER,
					   get_relkind_objtype(get_rel_relkind(relid)),
					   get_rel_name(relid));
}

/*
 * Raise 42501 if row level security applies to the current user on relid:
 * its policies would hide rows from a raise, which would leave them below
 * the token without a word
 */
void
FenceCheckRowSecurity(Oid relid)
{
	if (check_enable_rls(relid, InvalidOid, true) != RLS_ENABLED)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("cannot raise the fences of table \"%s\": row level security "
					"applies to the current user", get_rel_name(relid)),
			 errdetail("Its policies could hide rows from the raise, whose fences "
					   "would then stay below the token."),
			 errhint("Raise as a superuser or a role with BYPASSRLS, or run "
					 "ALTER TABLE ... NO FORCE ROW LEVEL SECURITY for the raise.")));
}
