package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redlock-go/redlock/redlock/internal/quorum"

	"github.com/redlock-go/redlock/internal/identity"
	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/waitq"
)

// Releasing and extending a lease: one round each, decided by a quorum.

// Lapse is one call of release or extend on a lease.
type Lapse struct {
	Settings *Settings
	Report   quorum.ReportFunc
	// Since, for a release, is the lease's start, and Confirmed says
	// until when each node itself last confirmed holding its token (see
	// Free): until then, a node finding the key absent counts as holding
	// the token if the same server answered. Nil Confirmed, or a zero
	// time, counts no absent key.
	Since     time.Time
	Confirmed Confirmed
	// quorum is how many nodes must still hold the token: 0 for a
	// majority, a semaphore's quorum for its permits (see semQuorum).
	Quorum int
	// Late, for an extension, is told each node that granted it after
	// the round was decided (it re-armed the key as the others did),
	// once the round is decided, on the node's goroutine or on
	// Extend's: it must not block.
	Late func(i int)
}

// Free runs op, the release of name by any kind (answering as a lock's
// node.Release does), in one round, and reports whether a quorum still
// held the token; announced says whether op announces itself to waiters.
// Nodes that have not answered when the outcome is certain finish in the
// background, unless ctx has ended (see below).
//
// The caller's cancellation stops neither the release nor the wait for its
// outcome: the requests go out detached (NewRound) and the round is
// bounded by the node timeout, so that a deferred Unlock with a done
// context (a cancelled job, a program shutting down) frees the lock and
// learns whether it held it. Once ctx has ended, Free also waits, within
// that bound, for the nodes still due (a program going away leaves nothing
// in the background). A release that no quorum confirmed returns
// ErrNotHeld only when the nodes answered that the token was gone from too
// many of them for a quorum; otherwise (nodes failed) the error says the
// release was not confirmed (and wraps ctx.Err() once ctx has ended), not
// ErrNotHeld.
//
// A node that answers that the key is without the token (absent, or
// another's) counts as holding it only before the expiry that node itself
// last confirmed (Confirmed: the start of its last grant or extension that
// it answered yes to, + TTL - drift), and only when the server that
// answered is the one it was known to be before the lease began (since).
// Then the key cannot have expired there, no one else can have taken it
// from the caller, and that server did not restart (a restart, or a
// failover to a replica, changes the run id), so an earlier try of this
// same release deleted it, one the client resent when its reply was lost
// (go-redis retries a command whose reply timed out); whoever holds the
// key now took it after that try (a waiter it woke or handed it over to).
// A node whose clock jumped ahead since it confirmed may have expired the
// key early, and a node that confirmed nothing because the clock guard
// refuses its clock may have granted all the same: when such nodes would
// make up the quorum, the release is neither confirmed nor refuted, and
// the error wraps ErrClockJump, not ErrNotHeld.
// The lease's own validity is no bound for a node: a node that missed the
// last extension expires the key at its own earlier time, and another
// client may have held the lock there since. A reentrant Unlock that drops
// one hold never deletes the key, so its absence is no resend: it passes
// no Confirmed.
func (e *Engine) Free(ctx context.Context, op node.Op, name string, announced bool, c Lapse) error {
	if err := e.Track(); err != nil {
		return err
	}
	defer e.life.Done()
	rd := e.releaseRound(ctx, c.Settings, c.Report).Needs(c.Quorum)
	rule := &releaseRule{now: e.now, ids: e.IDs.Reg, since: c.Since, confirmed: c.Confirmed, guard: e.Guard}
	rd.Grants = rule
	if announced {
		rule.heard.Watch(e.Waiters, name)
		rd.Hook = &rule.heard
	}
	rd.SendAll(op, nil, nil)
	// Decided whatever ctx says (a context that never ends, without the
	// allocation of context.WithoutCancel: the round keeps ctx's values).
	_ = rd.Decide(context.Background())
	ended := ctx.Err()
	if ended != nil {
		rd.Linger(c.Settings.NodeTimeout)
	}
	t := rd.Tally
	// A release that reached waiters waits for the nodes about as fast as
	// its quorum, and lets them go first (the courtesy, internal/waitq).
	waited := announced && rule.heard.Done(e.Now().Sub(rd.Start), e.Now())
	if t.Won() {
		if waited {
			rd.LingerAsLongAgain()
		}
		return nil
	}
	if ended == nil {
		settle(rd, nil, c.Settings.NodeTimeout)
	}
	return e.unfreed(ctx, ended, rule, t)
}

// errUnconfirmed heads the error of a release that nodes left neither
// confirmed nor refuted (see unfreed): not ErrNotHeld.
var errUnconfirmed = errors.New("redlock: release not confirmed")

// errNotExtended heads the error of an extension that nodes left neither
// confirmed nor refuted: no quorum extended, and too few answered that
// the token was gone to say that no quorum holds it (the others failed).
// The lease keeps its validity; not ErrNotHeld.
var errNotExtended = errors.New("redlock: extension not confirmed")

// unfreed is the error of a release that no quorum confirmed (see Free);
// ended is ctx's error as the release was decided.
func (e *Engine) unfreed(ctx context.Context, ended error, rule *releaseRule, t *quorum.Tally) error {
	reason := counted("token found on", t)
	if unknown := len(rule.jumped) + len(rule.late) + len(rule.skewed); unknown > 0 && t.Yes+unknown >= t.Majority {
		// Those nodes may have held the token until this release's
		// earlier try deleted it, or lost it early (a clock jump, a
		// restart): not known to be held, nor known not to be.
		sentinel := errUnconfirmed
		if len(rule.jumped)+len(rule.skewed) > 0 {
			// Headed as errUnconfirmed heads the other case.
			reason = "release not confirmed: " + reason
			sentinel = quorum.ErrClockJump
		}
		if len(rule.jumped) > 0 {
			reason += fmt.Sprintf("; %s found the token absent before the expiry confirmed there, but the clock jumped ahead since", nodeList(rule.jumped))
		}
		if len(rule.skewed) > 0 {
			reason += fmt.Sprintf("; %s found the token absent, with a clock the guard refuses: a grant there counted for nothing, and the key may have expired early", nodeList(rule.skewed))
		}
		if len(rule.late) > 0 {
			reason += fmt.Sprintf("; %s found the token absent before the expiry confirmed there, on a server not known to be the one the lock was taken on (a restart or a failover may have lost the key, or this release's earlier try deleted it)", nodeList(rule.late))
		}
		return e.fail(sentinel, reason, ended, t)
	}
	if !t.LostForGood() && !t.Hopeless() {
		// Too few said the token was gone to say that no quorum held it:
		// the nodes that failed may have, with those that confirmed.
		if ended != nil {
			return e.unconfirmed(ctx, reason, t)
		}
		return e.fail(errUnconfirmed, reason, nil, t)
	}
	return e.failLapse("release", reason, ended, t)
}

// Confirmed is what a lease knows of each node (see lease.Lease).
type Confirmed interface {
	// Confirmed returns until when node i is known to hold the lease's
	// token unless a request of the lease itself deleted it: the expiry
	// it last confirmed (zero when none), and whether its clock jumped
	// ahead since, which may have expired the key before then.
	Confirmed(i int) (until time.Time, jumped bool)
}

// failLapse is the error of a release or extension that no quorum
// confirmed and that the nodes refuted (see Free and Extend): ErrNotHeld
// with reason, unless the nodes that refused it for good
// (node.ErrMisconfigured: a missing ACL permission, say) left no quorum.
// The lock is then not known to be lost: it is refused, and the error
// wraps node.ErrMisconfigured instead.
func (e *Engine) failLapse(what, reason string, ctxErr error, t *quorum.Tally) error {
	if t.Hopeless() {
		return e.fail(node.ErrMisconfigured, fmt.Sprintf("%s refused by %d of %d nodes for a reason no retry changes, quorum %d", what, t.Misconfigured(), t.N, t.Majority), ctxErr, t)
	}
	return e.fail(ErrNotHeld, reason, ctxErr, t)
}

// releaseRule reads a release's replies.
type releaseRule struct {
	now       quorum.Clock
	ids       *identity.Registry
	since     time.Time
	confirmed Confirmed
	guard     *quorum.ClockGuard // nil: no clock guard
	heard     waitq.Release      // whether waiters heard it, when announced
	// jumped and late are the nodes that found the token absent before
	// the expiry they confirmed, but whose clocks jumped ahead since
	// (jumped), or whose server is not known to be the one they were
	// since the lease began (late: a restart or a failover before the
	// lease that this process did not learn of in time, or one since;
	// a server that keeps its keys across a restart, or a user refused
	// INFO): whether they held it is unknown (see Free). skewed are the
	// nodes that confirmed nothing and whose clock the guard refuses now:
	// a grant there was refused as a vote (quorum.Pool.clocked), so the
	// key may hold the token that this release's earlier try deleted, or
	// may have expired early (the simulator's seed 144099: a node 2 s
	// ahead granted, its release's resend found the key gone, and Unlock
	// said ErrNotHeld of a lock that a quorum held).
	jumped, late, skewed []int
}

// Grants is the release rule for one node's reply: it held the token, or
// it found the key without it (absent, or another's) before the expiry
// that node last confirmed, on the server it was known to be since before
// since (see Free).
func (rr *releaseRule) Grants(i int, rep node.Reply) bool {
	if rep.OK || rep.Err != nil {
		return rep.OK
	}
	rel := node.ReleasedOf(rep)
	if !rel.Gone && !rel.Taken || rr.confirmed == nil {
		return false
	}
	until, jumped := rr.confirmed.Confirmed(i)
	switch {
	case until.IsZero() && rr.guard != nil && rr.guard.Refused(i) != nil:
		rr.skewed = addNode(rr.skewed, i)
		return false
	case !rr.now().Before(until):
		return false
	case !rr.ids.Same(i, rel.Server, rr.since):
		rr.late = addNode(rr.late, i)
		return false
	case jumped:
		rr.jumped = addNode(rr.jumped, i)
		return false
	}
	return true
}

// lateYes tells the nodes that granted an extension after its round was
// decided (see Lapse.Late): the simulator's seed 114000 found a node whose
// yes came just after the quorum's, whose key then outlived what the lease
// had recorded for it; its release's resend found the key gone (its first
// try had deleted it), which the release could not count.
type lateYes struct {
	mu   sync.Mutex
	yes  []bool // granted, told or not
	done bool   // decided: a yes from now on is told at once
	tell func(i int)
}

// Heard implements quorum.Hook, on node i's goroutine.
func (l *lateYes) Heard(i int, rep node.Reply) {
	if !rep.OK || rep.Err != nil {
		return
	}
	l.mu.Lock()
	l.yes[i] = true
	done := l.done
	l.mu.Unlock()
	if done {
		l.tell(i)
	}
}

// decided tells the nodes that granted but are not in granted, the
// round's voters, and every later one as it comes.
func (l *lateYes) decided(granted []int) {
	l.mu.Lock()
	l.done = true
	yes := slices.Clone(l.yes)
	l.mu.Unlock()
	for i, ok := range yes {
		if ok && !slices.Contains(granted, i) {
			l.tell(i)
		}
	}
}

// addNode adds node i to nodes, once.
func addNode(nodes []int, i int) []int {
	if slices.Contains(nodes, i) {
		return nodes
	}
	return append(nodes, i)
}

// Extend runs the extend request on every node and reports whether a
// quorum still held the token and re-armed its TTL. It also returns the
// nodes that answered yes by then, whatever the outcome: each re-armed
// the key for the TTL from the round's start at the earliest. A failure
// is ErrNotHeld, with ErrLockLost, only when so many nodes answered that
// the token was gone that no quorum can hold it; when nodes failed
// instead, it is errNotExtended (the lease stands until its validity).
func (e *Engine) Extend(ctx context.Context, op node.Op, c Lapse) (granted []int, err error) {
	if err := e.Track(); err != nil {
		return nil, err
	}
	defer e.life.Done()
	rd := quorum.NewRound(ctx, e.Pool, c.Settings.NodeTimeout, c.Report, e.Pool.Size()).Needs(c.Quorum)
	var late *lateYes
	if c.Late != nil {
		late = &lateYes{yes: make([]bool, e.Pool.Size()), tell: c.Late}
		rd.Hook = late
	}
	rd.SendAll(op, nil, nil)
	ctxErr := rd.Decide(ctx)
	t := rd.Tally
	granted = t.GrantedNodes()
	if late != nil {
		late.decided(granted)
	}
	if ctxErr == nil && t.Won() {
		return granted, nil
	}
	settle(rd, ctxErr, c.Settings.NodeTimeout)
	return granted, e.notExtended(t, ctxErr)
}

// notExtended is the error of an extension that no quorum granted, as
// its tally t says (ctxErr: the caller's context's, when it ended first).
func (e *Engine) notExtended(t *quorum.Tally, ctxErr error) error {
	reason := counted("extended on", t)
	if gone := t.RefusedNodes(); len(gone) > 0 {
		// Those nodes answered, and no longer hold the token: not a
		// failure of theirs, so no node error says it.
		reason += fmt.Sprintf("; the token is gone from %s: its key expired there, or another client deleted it (a forced unlock)", nodeList(gone))
	}
	if !t.LostForGood() && !t.Hopeless() {
		// Too few said the token was gone to say that no quorum holds
		// it: the nodes that failed may, with those that extended.
		return e.fail(errNotExtended, reason, ctxErr, t)
	}
	err := e.failLapse("extension", reason, ctxErr, t)
	if t.LostForGood() {
		// So many nodes answered that the token is gone (N-Q+1 of them, a
		// quorum only for odd N) that no quorum can hold it. Extend never
		// re-creates a key, so no later extension can succeed: the lock is
		// lost.
		err = errors.Join(err, ErrLockLost)
	}
	return err
}

// settle waits, after a release or an extension failed, for the nodes not
// heard from yet, up to the node timeout (not past it, and not when the
// caller's context ended: ctxErr), so that its error counts what the
// nodes did: the round stops as soon as no quorum is left, and a forced
// unlock of every node would otherwise be told as the token gone from the
// first two that answered. A failure is rare; the wait is bounded as the
// round itself is.
func settle(rd *quorum.Round, ctxErr error, nodeTimeout time.Duration) {
	if ctxErr == nil {
		rd.Linger(nodeTimeout)
	}
}

// counted says on how many nodes of round t the token was found (what:
// "token found on", "extended on"), and, when some were not heard from in
// time, how many answered: the count is then a floor, not the nodes'
// state ("2 of 3 nodes answered, extended on 0, quorum 2").
func counted(what string, t *quorum.Tally) string {
	if p := t.Pending(); p > 0 {
		return fmt.Sprintf("%d of %d nodes answered, %s %d, quorum %d", t.N-p, t.N, what, t.Yes, t.Majority)
	}
	return fmt.Sprintf("%s %d of %d nodes, quorum %d", what, t.Yes, t.N, t.Majority)
}

// orphan releases, on node i, the lock name that was handed over to token
// after its waiter stopped waiting with it (see orphans).
func (e *Engine) orphan(i int, name, token string, ttl, timeout time.Duration) {
	e.Orphans([]int{i}, name, token, ttl, timeout)
}

// Orphans releases the lock name handed over to token on the nodes given
// (nil: every node), in the background, unless a lease of this process
// holds the token (the waiter won with it). A node that cannot take the
// release now (down, as every node is to a process that was paused) is
// owed it for ttl, the TTL the lock was handed over with, as an Unlock's
// is: the key it holds would otherwise keep the lock, for no one, until
// then (the simulator's seed 1010: the waiter's next TryLock was refused
// as held by another).
func (e *Engine) Orphans(nodes []int, name, token string, ttl, timeout time.Duration) {
	e.leasesMu.Lock()
	for _, held := range e.leases {
		if held == token {
			e.leasesMu.Unlock()
			return
		}
	}
	e.leasesMu.Unlock()
	op := &node.Release{Key: name, Token: token, Channel: node.ReleaseChannel(name), QueueKey: node.QueueKey(name)}
	// Sent before Orphans returns, so that on each node the release goes
	// ahead of this process's next attempt at the name: an attempt that
	// found the orphaned token would say the lock is held by another,
	// when no one holds it.
	e.Behind(op, nodes, timeout, ttl)
}

// Behind sends op to the nodes given (nil: every node) and gathers their
// replies in the background, each request bounded by timeout. The
// requests are on their way to their nodes, ahead of anything this
// process sends there after, when Behind returns. A node that cannot take
// op now is owed it for owe (0: dropped). Nothing is sent once the engine
// is closed.
func (e *Engine) Behind(op node.Op, nodes []int, timeout, owe time.Duration) {
	if e.Track() != nil {
		return
	}
	ops := make([]node.Op, e.Pool.Size())
	if nodes == nil {
		for i := range ops {
			ops[i] = op
		}
	}
	for _, i := range nodes {
		ops[i] = op
	}
	rd := e.postQueue(ops, timeout, owe)
	go func() {
		defer e.life.Done()
		_ = rd.Gather(context.Background())
	}()
}

// nodeList names nodes by their index: "node 2", "nodes 0, 1 and 3".
func nodeList(nodes []int) string {
	if len(nodes) == 1 {
		return fmt.Sprintf("node %d", nodes[0])
	}
	parts := make([]string, len(nodes))
	for k, i := range nodes {
		parts[k] = strconv.Itoa(i)
	}
	return "nodes " + strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}
