/*
 * proof.h
 *	  Verifiable tokens: the version-1 token proof, the lock key a table
 *	  row or resource must be granted for, and the trusted public keys.
 *
 * A proof is the coordinator's Ed25519 signature over
 *	  "pgfence token proof v1" NUL
 *	  cluster_id (u64 big-endian)  token (u64 big-endian)
 *	  length of the lock key (u32 big-endian)  lock key bytes
 * and travels as  v1.<kid>.<cluster_id decimal>.<base64url signature>
 * (no padding; at most FENCE_PROOF_MAXLEN bytes), where kid names the
 * signing key (trusted_keys.h).
 * tests/vectors/token_proof_v1.txt holds the shared test vector.
 */
#ifndef PG_FENCE_PROOF_H
#define PG_FENCE_PROOF_H

#include "postgres.h"

#include "access/htup.h"
#include "fmgr.h"
#include "utils/relcache.h"

#include "pg_fence.h"
#include "trusted_keys.h"

/* Lengths of the wire form */
#define FENCE_PROOF_MAXLEN			127
#define FENCE_SIGNATURE_B64LEN		86

/* Lock keys (templates' results, resource names) are at most this long */
#define FENCE_LOCK_KEY_MAXLEN		FENCE_RESOURCE_MAXLEN

/* A proof in parsed form */
typedef struct FenceProof
{
	char		kid[FENCE_KID_LEN + 1];
	uint64		cluster_id;
	unsigned char signature[FENCE_SIGNATURE_LEN];
} FenceProof;

/* What a proof is checked for, and where a refusal is counted and recorded */
typedef struct FenceProofTarget
{
	Oid			nspid;			/* schema of the extension */
	Oid			relid;			/* protected relation, or InvalidOid */
	const char *resource;		/* resource name, or NULL */
	FencePath	path;			/* the refusing path (fence_rejections) */
} FenceProofTarget;

/* One part of a lock key template: literal text or a column's value */
typedef struct FenceKeyPart
{
	AttrNumber	attnum;			/* 0 for literal text */
	char	   *literal;		/* unescaped text (attnum == 0) */
	FmgrInfo	output;			/* the column type's output function */
} FenceKeyPart;

/* A parsed lock key template such as 'report:{report_id}' */
typedef struct FenceKeyTemplate
{
	int			nparts;
	FenceKeyPart *parts;
} FenceKeyTemplate;

/* proof.c: wire form, the current proof, checking with a cache */
extern const char *FenceParseProof(const char *text, FenceProof *proof);
extern const char *FenceCurrentProof(void);
extern void FenceSetProofSetting(const char *proof);
extern const char *FenceSetProofOverride(const char *proof);
extern void FenceCheckProof(const FenceProofTarget *target, const char *proof,
							const char *lockkey, int64 token);
extern bool FenceProofVerifies(const FenceProofTarget *target, const char *text,
							   const char *lockkey, int64 token);
extern void FenceRefuseLockKey(const FenceProofTarget *target, int sqlerrcode,
							   const char *message, const char *detail);

/* template.c: lock key templates */
extern FenceKeyTemplate *FenceParseKeyTemplate(Relation rel, const char *template,
											   AttrNumber fence_attnum,
											   MemoryContext mcxt);
extern void FenceCheckKeyTemplateUnambiguous(Relation rel, const char *template,
											 const FenceKeyTemplate *t);
/*
 * A column's value for FenceAppendLockKey: false when the caller does not
 * know it; *isnull set otherwise
 */
typedef bool (*FenceKeyColumnFn) (void *arg, AttrNumber attnum, Datum *value, bool *isnull);
/* 0, or the attnum of the first column that is unknown or NULL */
extern AttrNumber FenceAppendLockKey(const FenceKeyTemplate *template, FenceKeyColumnFn column,
									 void *arg, StringInfo key);
/* target NULL: a refusal is raised but not counted */
extern char *FenceBuildLockKey(Relation rel, const FenceKeyTemplate *template,
							   HeapTuple tuple, const FenceProofTarget *target);

#endif							/* PG_FENCE_PROOF_H */
