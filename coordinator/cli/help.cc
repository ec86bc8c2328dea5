#include "cli/help.h"

namespace pgfence::cli {
namespace {

constexpr const char* kOverview = R"(fencectl - fencing-token locks from a pgfence coordinator cluster

usage: fencectl [--endpoints H:P,...] [--timeout DUR] [--max-clock-drift-ppm N] COMMAND [ARGS...]

commands:
  acquire KEY [--lease 10s] [--wait 30s] [--owner ID] [--advance R --dsn DSN] [-o json]
                           take the lock; prints only the fencing token
  release KEY TOKEN        give the lock back
  keepalive KEY TOKEN      reset the lease of a held lock; prints the remaining ttl
  run KEY [--lease 10s] [--wait 30s] [--owner ID] [--grace 2s] [--advance R --dsn DSN] -- CMD [ARGS...]
                           hold the lock while CMD runs (see fencectl run --help)
  elect NAME --value V [--lease 10s] [--wait DUR] [--owner ID] [--grace 2s] -- CMD [ARGS...]
                           run CMD while leader of election NAME (see fencectl elect --help)
  leader NAME [-o json]    show the leader of election NAME: value, token, owner, ttl
  proclaim NAME TOKEN VALUE
                           the leader with TOKEN publishes VALUE instead
  resign NAME TOKEN        the leader with TOKEN steps down; the next campaigner leads at once
  seq                      inside run's CMD: the next write number of its lease, for
                           pg_fence's sequenced mode (see fencectl seq --help)
  get KEY [-o json]        show one lock
  list [--prefix P] [-o json]  show all locks (or those whose key starts with P)
  status [-o json]         show every member: id, role (learners too), term, leader, commit, applied
  member list | add ID --peer-addr H:P --client-addr H:P | promote ID | remove ID
                           change the cluster's members (see fencectl help member)
  snapshot save FILE | status FILE
                           back up the lock table and token sequence (see fencectl help snapshot)
  watch KEY | --prefix P [--rev N] [--progress]
                           print lock events as JSON lines as they happen, until
                           interrupted (see fencectl help watch)
  explain TOKEN | --key K [--since T] [--until T] [--limit N] [--dsn DSN] [--client-log FILE] [-o json]
                           why a token's write was refused: its life, the refused
                           writes, the cause (see fencectl help explain)
  help [COMMAND]           this text, or one command's

global flags:
  --endpoints H:P,...   members to talk to (default: $FENCE_ENDPOINTS, else 127.0.0.1:7501-7503);
                        https://H:P for members that serve TLS;
                        followers redirect to the leader; unreachable members are skipped
  --timeout DUR         give up after this long (default 10s; acquire adds its --wait)
  --max-clock-drift-ppm N
                        rho: the largest clock-rate error of this host and of the
                        coordinator's members, in parts per million (default 50000
                        = 5%; 0..500000). run stops CMD by send + lease x (1 - rho);
                        the coordinator waits lease x (1 + rho) to expire a lease
  --cacert FILE         CA bundle the members' certificates must chain to, for
                        https:// endpoints (default: $FENCE_CACERT_FILE, else the
                        system's); a member must name its host or IP in its certificate
  --cert FILE, --key FILE
                        client certificate and key, for members started with
                        --client-cert-auth (default: $FENCE_CERT_FILE, $FENCE_KEY_FILE)
  --bearer-file FILE    send the secret on FILE's first line as a bearer token, for
                        members started with --auth-file (default: $FENCE_BEARER_FILE)
  -o, --output FMT      table (default) or json, for acquire/keepalive/get/list/status/explain
  -h, --help            help
  --version             the release version

durations: an integer and a unit, no spaces: 500ms, 10s, 2m, 1h (at most 24 days)

exit codes:
  0  ok
  1  other error (unexpected answer, cannot start CMD)
  2  usage error, or the server rejected the request as invalid (HTTP 400)
  3  lock held by someone else, or --wait ran out
  4  lease lost (keepalive refused; run: the lease could not be kept and CMD was terminated;
     --advance: no time left to publish before the lease's deadline, lock released)
  5  cluster unavailable (no member answered, no leader) within --timeout
  6  not found (get: no such lock; release: not held with that token; leader: the
     election has no leader; proclaim, resign: the election is not led with that token)
  7  not authorized (HTTP 401: no or unknown credentials; 403: no permission on that key)
  8  member: no member of that ID in the configuration
  9  member: the change is refused now (another one is in progress, the learner has
     not caught up, it is already a member...; the message says which)
  12 what answered on an endpoint is not a pgfence member (a web server, a proxy)
  13 watch: the revision asked for is older than the history the members keep;
     explain: the token is older than the token history the members keep
  14 explain: no such token was issued
  10 --advance: a newer fence is already at the resource (the token is stale)
  11 --advance, explain --dsn: a database error (connection, SQL error, refused proof,
     timeout; explain: no fence_rejections view)

While no member answers, fencectl says once on stderr, within about a second,
which endpoints it tries and where they came from, and keeps trying until
--timeout (acquire: plus --wait).
)";

constexpr const char* kAcquire = R"(usage: fencectl acquire KEY [KEY...] [--lease 10s] [--wait 30s] [--owner ID]
                        [--advance RESOURCE... --dsn DSN] [-o json]

Takes the lock on KEY and prints only its fencing token on stdout. Write to the
database with that token; keep the lock with `fencectl keepalive KEY TOKEN`
before the lease runs out, counted from when this command sent its request and
shortened by the clock-rate bound: lease x (1 - rho), rho = --max-clock-drift-ppm
(default 5%).

  --lease DUR   lease length (default 10s; the cluster enforces its own bounds)
  --wait DUR    if KEY is held, queue (first come, first served) for up to DUR (default 30s; 0s: fail at once)
  --owner ID    owner name; acquiring again with the same owner returns the same token
  -o json       print {"key","token","lease_ms","owner"} instead of the bare token,
                with "proof" too when the cluster signs grants (pass it to pg_fence
                as SET LOCAL pg_fence.proof, docs/sql.md)
  --advance R   publish the token at resource R in PostgreSQL before printing it:
                fence_advance(R, token, proof) (the proof of the key named R, when
                the cluster signs grants), so that from then on every older token
                is refused at R. Repeatable (at most 64), one transaction for all;
                if it fails the lock is released, nothing is printed, and the
                exit is 10 (R holds a newer fence), 11 (database error) or 4
                (no time left to publish before the lease's deadline)
  --dsn DSN     the database for --advance: a libpq connection string or URI
                (default: the PG* environment variables, as psql uses them)

exit: 0 acquired, 3 held (or the wait ran out), 5 cluster unavailable, 2 bad arguments,
10 --advance found a newer fence, 11 --advance failed in the database, 4 no
time left to publish (nothing printed, the lock released)
)";

constexpr const char* kRelease = R"(usage: fencectl release KEY TOKEN

Releases KEY if it is held with TOKEN (a stale holder can never release a newer
holder's lock).

exit: 0 released, 6 not held with that token, 5 cluster unavailable
)";

constexpr const char* kKeepalive = R"(usage: fencectl keepalive KEY TOKEN [-o json]

Resets the lease of KEY held with TOKEN to its full length and prints the
remaining ttl in milliseconds.

exit: 0 kept, 4 lease lost (not held with that token any more), 5 cluster unavailable
)";

constexpr const char* kRun = R"(usage: fencectl run KEY [--lease 10s] [--wait 30s] [--owner ID] [--grace 2s]
                    [--advance RESOURCE... --dsn DSN] -- CMD [ARGS...]

Acquires KEY, then runs CMD with FENCE_KEY, FENCE_TOKEN, FENCE_SEQ_FILE and
FENCECTL (this fencectl's path) in its environment (and FENCE_PROOF, the
grant's proof, when the cluster signs grants), in its own process group.
FENCE_SEQ_FILE is what `"$FENCECTL" seq` counts in: CMD calls it for the
sequence number of each write to a sequenced table. While CMD runs, the lease is kept alive every third
of the lease. The local deadline is the send time of the last successful
acquire or keepalive + lease x (1 - rho) (rho: --max-clock-drift-ppm, default
5%); CMD never runs past it. If a keepalive is refused, or none succeeded by
deadline - lease/10 - grace, CMD's process group gets SIGTERM, and SIGKILL by
deadline - lease/10 at the latest. If fencectl itself dies, CMD is killed too.
SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to fencectl are passed on to CMD. When
CMD exits, the lock is released.

  --lease, --wait, --owner   as for acquire
  --grace DUR                time between SIGTERM and SIGKILL when the lease is lost
                             (default 2s, at most a quarter of the lease)
  --advance R                before CMD starts, publish the token at resource R in
                             PostgreSQL: fence_advance(R, token, proof) (the proof of
                             KEY when R is KEY and the cluster signs grants). From then
                             on every older token is refused at R, before CMD has
                             written. Repeatable (at most 64), one transaction for all.
                             If it fails — R already holds a newer fence, a connection
                             or SQL error, no time left before the lease's deadline —
                             the lock is released and CMD never starts
  --dsn DSN                  the database for --advance: a libpq connection string or
                             URI (default: the PG* environment variables, as psql)

exit: CMD's exit status (128+N if CMD died of signal N); 4 if the lease was
lost (CMD was terminated); 3 held, 5 unavailable (CMD never started);
10 --advance found a newer fence, 11 --advance failed in the database, 4 no
time left to publish (CMD never started, the lock released); 127 CMD not
found, 126 CMD not executable
)";

constexpr const char* kElect = R"(usage: fencectl elect NAME --value V [--lease 10s] [--wait DUR] [--owner ID] [--grace 2s] -- CMD [ARGS...]

Campaigns in election NAME (the lock on key election/NAME: permissions under
--auth-file are that key's) and, once leader, runs CMD as `fencectl run` does,
with FENCE_ELECTION (NAME), FENCE_KEY (election/NAME), FENCE_TOKEN (the
leader's fencing epoch: write with it), FENCE_VALUE, FENCE_SEQ_FILE and
FENCECTL in its environment. Campaigners are served first come, first served.
While CMD runs the lease is kept alive; if it cannot be, CMD is terminated
before the lease ends, exactly as run's. When CMD exits, fencectl resigns, and
the next campaigner leads at once.

  --value V   what the leader publishes (fencectl leader NAME shows it; change
              it with fencectl proclaim NAME "$FENCE_TOKEN" V2 from CMD)
  --wait DUR  campaign for at most DUR (default: until leader)
  --lease, --owner, --grace   as for run

exit: CMD's exit status (128+N if CMD died of signal N); 4 if the leadership
was lost (CMD was terminated); 3 --wait ran out, 5 unavailable (CMD never
started); 127 CMD not found, 126 CMD not executable
)";

constexpr const char* kLeader = R"(usage: fencectl leader NAME [-o json]

Shows the leader of election NAME: its value, token (the fencing epoch of its
writes), owner and remaining ttl; -o json prints
{"name","key","value","token","owner","lease_ms","ttl_ms"}. The leader of the
cluster answers after confirming it still leads.

exit: 0 shown, 6 the election has no leader, 5 cluster unavailable
)";

constexpr const char* kProclaim = R"(usage: fencectl proclaim NAME TOKEN VALUE [-o json]

The leader of election NAME holding TOKEN publishes VALUE instead of its value,
without losing leadership.

exit: 0 done, 6 the election is not led with TOKEN, 5 cluster unavailable
)";

constexpr const char* kResign = R"(usage: fencectl resign NAME TOKEN

The leader of election NAME holding TOKEN steps down; the first waiting
campaigner is granted at once.

exit: 0 done, 6 the election is not led with TOKEN, 5 cluster unavailable
)";

constexpr const char* kSeq = R"(usage: fencectl seq

Inside the CMD of `fencectl run`: prints the next write number of its lease,
1, 2, 3, ..., for pg_fence's sequenced mode, where a write is accepted only
when (token, sequence) is newer than the pair the row stores, so a delayed or
retried write of the same holder cannot overwrite a later one:

  fencectl run report:7 -- sh -c '
    seq=$("$FENCECTL" seq) || exit
    psql -v ON_ERROR_STOP=1 -v token="$FENCE_TOKEN" -v seq="$seq" -f write.sql'

  (write.sql: BEGIN; SET LOCAL pg_fence.token = :token;
   SET LOCAL pg_fence.seq = :seq; UPDATE ...; COMMIT;)

Take the number into a variable and check its status: inside another
command's argument, $(fencectl seq) loses its exit status. Draw the number
right before the write it numbers.

The counter lives in the file FENCE_SEQ_FILE (made by run, removed when it
ends), taken under a lock: every process CMD starts (subshells, pipelines,
xargs -P) gets a number no other one got, each larger than every number handed
out before it was asked. Numbers start at 1 for every run, also when --owner
gives run its token back. Contacts no member.

exit: 0 printed; 4 the lease is lost or run has ended (start no new write);
2 FENCE_SEQ_FILE is not set, belongs to another FENCE_TOKEN, or FENCE_TOKEN
is not a token; 1 the file cannot be read, locked (5s) or written, or the
sequence is exhausted
)";

constexpr const char* kGet = R"(usage: fencectl get KEY [-o json]

Shows the lock on KEY: token, owner, lease and remaining ttl.

exit: 0 held, 6 not held, 5 cluster unavailable
)";

constexpr const char* kList = R"(usage: fencectl list [--prefix P] [-o json]

Shows every held lock (with --prefix, those whose key starts with P): key,
token, owner, lease and remaining ttl, sorted by key. The leader answers in
pages of 1000 locks; fencectl asks for the next page until the last, so a
lock granted or released meanwhile may show or not.
)";

constexpr const char* kStatus = R"(usage: fencectl status [-o json]

Asks every endpoint (and every member they list) for its status and prints one
row per member: id, role, term, leader, commit index, applied index. A member
that does not answer is shown as unreachable. With -o json, prints
{"members":[...]} with each member's own /v1/status answer.

exit: 0 if at least one member answered, 5 if none did, 12 if what answered
is not a pgfence member (shown as "not pgfence")
)";

constexpr const char* kMember = R"help(usage: fencectl member list [-o json]
       fencectl member add ID --peer-addr HOST:PORT --client-addr HOST:PORT [-o json]
       fencectl member promote ID [-o json]
       fencectl member remove ID [-o json]

Changes the cluster's members, one change at a time (the leader decides; with
--auth-file on the members, the user needs the admin permission). Each prints
the configuration once the change applied: one row per member with its role
(voter, or learner: replicated to but never counted in a quorum), its peer and
client addresses and the last log index the leader knows it has.

  list      the configuration in force
  add       a new member ID, as a learner; then start it with
            fence-coordinator --id ID --join ENDPOINTS --data-dir DIR (and
            --client-addr, which must match). --peer-addr is where the others
            dial it, --client-addr where clients are redirected to it.
  promote   make a learner a voter, once it has caught up (list shows
            "learner (caught up)": it replicated a round within an election timeout)
  remove    remove a member; a removed member stops itself. Removing the leader
            hands leadership to another voter first.

Grow a 3-member cluster to 5 with add + start + promote, twice; replace a
failed member with remove, then add a new ID (docs/operations.md has the
runbooks).

exit: 0 done, 8 no member of that ID, 9 refused now (the message says why),
5 cluster unavailable, 7 not authorized, 2 bad arguments
)help";

constexpr const char* kSnapshot = R"help(usage: fencectl snapshot save FILE [--timeout 2m] [-o json]
       fencectl snapshot status FILE [-o json]

Backups of the cluster's lock table and token sequence (admin only with
--auth-file on the members).

  save     asks the leader for a backup — its applied state once a quorum
           confirmed it still leads, so every grant answered before the
           request is in it — checks its CRC and contents, and writes FILE
           atomically (FILE.tmp, fsync, rename). Prints what status prints.
           --timeout bounds the transfer (default 2m).
  status   checks FILE and prints what is in it: the cluster it came from,
           when it was taken, its log index and term, the locks held, the
           last token granted, the token floor and the members.

Restore with fence-coordinator --restore FILE (docs/operations.md, "Backup and
restore"): the new cluster's tokens start above the backup's last token plus
--restore-token-headroom, because grants made after the backup was taken are
already stored in databases.

exit: 0 done, 1 the file or the answer is not a good backup (or cannot be
written), 5 cluster unavailable, 7 not authorized, 2 bad arguments
)help";

constexpr const char* kWatch = R"help(usage: fencectl watch KEY [--rev N] [--progress]
       fencectl watch --prefix P [--rev N] [--progress]

Prints the lock events of KEY (or of every key starting with P; --prefix ""
is every key you may read) on stdout, one JSON line per event, flushed as
it arrives, in log order, and runs until interrupted (SIGINT or SIGTERM:
exit 0, never in the middle of a line):

  {"type":"granted","revision":R,"key":K,"token":T,"owner":O,"lease_ms":L}
  {"type":"released","revision":R,"key":K,"token":T}
  {"type":"expired","revision":R,"key":K,"token":T,"existed":true|false}

A revision is the Raft log index of the entry that made the event (one entry
can make several events, which share it). Any member serves the watch, from
what it has applied. When that member dies or closes the stream, fencectl
says so on stderr and goes on from the last revision printed at another
member: no event is lost or printed twice.

  --rev N       every event from revision N on (default: only events from now on)
  --progress    also print {"type":"start","revision":A,"member":ID} each time a
                member starts serving (A: its applied index) and
                {"type":"progress","revision":A} (every event up to A was printed)

exit: 0 interrupted, 13 revision N is older than the history the members keep
(the message names the oldest revision still kept), 5 no member served the
watch within --timeout, 7 not authorized (the read permission on the key or
prefix), 2 bad arguments
)help";

constexpr const char* kExplain = R"help(usage: fencectl explain TOKEN [--dsn DSN] [--client-log FILE] [-o json]
       fencectl explain --key K [--since T] [--until T] [--limit N] [--dsn DSN] [--client-log FILE] [-o json]

Says why a write carrying TOKEN was refused as stale, from the evidence:
the token's life on the coordinator (granted, keepalives, how it ended, the
token that followed; asked of every member, since each counts only the
keepalives it received while leading), the writes PostgreSQL refused with it
(the fence_rejections view, pg_fence 1.6, over --dsn), and the holder's own
log (--client-log). It names one cause:

  continued_after_failed_renewal  a keepalive was refused (or answered with an
                   error), or the holder's own lease deadline passed unrenewed
                   (--client-log), before the write, and it wrote anyway
  partitioned_holder  keepalives sent after the last acknowledged one got no
                   answer, not even a 503 (needs --client-log)
  paused_holder    the holder did not run across its lease's end (a stall in
                   its log), or the leader
                   stopped hearing from it before the expiry and the write came
                   after the expiry (without --client-log a network cut looks
                   the same; the evidence says so)
  lease_too_short  one piece of work lasted longer than the lease, with no
                   keepalive sent during it (needs --client-log)
  contention       no write with TOKEN was refused (and the database's
                   rejection ring still covers the token); a waiter got the
                   lock next
  undetermined     the evidence does not decide; "missing" says what would

The rules are tried in an order (contention first when nothing was refused;
docs/cli.md "explain" has them in full, docs/operations.md "Investigating
stale writes" what to do about each).

  --dsn DSN          libpq connection string of the database ("" = the PG*
                     environment); never printed. Without it the database is
                     not read and the cause is undetermined
  --client-log FILE  the holder's log in fence-worker's CSV format (--log); read
                     up to 256 MiB, the token's lines kept
  --key K            explain every token of lock key K granted in the window
                     (explain's --key is the lock key; the TLS client key then
                     comes from $FENCE_KEY_FILE)
  --since T, --until T  the window: 2026-12-04T21:30:00Z (UTC, as explain prints
                     times) or a duration before now (15m); tokens whose lease
                     overlaps it
  --limit N          the newest N tokens of the key looked at (default 20, at
                     most 1000); the output says when older ones may be in the window
  -o json            one JSON object (with --key: {"key":K,"tokens":[...],
                     "more_tokens":B}): the
                     token's life as the members answer it, keepalives merged and
                     by member, next, rejections, client_log, cause, evidence, missing

exit: 0 explained (any cause), 14 no such token was issued, 13 the token is
older than the history kept, 11 the database failed or has no fence_rejections,
5 no member answered (or the token is past what a member applied), 7 not authorized (read permission on the key), 2 bad
arguments or an unreadable --client-log
)help";

}  // namespace

std::string help_text(const std::string& command) {
    if (command.empty()) return kOverview;
    if (command == "acquire") return kAcquire;
    if (command == "release") return kRelease;
    if (command == "keepalive") return kKeepalive;
    if (command == "run") return kRun;
    if (command == "seq") return kSeq;
    if (command == "elect") return kElect;
    if (command == "leader") return kLeader;
    if (command == "proclaim") return kProclaim;
    if (command == "resign") return kResign;
    if (command == "get") return kGet;
    if (command == "list") return kList;
    if (command == "status") return kStatus;
    if (command == "member") return kMember;
    if (command == "snapshot") return kSnapshot;
    if (command == "watch") return kWatch;
    if (command == "explain") return kExplain;
    return "";
}

}  // namespace pgfence::cli
