package redlock

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

// grant is a successful acquisition: the start of its attempt, the end of
// its validity, and its fencing token (0 when not fenced).
type grant struct {
	start, until time.Time
	fence        uint64
	// voters are the nodes whose grants counted, and jumps the clock
	// jumps found on each node by then (see clockJumped).
	voters, jumps []int
}

// refusal is what a failed attempt says of itself, for the wait before
// the next: how many nodes granted it when it was decided, how long it
// took, and whether it gave way to a competitor that ranks higher (see
// outranks); hopeless is set when so many nodes failed with errors no
// retry can change (node.ErrMisconfigured) that no quorum is left to grant, and
// local when the value's own state refused it, without I/O (it waits for
// its own release, without taking a turn in the nodes' queues).
type refusal struct {
	granted  int
	took     time.Duration
	yielded  bool
	hopeless bool
	local    bool
}

// spec is one acquisition to make: the operation, its undo, the rule and
// the settings it runs with.
type spec struct {
	op     node.Op
	undo   node.Op // gives back what op may have taken, silently
	token  string  // what op sets: competitors are ranked against it
	cfg    *settings
	report quorum.ReportFunc
	// quorum is how many nodes must grant: 0 for a majority.
	quorum int
	// split applies the split-vote rule (see outranks): a lock's attempt,
	// whose refusals name the holder. Without it the round is decided by a
	// plain count (a semaphore's permits, the readers of a name).
	split bool
	// reentrant marks an undo that drops one hold (see mustUndo).
	reentrant bool
	// fence, when set, gives a won acquisition its fencing token (see
	// Redlock.fence).
	fence *node.Fence
	// released, when not "", is a token whose release was just announced:
	// a node may still hold it because the announcement from a faster node
	// arrived first, so its refusals count as "may still grant" and the
	// attempt never gives way to it.
	released string
	// reasks bounds how many times a node may be asked again (see
	// maxReasks): Lock's attempts ask again, TryLock's single attempt does
	// not, so that a caller that tries in a loop gets a quick answer every
	// time.
	reasks int
	// notAcquired is the error a failed attempt wraps (nil:
	// errNotAcquiredSentinel), and rule the quorum rule its message names ("":
	// none): a permit's or a read lock's words.
	notAcquired error
	rule        string
}

// acquire makes one attempt to take s.op on a quorum.
//
//  1. Note the start on the monotonic clock.
//  2. Send the acquire request (a script, like SET key token NX GET PX ttl)
//     to every node at once; a node that is down is skipped, and one that
//     has not answered by the node timeout counts as failed.
//  3. Decide as soon as the outcome is certain: a quorum granted, a quorum
//     can no longer grant, or (with the split-vote rule) a competitor
//     ranks higher: see attempt.go.
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
func (e *engine) acquire(ctx context.Context, s spec) (grant, refusal, error) {
	idr, err := e.enter()
	if err != nil {
		return grant{}, refusal{}, err
	}
	defer e.wg.Done()
	if e.admit != nil {
		// The first attempts have the nodes to themselves; the audit
		// follows.
		defer e.admit.Attempted()
		if err := e.admit.Admit(ctx, s.quorum); err != nil {
			return grant{}, refusal{hopeless: true, local: true}, err
		}
	}
	if a, ok := s.op.(*node.Acquire); ok {
		// Every grant carries the node's time while the guard is on (see
		// clockguard.go); with no guard, none does.
		a.Clock = e.guard != nil
	}
	if e.guard != nil {
		e.guard.InUse(s.cfg.ttl)
	}
	gates := quorum.NewGates(e.pool.Size())
	rd := quorum.NewRound(ctx, e.pool, s.cfg.nodeTimeout, s.report, e.pool.Size()*(1+quorum.MaxReasks)).Needs(s.quorum)
	a := quorum.NewAttempt(rd, s.op, s.token, gates, s.split, s.reentrant, s.released, s.reasks)
	ctxErr := a.Run(ctx)
	t := rd.Tally
	won := ctxErr == nil && t.Won()
	idErr := e.ids.distinct(idr, won, rd.Start, rd.Start.Add(s.cfg.nodeTimeout))
	if g, ok := e.granted(rd.Start, s.cfg, t.GrantedNodes); won && idErr == nil && ok {
		if s.fence == nil {
			return g, refusal{}, nil
		}
		return e.fence(ctx, s, g, a.Highest)
	}
	e.undo(ctx, s, gates, a.MayHold, ctxErr == nil, t.GrantedNodes())
	failed := refusal{granted: t.Yes, took: e.now().Sub(rd.Start), yielded: a.Yielded, hopeless: t.Hopeless()}
	if idErr != nil {
		return grant{}, failed, idErr
	}
	return grant{}, failed, e.fail(cmp.Or(s.notAcquired, errNotAcquiredSentinel), notAcquired(t, a, failed.took, s.cfg.ttl, s.rule)+e.skewed(), ctxErr, t)
}

// granted returns the grant of votes counted from start (an attempt's,
// or the registration of a waiter handed the lock over): every voter holds
// the token until at least start + TTL on its own clock, so the validity
// ends at start + TTL - drift. False when none of it is left. voters are
// the nodes whose votes counted, for the clock guard. Every grant is made
// here.
func (e *engine) granted(start time.Time, cfg *settings, voters func() []int) (grant, bool) {
	until := quorum.ValidUntil(start, cfg.ttl, cfg.driftFactor)
	if !e.now().Before(until) {
		return grant{}, false
	}
	g := grant{start: start, until: until}
	if e.guard != nil {
		g.voters, g.jumps = voters(), e.guard.JumpsOf()
	}
	return g, true
}

// skewed says, when this process's own wall clock is the one off (every
// node's agrees with the others', none with it), why its nodes refuse to
// vote; "" otherwise.
func (e *engine) skewed() string {
	if e.guard == nil {
		return ""
	}
	if off, ok := e.guard.ProcessSkew(); ok {
		return fmt.Sprintf("; this process's wall clock is %v from every node's, so none votes: fix this machine's clock", (-off).Round(time.Millisecond))
	}
	return ""
}

// enter starts an acquisition: it counts it in (see track; the caller
// calls r.wg.Done when it returns, unless enter failed), refuses it when
// two nodes were found to be one server, and returns the round asking
// every node who it is when this is the Redlock's first acquisition (nil
// otherwise).
func (e *engine) enter() (*quorum.Round, error) {
	if err := e.track(1); err != nil {
		return nil, err
	}
	if err := e.ids.reg.Err(); err != nil {
		e.wg.Done()
		return nil, invalid("%v", err)
	}
	return e.ids.first(), nil
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
	case a.Yielded:
		reason += fmt.Sprintf(", gave way to a competitor holding %d", a.Rival)
	case t.Won():
		reason = fmt.Sprintf("quorum %s after %v, no validity left of ttl %v", did, took, ttl)
	}
	return reason
}

// undo releases a failed attempt with s.undo on the nodes where only(i)
// says it may hold its token (nil: every node), each once its acquire
// requests there returned (gates; nil: at once). When wait is set, it
// waits, at most a node timeout, for the releases of the nodes in
// granted. An undo announces nothing, and the next attempt of the same
// name follows it on each node (one lane per name).
func (e *engine) undo(ctx context.Context, s spec, gates []*quorum.Gate, only func(int) bool, wait bool, granted []int) {
	rd := e.releaseRound(ctx, s.cfg, s.report)
	rd.SendAll(s.undo, gates, only)
	if wait {
		rd.WaitFor(granted, s.cfg.nodeTimeout)
	}
}

// releaseRound is a round that releases: a release that could not be
// delivered is owed to its node.
func (e *engine) releaseRound(ctx context.Context, cfg *settings, report quorum.ReportFunc) *quorum.Round {
	rd := quorum.NewRound(ctx, e.pool, cfg.nodeTimeout, report, e.pool.Size())
	rd.OweFor = cfg.ttl
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
func (e *engine) fence(ctx context.Context, s spec, g grant, highest uint64) (grant, refusal, error) {
	commit := *s.fence
	commit.Fence = highest + 1
	if commit.Fence >= maxFence {
		e.undo(ctx, s, nil, nil, false, nil)
		return grant{}, refusal{}, fmt.Errorf("%w: fencing counter %d is at its limit", errNotAcquiredSentinel, highest)
	}
	rd := quorum.NewRound(ctx, e.pool, s.cfg.nodeTimeout, s.report, e.pool.Size()).SendAll(&commit, nil, nil)
	ctxErr := rd.Decide(ctx)
	ft := rd.Tally
	if ctxErr == nil && ft.Won() && e.now().Before(g.until) {
		// Wait for the nodes about as fast as the quorum, as Unlock does
		// when someone waits: the more nodes know the token when TryLock
		// returns, the more of them may later lose their data (see the
		// package documentation).
		rd.LingerAsLongAgain()
		g.fence = commit.Fence
		return g, refusal{}, nil
	}
	// Released on every node, the grants included: a token recorded on too
	// few nodes could be overtaken by a later holder's.
	e.undo(ctx, s, nil, nil, false, nil)
	took := e.now().Sub(g.start)
	reason := fmt.Sprintf("fencing token %d recorded on %d of %d nodes holding the lock, quorum %d", commit.Fence, ft.Yes, ft.N, ft.Majority)
	if ft.Won() {
		reason = fmt.Sprintf("fencing token recorded after %v, no validity left of ttl %v", took, s.cfg.ttl)
	}
	return grant{}, refusal{took: took}, e.fail(errNotAcquiredSentinel, reason, ctxErr, ft)
}
