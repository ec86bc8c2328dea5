"""Publishing a lock's generation at the resources it guards before any work
under the lock starts (docs/guarantees.md, "Publishing the generation
first"), as `fencectl run --advance` does:

    pgfence.publish_generation(db, ["report:7"], lease.token, {"report:7": lease.proof})

runs fence_advance(resource, token, proof) for each resource, in sorted order
and each once, in one transaction of its own on `db` that commits only when
every resource took the token. From that commit on, pg_fence refuses every
older token at those resources, whether or not the new holder has written.

`db` is a DB-API 2.0 connection the caller made (psycopg2, psycopg 3, pg8000:
a driver that takes %s parameters); this package does not import a driver
and never connects. It must not be inside a transaction with work of its
own: the publish commits (with `autocommit` on, it sends BEGIN and COMMIT
itself). fence_advance is called by its schema-qualified name (the schema
pg_fence is installed in), whatever the connection's search_path.

`timeout` (a duration, e.g. "2s", or None: no bound of its own) bounds the
publish: the transaction runs SET LOCAL lock_timeout and statement_timeout
to it, so an older holder's open transaction on a resource's row (a paused
fence_admit) makes it fail with PublishError (SQLSTATE 55P03 or 57014)
instead of waiting. lock(advance=...) passes the lease's usable time (until
lost_at, the lease's deadline minus the margin).

| outcome                                   | raises             | exit_code |
|-------------------------------------------|--------------------|-----------|
| every resource's fence is the token       | nothing            |           |
| a resource holds a newer fence already    | StalePublishError  | 10        |
| (or, with pg_fence.preempt, a newer token |                    |           |
| is in flight there: 55F01)                |                    |           |
| any database error (connection, SQL, a    | PublishError       | 11        |
| refused proof 55F02, a timeout)           |                    |           |

Nothing is committed when it raises (the transaction is rolled back).
"""

from . import errors
from .duration import parse_duration_ms

MAX_RESOURCES = 64  # as fencectl's --advance
_MAX_RESOURCE_BYTES = 512  # pg_fence's bound on a resource name (docs/sql.md)
_SCHEMA_SQL = ("SELECT pg_catalog.quote_ident(n.nspname) FROM pg_catalog.pg_extension e "
               "JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname OPERATOR(pg_catalog.=) 'pg_fence'")


def resources_of(advance):
    """The resources `advance` names (a str, or a list or tuple of them),
    sorted and each once; ValueError naming a bad one."""
    names = [advance] if isinstance(advance, str) else list(advance)
    if not names:
        raise ValueError("advance names no resource")
    if len(names) > MAX_RESOURCES:
        raise ValueError(f"advance names {len(names)} resources, at most {MAX_RESOURCES}")
    for name in names:
        if not isinstance(name, str):
            raise ValueError(f"advance: resource {name!r} is not a str")
        if not 1 <= len(name.encode()) <= _MAX_RESOURCE_BYTES:
            raise ValueError(f"advance: resource {name!r} must be 1-{_MAX_RESOURCE_BYTES} bytes")
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in name):
            raise ValueError(f"advance: resource {name!r} contains a control character")
    return sorted(set(names))


def _sqlstate(e):
    """The SQLSTATE of a driver's exception (psycopg2: pgcode; psycopg 3:
    sqlstate; pg8000: args[0]["C"]), or None."""
    code = getattr(e, "pgcode", None) or getattr(e, "sqlstate", None)
    if code is None and e.args and isinstance(e.args[0], dict):
        code = e.args[0].get("C")
    return code


def _cause(e):
    text = " ".join(str(e).split()) or type(e).__name__
    state = _sqlstate(e)
    return f"{text} (SQLSTATE {state})" if state else text


def _not_published(resources, token):
    names = ", ".join(f'"{r}"' for r in resources)
    return f"token {token} not published at resource{'s' if len(resources) > 1 else ''} {names}"


def _run(db, resources, token, proofs, timeout_ms):
    """The transaction's statements; returns (resource, fence) of the first
    resource with a newer fence, else None."""
    cur = db.cursor()
    try:
        if timeout_ms is not None:
            cur.execute("SELECT pg_catalog.set_config('lock_timeout', %s, true), "
                        "pg_catalog.set_config('statement_timeout', %s, true)",
                        (f"{timeout_ms}ms", f"{timeout_ms}ms"))
            cur.fetchone()
        cur.execute(_SCHEMA_SQL)
        row = cur.fetchone()
        if row is None:
            raise errors.PublishError(f"{_not_published(resources, token)}: pg_fence is not installed in "
                                      "this database (CREATE EXTENSION pg_fence)",
                                      resource=resources[0] if len(resources) == 1 else None, token=token)
        schema = row[0]
        for resource in resources:
            cur.execute(f"SELECT {schema}.fence_advance(%s::text, %s::bigint, %s::text)",
                        (resource, token, proofs.get(resource) or None))
            if cur.fetchone()[0] is not True:
                cur.execute(f"SELECT {schema}.fence_current(%s::text)", (resource,))
                return resource, cur.fetchone()[0]
        return None
    finally:
        cur.close()


def _end(db, autocommit, commit):
    """Commits or rolls back the publish's transaction."""
    if autocommit:
        cur = db.cursor()
        try:
            cur.execute("COMMIT" if commit else "ROLLBACK")
        finally:
            cur.close()
    elif commit:
        db.commit()
    else:
        db.rollback()


def _rollback_quietly(db, autocommit):
    try:
        _end(db, autocommit, False)
    except Exception:  # the connection may be gone: nothing was committed either way
        pass


def publish_generation(db, resources, token, proofs=None, timeout=None):
    """Publishes `token` at `resources` (see the module's docstring).
    `proofs`: {resource: proof} for resources that are lock keys of a
    cluster that signs grants (a proof binds its own lock key only).
    `timeout`: a duration bounding the publish (None: the connection's own)."""
    resources = resources_of(resources)
    proofs = proofs or {}
    timeout_ms = None if timeout is None else max(1, parse_duration_ms(timeout))
    autocommit = getattr(db, "autocommit", False) is True
    try:
        if autocommit:
            cur = db.cursor()
            try:
                cur.execute("BEGIN")
            finally:
                cur.close()
        stale = _run(db, resources, token, proofs, timeout_ms)
        if stale is not None:
            _rollback_quietly(db, autocommit)
            resource, fence = stale
            raise errors.StalePublishError(
                f'token {token} not published at resource "{resource}": its fence is {fence} already '
                "(a newer holder published first; this token is stale)",
                resource=resource, fence=fence, token=token)
        _end(db, autocommit, True)
    except errors.FenceError as e:
        if not isinstance(e, errors.StalePublishError):  # that one rolled back already
            _rollback_quietly(db, autocommit)
        raise
    except Exception as e:  # the driver's: connection, SQL error, refused proof, timeout
        _rollback_quietly(db, autocommit)
        if _sqlstate(e) == "55F01":  # pg_fence.preempt: a newer token is in flight at a resource
            raise errors.StalePublishError(
                f"{_not_published(resources, token)}: {_cause(e)}",
                resource=resources[0] if len(resources) == 1 else None, token=token, sqlstate="55F01") from e
        raise errors.PublishError(f"{_not_published(resources, token)}: fence_advance failed: {_cause(e)}",
                                  resource=resources[0] if len(resources) == 1 else None, token=token,
                                  sqlstate=_sqlstate(e)) from e
