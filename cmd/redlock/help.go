package main

const overview = `redlock: run commands under a distributed lock held on a majority of
independent Redis masters (Redlock), under a read lock that other readers
share (--read), or under a permit of a counting semaphore (--permits K: at
most K at once), and inspect or free such locks.

Usage:
  redlock run [--nodes URLS] [--ttl 10s] [--wait DURATION] [--fencing | --read | --permits K] NAME -- COMMAND [ARGS...]
  redlock status [--nodes URLS] [--json] NAME
  redlock unlock --force [--nodes URLS] NAME
  redlock doctor [--nodes URLS] [--json] [--restart-delay D] [--replica-ack N]
  redlock help [SUBCOMMAND]

Nodes: --nodes takes comma-separated redis:// or rediss:// URLs, one per
independent master, with optional user, password and database
(redis://user:password@host:6379/0), as go-redis parses them. Without
--nodes, REDLOCK_NODES is read. The lock NAME is the key on every node.

Exit status of run: the command's own (128+N when signal N ended it);
  64  usage error
  69  not acquired: too many nodes failed for a quorum (down, timing out)
  70  lock (or permit) lost while the command ran
  75  not acquired within --wait: held elsewhere (only then)
  78  not acquired: too many nodes refuse this client for good (a wrong
      password, a missing right, a semaphore kept with another count)
  126 command cannot be executed      127 command not found
  128+N a signal ended the wait for the lock

Examples:
  # cron: a nightly job on one host of many; skip if another host runs it
  export REDLOCK_NODES=redis://r1:6379,redis://r2:6379,redis://r3:6379
  redlock run --ttl 30s nightly-report -- /usr/local/bin/report --yesterday

  # deploy: wait up to 10 minutes for the other deploys, then migrate
  redlock run --wait 10m --fencing deploy:shop -- ./migrate.sh

  # at most 4 encoders at once across the fleet
  redlock run --permits 4 --wait 1h encoders -- ./encode.sh "$FILE"

  # readers share the catalog; a plain run of the same name writes alone
  redlock run --read --wait 5m catalog -- ./export.sh

  redlock status nightly-report
  redlock unlock --force nightly-report

  # before a deployment: is every node fit to keep a lock?
  redlock doctor || exit 1

See "redlock help run", "redlock help status", "redlock help unlock",
"redlock help doctor".
`

var helpTexts = map[string]string{
	"run": `Usage: redlock run [--nodes URLS] [--ttl 10s] [--wait DURATION] [--fencing | --read | --permits K] NAME -- COMMAND [ARGS...]

Runs COMMAND while holding the lock NAME on a majority of the nodes, renews
the lock while it runs (every TTL/3), and releases it on every reachable
node when it ends, waiting for those releases before exiting.

With --permits K, NAME is a counting semaphore instead: COMMAND runs as one of
at most K holders, each holding a permit admitted by a quorum of
N*K/(K+1)+1 of the N nodes: a majority for K = 1, more for larger K, all N
once K >= N-1 (then a single node down stops new permits). Everything below
holds for a permit as for the lock. Every run of a semaphore must give the
same K: a node keeping another count refuses (exit 78, the count is named).
A lock and a semaphore cannot share a name.

With --read, COMMAND runs under a read lock of the reader-writer lock NAME:
any number of --read runs hold it at once, each on a majority of the nodes,
while a plain run of NAME (or an RWMutex's writer) is a writer and holds it
alone. Once a writer waits, new readers wait too, so writers are not starved.

Flags (before NAME):
  --nodes URLS     comma-separated redis:// or rediss:// URLs (default: $REDLOCK_NODES)
  --ttl D          the lock's time to live on each node (default 10s): if redlock dies,
                   the lock frees itself within D
  --wait D         how long to wait for the lock (default 0: one attempt)
  --fencing        give the command a fencing token in $REDLOCK_FENCE, greater than every
                   earlier holder's: pass it to the resource so it can refuse stale holders
  --permits K      hold one of K permits of the semaphore NAME (K >= 1) instead of the
                   lock; not with --fencing
  --read           hold a read lock of NAME, shared with other readers; not with
                   --fencing or --permits

The command's environment gets REDLOCK_NAME (and REDLOCK_FENCE with --fencing,
REDLOCK_PERMITS with --permits, REDLOCK_READ=1 with --read).
Its standard input, output and error are redlock's.

Signals: SIGINT, SIGTERM and SIGHUP sent to redlock are forwarded to the command
(to its process group when it has its own, see below); redlock waits for it to
exit. A signal while waiting for the lock ends the wait: exit 128+N.

Lost lock: if the lock is lost while the command runs (renewal finds it taken or
deleted, or cannot renew it before its validity ends), redlock sends SIGTERM to
the command, SIGKILL if it still runs when the lock's validity would end, and
exits 70. If redlock itself is killed, the command gets SIGKILL (Linux: a
parent-death signal); its own children are not reached that way.

Process groups: when standard input is not a terminal (cron, CI, scripts), the
command runs in its own process group, and signals go to that whole group, so a
shell script's children are reached too. When standard input is a terminal, the
command stays in redlock's process group, so that it can read the terminal (a
background group would be stopped by SIGTTIN); the terminal then sends Ctrl-C
(SIGINT), Ctrl-\ (SIGQUIT) and hangups (SIGHUP) to both, so redlock does not
forward those while it is in the terminal's foreground, and signals reach the
command's process only, not its children.

Exit status: the command's own (128+N when signal N ended it); 127 when COMMAND
is not found, 126 when it cannot be executed; when the lock (or a permit) was
not acquired within --wait: 75 when it is held elsewhere (a quorum of nodes
answered and none granted it), 69 when too many nodes failed for a quorum
(down, timing out), 78 when too many refuse this client for a reason no retry
changes (a wrong password, a missing right, another permit count), stderr
naming the nodes and why; 70 when it was lost while the command ran; 64 for
usage errors; 128+N when signal N ended the wait.

Examples:
  # crontab: one host of many runs the job; the others exit 75 at once, which
  # is no failure (69 and 78 still are: the nodes need fixing)
  */5 * * * * REDLOCK_NODES=redis://r1,redis://r2,redis://r3 redlock run sync-feeds -- /opt/sync || [ $? -eq 75 ]

  # deploy step: wait up to 10 minutes, hold as long as it takes
  redlock run --wait 10m --ttl 30s --fencing deploy:shop -- ./deploy.sh "$VERSION"

  # at most 2 backups hit the storage at once; the others wait their turn
  redlock run --permits 2 --wait 2h backups -- ./backup.sh
`,
	"status": `Usage: redlock status [--nodes URLS] [--json] NAME

Reads the lock NAME on every node, changing nothing, and prints one line per
node: its address and "held" (remaining TTL, the first 8 characters of the
holder's token, the fencing counter), "free" (with the fencing counter) or
"unreachable" (why), then a summary: on how many of the N nodes the most
common holder holds it, and the quorum (N/2+1) a holder needs.

When NAME is a semaphore (see "redlock run --permits"), each node's line shows
its live permits, "held  2 of 3 permits  1a2b3c4d ttl 9.2s, 5e6f7a8b ttl 3.1s"
(the first 8 characters of each holder's token, the time its permit has left
by that node's clock), or "free"; the summary gives the permit count, how
many holders are admitted on the quorum that count needs (N*K/(K+1)+1), and
each holder with the number of nodes that admitted it, "(too few)" when that
is short of the quorum. When NAME is read-locked (see "redlock run --read"),
the lines list its live readers the same way, "held  2 readers  ...", and
the summary "read-locked by 2 readers (quorum 3 of 5 nodes)"; a writer shows
as a lock. --json adds "kind" ("lock", "semaphore" or "readers"),
"permits", "permit_quorum" and "holders" (holder, nodes, quorum), and per node
"kind", "permits" and "holders" (holder, ttl_ms).

Flags (before NAME):
  --nodes URLS   comma-separated redis:// or rediss:// URLs (default: $REDLOCK_NODES)
  --json         print one JSON object instead (for scripts)

Exit status: 0 when the nodes were read (even with some unreachable); 64 for
usage errors; 70 when nothing could be asked.

Example:
  redlock status --nodes redis://r1:6379,redis://r2:6379,redis://r3:6379 nightly-report
`,
	"unlock": `Usage: redlock unlock --force [--nodes URLS] NAME

Deletes the lock NAME on every reachable node, whoever holds it: the operator's
way out of a stuck lock. Prints what it did on each node. Each node that held
the lock announces the release, so processes waiting for it try at once. The
fencing counter is never deleted or lowered: the next holder's token is still
greater than the one the lock had. The holder is not told: it finds out at its
next renewal (a "redlock run" holder then stops its command and exits 70) and
may act as the holder until then. --force is required.

Flags (before NAME):
  --force        required: delete the lock whoever holds it
  --nodes URLS   comma-separated redis:// or rediss:// URLs (default: $REDLOCK_NODES)

Exit status: 0, even with nodes unreachable (they may still hold the lock until
its TTL passes); 64 for usage errors; 70 when nothing could be asked.

Example:
  redlock unlock --force deploy:shop
`,
	"doctor": `Usage: redlock doctor [--nodes URLS] [--json] [--restart-delay D] [--replica-ack N]

Audits every node, changing nothing (INFO, CONFIG GET, TIME, ACL WHOAMI and
ACL DRYRUN where permitted), and prints one row per node: server and version,
role and replicas, eviction (maxmemory-policy and maxmemory), persistence
(append-only file and appendfsync), the clock's offset from this host's and
the round trip, the ways the node can be spoken to (scripts, native,
transactions), the server's own compare-and-set commands its user may run
(SET IFEQ, DELIFEQ, DELEX IFEQ), the commands its user may not run, and a
verdict: ok,
degraded (a feature falls back, or the node takes no part: its clock is off),
unsafe (it can lose a held lock: eviction, no persistence, replicas not
waited for), or, for a node that could not be read, unreachable (its finding
"unreachable") or refused (its finding "refused": it refuses this client, a
wrong password or user, a failed TLS handshake). Then one line per
finding beyond the server's version, saying what it risks and how to fix it;
docs/DEPLOYMENTS.md explains each. Findings are judged as for a Redlock with
the library's defaults: a clock tolerance of 1s, no restart delay unless
--restart-delay gives the one your clients use (a node without persistence
is then not unsafe), and no replica acknowledgement unless --replica-ack
gives the replicas your clients wait for (a master with that many replicas
is then not unsafe).

Flags:
  --nodes URLS         comma-separated redis:// or rediss:// URLs (default: $REDLOCK_NODES)
  --json               print a JSON array, one object per node, instead
  --restart-delay D    judge as clients given WithRestartDelay(D) (0 or at least 2s)
  --replica-ack N      judge as clients given WithReplicaAck(N, ...) (not for Cluster nodes)

Exit status: 0 when no node is unsafe, unreachable or refused (degraded nodes
included); 1 when one is, so that it can gate a deployment; 64 for usage
errors; 70 when nothing could be asked.

Example:
  redlock doctor --nodes redis://r1:6379,redis://r2:6379,redis://r3:6379
`,
}
