package quorum

import (
	"fmt"
	"sync"
	"time"

	"github.com/redlock-go/redlock/internal/node"
)

// What the pool knows of each node (see pool.go), and the releases it
// owes it.

// owable is an operation that may be delivered later when it failed with
// err (see node.Release.Owable).
type owable interface {
	node.Op
	Owable(err error) bool
}

// trip learns the round trip d of a request answered: the smoothed round
// trip moves an eighth of the way to it (TCP's smoothing of its own
// round-trip time), from the first reply's. It includes the time the
// request queued in the client: what a caller waits. Called with mu held.
func (s *nodeState) trip(d time.Duration) {
	if s.rtt == 0 {
		s.rtt = d
		return
	}
	s.rtt += (d - s.rtt) / 8
}

// nodeState is what the pool knows of one node. Guarded by mu.
type nodeState struct {
	mu        sync.Mutex
	down      bool
	downSince time.Time
	cause     error     // why it is down
	lastReply time.Time // the last time the node answered anything
	lastErr   error     // the last failure to reach the node (dial, TLS, network)
	lastErrAt time.Time
	failing   time.Time     // the first failure seen since lastReply (see failedAt)
	inflight  int           // requests sent and not answered
	rtt       time.Duration // the round trip, smoothed (see trip)
	waiting   time.Time     // since when some request has waited for an answer
	waitingBy time.Time     // the node timeout of the request sent at waiting
	repairing bool          // the repair goroutine runs
	probes    int           // probes in flight
	owed      []owedRelease
	// refused is the last refusal for a reason no retry changes
	// (node.ErrMisconfigured), by an operation of kind refusedBy; nil
	// once that kind of operation succeeded again.
	refused   error
	refusedBy string

	// told is whether the node was last told down to the pool's Watch;
	// tellMu orders the tellings (see tell).
	tellMu sync.Mutex
	told   bool
}

// owedRelease is a release the node has not received yet.
type owedRelease struct {
	op    owable
	until time.Time // while the node answers, pointless after this
}

// timeoutErr is the error of a request sent to node n at sent that the
// node did not answer within the node timeout, now: ErrNodeTimeout, with
// the last failure to reach the node when nothing came from it since: a
// failed call (a dial refused, a TLS handshake that failed), or the
// client's last dial when it failed (see node.DialWatcher), which the
// client's own dial retries keep from the call until long after the
// timeout. That failure is then the real cause; a certificate not trusted
// makes the timeout ErrMisconfigured, as it is when it reaches the call.
func (s *nodeState) timeoutErr(n node.Node, now, sent time.Time) error {
	s.mu.Lock()
	last, at, replied := s.lastErr, s.lastErrAt, s.lastReply
	s.failedAt(now)
	s.mu.Unlock()
	what := "last error"
	if w, ok := n.(node.DialWatcher); ok {
		if f := w.LastDialFailure(); f != nil && f.At.After(at) {
			last, at, what = f.Err, f.At, "last dial"
		}
	}
	if last == nil || at.Before(replied) || at.Before(sent.Add(-time.Minute)) {
		return node.ErrNodeTimeout
	}
	return node.Classify(fmt.Errorf("%w (%s %v ago: %w)", node.ErrNodeTimeout, what, now.Sub(at).Round(time.Millisecond), last))
}

// failedAt records a failure of the node seen at at (a request that could
// not reach it, or went unanswered for the node timeout) and returns the
// first one seen since the node last answered: the start of its outage as
// far as this process saw, which a node put down (at the next request
// after its silence, say) reports as down since. Called with mu held.
func (s *nodeState) failedAt(at time.Time) time.Time {
	if s.failing.IsZero() || s.failing.Before(s.lastReply) || at.Before(s.failing) {
		s.failing = at
	}
	return s.failing
}

// outage returns when the node's outage began as far as this process saw,
// as it is put down now: the first failure recorded since it last answered
// or, when earlier, the moment its silence became a failure (see
// noticeSilence), which no one may have watched, since a round that
// decided without the node does not wait for it. That moment is the node
// timeout of the request sent at waiting when it was sent after the last
// answer, else timeout after that answer (requests waited through it).
// Every caller follows a request that waited until now, so waiting is
// that of the silence. Called with mu held.
func (s *nodeState) outage(now time.Time, timeout time.Duration) time.Time {
	at := now
	switch {
	case s.waiting.IsZero():
	case s.waiting.After(s.lastReply):
		at = s.waitingBy
	default:
		at = s.lastReply.Add(timeout)
	}
	if at.After(now) {
		at = now
	}
	return s.failedAt(at)
}

// Health returns what the pool knows of node i: whether it is down, since
// when (the first failure seen, see failedAt), how many releases it is
// owed, and why it is down.
func (p *Pool) Health(i int) (down bool, since time.Time, owed int, cause error) {
	s := p.states[i]
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return true, s.downSince, len(s.owed), s.cause
	}
	return false, time.Time{}, len(s.owed), nil
}

// Refused returns node i's last refusal of a request for a reason no retry
// changes (an error wrapping node.ErrMisconfigured: a wrong password, a
// missing right, a certificate not trusted), from the first request it
// refused so; nil when none, or once the same kind of request succeeded.
func (p *Pool) Refused(i int) error {
	s := p.states[i]
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// tell tells the pool's Watch that node i went down or came back, as it
// is now: a change undone before it is told is not told, and each telling
// is the opposite of the last, so a node is told down once per episode,
// whichever of its failures (a refused dial, a probe, a timeout) came
// first. Called without the node's mu held: Watch may log.
func (p *Pool) tell(i int) {
	if p.watch == nil {
		return
	}
	s := p.states[i]
	s.tellMu.Lock()
	defer s.tellMu.Unlock()
	s.mu.Lock()
	down, since, cause := s.down, s.downSince, s.cause
	s.mu.Unlock()
	if down == s.told {
		return
	}
	s.told = down
	p.watch(i, down, since, cause)
}

// hearRefusals has each node whose client reports refused dials (see
// node.Redis.OnRefused) put down at the first one: a host that refuses a
// connection has no server listening, a certainty the node's calls would
// only report after the client's own retries.
func (p *Pool) hearRefusals() {
	for i, n := range p.Nodes {
		if r, ok := n.(interface{ OnRefused(func(error)) }); ok {
			r.OnRefused(func(err error) { p.DialRefused(i, err) })
		}
	}
}

// DialRefused puts node i down for err, a dial its client's host refused,
// told on the dialling goroutine (one of the client's, not counted in the
// pool); nothing once the pool is closed.
func (p *Pool) DialRefused(i int, err error) {
	if !p.life.Enter() {
		return
	}
	defer p.life.Done()
	p.MarkDown(i, node.Classify(err))
}

// SlowestTrip returns the longest of the nodes' round trips, each smoothed
// over its last replies (see nodeState.trip), of the nodes not down: how
// far apart, at most, the replies of requests sent to every node at once
// arrive. Zero before any reply.
func (p *Pool) SlowestTrip() time.Duration {
	var slowest time.Duration
	for _, s := range p.states {
		s.mu.Lock()
		if !s.down {
			slowest = max(slowest, s.rtt)
		}
		s.mu.Unlock()
	}
	return slowest
}
