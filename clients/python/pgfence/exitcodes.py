"""Exit codes of pgfence's tools: the same numbers as every pgfence tool's
(coordinator/client/exit_codes.h): fencectl's, and 10 and 11 for the
database's answer to a fenced write. The example
worker (clients/python/examples/worker.py) exits with them; so should a
tool built on this package.

| code | name                | meaning                                                          |
|------|---------------------|------------------------------------------------------------------|
| 0    | EXIT_OK             | done                                                             |
| 1    | EXIT_OTHER          | anything else: a protocol error, a full lock table, an internal  |
|      |                     | error                                                            |
| 2    | EXIT_USAGE          | a bad argument (flag, duration, endpoint list, credentials       |
|      |                     | file), or the server refused the request as invalid (400)        |
| 3    | EXIT_HELD           | the key is held by someone else, or the wait ran out             |
| 4    | EXIT_LEASE_LOST     | the lease is lost (a keepalive refused, or its deadline passed)  |
| 5    | EXIT_UNAVAILABLE    | no member answered in time (connection errors, no leader)        |
| 6    | EXIT_NOT_FOUND      | no lock on the key, or not held with that token (release)        |
| 7    | EXIT_NOT_AUTHORIZED | 401 (no or unknown credentials) or 403 (no permission)           |
| 8    | EXIT_UNKNOWN_MEMBER | member change: no member of that ID in the configuration         |
| 9    | EXIT_REFUSED        | member change refused now                                        |
| 10   | EXIT_STALE          | PostgreSQL refused the token: SQLSTATE 55F01, or fenced_update   |
|      |                     | answered 'stale', or a publish found a newer fence               |
|      |                     | (StalePublishError)                                              |
| 11   | EXIT_DATABASE       | a database error other than a stale token (PublishError too)     |
| 12   | EXIT_NOT_PGFENCE    | what answered on an endpoint is not a pgfence member             |
| 13   | EXIT_COMPACTED      | watch: the revision asked for is older than the history kept;    |
|      |                     | explain: the token is older than the token history kept          |
| 14   | EXIT_NO_SUCH_TOKEN  | explain (fencectl): no such token was issued                     |

Every FenceError carries its code as `exit_code` (pgfence.errors).
"""

EXIT_OK = 0
EXIT_OTHER = 1
EXIT_USAGE = 2
EXIT_HELD = 3
EXIT_LEASE_LOST = 4
EXIT_UNAVAILABLE = 5
EXIT_NOT_FOUND = 6
EXIT_NOT_AUTHORIZED = 7
EXIT_UNKNOWN_MEMBER = 8
EXIT_REFUSED = 9
EXIT_STALE = 10
EXIT_DATABASE = 11
EXIT_NOT_PGFENCE = 12
EXIT_COMPACTED = 13
EXIT_NO_SUCH_TOKEN = 14
