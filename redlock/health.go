package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Node health and owed releases. A Redlock keeps, per node, what it has
// learned of the node's health:
//
//   - A node that did not answer within the node timeout, or could not be
//     reached (connection refused, reset, closed), is down: requests to it
//     fail at once with ErrNodeDown, without being sent. Not sending is
//     always safe: a node that is not asked grants nothing, and an
//     acquisition still needs a quorum of the others. A timeout does not
//     count while other replies from the node arrived after the late
//     request was sent: the node answers, the request was only slow.
//   - A down node is probed in the background (PING), after a short
//     cool-down and then at growing intervals, until it answers; any answer
//     from the node, to a probe or to a late request, brings it back.
//   - A release that could not be delivered (the node was down, silent or
//     its queue full) is owed to the node and delivered as soon as it
//     answers again. An undo is sent only after the SET it undoes has
//     returned (see gate), so when the SET is still in the node's socket
//     buffer, the node applies it before it answers anything sent later.
//     While the node answers, an owed release is dropped once the TTL it
//     guards has passed; while it is down, it is kept (up to maxOwed per
//     node), since a SET applied on resumption lives one TTL from then.

const (
	// probeFirst is the cool-down before a down node's first probe, and
	// probeMax the longest interval between probes.
	probeFirst = 20 * time.Millisecond
	probeMax   = 200 * time.Millisecond
	// probeTimeout bounds one probe: long enough to dial a far node.
	probeTimeout = time.Second
	// maxProbes bounds the probes in flight to one node.
	maxProbes = 2
	// maxOwed bounds the releases owed to one node; beyond it the oldest
	// are dropped (their keys then expire with their TTL).
	maxOwed = 4096
)

// peer is one node as a Redlock sees it: its transport, its health and the
// releases owed to it. It is shared by every operation of the Redlock; its
// state is behind mu.
type peer struct {
	r     *Redlock
	index int
	n     node

	mu        sync.Mutex
	down      bool
	downSince time.Time
	cause     error     // why it is down
	lastReply time.Time // the last time the node answered anything
	lastErr   error     // the last failure to reach the node (dial, TLS, network)
	lastErrAt time.Time
	inflight  int       // requests sent and not answered
	waiting   time.Time // since when some request has waited for an answer
	repairing bool      // the repair goroutine runs
	probes    int       // probes in flight
	owed      []owedRelease
}

// owedRelease is a release the node has not received yet.
type owedRelease struct {
	req   *releaseReq
	until time.Time // while the node answers, pointless after this
}

// NodeHealth is what a Redlock knows of one node (see [Redlock.Health]).
type NodeHealth struct {
	// Index is the node's position in the clients given to [New].
	Index int
	// Addr is the node's address as its client reports it.
	Addr string
	// Down is true while the node is skipped: it timed out or could not be
	// reached, and has not answered since. Requests to it fail at once
	// with [ErrNodeDown]; it is probed in the background.
	Down bool
	// Since is when the node went down; zero when it is up.
	Since time.Time
	// Err is why the node went down; nil when it is up.
	Err error
	// Owed is how many releases wait for the node to answer again.
	Owed int
}

// Health returns what the Redlock knows of each node's health, in the order
// of the clients given to [New]. It does no I/O.
func (r *Redlock) Health() []NodeHealth {
	out := make([]NodeHealth, len(r.peers))
	for i, p := range r.peers {
		p.mu.Lock()
		out[i] = NodeHealth{Index: i, Addr: p.n.addr(), Down: p.down, Owed: len(p.owed)}
		if p.down {
			out[i].Since, out[i].Err = p.downSince, p.cause
		}
		p.mu.Unlock()
	}
	return out
}

// send sends o to the node and calls done once with the reply; at once,
// with an error wrapping ErrNodeDown, when the node is down. The caller
// must be counted in the Redlock's WaitGroup (an operation, or the
// completion of an earlier request): each request is counted until done.
// A call that fails, or answers after timeout, is reported to obs (nil:
// none) before done, whether or not its operation still waits for it.
//
// A node whose requests have all gone unanswered for timeout, with one of
// them waiting all that time, is put down here too: an operation that
// decided without it does not wait for it, so only the next one notices.
func (p *peer) send(ctx context.Context, timeout time.Duration, obs Observer, o op, done func(reply)) {
	now := p.r.now()
	p.mu.Lock()
	if !p.down && p.inflight > 0 && now.Sub(later(p.waiting, p.lastReply)) > timeout {
		p.down, p.downSince, p.cause = true, now, ErrNodeTimeout
		p.startRepair()
	}
	down, since, cause := p.down, p.downSince, p.cause
	if !down {
		if p.inflight == 0 {
			p.waiting = now
		}
		p.inflight++
	}
	p.mu.Unlock()
	if down {
		err := classify(fmt.Errorf("%w for %v (%w)", ErrNodeDown, now.Sub(since).Round(time.Millisecond), cause))
		if obs != nil {
			obs.NodeFailed(ctx, &NodeError{Index: p.index, Addr: p.n.addr(), Err: err})
		}
		done(reply{err: err})
		return
	}
	p.r.wg.Add(1)
	sendBy := now.Add(timeout)
	if obs == nil {
		// Apart from the observed one below, so that its closure holds no
		// more than without an observer.
		p.n.do(ctx, sendBy, o, func(rep reply) {
			done(p.received(rep))
			p.r.wg.Done()
		})
		return
	}
	p.n.do(ctx, sendBy, o, func(rep reply) {
		rep = p.received(rep)
		p.report(ctx, obs, rep.err, sendBy)
		done(rep)
		p.r.wg.Done()
	})
}

// received learns from a reply that came in, and returns it with its
// error as operations see it.
func (p *peer) received(rep reply) reply {
	p.mu.Lock()
	p.inflight--
	p.mu.Unlock()
	p.observe(rep.err)
	rep.err = classify(clientErr(rep.err))
	return rep
}

// report tells obs of a call that ended with err, if it failed: err is
// not nil, or the reply came after deadline, the node timeout, when the
// algorithm had stopped waiting for it.
func (p *peer) report(ctx context.Context, obs Observer, err error, deadline time.Time) {
	if err == nil && p.r.now().After(deadline) {
		err = ErrNodeTimeout
	}
	if err != nil {
		obs.NodeFailed(ctx, &NodeError{Index: p.index, Addr: p.n.addr(), Err: err})
	}
}

// classify marks an error that no retry can change (see ErrMisconfigured).
func classify(err error) error {
	if err != nil && misconfigured(err) && !errors.Is(err, ErrMisconfigured) {
		return &misconfiguredError{err: err}
	}
	return err
}

// misconfiguredError is a node's error that wraps ErrMisconfigured.
type misconfiguredError struct{ err error }

func (e *misconfiguredError) Error() string        { return "misconfigured: " + e.err.Error() }
func (e *misconfiguredError) Unwrap() error        { return e.err }
func (e *misconfiguredError) Is(target error) bool { return target == ErrMisconfigured } //nolint:errorlint,err113 // a sentinel

// timeoutErr is the error of a request sent at sent that the node did not
// answer within the node timeout: ErrNodeTimeout, with the last failure to
// reach the node when nothing came from it since (a dial refused, a TLS
// handshake that failed). The client's own retries may outlast the node
// timeout, and that failure is then the real cause.
func (p *peer) timeoutErr(sent time.Time) error {
	p.mu.Lock()
	last, at, replied := p.lastErr, p.lastErrAt, p.lastReply
	p.mu.Unlock()
	if last == nil || at.Before(replied) || at.Before(sent.Add(-time.Minute)) {
		return ErrNodeTimeout
	}
	return classify(fmt.Errorf("%w (last error %v ago: %w)", ErrNodeTimeout, p.r.now().Sub(at).Round(time.Millisecond), last))
}

// observe learns from a request's outcome: an answer proves the node
// alive, a failure to reach it puts it down.
func (p *peer) observe(err error) {
	switch {
	case err == nil || !unsent(err) && !unreachable(err):
		p.answered()
	case unreachable(err):
		p.markDown(err)
	}
}

// timedOut reports a request sent at sent that got no answer within the
// node timeout. It puts the node down unless it answered since then.
func (p *peer) timedOut(sent time.Time) {
	p.mu.Lock()
	alive := p.lastReply.After(sent)
	p.mu.Unlock()
	if !alive {
		p.markDown(ErrNodeTimeout)
	}
}

// markDown puts the node down for cause and starts probing it.
func (p *peer) markDown(cause error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.r.now()
	if !p.down {
		p.down, p.downSince = true, now
	}
	p.cause = cause
	if !errors.Is(cause, ErrNodeTimeout) {
		p.lastErr, p.lastErrAt = cause, now
	}
	p.startRepair()
}

// answered records an answer from the node: it is up.
func (p *peer) answered() {
	p.mu.Lock()
	p.lastReply = p.r.now()
	back := p.down
	if p.down {
		p.down, p.cause = false, nil
		if len(p.owed) > 0 {
			p.startRepair()
		}
	}
	p.mu.Unlock()
	if back {
		p.r.reidentify(p.index)
	}
}

// owe keeps req to deliver once the node answers, until ttl has passed
// while it answers.
func (p *peer) owe(req *releaseReq, ttl time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.owed) >= maxOwed {
		p.owed = append(p.owed[:0], p.owed[1:]...)
	}
	p.owed = append(p.owed, owedRelease{req: req, until: p.r.now().Add(ttl)})
	p.startRepair()
}

// owable reports whether a release that failed with err should be
// delivered later: it may not have reached the node, and sending it again
// cannot drop more than it should. Dropping one hold of a reentrant lock
// never frees it, so it is not worth owing; the undo of a reentrant hold is
// resent only when it surely was not applied.
func owable(req *releaseReq, err error) bool {
	if err == nil || !unsent(err) && !unreachable(err) || errors.Is(err, errClosedNode) {
		return false
	}
	if req.reentrant && req.drop == dropOne {
		return false
	}
	return !req.reentrant || req.drop == dropAll || unsent(err)
}

// startRepair starts the repair goroutine unless it runs. Called with p.mu
// held, from a caller counted in the Redlock's WaitGroup.
func (p *peer) startRepair() {
	if p.repairing {
		return
	}
	p.repairing = true
	p.r.wg.Add(1)
	go p.repair()
}

// repair probes the node while it is down and delivers what is owed to it
// once it answers; it returns when the node is up and owes nothing, or the
// Redlock closes.
func (p *peer) repair() {
	defer p.r.wg.Done()
	wait := probeFirst
	for {
		p.mu.Lock()
		down := p.down
		var owed []owedRelease
		if !down {
			owed, p.owed = p.owed, nil
		}
		if !down && len(owed) == 0 {
			p.repairing = false
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		if down || wait > probeFirst {
			if !p.r.sleep(wait) {
				p.mu.Lock()
				p.repairing = false
				p.mu.Unlock()
				return
			}
			wait = min(2*wait, probeMax)
		}
		if down {
			if p.probe() {
				wait = probeFirst
			}
			continue
		}
		if !p.deliver(owed) {
			wait = max(wait, 2*probeFirst) // some are owed again: not at once
		} else {
			wait = probeFirst
		}
	}
}

// probe pings the node and reports whether it answered within
// probeTimeout. A client that ignores context deadlines for reads (go-redis
// without ContextTimeoutEnabled) may keep a PING on a silent connection for
// its whole read timeout: the probe then stops waiting for it, and the next
// probe goes out on another connection, while at most maxProbes are stuck.
func (p *peer) probe() bool {
	p.mu.Lock()
	if p.probes >= maxProbes {
		p.mu.Unlock()
		return false
	}
	p.probes++
	p.mu.Unlock()
	result := make(chan error, 1)
	p.r.wg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
		err := p.n.ping(ctx)
		cancel()
		p.mu.Lock()
		p.probes--
		p.mu.Unlock()
		if err != nil && !unreachable(err) {
			err = nil // an error reply (NOAUTH, LOADING...) is an answer too
		}
		if err == nil {
			p.answered() // even late: the node answers
		}
		result <- err
	})
	timer := time.NewTimer(probeTimeout)
	defer timer.Stop()
	select {
	case err := <-result:
		if err != nil {
			p.markDown(err)
		}
		return err == nil
	case <-timer.C:
		return false
	case <-p.r.done:
		return false
	}
}

// deliver sends owed releases and waits for their replies; those that fail
// again are owed again unless their time has passed. It reports whether
// all were delivered.
func (p *peer) deliver(owed []owedRelease) bool {
	results := make(chan bool, len(owed))
	for _, o := range owed {
		p.send(context.Background(), probeTimeout, p.r.cfg.observer, o.req, func(rep reply) {
			again := owable(o.req, rep.err)
			if again {
				p.mu.Lock()
				if (p.down || p.r.now().Before(o.until)) && len(p.owed) < maxOwed {
					p.owed = append(p.owed, o)
				}
				p.mu.Unlock()
			}
			results <- !again
		})
	}
	all := true
	for range owed {
		all = <-results && all
	}
	return all
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// errNoAnswer marks a client's own context error (see clientErr).
var errNoAnswer = errors.New("redlock: no answer")

// clientErr keeps a context error that a client returns (go-redis' own
// dial or pool timeout) out of the error chain, where it would pass for
// the caller's context ending. Whether the request was sent stays known.
func clientErr(err error) error {
	if err == nil || !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return err
	}
	if unsent(err) {
		return fmt.Errorf("%v: %w", err, errUnsent) //nolint:errorlint // on purpose: see above
	}
	return fmt.Errorf("%v: %w", err, errNoAnswer) //nolint:errorlint // on purpose: see above
}
