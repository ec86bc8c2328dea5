/*
 * compat.h
 *	  The PostgreSQL majors pg_fence supports, and the few server interfaces
 *	  that differ between them, each behind one helper.
 *
 * Supported: 15, 16, 17 and 18.  15, 17 and 18 are built and tested (the
 * host's server and Debian's trixie and sid chroots: scripts/pg-matrix.sh);
 * 16 is written against REL_16_STABLE's API; neither built nor run here.
 *
 * What moved, and where it is used:
 *	  16  GUC "extra" data and string values live in a GUC memory context and
 *	      are released with guc_free(), which pfree()s: a check hook must
 *	      allocate its extra with guc_malloc().  Before 16 they were malloc()ed
 *	      and free()d.  (pg_fence.c, CheckTokenSetting)
 *	  16  pg_class_ownercheck() became object_ownercheck(RelationRelationId, ...).
 *	      (pg_fence.c, FenceCheckOwner)
 *	  16  find_option() is exported; before 16 a variable is found by walking
 *	      get_guc_variables() (whose signature changed in 16).  (pg_fence.c,
 *	      the origin of pg_fence.token, .seq and .proof where they are used)
 *	  17  PGPROC's lxid moved into vxid.lxid.  (guard.c, the admitted row)
 *	  17  PGPROC's pgprocno became MyProcNumber.  (preempt.c, the registry)
 */
#ifndef PG_FENCE_COMPAT_H
#define PG_FENCE_COMPAT_H

#include "postgres.h"

#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/guc.h"
#include "utils/guc_tables.h"

#if PG_VERSION_NUM < 150000
#error "pg_fence supports PostgreSQL 15, 16, 17 and 18 (tested: 15, 17, 18); this server is older"
#endif

#if PG_VERSION_NUM >= 160000
#include "catalog/pg_class_d.h"
#endif

/* Allocate a GUC check hook's "extra" the way this major will free it */
static inline void *
FenceGucMalloc(size_t size)
{
#if PG_VERSION_NUM >= 160000
	return guc_malloc(LOG, size);
#else
	return malloc(size);
#endif
}

/* The GUC variable named name (defined, not a placeholder), or NULL */
static inline struct config_generic *
FenceFindGucVariable(const char *name)
{
#if PG_VERSION_NUM >= 160000
	struct config_generic *gen = find_option(name, false, true, DEBUG1);

	if (gen == NULL || (gen->flags & GUC_CUSTOM_PLACEHOLDER) != 0)
		return NULL;
	return gen;
#else
	struct config_generic **vars = get_guc_variables();
	int			n = GetNumConfigOptions();

	for (int i = 0; i < n; i++)
		if (strcmp(vars[i]->name, name) == 0 &&
			(vars[i]->flags & GUC_CUSTOM_PLACEHOLDER) == 0)
			return vars[i];
	return NULL;
#endif
}

/* Does roleid own relation relid (or is it a superuser)? */
static inline bool
FenceOwnsRelation(Oid relid, Oid roleid)
{
#if PG_VERSION_NUM >= 160000
	return object_ownercheck(RelationRelationId, relid, roleid);
#else
	return pg_class_ownercheck(relid, roleid);
#endif
}

/* This backend's local transaction id */
static inline LocalTransactionId
FenceLocalXid(void)
{
#if PG_VERSION_NUM >= 170000
	return MyProc->vxid.lxid;
#else
	return MyProc->lxid;
#endif
}

/* This backend's PGPROC number (GetPGProcByNumber's argument) */
static inline int
FenceMyProcNumber(void)
{
#if PG_VERSION_NUM >= 170000
	return MyProcNumber;
#else
	return MyProc->pgprocno;
#endif
}

#endif							/* PG_FENCE_COMPAT_H */
