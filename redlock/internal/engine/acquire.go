package engine

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/redlock-go/redlock/redlock/internal/quorum"

	"github.com/redlock-go/redlock/internal/node"
)

// Acquiring: one attempt to take a lock on a quorum, its fencing token,
// and the release of what a failed attempt may have taken.

// Grant is a successful acquisition: the start of its attempt, the end of
// its validity, and its fencing token (0 when not fenced).
type Grant struct {
	Start, Until time.Time
	Fence        uint64
	// Voters are the nodes whose grants counted: each holds the token
	// until Until at least. Jumps are the clock jumps found on each node
	// by then (see clockJumped), nil when no clock guard is on.
	Voters, Jumps []int
	// Late, when set, tells the nodes that granted after the decision
	// too: they hold the token until Until as well (see quorum.Attempt).
	Late interface{ Granted(i int) bool }
}

// Refusal is what a failed attempt says of itself, for the wait before
// the next: how many nodes granted it when it was decided, how long it
// took, and whether it gave way to a competitor that ranks higher (see
// outranks); hopeless is set when so many nodes failed with errors no
// retry can change (node.ErrMisconfigured) that no quorum is left to grant, and
// local when the value's own state refused it, without I/O (it waits for
// its own release, without taking a turn in the nodes' queues).
type Refusal struct {
	Granted  int
	Took     time.Duration
	GaveWay  bool
	Hopeless bool
	Local    bool
}

// Spec is one acquisition to make: the operation, its undo, the rule and
// the settings it runs with.
type Spec struct {
	Op   node.Op
	Undo node.Op // gives back what op may have taken, silently
	// HandOver, when set, replaces Undo after an attempt that no
	// competitor was seen to win (a split: see quorum.Attempt.Strongest):
	// it gives back what op may have taken by handing it over to each
	// node's next waiter, announced (a handed token's attempt, see
	// turn/handoff.go). Where a competitor holds a quorum, its own release
	// hands the lock over later, and Undo frees the other nodes for the
	// attempts of whoever it hands to.
	HandOver node.Op
	// Handed, when set, receives the handoffs of Token (an attempt with a
	// token that releases hand the lock over to, see turn/handoff.go): a
	// node that refused the attempt, the holder's release not having
	// reached it yet, and handed the lock over to Token since counts as a
	// grant (see quorum.Attempt.HearHandoffs).
	Handed   <-chan node.Handed
	Token    string // what op sets: competitors are ranked against it
	Settings *Settings
	Report   quorum.ReportFunc
	// quorum is how many nodes must grant: 0 for a majority.
	Quorum int
	// split applies the split-vote rule (see outranks): a lock's attempt,
	// whose refusals name the holder. Without it the round is decided by a
	// plain count (a semaphore's permits, the readers of a name).
	Split bool
	// Fence, when set, is the operation that records fencing token n for
	// a won acquisition (see Engine.fence).
	Fence func(n uint64) node.Op
	// released, when not "", is a token whose release was just announced:
	// a node may still hold it because the announcement from a faster node
	// arrived first, so its refusals count as "may still grant" and the
	// attempt never gives way to it.
	Released string
	// reasks bounds how many times a node may be asked again (see
	// quorum.MaxReasks): a lock's attempts, Lock's and TryLock's alike,
	// ask again, so that the contender that ranks first completes its
	// quorum when the others give way.
	Reasks int
	// notAcquired is the error a failed attempt wraps (nil:
	// ErrNotAcquired), and rule the quorum rule its message names ("":
	// none): a permit's or a read lock's words.
	NotAcquired error
	Rule        string
	// Held is what an ErrHeld refusal counted plainly says of the lock
	// ("": "held by others", a semaphore's permits).
	Held string
}

// Acquire makes one attempt to take s.op on a quorum.
//
//  1. Note the start on the monotonic clock.
//  2. Send the acquire request (a script, like SET key token NX GET PX ttl)
//     to every node at once; a node that is down is skipped, and one that
//     has not answered by the node timeout counts as failed.
//  3. Decide as soon as the outcome is certain: a quorum granted, a quorum
//     can no longer grant, or (with the split-vote rule) a competitor
//     ranks higher: see quorum.Attempt.
//  4. Succeed only with a quorum AND validity left: the window ends at
//     start + ttl - drift, whatever the attempt cost (a node asked again
//     set its key later, so it expires later still). With fencing, a
//     second round records the token (see fence).
//  5. Otherwise release on every node where the attempt may have set the
//     key (see mustUndo), each once its acquire requests have returned
//     (see gate), so that a release never overtakes the SET it undoes.
//
// On failure the caller waits, at most a node timeout, for the releases of
// the nodes that had granted when the outcome was decided, so that those
// hold nothing of the attempt once it returns; the others, and all of them
// when ctx has ended, finish in the background. Releases never use the
// caller's cancellation: cleanup must happen even after ctx is done.
func (e *Engine) Acquire(ctx context.Context, s Spec) (Grant, Refusal, error) {
	idr, err := e.enter()
	if err != nil {
		return Grant{}, Refusal{}, err
	}
	defer e.life.Done()
	if e.admit != nil {
		// The first attempts have the nodes to themselves; the audit
		// follows.
		defer e.admit.Attempted()
		if err := e.admit.Admit(ctx, s.Quorum); err != nil {
			return Grant{}, Refusal{Hopeless: true, Local: true}, err
		}
	}
	e.guarded(s)
	gates := quorum.NewGates(e.Pool.Size())
	rd := quorum.NewRound(ctx, e.Pool, s.Settings.NodeTimeout, s.Report, e.Pool.Size()*(1+quorum.MaxReasks)).Needs(s.Quorum)
	a, ctxErr := e.run(ctx, rd, s, gates)
	t := rd.Tally
	won := ctxErr == nil && t.Won()
	idErr := e.IDs.distinct(idr, won, rd.Start, rd.Start.Add(s.Settings.NodeTimeout))
	if g, ok := e.Granted(rd.Start, s.Settings, t.GrantedNodes); won && idErr == nil && ok {
		g.Late = a
		if s.Fence == nil {
			return g, Refusal{}, nil
		}
		return e.fence(ctx, s, g, a.Highest)
	}
	if s.HandOver != nil && a.Strongest() < t.Majority {
		s.Undo = s.HandOver
	}
	e.undo(ctx, s, gates, a.MayHold, ctxErr == nil, t.GrantedNodes())
	failed := Refusal{Granted: t.Yes, Took: e.Now().Sub(rd.Start), GaveWay: a.GaveWay, Hopeless: t.Hopeless()}
	if idErr != nil {
		return Grant{}, failed, idErr
	}
	return Grant{}, failed, e.fail(refusalWords(s, t, a, ctxErr), notAcquired(t, a, failed.Took, s.Settings.TTL, s.Rule)+e.skewed(), ctxErr, t)
}

// run makes the attempt of s over rd, and returns it with ctx's error if
// ctx ended first. An attempt with a handed token counts the handoffs of
// it that come while it is out (Spec.Handed), and, when it failed, those
// that came since.
func (e *Engine) run(ctx context.Context, rd *quorum.Round, s Spec, gates []*quorum.Gate) (*quorum.Attempt, error) {
	a := quorum.NewAttempt(rd, s.Op, s.Token, gates, s.Split, s.Released, s.Reasks)
	if s.Handed == nil {
		return a, a.Run(ctx)
	}
	a.HearHandoffs(s.Handed, func(h node.Handed) bool { return e.mayVote(h, rd.Start) })
	err := a.Run(ctx)
	if !rd.Tally.Won() {
		e.drain(s, a)
	}
	return a, err
}

// drain counts the handoffs of s.Token that came since a's vote loop
// returned without a quorum (see quorum.Attempt.Drain), and releases
// those of any other token.
func (e *Engine) drain(s Spec, a *quorum.Attempt) {
	a.Drain()
	for _, h := range a.Strays {
		e.orphan(h.Node, node.LaneOf(s.Op), h.Token, s.Settings.TTL, s.Settings.NodeTimeout)
	}
}

// mayVote reports whether the clock guard lets node h.Node's handoff,
// made after start, count as a vote (no guard: it does).
func (e *Engine) mayVote(h node.Handed, start time.Time) bool {
	switch {
	case e.Guard == nil:
		return true
	case h.NodeTime.IsZero():
		return e.Guard.Refused(h.Node) == nil
	}
	return e.Guard.Check(h.Node, start, h.At, h.NodeTime) == nil
}

// refusalWords is the error a refusal of s wraps: its words, with the
// class of refusal when the attempt can tell it (see class).
func refusalWords(s Spec, t *quorum.Tally, a *quorum.Attempt, ctxErr error) error {
	words := cmp.Or(s.NotAcquired, ErrNotAcquired)
	c := class(t, a, ctxErr)
	if c == nil {
		return words
	}
	r := &refusal{words: words, class: c}
	if c == ErrHeld && !a.Split {
		r.phrase = cmp.Or(s.Held, "held by others") // permits, readers: a count, no one holder
	}
	return r
}

// class is what a failed attempt's refusal says of the lock (see
// redlock/errors.go), nil when it says nothing (the context ended before
// the outcome was certain; a quorum granted too late):
//
//   - ErrHeld: one competitor holds a quorum of the nodes (a lock's
//     attempt: its refusals name the holder); for permits and readers,
//     whose refusals name no one, the refusals alone leave no quorum.
//   - ErrSplit: a lock's refusals, with the grants it gave way with, leave
//     no quorum, yet no one competitor holds one: contenders split the
//     nodes, and the lock may be free in a moment.
//   - ErrNodesFailed: neither; the nodes that failed made the difference.
func class(t *quorum.Tally, a *quorum.Attempt, ctxErr error) *classError {
	switch {
	case t.Won():
		return nil
	case a.Split && a.Strongest() >= t.Majority, !a.Split && t.LostForGood():
		return ErrHeld
	case ctxErr != nil:
		return nil
	case a.Split && (a.GaveWay || t.LostForGood()):
		return ErrSplit
	}
	return ErrNodesFailed
}

// guarded prepares s for the clock guard: every grant carries the node's
// time while the guard is on (see quorum.ClockGuard); with no guard, none
// does.
func (e *Engine) guarded(s Spec) {
	if a, ok := s.Op.(*node.Acquire); ok {
		a.Clock = e.Guard != nil
	}
	if e.Guard != nil {
		e.Guard.InUse(s.Settings.TTL)
	}
}

// Granted returns the grant of votes counted from start (an attempt's,
// or the registration of a waiter handed the lock over): every voter holds
// the token until at least start + TTL on its own clock, so the validity
// ends at start + TTL - drift. False when none of it is left. voters are
// the nodes whose votes counted, for the release and the clock guard
// (see lease.confirm). Every grant is made
// here, attempts' and handoffs' alike, under the invariant that makes each
// vote true (a node counts only while it holds the token, its time read
// with the vote), stated once in internal/turn/turn.go.
func (e *Engine) Granted(start time.Time, cfg *Settings, voters func() []int) (Grant, bool) {
	until := quorum.ValidUntil(start, cfg.TTL, cfg.DriftFactor)
	if !e.Now().Before(until) {
		return Grant{}, false
	}
	g := Grant{Start: start, Until: until, Voters: voters()}
	if e.Guard != nil {
		g.Jumps = e.Guard.JumpsOf()
	}
	return g, true
}

// skewed says, when this process's own wall clock is the one off (every
// node's agrees with the others', none with it), why its nodes refuse to
// vote; "" otherwise.
func (e *Engine) skewed() string {
	if e.Guard == nil {
		return ""
	}
	if off, ok := e.Guard.ProcessSkew(); ok {
		return fmt.Sprintf("; this process's wall clock is %v from every node's, so none votes: fix this machine's clock", (-off).Round(time.Millisecond))
	}
	return ""
}

// enter starts an acquisition: it counts it in (see track; the caller
// calls r.wg.Done when it returns, unless enter failed), refuses it when
// two nodes were found to be one server, and returns the round asking
// every node who it is when this is the Redlock's first acquisition (nil
// otherwise).
func (e *Engine) enter() (*quorum.Round, error) {
	if err := e.Track(); err != nil {
		return nil, err
	}
	if err := e.IDs.Reg.Err(); err != nil {
		e.life.Done()
		return nil, Invalid("%v", err)
	}
	return e.IDs.first(), nil
}

// notAcquired says why an attempt failed; rule is the quorum rule that
// applied, named when nodes failed ("": none).
func notAcquired(t *quorum.Tally, a *quorum.Attempt, took, ttl time.Duration, rule string) string {
	did, do := "granted", "grant" // a lock's nodes grant; a semaphore's admit
	if !a.Split {
		did, do = "admitted", "admit"
	}
	reason := fmt.Sprintf("%d of %d nodes %s, quorum %d", t.Yes, t.N, did, t.Majority)
	if failed := len(t.Failures); failed > 0 && !t.Won() {
		reason += fmt.Sprintf("; %d of %d nodes failed", failed, t.N)
		if p := t.Pending(); p > 0 {
			reason += fmt.Sprintf(", %d not waited for (no quorum was left)", p)
		}
		if rule != "" {
			reason += ": " + rule
		}
	}
	switch {
	case t.Hopeless():
		reason += fmt.Sprintf("; misconfigured nodes: %d, too many for a quorum to %s until they are fixed", t.Misconfigured(), do)
	case t.Won():
		reason = fmt.Sprintf("quorum %s after %v, no validity left of ttl %v", did, took, ttl)
	case a.Split && a.Strongest() >= t.Majority:
		reason += fmt.Sprintf("; another holds it on %d", a.Strongest())
	case a.GaveWay:
		reason += fmt.Sprintf(", gave way to a competitor holding %d", a.Rival)
	}
	return reason
}

// undo releases a failed attempt with s.undo on the nodes where only(i)
// says it may hold its token (nil: every node), each once its acquire
// requests there returned (gates; nil: at once). When wait is set, it
// waits, at most a node timeout, for the releases of the nodes in
// granted. The next attempt of the same name follows it on each node (one
// lane per name). An undo announces nothing unless it is s.HandOver.
func (e *Engine) undo(ctx context.Context, s Spec, gates []*quorum.Gate, only func(int) bool, wait bool, granted []int) {
	rd := e.releaseRound(ctx, s.Settings, s.Report)
	rd.SendAll(s.Undo, gates, only)
	if wait {
		rd.WaitFor(granted, s.Settings.NodeTimeout)
	}
}

// releaseRound is a round that releases: a release that could not be
// delivered is owed to its node.
func (e *Engine) releaseRound(ctx context.Context, cfg *Settings, report quorum.ReportFunc) *quorum.Round {
	rd := quorum.NewRound(ctx, e.Pool, cfg.NodeTimeout, report, e.Pool.Size())
	rd.OweFor = cfg.TTL
	return rd
}

// fence gives acquisition acq, which a quorum granted, its fencing token:
// one more than highest, the highest counter read from the nodes that
// answered the acquisition, written to every node, where the counter only
// grows. The acquisition succeeds when a quorum still held the lock as the
// token was written and validity is left; otherwise it is released on
// every node.
//
// Why the token exceeds that of every acquisition B that succeeded before
// this one began: B's token reached a quorum of nodes that held B's lock as
// it was written; this acquisition was granted by a quorum; the two share a
// node. There the grant came after B's key was gone, so after B's token
// was written, and the counter read with the grant is at least B's token,
// unless that node lost its data in between (see the package documentation).
func (e *Engine) fence(ctx context.Context, s Spec, g Grant, highest uint64) (Grant, Refusal, error) {
	n := highest + 1
	if n >= MaxFence {
		e.undo(ctx, s, nil, nil, false, nil)
		return Grant{}, Refusal{}, fmt.Errorf("%w: fencing counter %d is at its limit", ErrNotAcquired, highest)
	}
	rd := quorum.NewRound(ctx, e.Pool, s.Settings.NodeTimeout, s.Report, e.Pool.Size()).SendAll(s.Fence(n), nil, nil)
	ctxErr := rd.Decide(ctx)
	ft := rd.Tally
	if ctxErr == nil && ft.Won() && e.Now().Before(g.Until) {
		// Wait for the nodes about as fast as the quorum, as Unlock does
		// when someone waits: the more nodes know the token when TryLock
		// returns, the more of them may later lose their data (see the
		// package documentation).
		rd.LingerAsLongAgain()
		g.Fence = n
		return g, Refusal{}, nil
	}
	// Released on every node, the grants included: a token recorded on too
	// few nodes could be overtaken by a later holder's.
	e.undo(ctx, s, nil, nil, false, nil)
	took := e.Now().Sub(g.Start)
	reason := fmt.Sprintf("fencing token %d recorded on %d of %d nodes holding the lock, quorum %d", n, ft.Yes, ft.N, ft.Majority)
	if ft.Won() {
		reason = fmt.Sprintf("fencing token recorded after %v, no validity left of ttl %v", took, s.Settings.TTL)
	}
	return Grant{}, Refusal{Took: took}, e.fail(ErrNotAcquired, reason, ctxErr, ft)
}
