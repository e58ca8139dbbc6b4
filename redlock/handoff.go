package redlock

import (
	"context"
	"time"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/waitq"
)

// The lock handed over. A waiting Lock of a plain lock (no fencing, no
// restart delay, no replica acknowledgement) queues itself with a token
// of its own (see waitq.JoinHandoff): a release that pops it sets the key
// to that token in the step that deletes its own, when this process hears
// the announcement. Nothing can take the lock in between, and the waiter
// needs no attempt of its own: each node's announcement is that node's
// vote.
//
// The validity of such votes: a node hands the lock over only after it
// popped the waiter's member, which no node had before registered (this
// process's clock, read before the member was sent anywhere); the key it
// sets lives for the TTL from then on the node's clock. A quorum of
// handoffs therefore holds the lock until registered + TTL - drift, as a
// grant to an attempt started at registered would. Handoffs are counted
// only while half the TTL or more of that is left; otherwise (a long
// wait) the waiter makes an attempt with the token, which finds the keys
// handed to it already its own and re-arms them (acquire_plain.lua), so
// that its validity counts from the attempt.
//
// With fewer handoffs than a quorum within handoffWindow of the first (the
// nodes' queues differ, a release is slow to reach a node), the waiter
// makes the same attempt: the nodes that handed the lock over grant it,
// the others are asked as usual. After an attempt with a token fails, the
// token is retired (its keys released by the attempt's undo, or as
// orphans: see waitq) and a new one registered at the same place in the
// queues.

// handoffWindow is how long a waiter that heard one node hand it the lock
// waits for a quorum of them before it makes an attempt. The releases were
// sent to every node at once: their announcements come within about a
// round trip of one another.
const handoffWindow = 5 * time.Millisecond

// handsOver reports whether a Lock of m may take the lock handed over.
func (m *Mutex) handsOver() bool {
	cfg := &m.h.cfg
	_, plain := m.lock.(plainLock)
	return plain && cfg.notify && !cfg.fencing && cfg.restart == 0 && cfg.ack.Replicas == 0
}

// handoffOf is what a waiting Lock has been handed with its current token.
type handoffOf struct {
	token      string
	registered time.Time // before the token's member was sent anywhere
	used       bool      // an attempt was made with the token
	votes      []int     // the nodes whose handoffs count
	heard      map[int]bool
}

// collect adds the handoff h and those that follow within handoffWindow
// to wt's votes, until they make a quorum; it returns ctx's error if ctx
// ended first.
func (wt *waiting) collect(ctx context.Context, h waitq.Handed) error {
	e := wt.h.e
	q := quorum(e.pool.size())
	timer := time.NewTimer(handoffWindow)
	defer timer.Stop()
	for {
		wt.count(h)
		if len(wt.ho.votes) >= q {
			return nil
		}
		select {
		case h = <-wt.w.Handed():
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// count counts node h.Node's handoff as a vote for the current token,
// unless the node's clock says it may not vote.
func (wt *waiting) count(h waitq.Handed) {
	ho := wt.ho
	if h.Token != ho.token || ho.heard[h.Node] {
		return
	}
	ho.heard[h.Node] = true
	if g := wt.h.e.guard; g != nil && refusedVote(g, h, ho.registered) {
		return // it holds the token: the attempt, if one follows, undoes it
	}
	ho.votes = append(ho.votes, h.Node)
}

// refusedVote reports whether the clock guard refuses node h.Node's
// handoff as a vote. The announcement carries the node's time, read when
// it handed the lock over, somewhere between the waiter's registration
// and h.At: within a window no wider than the tolerance it is checked as
// a reply is. A wider one (a long wait) would widen the node's allowance
// for its next reply too: the node must then be voting, and its time
// agree with this process's wall clock within the tolerance plus the
// window, without being recorded.
func refusedVote(g *clockGuard, h waitq.Handed, registered time.Time) bool {
	if h.NodeTime.IsZero() {
		return g.refused(h.Node) != nil
	}
	window := h.At.Sub(registered)
	if window <= g.tolerance {
		return g.check(h.Node, registered, h.At, h.NodeTime) != nil
	}
	mid := registered.Add(window / 2).Round(0) // the wall clock reading
	return g.refused(h.Node) != nil || abs(h.NodeTime.Sub(mid)) > g.tolerance+window/2
}

// handed returns the grant of the votes collected with the current token,
// or false when they are too few, or too late to count (see above).
func (wt *waiting) handed() (grant, bool) {
	ho := wt.ho
	e, cfg := wt.h.e, &wt.h.cfg
	if ho == nil || ho.used || len(ho.votes) < quorum(e.pool.size()) {
		return grant{}, false
	}
	if e.now().After(ho.registered.Add(cfg.ttl / 2)) {
		return grant{}, false
	}
	g := grant{start: ho.registered, until: validUntil(ho.registered, cfg.ttl, cfg.driftFactor)}
	if e.guard != nil {
		g.voters, g.jumps = ho.votes, e.guard.jumpsOf()
	}
	return g, true
}

// register queues the wait with a new token to be handed the lock with,
// in the background; w is nil for the first registration.
func (wt *waiting) register() {
	h := wt.h
	registered := h.e.now()
	if wt.w == nil {
		wt.w = h.e.waiters.JoinHandoff(h.name, h.cfg.nodeTimeout, h.cfg.ttl)
	} else {
		wt.w.Requeue(h.cfg.nodeTimeout)
	}
	wt.ho = &handoffOf{token: wt.w.Handoff(), registered: registered, heard: map[int]bool{}}
}

// orphan releases, on node i, the lock name that was handed over to token
// after its waiter stopped waiting with it, unless a lease of this
// process holds the token (the waiter won with it).
func (e *engine) orphan(i int, name, token string, timeout time.Duration) {
	e.leasesMu.Lock()
	for l := range e.leases {
		if l.token == token {
			e.leasesMu.Unlock()
			return
		}
	}
	e.leasesMu.Unlock()
	if e.track(1) != nil {
		return // closed: the key expires with its TTL
	}
	go func() {
		defer e.wg.Done()
		ops := make([]node.Op, e.pool.size())
		ops[i] = announced(name, &lease{token: token, notice: token})
		e.deliver(ops, timeout)
	}()
}
