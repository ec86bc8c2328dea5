"""Errors of the pgfence client: one exception class per ErrorKind of the
C++ client (coordinator/client/client.h), all under FenceError.

| class               | kind             | exit | when                                                   |
|---------------------|------------------|------|--------------------------------------------------------|
| HeldError           | "held"           | 3    | 409: the key is held by someone else, or the wait ran  |
|                     |                  |      | out                                                    |
| NotHeldError        | "not_held"       | 6, 4 | 404 on release (6) or keepalive (4: the lease is       |
|                     |                  |      | lost): not held with that token                        |
| NotFoundError       | "not_found"      | 6    | 404 on get: nobody holds the key                       |
| BadRequestError     | "bad_request"    | 2    | 400: an argument the server refused (a lease or wait   |
|                     |                  |      | named as the caller gave it, other fields as the       |
|                     |                  |      | server named them)                                     |
| UnavailableError    | "unavailable"    | 5    | no member answered usefully (connection errors,        |
|                     |                  |      | timeouts, TLS handshakes refused, 503 no_leader) by    |
|                     |                  |      | the deadline                                           |
| ProtocolError       | "protocol"       | 1    | an answer the client cannot understand (bad JSON, an   |
|                     |                  |      | unexpected status, too many redirects)                 |
| TableFullError      | "protocol"       | 1    | 507 table_full: the lock table is at its size limit (a |
|                     |                  |      | ProtocolError, as in the C++ client, but catchable     |
|                     |                  |      | alone)                                                 |
| NotAuthorizedError  | "not_authorized" | 7    | 401 (no or unknown credentials) or 403 (no permission  |
|                     |                  |      | on that key); http_status tells which                  |
| LeaseLostError      | "lease_lost"     | 4    | HeldLock.check(): the lease is lost or past its        |
|                     |                  |      | deadline                                               |
| CompactedError      | "compacted"      | 13   | 410 on watch: the revision asked for (or resumed from) |
|                     |                  |      | is older than the history the members keep;            |
|                     |                  |      | oldest_revision says where it starts                   |
| PublishError        | "database"       | 11   | lock(advance=...): publishing the token at a resource  |
|                     |                  |      | failed in the database (connection, SQL error, a       |
|                     |                  |      | refused proof, a timeout); sqlstate says which         |
| StalePublishError   | "stale"          | 10   | lock(advance=...): a resource holds a newer fence      |
|                     |                  |      | already (a PublishError too); `fence` is it            |

Every error carries `kind`, `message` (what happened, naming the key, the
token and the member where they are known, with the server's own message
when it sent one), `http_status` (0 when no HTTP answer was involved),
`key`, `token` and `endpoint` (None when not known; `token` is the caller's
for release and keepalive, the holder's for HeldError) and `exit_code`, the
code a tool exits with for it (pgfence.exitcodes, fencectl's scheme). A
bearer secret is never part of a message.
"""

from . import exitcodes


class FenceError(Exception):
    """Base class of every error the pgfence client raises about the cluster."""

    kind = "error"
    exit_code = exitcodes.EXIT_OTHER

    def __init__(self, message, http_status=0, *, key=None, token=None, endpoint=None, exit_code=None):
        super().__init__(message)
        self.message = message
        self.http_status = http_status
        self.key = key
        self.token = token
        self.endpoint = endpoint
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self):
        return self.message


class HeldError(FenceError):
    """409: the key is held by someone else, or a waiting acquire ran out of time."""

    kind = "held"
    exit_code = exitcodes.EXIT_HELD


class NotHeldError(FenceError):
    """404 on release or keepalive: the key is not held with that token."""

    kind = "not_held"
    exit_code = exitcodes.EXIT_NOT_FOUND  # keepalive's: EXIT_LEASE_LOST


class NotFoundError(FenceError):
    """404 on get: no lock on that key."""

    kind = "not_found"
    exit_code = exitcodes.EXIT_NOT_FOUND


class BadRequestError(FenceError):
    """400: the request was invalid; the message names the argument."""

    kind = "bad_request"
    exit_code = exitcodes.EXIT_USAGE


class UnavailableError(FenceError):
    """No member gave an answer within the call's deadline or attempts."""

    kind = "unavailable"
    exit_code = exitcodes.EXIT_UNAVAILABLE


class ProtocolError(FenceError):
    """An answer that cannot be understood (or an unexpected HTTP status)."""

    kind = "protocol"


class NotPgfenceError(FenceError):
    """What answered on an endpoint is not a pgfence member: its answer is
    not a JSON object (a web server's page, a proxy's error)."""

    kind = "not_pgfence"
    exit_code = exitcodes.EXIT_NOT_PGFENCE


class TableFullError(ProtocolError):
    """507 table_full: the lock table is full; nothing was granted."""


class NotAuthorizedError(FenceError):
    """401 (unauthenticated) or 403 (forbidden); see http_status."""

    kind = "not_authorized"
    exit_code = exitcodes.EXIT_NOT_AUTHORIZED


class LeaseLostError(FenceError):
    """The lease of a HeldLock is lost (refused keepalive, or its deadline passed)."""

    kind = "lease_lost"
    exit_code = exitcodes.EXIT_LEASE_LOST


class CompactedError(FenceError):
    """410 compacted on watch: the revision is older than the history kept.
    `oldest_revision` is the oldest revision a watch may still start from."""

    kind = "compacted"
    exit_code = exitcodes.EXIT_COMPACTED

    def __init__(self, message, http_status=0, *, oldest_revision=0, **kwargs):
        super().__init__(message, http_status, **kwargs)
        self.oldest_revision = oldest_revision


class PublishError(FenceError):
    """Publishing a token at a resource (pgfence.advance) failed in the
    database: nothing was committed, and lock(advance=...) released the lock.
    `resource` (None when several were published together), `token`,
    `sqlstate` (the driver's, None when it gave none)."""

    kind = "database"
    exit_code = exitcodes.EXIT_DATABASE

    def __init__(self, message, http_status=0, *, resource=None, sqlstate=None, **kwargs):
        super().__init__(message, http_status, **kwargs)
        self.resource = resource
        self.sqlstate = sqlstate


class StalePublishError(PublishError):
    """Publishing found a newer fence already at `resource` (`fence`): a
    newer holder published first, and this token is stale there."""

    kind = "stale"
    exit_code = exitcodes.EXIT_STALE

    def __init__(self, message, http_status=0, *, fence=None, **kwargs):
        super().__init__(message, http_status, **kwargs)
        self.fence = fence
