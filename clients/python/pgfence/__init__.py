"""pgfence: a Python client for the pgfence lock coordinator (standard library only).

    import pgfence

    with pgfence.lock("report:7", lease="10s") as lease:   # endpoints: $FENCE_ENDPOINTS
        cur.execute("SELECT set_config('pg_fence.token', %s, true)", (str(lease.token),))
        cur.execute("SELECT set_config('pg_fence.seq', %s, true)", (str(lease.next_seq()),))  # sequenced mode
        ...

    c = pgfence.Client("127.0.0.1:7501,127.0.0.1:7502,127.0.0.1:7503")
    granted = c.acquire("job:1", lease="30s", wait="0s")   # -> Lease (token, proof, deadline)
    c.keepalive("job:1", granted.token)                    # -> KeepaliveResult
    c.get("job:1"); c.list("job:"); c.status()
    c.release("job:1", granted.token)
    for event in c.watch(prefix="job:", rev=1):            # lock events, resumed across member deaths
        print(event["type"], event["key"], event["token"])

    with pgfence.election("billing", value="http://10.0.0.5:8080") as leader:   # leads until the block ends
        write_with(leader.token)               # the fencing epoch of the leader's writes
        leader.proclaim("http://10.0.0.6:8080")
    c.election_leader("billing")             # -> Leader (value, token, owner); NotFoundError when none
    for leader in c.observe("billing"): ...  # the leader now, then each change (streamed)

Client (pgfence.client) is the HTTP API with the C++ client's retries,
redirects, deadlines and lease rule; lock()/HeldLock (pgfence.holder) hold a
lock with a background keepalive as `fencectl run` does, and number the
writes made with its token for pg_fence's sequenced mode (next_seq(): 1, 2,
3, ... up to MAX_SEQ); errors are the classes of pgfence.errors, each with
the code a tool exits with for it (pgfence.exitcodes, fencectl's);
lock(..., advance=R, db=conn) publishes the token at resource R in PostgreSQL
before the block starts (pgfence.advance); durations
("10s", "500ms") and endpoint lists ("h:p,https://h:p") are spelled as
fencectl's. pgfence.outbox enqueues side effects in pg_fence's fenced outbox
(psycopg2 cursor); `python3 -m pgfence.relay` (fence-relay) delivers them.
"""

from . import exitcodes, outbox
from .advance import publish_generation
from .client import (DEFAULT_MAX_CLOCK_DRIFT_PPM, ELECTION_PREFIX, Client, KeepaliveResult, Leader, Lease,
                     LockInfo, usable_lease)
from .duration import format_duration_ms, parse_duration_ms
from .endpoints import Endpoint, endpoints_from, parse_endpoint, parse_endpoints
from .errors import (BadRequestError, CompactedError, FenceError, HeldError, LeaseLostError, NotAuthorizedError,
                     NotFoundError, NotHeldError, NotPgfenceError, ProtocolError, PublishError, StalePublishError,
                     TableFullError, UnavailableError)
from .holder import MAX_SEQ, HeldLock, campaign, election, hold, lock

__all__ = [
    "Client", "Lease", "KeepaliveResult", "LockInfo", "HeldLock", "lock", "hold", "usable_lease",
    "Leader", "election", "campaign", "ELECTION_PREFIX",
    "DEFAULT_MAX_CLOCK_DRIFT_PPM", "Endpoint", "endpoints_from", "parse_endpoint", "parse_endpoints",
    "parse_duration_ms", "format_duration_ms", "FenceError", "HeldError", "NotHeldError",
    "NotFoundError", "BadRequestError", "UnavailableError", "ProtocolError", "TableFullError", "NotPgfenceError",
    "NotAuthorizedError", "LeaseLostError", "CompactedError", "PublishError", "StalePublishError", "MAX_SEQ",
    "exitcodes", "outbox", "publish_generation",
]
