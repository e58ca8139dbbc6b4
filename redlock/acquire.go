package redlock

import (
	"context"
	"fmt"
	"time"

	"github.com/redlock-go/redlock/internal/node"
)

// Acquiring: one attempt to take a lock on a quorum, its fencing token,
// and the release of what a failed attempt may have taken.

// acquisition is what a successful acquire leaves for later calls on the
// same lease, or what a failed one says about itself.
type acquisition struct {
	start, until time.Time // the attempt's start, and the validity's end
	// fence is the acquisition's fencing token (0 when not fenced).
	fence uint64
	// granted, took and yielded describe a failed attempt: how many nodes
	// granted it when it was decided, how long it took, and whether it gave
	// way to a competitor that ranks higher (see outranks).
	granted int
	took    time.Duration
	yielded bool
	// hopeless is set when so many nodes failed with errors no retry can
	// change (ErrMisconfigured) that no quorum is left to grant.
	hopeless bool
}

// try is one call of acquire: the operation, the settings it runs with,
// and what it knows of the lock's state.
type try struct {
	op     *node.Acquire
	cfg    *config
	report reportFunc
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
}

// acquire makes one attempt to take the lock on a quorum.
//
//  1. Note the start on the monotonic clock.
//  2. Send the acquire request (a script, like SET key token NX GET PX ttl)
//     to every node at once; a node that is down is skipped, and one that
//     has not answered by the node timeout counts as failed.
//  3. Decide as soon as the outcome is certain: a quorum granted, a quorum
//     can no longer grant, or a competitor ranks higher (the split-vote
//     rule: see attempt.go).
//  4. Succeed only with a quorum AND validity left: the window ends at
//     start + ttl - drift, whatever the attempt cost (a node asked again
//     set its key later, so it expires later still).
//  5. Otherwise release on every node where the attempt may have set the
//     key (see mustUndo), each once its own acquire requests have returned
//     (see gate), so that a release never overtakes the SET it undoes.
//
// On failure the caller waits, at most a node timeout, for the releases of
// the nodes that had granted when the outcome was decided, so that those
// hold nothing of the attempt once it returns; the others, and all of them
// when ctx has ended, finish in the background. Releases never use the
// caller's cancellation: cleanup must happen even after ctx is done.
func (r *Redlock) acquire(ctx context.Context, c try) (acquisition, error) {
	idr, err := r.enter()
	if err != nil {
		return acquisition{}, err
	}
	defer r.wg.Done()
	gates := newGates(r.pool.size())
	rd := newRound(ctx, r.pool, c.cfg.nodeTimeout, c.report, r.pool.size()*(1+maxReasks))
	start := rd.start
	a := newAttempt(rd, c.op, gates, c.released, c.reasks)
	ctxErr := a.run(ctx)
	t := rd.t
	held, until, idErr := r.held(idr, rd, ctxErr, c.cfg)
	if held {
		acq := acquisition{start: start, until: until}
		if c.op.FenceKey == "" || c.op.Reenter {
			return acq, nil
		}
		return r.fence(ctx, c, acq, a.highest)
	}
	r.undo(ctx, c, gates, a.mayHold, ctxErr == nil, t.grantedNodes())
	failed := acquisition{granted: t.yes, took: r.now().Sub(start), yielded: a.yielded, hopeless: t.hopeless()}
	if idErr != nil {
		return failed, idErr
	}
	return failed, r.fail(ErrNotAcquired, notAcquired(t, a, failed.took, c.cfg.ttl), ctxErr, t)
}

// enter starts an acquisition: it counts it in (see track; the caller
// calls r.wg.Done when it returns, unless enter failed), refuses it when
// two nodes were found to be one server, and returns the round asking
// every node who it is when this is the Redlock's first acquisition (nil
// otherwise).
func (r *Redlock) enter() (*round, error) {
	if err := r.track(1); err != nil {
		return nil, err
	}
	if err := r.ids.Err(); err != nil {
		r.wg.Done()
		return nil, invalid("%v", err)
	}
	return r.identifyFirst(), nil
}

// held reports whether an attempt over round rd, whose vote loop returned
// ctxErr, holds what it asked for: a quorum granted, no two of the nodes
// are one server (idr: see distinct), and validity is left. It also
// returns the end of the validity window, and the identity check's error.
func (r *Redlock) held(idr, rd *round, ctxErr error, cfg *config) (bool, time.Time, error) {
	until := validUntil(rd.start, cfg.ttl, cfg.driftFactor)
	won := ctxErr == nil && rd.t.won()
	idErr := r.distinct(idr, won, rd.start, rd.start.Add(cfg.nodeTimeout))
	return won && idErr == nil && r.now().Before(until), until, idErr
}

// distinct checks, for an attempt that a quorum granted, that no two of
// the nodes are the same server (see identified); idr is the first round
// of identities, nil unless this is the first acquisition. An attempt
// that failed hands idr to the background.
func (r *Redlock) distinct(idr *round, won bool, start, deadline time.Time) error {
	if !won {
		r.identifyLater(idr)
		return nil
	}
	return r.identified(idr, start, deadline)
}

// notAcquired says why an attempt failed.
func notAcquired(t *tally, a *attempt, took, ttl time.Duration) string {
	reason := fmt.Sprintf("%d of %d nodes granted, quorum %d", t.yes, t.n, t.quorum)
	switch {
	case t.hopeless():
		reason += fmt.Sprintf("; misconfigured nodes: %d, too many for a quorum to grant until they are fixed", t.misconfigured())
	case a.yielded:
		reason += fmt.Sprintf(", gave way to a competitor holding %d", a.rival)
	case t.won():
		reason = fmt.Sprintf("quorum granted after %v, no validity left of ttl %v", took, ttl)
	}
	return reason
}

// undo releases a failed attempt on the nodes where only(i) says it may
// hold its token (nil: every node), each once its acquire requests there
// returned. When wait is set, it waits, at most a node timeout, for the
// releases of the nodes in granted.
func (r *Redlock) undo(ctx context.Context, c try, gates []*gate, only func(int) bool, wait bool, granted []int) {
	op := &node.Release{Key: c.op.Key, Also: c.op.Also, Token: c.op.Token, Reentrant: c.op.Reentrant, Drop: node.DropUndo}
	r.undoWith(ctx, op, c.cfg, c.report, gates, only, wait, granted)
}

// undoWith is undo with the release op (a lock's or a semaphore's).
func (r *Redlock) undoWith(ctx context.Context, op node.Op, cfg *config, report reportFunc, gates []*gate, only func(int) bool, wait bool, granted []int) {
	rd := r.releaseRound(ctx, cfg, report)
	// An undo enters no order: the attempt waits for the undos of the
	// nodes that granted, and the next attempt follows them.
	rd.sendAll(op, gates, only)
	if wait {
		rd.waitFor(granted, cfg.nodeTimeout)
	}
}

// releaseRound is a round that releases: a release that could not be
// delivered is owed to its node.
func (r *Redlock) releaseRound(ctx context.Context, cfg *config, report reportFunc) *round {
	rd := newRound(ctx, r.pool, cfg.nodeTimeout, report, r.pool.size())
	rd.oweFor = cfg.ttl
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
func (r *Redlock) fence(ctx context.Context, c try, acq acquisition, highest uint64) (acquisition, error) {
	commit := &node.Fence{Key: c.op.Key, Token: c.op.Token, FenceKey: c.op.FenceKey, Fence: highest + 1, Reentrant: c.op.Reentrant, Ack: c.op.Ack}
	if commit.Fence >= maxFence {
		r.undo(ctx, c, nil, nil, false, nil)
		return acquisition{}, fmt.Errorf("%w: fencing counter %d is at its limit", ErrNotAcquired, highest)
	}
	rd := newRound(ctx, r.pool, c.cfg.nodeTimeout, c.report, r.pool.size()).sendAll(commit, nil, nil)
	ctxErr := rd.decide(ctx)
	ft := rd.t
	if ctxErr == nil && ft.won() && r.now().Before(acq.until) {
		// Wait for the nodes about as fast as the quorum, as Unlock does
		// when someone waits: the more nodes know the token when TryLock
		// returns, the more of them may later lose their data (see the
		// package documentation).
		rd.lingerAsLongAgain()
		acq.fence = commit.Fence
		return acq, nil
	}
	// Released on every node, the grants included: a token recorded on too
	// few nodes could be overtaken by a later holder's.
	r.undo(ctx, c, nil, nil, false, nil)
	took := r.now().Sub(acq.start)
	reason := fmt.Sprintf("fencing token %d recorded on %d of %d nodes holding the lock, quorum %d", commit.Fence, ft.yes, ft.n, ft.quorum)
	if ft.won() {
		reason = fmt.Sprintf("fencing token recorded after %v, no validity left of ttl %v", took, c.cfg.ttl)
	}
	return acquisition{took: took}, r.fail(ErrNotAcquired, reason, ctxErr, ft)
}
