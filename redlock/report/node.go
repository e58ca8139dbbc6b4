package report

import (
	"time"

	"github.com/redlock-go/redlock/internal/node"
)

// NodeHealth is what a Redlock knows of one node (see redlock.Redlock.Health).
type NodeHealth struct {
	// Index is the node's position in the clients given to redlock.New.
	Index int
	// Addr is the node's address as its client reports it.
	Addr string
	// Down is true while the node is skipped: it timed out or could not be
	// reached (a refused connection counts from the first dial refused,
	// even one the client made for another caller), and has not answered
	// since. Requests to it fail at once with [ErrNodeDown]; it is probed
	// in the background. redlock.WithLogger logs each change.
	Down bool
	// Since is when this process first saw the node fail since it last
	// answered (a request that could not reach it, or went unanswered for
	// the node timeout): the start of its outage as far as this process
	// saw, which may come before the node was put Down (a silence is
	// noticed at the next request). A node that fails while no request
	// goes to it is seen failing at the next one. Zero when it is up.
	Since time.Time
	// Err is why the node went down; nil when it is up.
	Err error
	// Misconfigured is the node's last refusal of a request for a reason no
	// retry changes, from the first request it refused so: an error
	// wrapping redlock.ErrMisconfigured (a wrong or missing password, a right
	// its user lacks, a certificate not trusted). Such a node answers, so
	// it is not Down, but it does not vote for that kind of request. Nil
	// when none, or once that kind of request succeeded on the node.
	Misconfigured error
	// OwedReleases is how many releases wait for the node to answer again.
	OwedReleases int
	// FeaturesOff holds the optional features the node refused ([FeatureQueue],
	// [FeatureIdentify]), each with the error that turned it off; nil when
	// none. The lock works without them (see [FeatureQueue]); each is
	// also reported once to the Observer.
	FeaturesOff map[string]error
	// Speaks is how the node is spoken to: "scripts" (Lua scripts, the
	// default), or, for a node that refuses them (see [FeatureScripts] and
	// redlock.WithoutScripts), "native" (a plain Mutex's operations in the
	// server's own commands, see [NodeCaps]; transactions for the rest)
	// or "transactions" (a plain acquisition's SET NX GET PX, WATCH,
	// MULTI and EXEC for the rest; also the way of a node told to avoid
	// scripts that has not answered the probe yet).
	Speaks string
	// Caps is what the node's server is and which of its own
	// compare-and-set commands its user may run, asked once, with the
	// node's first request; zero until it answered.
	Caps NodeCaps
	// Clock is why the node does not vote now because of its clock (an
	// error wrapping redlock.ErrClockJump; see redlock.WithClockTolerance), nil while
	// it votes.
	Clock error
	// Audit is the node's last audit (see redlock.Redlock.Audit): its settings,
	// its user's rights and what they risk, or why it could not be read
	// (a wrong password, an address that refuses connections); nil until
	// the first audit of the node ended. The first runs in the background
	// a second after the Redlock's first attempt to acquire (a Redlock
	// closed sooner is not audited).
	Audit *NodeAudit
}

// NodeCaps is what a node's server is and which of its own compare-and-set
// commands its user may run (see [NodeHealth.Caps]). A Mutex without
// fencing, reentrancy or a restart delay speaks them on a node without
// scripts: SET IFEQ for its extension, DELIFEQ or DELEX for its release
// (see docs/DEPLOYMENTS.md).
type NodeCaps struct {
	// Known is set once the node answered.
	Known bool
	// Server is "valkey" or "redis", and Version its version (Valkey's
	// own, not the redis_version it reports for compatibility); "" when
	// the user may not run INFO.
	Server, Version string
	// SetIfEq is SET key value IFEQ old (Valkey 8.1, Redis 8.4).
	SetIfEq bool
	// DelIfEq is DELIFEQ key value (Valkey 9.0).
	DelIfEq bool
	// DelEx is DELEX key IFEQ value (Redis 8.4, Valkey 9.2).
	DelEx bool
}

// String is the capabilities as the command line shows them:
// "valkey 9.1.2: SET IFEQ, DELIFEQ", "unknown" before the node answered.
func (c NodeCaps) String() string { return node.Caps(c).String() }

// Optional features: what a node may refuse without the lock failing. A
// least-privilege ACL user may lack the waiters' queue (ZADD, ZREM,
// ZPOPMIN), the channels (SUBSCRIBE, PUBLISH) or INFO. The lock works
// without them: waiters poll and hear the releases announced to all, and
// nodes are not checked for being one server. A feature a node refuses is
// recorded once, shown by redlock.Redlock.Health, and reported to the Observer
// once, as a failure of that node wrapping redlock.ErrMisconfigured.

// The optional features, by the name [NodeHealth.FeaturesOff] gives them.
const (
	// FeatureQueue is the waiters' queue kept on the node (ZADD, ZREM,
	// ZPOPMIN on name + ":redlock:waiters"): without it, waiters do not
	// take turns on that node.
	FeatureQueue = "queue"
	// FeatureIdentify is INFO, which names the server behind the node:
	// without it, two clients of one server are not found out, and a
	// release go-redis resent after losing its reply counts as not held.
	FeatureIdentify = "identify"
	// FeatureScripts is Lua scripting (EVALSHA, EVAL): a node that refuses
	// it is spoken to without scripts from then on (see [NodeHealth.Speaks]
	// and redlock.WithoutScripts): a Mutex works in full, semaphores,
	// reader-writer and multi-name locks are refused there.
	FeatureScripts = "scripts"
	// FeatureClock is TIME, read with every vote for the clock guard (see
	// redlock.WithClockTolerance): without it, the node's clock is not checked.
	FeatureClock = "clock"
)
