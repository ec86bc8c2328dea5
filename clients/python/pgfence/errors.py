"""Errors of the pgfence client: one exception class per ErrorKind of the
C++ client (coordinator/client/client.h), all under FenceError.

| class               | kind             | when                                                        |
|---------------------|------------------|-------------------------------------------------------------|
| HeldError           | "held"           | 409: the key is held by someone else, or the wait ran out   |
| NotHeldError        | "not_held"       | 404 on release/keepalive: not held with that token          |
| NotFoundError       | "not_found"      | 404 on get: nobody holds the key                            |
| BadRequestError     | "bad_request"    | 400: the server named the field that was wrong              |
| UnavailableError    | "unavailable"    | no member answered usefully (connection errors, timeouts,   |
|                     |                  | TLS handshakes refused, 503 no_leader) by the deadline      |
| ProtocolError       | "protocol"       | an answer the client cannot understand (bad JSON, an        |
|                     |                  | unexpected status, too many redirects)                      |
| TableFullError      | "protocol"       | 507 table_full: the lock table is at its size limit (a      |
|                     |                  | ProtocolError, as in the C++ client, but catchable alone)   |
| NotAuthorizedError  | "not_authorized" | 401 (no or unknown credentials) or 403 (no permission on    |
|                     |                  | that key); http_status tells which                          |
| LeaseLostError      | "lease_lost"     | HeldLock.check(): the lease is lost or past its deadline    |

Every error carries `kind`, `message` (what happened, with the server's own
message when it sent one) and `http_status` (0 when no HTTP answer was
involved). A bearer secret is never part of a message.
"""


class FenceError(Exception):
    """Base class of every error the pgfence client raises about the cluster."""

    kind = "error"

    def __init__(self, message, http_status=0):
        super().__init__(message)
        self.message = message
        self.http_status = http_status

    def __str__(self):
        return self.message


class HeldError(FenceError):
    """409: the key is held by someone else, or a waiting acquire ran out of time."""

    kind = "held"


class NotHeldError(FenceError):
    """404 on release or keepalive: the key is not held with that token."""

    kind = "not_held"


class NotFoundError(FenceError):
    """404 on get: no lock on that key."""

    kind = "not_found"


class BadRequestError(FenceError):
    """400: the request was invalid; the message names the field."""

    kind = "bad_request"


class UnavailableError(FenceError):
    """No member gave an answer within the call's deadline or attempts."""

    kind = "unavailable"


class ProtocolError(FenceError):
    """An answer that cannot be understood (or an unexpected HTTP status)."""

    kind = "protocol"


class TableFullError(ProtocolError):
    """507 table_full: the lock table is full; nothing was granted."""


class NotAuthorizedError(FenceError):
    """401 (unauthenticated) or 403 (forbidden); see http_status."""

    kind = "not_authorized"


class LeaseLostError(FenceError):
    """The lease of a HeldLock is lost (refused keepalive, or its deadline passed)."""

    kind = "lease_lost"
