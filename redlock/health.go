package redlock

import (
	"context"
	"fmt"
	"time"

	"github.com/redlock-go/redlock/redlock/internal/engine"
)

// NodeHealth is what a Redlock knows of one node (see [Redlock.Health]).
type NodeHealth struct {
	// Index is the node's position in the clients given to [New].
	Index int
	// Addr is the node's address as its client reports it.
	Addr string
	// Down is true while the node is skipped: it timed out or could not be
	// reached (a refused connection counts from the first dial refused,
	// even one the client made for another caller), and has not answered
	// since. Requests to it fail at once with [ErrNodeDown]; it is probed
	// in the background. [WithLogger] logs each change.
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
	// Refused is the node's last refusal of a request for a reason no
	// retry changes, from the first request it refused so: an error
	// wrapping [ErrMisconfigured] (a wrong or missing password, a right
	// its user lacks, a certificate not trusted). Such a node answers, so
	// it is not Down, but it does not vote for that kind of request. Nil
	// when none, or once that kind of request succeeded on the node.
	Refused error
	// Owed is how many releases wait for the node to answer again.
	Owed int
	// Off holds the optional features the node refused ([FeatureQueue],
	// [FeatureIdentify]), each with the error that turned it off; nil when
	// none. The lock works without them (see [FeatureQueue]); each is
	// also reported once to the Observer.
	Off map[string]error
	// Way is how the node is spoken to: "scripts" (Lua scripts, the
	// default), or, for a node that refuses them (see [FeatureScripts] and
	// [WithoutScripts]), "native" (a plain Mutex's operations in the
	// server's own commands, see [NodeCaps]; transactions for the rest)
	// or "transactions" (a plain acquisition's SET NX GET PX, WATCH,
	// MULTI and EXEC for the rest; also the way of a node told to avoid
	// scripts that has not answered the probe yet).
	Way string
	// Caps is what the node's server is and which of its own
	// compare-and-set commands its user may run, asked once, with the
	// node's first request; zero until it answered.
	Caps NodeCaps
	// Clock is why the node does not vote now because of its clock (an
	// error wrapping [ErrClockJump]; see [WithClockTolerance]), nil while
	// it votes.
	Clock error
	// Audit is the node's last audit (see [Redlock.Audit]): its settings,
	// its user's rights and what they risk, or why it could not be read
	// (a wrong password, an address that refuses connections); nil until
	// the first audit of the node ended. The first runs in the background
	// a second after the Redlock's first attempt to acquire (a Redlock
	// closed sooner is not audited).
	Audit *NodeAudit
}

// Health returns what the Redlock knows of each node's health, in the order
// of the clients given to [New]. It does no I/O.
func (r *Redlock) Health() []NodeHealth {
	out := make([]NodeHealth, r.e.Pool.Size())
	for i := range out {
		h := NodeHealth{Index: i, Addr: r.e.Pool.Addr(i)}
		h.Down, h.Since, h.Owed, h.Err = r.e.Pool.Health(i)
		h.Refused = r.e.Pool.Refused(i)
		h.Off = r.e.Features.Of(i)
		h.Way = r.e.Pool.Way(i).String()
		h.Caps = NodeCaps(r.e.Pool.Caps(i))
		if r.e.Guard != nil {
			h.Clock = r.e.Guard.Refused(i)
		}
		h.Audit = r.audits.of(i)
		out[i] = h
	}
	return out
}

// Audit reads every node's settings and its user's rights now, judges
// them (see [NodeAudit] and [Finding]) and returns them, one per node in
// the order of the clients given to [New]: for a service's readiness
// check, or `redlock doctor`. It sends only commands that change nothing
// (INFO, CONFIG GET, TIME, ACL WHOAMI and ACL DRYRUN, or where ACL DRYRUN
// is refused each command in a form that changes nothing: EVALSHA of a
// script no node has, SET and ZADD with XX on a key that does not exist,
// PUBLISH to a channel no one hears; and SET ... IFEQ, DELIFEQ and DELEX
// ... IFEQ on the key "redlock:probe", which holds nothing, for
// [NodeAudit.Caps]: a user whose key patterns leave it out shows none),
// every node at once, down nodes included, and returns once every node
// was read or ctx ended (each node is given at most five seconds). A node
// that could not be read has its error in [NodeAudit.Err]. It records what
// it found for [NodeHealth.Audit], and tells an [AuditObserver] of each
// finding above [SeverityInfo] not told before for that node.
//
// Findings are judged against the options given to New: the restart
// delay, replica acknowledgement and clock tolerance (a Mutex given other
// values is not judged apart).
//
// It returns an error wrapping [ErrInvalidArgument] for a nil context,
// [ErrClosed] after [Redlock.Close], and, when ctx ended before every node
// was read, the audits so far (the others with ctx's error) and an error
// wrapping ctx.Err().
func (r *Redlock) Audit(ctx context.Context) ([]NodeAudit, error) {
	if ctx == nil {
		return nil, engine.Invalid("nil context")
	}
	if err := r.e.Track(1); err != nil {
		return nil, err
	}
	defer r.e.WG.Done()
	out := r.audits.audit(ctx)
	if err := ctx.Err(); err != nil {
		return out, fmt.Errorf("redlock: audit: %w", err)
	}
	return out, nil
}
