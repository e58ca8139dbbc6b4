package quorum

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redlock-go/redlock/internal/jitter"
	"github.com/redlock-go/redlock/internal/life"
	"github.com/redlock-go/redlock/internal/node"
)

// The pool: the N nodes as this process sees them. It keeps, per node,
// what it has learned of the node's health, the releases owed to it, and
// the order of this process's requests on each lock name:
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
//
// The pool owns the goroutines that repair down nodes (probes, owed
// releases) and counts every request in flight; stop ends the first, wait
// waits for both, and close then closes the nodes.

const (
	// probeFirst is the cool-down before a down node's first probe; the
	// waits between probes, or deliveries, that fail back off from it
	// (jitter.Backoff).
	probeFirst = 20 * time.Millisecond
	// probeMax is the longest interval between probes.
	probeMax = 200 * time.Millisecond
	// ProbeTimeout bounds one probe: long enough to dial a far node.
	ProbeTimeout = time.Second
	// maxProbes bounds the probes in flight to one node.
	maxProbes = 2
	// maxOwed bounds the releases owed to one node; beyond it the oldest
	// are dropped (their keys then expire with their TTL).
	maxOwed = 4096
)

// Pool is shared by every operation of a Redlock; each node's state is
// behind its own mutex.
type Pool struct {
	Nodes  []node.Node
	states []*nodeState
	now    Clock
	report ReportFunc
	back   func(i int)
	guard  *ClockGuard
	watch  func(i int, down bool, since time.Time, cause error)

	// slowest is the longest node timeout a request was sent with, in
	// nanoseconds: how long close may still wait for a reply.
	slowest atomic.Int64

	// life counts the node calls in flight, the repairs and the timers;
	// Close stops it (repairs stop, and a refused dial, told on a client's
	// goroutine, counts itself only before: see DialRefused).
	life life.Group
}

// PoolConfig is what a Pool is made with, whole at construction.
type PoolConfig struct {
	// Now is the clock (nil: time.Now).
	Now Clock
	// Report is where background calls (owed releases) report failures;
	// Back is called when a down node answers again. Both may be nil.
	Report ReportFunc
	Back   func(i int)
	// Guard reads the clock evidence of every reply (nil: no check).
	Guard *ClockGuard
	// Watch is told of each node going down and coming back (see tell);
	// nil: none.
	Watch func(i int, down bool, since time.Time, cause error)
}

// NewPool returns the pool of nodes, healthy, made as c says.
func NewPool(nodes []node.Node, c PoolConfig) *Pool {
	if c.Now == nil {
		c.Now = time.Now
	}
	p := &Pool{Nodes: nodes, states: make([]*nodeState, len(nodes)), now: c.Now,
		report: c.Report, back: c.Back, guard: c.Guard, watch: c.Watch}
	for i := range p.states {
		p.states[i] = new(nodeState)
	}
	p.hearRefusals()
	return p
}

// Size is N, the number of nodes.
func (p *Pool) Size() int { return len(p.Nodes) }

// Addr names node i.
func (p *Pool) Addr(i int) string { return p.Nodes[i].Addr() }

// Send sends op to node i and calls done once with the reply; at once,
// with an error wrapping ErrNodeDown, when the node is down. A request is
// counted in the pool until done returns. A call that fails, or answers
// after timeout, is reported to report (nil: none) before done, whether
// or not its operation still waits for it.
//
// A node whose requests have all gone unanswered for timeout, with one of
// them waiting all that time, is put down here too: an operation that
// decided without it does not wait for it, so only the next one notices.
func (p *Pool) Send(ctx context.Context, i int, timeout time.Duration, op node.Op, report ReportFunc, done receiver) {
	now := p.now()
	s := p.states[i]
	s.mu.Lock()
	went := p.noticeSilence(i, now, timeout)
	down, since, cause := s.down, s.downSince, s.cause
	if !down {
		if s.inflight == 0 {
			s.waiting, s.waitingBy = now, now.Add(timeout)
		}
		s.inflight++
	}
	s.mu.Unlock()
	if went {
		p.tell(i)
	}
	if down {
		err := node.Classify(fmt.Errorf("%w for %v (%w)", node.ErrNodeDown, now.Sub(since).Round(time.Millisecond), cause))
		if report != nil {
			report(ctx, i, err, false)
		}
		done.receive(node.Reply{Err: err})
		return
	}
	p.life.Add(1)
	if int64(timeout) > p.slowest.Load() {
		p.slowest.Store(int64(timeout)) // racing stores of different timeouts: a close waits a little less
	}
	sendBy := now.Add(timeout)
	if report == nil {
		// Apart from the reported one below, so that its closure holds no
		// more than without a report.
		p.Nodes[i].Do(ctx, sendBy, op, func(rep node.Reply) {
			at := p.now()
			done.receive(p.clocked(i, now, at, op, p.received(i, now, at, op, rep)))
			p.life.Done()
		})
		return
	}
	w := watchAfter(ctx, &p.life, p, i, now, timeout, report)
	p.Nodes[i].Do(ctx, sendBy, op, func(rep node.Reply) {
		at := p.now()
		rep = p.clocked(i, now, at, op, p.received(i, now, at, op, rep))
		w.replied(rep, at.After(sendBy))
		done.receive(rep)
		p.life.Done()
	})
}

// receiver is told the reply to a request sent to a node: a request of a
// round (see round.go) is one itself, so that sending it allocates no
// closure for the reply.
type receiver interface{ receive(rep node.Reply) }

// ReceiveFunc is a function as a receiver.
type ReceiveFunc func(rep node.Reply)

func (f ReceiveFunc) receive(rep node.Reply) { f(rep) }

// ask sends op to node i like send, but learns nothing from it and skips
// no node: for background questions (who the node is) whose answers, or
// silence, say nothing of how the node serves locks.
func (p *Pool) ask(ctx context.Context, i int, timeout time.Duration, op node.Op, done receiver) {
	p.life.Add(1)
	p.Nodes[i].Do(ctx, p.now().Add(timeout), op, func(rep node.Reply) {
		rep.Err = node.Classify(node.ClientErr(rep.Err))
		done.receive(rep)
		p.life.Done()
	})
}

// noticeSilence puts node i down when its requests have all gone
// unanswered for timeout, with one of them waiting all that time, and
// reports whether it did. Called with the node's mu held.
func (p *Pool) noticeSilence(i int, now time.Time, timeout time.Duration) bool {
	s := p.states[i]
	if !s.down && s.inflight > 0 && now.Sub(later(s.waiting, s.lastReply)) > timeout {
		s.down, s.downSince, s.cause = true, s.outage(now, timeout), node.ErrNodeTimeout
		p.startRepair(i)
		return true
	}
	return false
}

// received learns from a reply that came in from node i at at, to a
// request sent at sent, and returns it with its error as operations see
// it.
func (p *Pool) received(i int, sent, at time.Time, op node.Op, rep node.Reply) node.Reply {
	s := p.states[i]
	s.mu.Lock()
	s.inflight--
	if rep.Err == nil {
		s.trip(at.Sub(sent))
	}
	s.mu.Unlock()
	p.observe(i, rep.Err)
	rep.Err = node.Classify(node.ClientErr(rep.Err))
	s.mu.Lock()
	switch {
	case errors.Is(rep.Err, node.ErrMisconfigured):
		s.refused, s.refusedBy = rep.Err, op.Name()
	case rep.Err == nil && s.refused != nil && s.refusedBy == op.Name():
		s.refused, s.refusedBy = nil, ""
	}
	s.mu.Unlock()
	return rep
}

// observe learns from a request's outcome: an answer proves the node
// alive, a failure to reach it puts it down.
func (p *Pool) observe(i int, err error) {
	switch {
	case err == nil || !node.Unsent(err) && !node.Unreachable(err):
		p.Answered(i)
	case node.Unreachable(err):
		p.MarkDown(i, err)
	}
}

// TimeoutErr is the error of a request sent to node i at sent that the
// node did not answer within the node timeout (see nodeState.timeoutErr).
func (p *Pool) TimeoutErr(i int, sent time.Time) error {
	return p.states[i].timeoutErr(p.Nodes[i], p.now(), sent)
}

// timedOut reports a request to node i sent at sent that got no answer
// within the node timeout. It puts the node down unless it answered since
// then, and returns the request's error (see timeoutErr).
func (p *Pool) timedOut(i int, sent time.Time) error {
	s := p.states[i]
	s.mu.Lock()
	alive := s.lastReply.After(sent)
	s.mu.Unlock()
	err := p.TimeoutErr(i, sent)
	if !alive {
		p.MarkDown(i, err) // the requests it fails at once say why too
	}
	return err
}

// MarkDown puts node i down for cause and starts probing it.
func (p *Pool) MarkDown(i int, cause error) {
	s := p.states[i]
	s.mu.Lock()
	now := p.now()
	went := !s.down
	if went {
		s.down, s.downSince = true, s.outage(now, p.Longest())
	}
	s.cause = cause
	if !errors.Is(cause, node.ErrNodeTimeout) {
		s.lastErr, s.lastErrAt = cause, now
	}
	p.startRepair(i)
	s.mu.Unlock()
	if went {
		p.tell(i)
	}
}

// Answered records an answer from node i: it is up.
func (p *Pool) Answered(i int) {
	s := p.states[i]
	s.mu.Lock()
	s.lastReply = p.now()
	back := s.down
	if s.down {
		s.down, s.cause = false, nil
		if len(s.owed) > 0 {
			p.startRepair(i)
		}
	}
	s.mu.Unlock()
	if back {
		p.tell(i)
	}
	if back && p.back != nil {
		p.back(i)
	}
}

// owe keeps op to deliver to node i once it answers, until ttl has passed
// while it answers.
func (p *Pool) owe(i int, op owable, ttl time.Duration) {
	s := p.states[i]
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.owed) >= maxOwed {
		s.owed = append(s.owed[:0], s.owed[1:]...)
	}
	s.owed = append(s.owed, owedRelease{op: op, until: p.now().Add(ttl)})
	p.startRepair(i)
}

// startRepair starts node i's repair goroutine unless it runs. Called with
// the node's mu held, from a caller counted in the pool.
func (p *Pool) startRepair(i int) {
	s := p.states[i]
	if s.repairing {
		return
	}
	s.repairing = true
	p.life.Go(func() { p.repair(i) })
}

// repair probes node i while it is down and delivers what is owed to it
// once it answers; it returns when the node is up and owes nothing, or the
// pool stops.
func (p *Pool) repair(i int) {
	s := p.states[i]
	backoff := jitter.Backoff{Lo: probeFirst, Hi: probeMax}
	failed := 0 // probes, or deliveries, that failed in a row
	for {
		s.mu.Lock()
		down := s.down
		var owed []owedRelease
		if !down {
			owed, s.owed = s.owed, nil
		}
		if !down && len(owed) == 0 {
			s.repairing = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		if down || failed > 0 {
			if !jitter.Sleep(backoff.Delay(failed+1), p.life.Closing()) {
				s.mu.Lock()
				s.repairing = false
				s.mu.Unlock()
				return
			}
		}
		switch {
		case down && p.probe(i), !down && p.deliver(i, owed):
			failed = 0
		default:
			failed++ // some are owed again: not at once
		}
	}
}

// probe pings node i and reports whether it answered within probeTimeout.
// A client that ignores context deadlines for reads (go-redis without
// ContextTimeoutEnabled) may keep a PING on a silent connection for its
// whole read timeout: the probe then stops waiting for it, and the next
// probe goes out on another connection, while at most maxProbes are stuck.
func (p *Pool) probe(i int) bool {
	s := p.states[i]
	s.mu.Lock()
	if s.probes >= maxProbes {
		s.mu.Unlock()
		return false
	}
	s.probes++
	s.mu.Unlock()
	result := make(chan error, 1)
	p.life.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), ProbeTimeout)
		err := p.Nodes[i].Ping(ctx)
		cancel()
		s.mu.Lock()
		s.probes--
		s.mu.Unlock()
		if err != nil && !node.Unreachable(err) {
			err = nil // an error reply (NOAUTH, LOADING...) is an answer too
		}
		if err == nil {
			p.Answered(i) // even late: the node answers
		}
		result <- err
	})
	timer := time.NewTimer(ProbeTimeout)
	defer timer.Stop()
	select {
	case err := <-result:
		if err != nil {
			p.MarkDown(i, err)
		}
		return err == nil
	case <-timer.C:
		return false
	case <-p.life.Closing():
		return false
	}
}

// deliver sends owed releases to node i and waits for their replies; those
// that fail again are owed again unless their time has passed. It reports
// whether all were delivered.
func (p *Pool) deliver(i int, owed []owedRelease) bool {
	s := p.states[i]
	results := make(chan bool, len(owed))
	for _, o := range owed {
		p.Send(context.Background(), i, ProbeTimeout, o.op, p.report, ReceiveFunc(func(rep node.Reply) {
			again := o.op.Owable(rep.Err)
			if again {
				s.mu.Lock()
				if (s.down || p.now().Before(o.until)) && len(s.owed) < maxOwed {
					s.owed = append(s.owed, o)
				}
				s.mu.Unlock()
			}
			results <- !again
		}))
	}
	all := true
	for range owed {
		all = <-results && all
	}
	return all
}

// Go runs f as one of the pool's node calls: Close waits for it, within
// its bounds.
func (p *Pool) Go(f func()) { p.life.Go(f) }

// Close stops the repairs (probing of down nodes ends, and releases still
// owed are dropped), waits for every request in flight until ctx ends,
// and closes the nodes. Called once no new operation can start. When ctx
// ends first, the nodes are closed without waiting for their calls, which
// their clients end by their own timeouts, and the error says how many
// there were.
func (p *Pool) Close(ctx context.Context) error {
	p.life.Stop()
	if err := p.life.Wait(ctx); err == nil {
		for _, n := range p.Nodes {
			_ = n.Close(ctx) // idle: its calls have returned
		}
		return nil
	}
	left := 0
	for i, n := range p.Nodes {
		_ = n.Close(ctx) // ctx has ended: stops without waiting
		st := p.states[i]
		st.mu.Lock()
		left += st.inflight
		st.mu.Unlock()
	}
	if left == 0 {
		return nil
	}
	return fmt.Errorf("%d node calls still in flight end at their client's timeout", left)
}

// Longest is the longest node timeout a request was sent with.
func (p *Pool) Longest() time.Duration { return time.Duration(p.slowest.Load()) }

// Way returns how node i is spoken to (see node.Way): scripts for a node
// that does not say.
func (p *Pool) Way(i int) node.Way {
	if w, ok := p.Nodes[i].(interface{ Way() node.Way }); ok {
		return w.Way()
	}
	return node.Scripts
}

// Caps returns node i's capabilities (see node.Caps): zero for a node
// that does not say.
func (p *Pool) Caps(i int) node.Caps {
	if c, ok := p.Nodes[i].(interface{ Caps() node.Caps }); ok {
		return c.Caps()
	}
	return node.Caps{}
}
