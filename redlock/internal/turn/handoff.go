package turn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/redlock/internal/engine"

	"github.com/redlock-go/redlock/redlock/internal/quorum"
)

// The lock handed over (see turn.go for the policy and the invariant). A
// waiting Lock of a plain lock queues itself with a token of its own (see
// waitq.JoinHandoff); a release that pops it where the node's server
// counts this process's subscription sets the key to that token in the
// step that deletes its own, then announces it (release.lua). Each such
// announcement is that node's vote.
//
// Validity: a node hands the lock over only after it popped the waiter's
// member, which no node had before it was registered (this process's
// clock, read before the member was sent anywhere); the key it sets lives
// for the TTL from then on the node's clock. A quorum of handoffs
// therefore holds the lock until registered + TTL - drift, as a grant to
// an attempt started at registered would. Handoffs are counted only while
// half the TTL or more of that is left; otherwise (a long wait) the
// waiter makes an attempt with the token, which finds the keys handed to
// it already its own and re-arms them (acquire_plain.lua), so that its
// validity counts from the attempt.
//
// With fewer handoffs than a quorum within the window after the first (see
// handoffWindow; the nodes' queues differ, a release is slow to reach a
// node, a node named the waiter instead), the waiter makes the same
// attempt: the nodes that handed the lock over grant it, the others are
// asked as usual. The releaser's token, which the handoffs name, is not
// taken for a holder's there (its release is on its way: engine.Spec.Released),
// and a node that refused the attempt and hands the lock over while it is
// out counts as a grant (engine.Spec.Handed): across sites the last
// handoffs came tens of milliseconds after the window, while the attempt
// was out, and were undone with it (make bench-wan, one run of the five
// nodes' placement, 30 s: 44 of 158 failed attempts with a token had
// handoffs come while they were out, and the attempt then waited its
// back-off). After an attempt with a token fails, the token is
// retired (its keys released by the attempt's undo, or as orphans: see
// waitq) and a new one registered at the same place in the queues. When no
// competitor holds a quorum (a split: the nodes handed the lock to
// different waiters), that undo hands the lock over as a holder's release
// does (Mutex.tryHanded): a node that handed this waiter the lock hands it
// to its next waiter and announces it, rather than lie free, unannounced,
// until the waiters' back-offs end (make bench-wan, one run of each beside
// redsync: longest wait 545-915 ms against 863-1027 without,
// acquisitions/s 2.4-2.5x redsync's against 1.9-2.3x). A waiter that gives
// up before an attempt with its token releases the token on every node: a
// node may have handed it the lock without the announcement reaching it.

// handoffWindow is how long a waiter that heard one node hand it the lock
// waits for a quorum of them before it makes an attempt, beyond the
// slowest node's round trip (quorum.Pool.SlowestTrip). The releases were
// sent to every node at once, from wherever the holder is: their
// announcements come within about the slowest round trip of one another.
// An attempt made before the rest come costs a round trip to a quorum
// again, and, sent while the release is still on its way to a far node,
// it finds the lock held there and splits the nodes with the waiter it
// was handed to (make bench-wan: with the window alone, 5 ms, hand-overs
// between sites 30-50 ms apart took 2-6 times their floor).
const handoffWindow = 5 * time.Millisecond

// handoffFresh bounds a handoff's age: a waiter takes the lock it was
// handed only within TTL/handoffFresh of its registration, so that at
// least that much validity is left when Lock returns.
const handoffFresh = 2

// handoffOf is what a waiting Lock has been handed with its current token.
type handoffOf struct {
	token      string
	registered time.Time // before the token's member was sent anywhere
	used       bool      // an attempt was made with the token
	votes      []int     // the nodes whose handoffs count
	heard      map[int]bool
}

// collect adds the handoff h and those that follow within the window
// to wt's votes, until they make a quorum; it returns ctx's error if ctx
// ended first.
func (wt *Waiting) collect(ctx context.Context, h node.Handed) error {
	e := wt.Holder.Engine
	q := quorum.Majority(e.Pool.Size())
	timer := time.NewTimer(handoffWindow + e.Pool.SlowestTrip())
	defer timer.Stop()
	// The attempt that follows, if one does, finds the releaser's token
	// on the nodes its release has not reached yet: it waits for their
	// handoffs rather than take it for a holder (engine.Spec.Released).
	wt.released = h.Released
	for {
		wt.count(h)
		if len(wt.Handed.votes) >= q {
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
func (wt *Waiting) count(h node.Handed) {
	ho := wt.Handed
	if h.Token != ho.token || ho.heard[h.Node] {
		return
	}
	ho.heard[h.Node] = true
	if g := wt.Holder.Engine.Guard; g != nil && refusedVote(g, h, ho.registered) {
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
func refusedVote(g *quorum.ClockGuard, h node.Handed, registered time.Time) bool {
	if h.NodeTime.IsZero() {
		return g.Refused(h.Node) != nil
	}
	window := h.At.Sub(registered)
	if window <= g.Tolerance {
		return g.Check(h.Node, registered, h.At, h.NodeTime) != nil
	}
	mid := registered.Add(window / 2).Round(0) // the wall clock reading
	return g.Refused(h.Node) != nil || h.NodeTime.Sub(mid).Abs() > g.Tolerance+window/2
}

// handed returns the grant of the votes collected with the current token,
// or false when they are too few, or too late to count (see above).
func (wt *Waiting) handed() (engine.Grant, bool) {
	ho := wt.Handed
	e, cfg := wt.Holder.Engine, &wt.Holder.Settings
	if ho == nil || ho.used || len(ho.votes) < quorum.Majority(e.Pool.Size()) {
		return engine.Grant{}, false
	}
	if e.Now().After(ho.registered.Add(cfg.TTL / handoffFresh)) {
		return engine.Grant{}, false
	}
	if e.Distinct(e.Now().Add(cfg.NodeTimeout)) != nil {
		// Two nodes are one server: its one announcement would count
		// twice. The attempt with the token that follows fails as every
		// attempt then does.
		return engine.Grant{}, false
	}
	return e.Granted(ho.registered, cfg, func() []int { return ho.votes })
}

// UseHanded begins an attempt of a Lock queued to be handed the lock
// (Handed is set): it takes the lock with the handoffs counted when they
// make a quorum (took), and otherwise returns their token, for the
// caller's attempt with it.
func (wt *Waiting) UseHanded(ctx context.Context) (token string, took bool, err error) {
	if err := ctx.Err(); err != nil {
		return "", false, errors.Join(fmt.Errorf("%w: context done before the attempt", engine.ErrNotAcquired), err)
	}
	ho := wt.Handed
	g, ok := wt.handed()
	ho.used = true
	if ok {
		wt.Holder.Take(ctx, ho.token, ho.token, g)
		return "", true, nil
	}
	return ho.token, false, nil
}

// Handoffs is where the handoffs of the wait's current token arrive (see
// engine.Spec.Handed); nil when it is not queued to be handed the lock.
func (wt *Waiting) Handoffs() <-chan node.Handed {
	if wt.w == nil {
		return nil
	}
	return wt.w.Handed()
}

// Member is the wait's member of the nodes' queues, the one its current
// token was registered with; "" when it is not queued.
func (wt *Waiting) Member() string {
	if wt.w == nil {
		return ""
	}
	return wt.w.Member()
}

// register queues the wait with a new token to be handed the lock with,
// in the background; w is nil for the first registration.
func (wt *Waiting) register() {
	h := wt.Holder
	registered := h.Engine.Now()
	if wt.w == nil {
		wt.w = h.Engine.Waiters.JoinHandoff(h.Name, h.Settings.NodeTimeout, h.Settings.TTL)
	} else {
		wt.w.Requeue(h.Settings.NodeTimeout)
	}
	wt.Handed = &handoffOf{token: wt.w.Handoff(), registered: registered, heard: map[int]bool{}}
}
