/*
 * fenced_update.h
 *	  Plan cache of fenced_update(): one prepared conditional UPDATE (and
 *	  one existence probe) per relation and set of columns.
 */
#ifndef FENCED_UPDATE_H
#define FENCED_UPDATE_H

#include "postgres.h"

#include "executor/spi.h"
#include "fmgr.h"
#include "utils/relcache.h"

/* Most key + change columns one fenced_update call may name */
#define FU_MAX_COLUMNS			100

/* Most plans one session keeps; the cache is flushed when it fills up */
#define FU_MAX_CACHED_PLANS		256

/*
 * Cache key.  attnums holds the key columns, then the change columns, in
 * the (deterministic) order jsonb iterates object keys; unused slots are 0.
 */
typedef struct FuPlanKey
{
	Oid			relid;
	AttrNumber	fence_attnum;
	AttrNumber	seq_attnum;		/* 0: no sequence (the strict form) */
	int16		nkeys;
	int16		nchanges;
	AttrNumber	attnums[FU_MAX_COLUMNS];
} FuPlanKey;

/* How to turn a JSON value into a parameter for one column */
typedef struct FuColumn
{
	Oid			typid;
	int32		typmod;
	Oid			typioparam;
	bool		is_json;		/* json/jsonb column: pass JSON text */
	FmgrInfo	input;			/* the type's input function */
} FuColumn;

/*
 * A cached plan.  Parameters of update: $1..$nkeys key values, then the
 * change values, then the token (and, with a sequence column, the
 * sequence).  probe takes the key values and returns the fence (and
 * sequence) of at most two matching rows.
 */
typedef struct FuPlan
{
	FuPlanKey	key;			/* must be first */
	bool		valid;			/* false after a relcache invalidation */
	int			pincount;		/* > 0 while a call (maybe nested) uses it */
	bool		key_is_unique;	/* a unique index covers the key columns */
	SPIPlanPtr	update;
	SPIPlanPtr	probe;
	FuColumn   *columns;		/* one per attnums[] entry */
} FuPlan;

extern FuPlan *FuLookupPlan(Relation rel, const FuPlanKey *key);
extern void FuPinPlan(FuPlan *plan);
extern void FuUnpinPlan(FuPlan *plan);

#endif							/* FENCED_UPDATE_H */
