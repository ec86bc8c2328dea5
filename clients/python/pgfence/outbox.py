"""The fenced outbox from Python: enqueue a side effect under a token, and the
idempotency key its delivery carries (pg_fence 1.5, docs/sql.md).

    with db, db.cursor() as cur:
        cur.execute("SELECT fence_admit(%s, %s)", ("mail:7", lease.token))
        cur.execute("UPDATE orders SET state = 'paid' WHERE id = 7")
        key = pgfence.outbox.enqueue(cur, "mail:7", lease.token, "order:7:receipt",
                                     "https://mail.internal/send", {"order": 7})

The entry commits or rolls back with the transaction; the relay
(`python3 -m pgfence.relay`, `fence-relay`) delivers it with the header
`Idempotency-Key: <key>`. idempotency_key() computes the same key as
PostgreSQL's fence_outbox_key(), e.g. for a receiver that wants to know
which key an effect will carry.
"""

import hashlib
import json
import struct

KEY_PREFIX = "pgfence-v1-"


def idempotency_key(target, token, operation_id):
    """The key fence_enqueue gives (target, token, operation_id):
    "pgfence-v1-" + hex SHA-256 of be32 len | target | be64 token | be32 len | operation_id
    (target and operation_id as UTF-8)."""
    if not isinstance(token, int) or token < 0 or token > 2**63 - 1:
        raise ValueError(f"token must be an integer 0..2^63-1, not {token!r}")
    t = target.encode("utf-8")
    op = operation_id.encode("utf-8")
    h = hashlib.sha256()
    h.update(struct.pack(">I", len(t)) + t + struct.pack(">Q", token) + struct.pack(">I", len(op)) + op)
    return KEY_PREFIX + h.hexdigest()


def enqueue(cursor, target, token, operation_id, endpoint, payload, proof=None):
    """fence_enqueue in the cursor's transaction; payload is anything
    json.dumps takes (or a str holding JSON). Returns the idempotency key.
    A stale token raises psycopg2's error with pgcode '55F01'."""
    body = payload if isinstance(payload, str) else json.dumps(payload)
    cursor.execute("SELECT fence_enqueue(%s, %s, %s, %s, %s::jsonb, %s)",
                   (target, token, operation_id, endpoint, body, proof))
    return cursor.fetchone()[0]
