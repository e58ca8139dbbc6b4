package turn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redlock-go/redlock/internal/jitter"
	"github.com/redlock-go/redlock/internal/node"

	"github.com/redlock-go/redlock/redlock/internal/lease"

	"github.com/redlock-go/redlock/redlock/internal/engine"

	"github.com/redlock-go/redlock/internal/waitq"
)

// Taking turns: who takes a released lock, and how a waiting acquisition
// (Lock, Acquire, RLock) waits for it. This comment is the whole policy;
// each rule is stated once where it is applied, with its constants:
// handoff.go, internal/waitq (the queues, the wakes, the courtesy) and
// release.lua.
//
//   - Trying: a wait makes an attempt at once, unless this process's last
//     release of the name reached waiters (the courtesy): it then lets
//     them go first; a reentrant lock's re-entry by its holder tries at
//     once all the same. A TryLock is a wait of one attempt, without the
//     courtesy or the queue (Once).
//   - Settling: an attempt refused by a split (engine.ErrSplit: no one
//     holds a quorum) does not count against the attempts bound while the
//     wait is less than a node timeout old: it tries again soon (see soon),
//     so that a free lock goes to one of those who try, and the rest are
//     refused because it is held.
//   - Queued: after a failed attempt it joins the name's queue on every
//     node, at the place of when it began to wait, and waits for its turn
//     or for a back-off of at least half the longest (queued).
//   - Named: a release pops the oldest member of each node's queue and
//     wakes that waiter alone, which tries, and queues again at its place
//     if it fails. With no one to pop, each process's oldest waiter is
//     woken (every reader, for a reader's turn); with no queue on the
//     node, no one, and waiters try at their back-off.
//   - Handed: a plain lock's release that pops a waiter's token sets the
//     key to it instead (handoff.go): a quorum of those is the waiter's
//     grant; fewer, and it tries with the token, counting the handoffs
//     that come while it is out, its releaser's token taken for no
//     holder's. That attempt, when it fails with no one holding a quorum
//     (a split), is undone by a release that hands over in turn, so the
//     nodes it held go to their next waiter at once.
//   - Left: a wait that ends leaves the queues; its lease's release
//     removes its member first, so no release names an ended wait.
//
// A node spoken to without scripts does less of this: it hands nothing
// over (its waiters are named instead), and with the server's own delete
// it names no one either and announces every plain release to every
// waiter. The table of ways (internal/node/conformance.Lacks) says which
// way lacks what, and the conformance suite checks the table.
//
// The invariant: a node's answer counts toward a quorum only if the node
// holds the voter's token from then on, for the validity counted. Every
// vote (a grant, an extension, a handoff) is the node's own reply from the
// step that set the key and armed its TTL, with the node's time read
// after it (quorum.ClockGuard), from a go-redis Ring only while every
// shard was up (the go-redis transport's Batch, goredis.ringWhole); never
// a PUBLISH receiver count. Votes from two nodes found to be one server
// count once (engine.Distinct), for a handoff as for an attempt.
//
// Its counterpart for what the holder says afterwards: each vote is also
// a confirmation, recorded per node (lease.Lease.confirm), a yes that
// came after its round was decided included (a late grant, lease.node; a
// late extension, engine.lateYes): that node holds the token until the
// voting step's start + TTL - drift, unless its clock
// jumped ahead since or another server answers for it. A release's
// "absent" or "taken" counts as held only within that (engine.Free), the
// clock watch keeps the lease while a quorum of such confirmations covers
// its validity, and nothing else vouches for a node.
//
// The bound: queued behind k waiters, a Lock takes the lock within k holds
// and k+1 handoffs, plus one queued back-off per lost wake. Contenders
// that split the nodes try again within soonAttempts attempt times,
// soonInARow times in a row at most (delay).
//
// Every constant of the turn, and where it is applied:
//   - soonAttempts (2) and soonInARow (2), below: the retry after a split.
//   - settleAttempts (10) and maxSettles (32), below: settling a split past
//     the attempts bound (settles).
//   - queuedShare (1/2), below: a queued waiter's fallback back-off is at
//     least that share of the longest back-off (queued).
//   - handoffWindow (5 ms, plus the slowest node's round trip) and
//     handoffFresh (1/2 of the TTL), handoff.go: how long a handed-over
//     waiter waits for the other nodes' handoffs, and how old a handoff may
//     be and still be taken.
//   - courtesyTimes (4), courtesyMin (1 ms), courtesyMax (20 ms),
//     internal/waitq/courtesy.go: the courtesy after a release.
//   - waitq.Linger (5 s) and queueTTL (1 min), internal/waitq/waitq.go: a
//     name's subscription after its last waiter, a queue after its last
//     registration.
//   - The back-off itself is the Settings' (WithRetryDelay: 10-200 ms).

// Kind is what a wait is for, which decides how it takes its turn.
type Kind uint8

const (
	// Permit is a semaphore's Acquire.
	Permit Kind = iota
	// Reader is an RWMutex's RLock: queued as a reader, woken with the
	// other readers.
	Reader
	// Lock is a lock's Lock: it lets the waiters it just released go first
	// (the courtesy), and waits less after a split vote (see delay).
	Lock
	// HandedLock is a Lock that also takes the lock handed over by a
	// release (see handoff.go); which Lock may is its lock kind's to say.
	HandedLock
)

// Waiting is one blocking acquisition in progress: Lock, Acquire or RLock.
type Waiting struct {
	Holder *lease.Holder
	Kind   Kind
	Once   bool          // a TryLock: one attempt counts (see settles); no courtesy, no queue
	w      *waitq.Waiter // queued and subscribed; nil until the first wait
	// Handed is what a HandedLock was handed with its current token.
	Handed   *handoffOf
	released string // the token whose announced release woke it
	woken    bool   // the last wait ended with an announced release
	splits   int    // consecutive short waits after split votes
	settled  int    // attempts that settled a split past the bound (see settles)
	attempts int    // attempts made
	tries    int    // the attempts bound (0: none)
	settleBy time.Time
	// told is the error of the last attempt that said what refused it
	// (engine.Classed), returned at toldAt: the wait's verdict when a
	// later attempt could not tell (see verdict).
	told   error
	toldAt time.Time
}

// soonAttempts bounds, in attempt times, the retry after a split (soon);
// soonInARow is how many such retries a wait makes in a row (delay).
const (
	soonAttempts = 2
	soonInARow   = 2
)

// queuedShare is the least share of the longest back-off that a queued
// waiter waits before it tries out of turn (queued).
const queuedShare = 2 // 1/queuedShare

// settleAttempts is how many attempt times a wait may spend settling a
// split when that is longer than a node timeout (see settles).
const settleAttempts = 10

// maxSettles bounds the attempts a wait makes past its bound to settle a
// split (see settles), which the node timeout bounds already: a loop
// bounded by a count as well as by time.
const maxSettles = 32

// A wait is driven by its caller, in a loop: Begin, then one attempt
// after another, each told to After, until After says the wait is over;
// End when it returns. Each attempt is made with Released (and, for a
// HandedLock handed the lock, with UseHanded's token). The wait ends when
// an attempt succeeds, ctx ends, the attempts bound is reached (attempts
// settling a split aside, see settles), or the last attempt says no
// retry can succeed.

// Begin starts the wait: a Lock lets the waiters it just released go
// first (see courtesy). It returns an error when ctx ended meanwhile.
func (wt *Waiting) Begin(ctx context.Context) error {
	wt.tries = wt.Holder.Settings.Tries
	if wt.Once {
		wt.tries = 1
	}
	// A holder's re-entry (a reentrant lock's Lock while it holds it)
	// makes no one wait: no waiter can take the lock meanwhile.
	if wt.Kind >= Lock && !wt.Once && wt.Holder.Live() == nil {
		if err := wt.courtesy(ctx); err != nil {
			return err
		}
	}
	wt.settleBy = wt.Holder.Engine.Now() // until the first attempt's time is known
	return nil
}

// Released is the token whose announced release woke the wait ("" when
// none did), for its next attempt: nodes that still hold it are about to
// be free.
func (wt *Waiting) Released() string { return wt.released }

// Attempts returns how many attempts the wait made.
func (wt *Waiting) Attempts() int { return wt.attempts }

// After is told of the attempt just made, which failed as failed says
// with err (nil: it succeeded). It reports whether the wait is over, with
// its error; otherwise it has waited until the next attempt is due.
func (wt *Waiting) After(ctx context.Context, failed engine.Refusal, err error) (bool, error) {
	wt.attempts++
	if wt.attempts == 1 {
		wt.settleBy = wt.settleBy.Add(max(wt.Holder.Settings.NodeTimeout, settleAttempts*failed.Took))
	}
	if engine.Classed(err) {
		wt.told, wt.toldAt = err, wt.Holder.Engine.Now()
	}
	settle := wt.settling(ctx, wt.tries, wt.attempts, failed, err, wt.settleBy)
	if done, err := final(ctx, wt.tries, wt.attempts-wt.settled, failed, err); done {
		if err == nil && wt.w != nil {
			// Its removal from the nodes' queues goes in the
			// background: the lease's release removes it too.
			wt.Holder.Left(wt.w.Member(), wt.w.Since())
		}
		return true, wt.verdict(err)
	}
	if ctxErr := wt.pause(ctx, wt.attempts, failed, settle); ctxErr != nil {
		return true, wt.verdict(errors.Join(err, ctxErr))
	}
	return false, nil
}

// verdict is err, the error a wait ends with, and, when its last attempt
// could not say what refused it (the wait ended while it was out, or a
// quorum granted too late), what the last attempt that could said: a wait
// cut short by its deadline in the middle of an attempt still says that
// the lock is held, when it was, as the attempts before had found.
func (wt *Waiting) verdict(err error) error {
	if err == nil || wt.told == nil || engine.Classed(err) {
		return err
	}
	return errors.Join(err, engine.Told(wt.told, wt.Holder.Engine.Now().Sub(wt.toldAt)))
}

// listen returns what a queued wait listens to between attempts (nil
// channels when it is not queued): the announcements of releases, and the
// handoffs; a wait that was named and failed, or used its handed token,
// takes its place in the queues again first.
func (wt *Waiting) listen() (<-chan string, <-chan node.Handed) {
	if wt.w == nil {
		return nil, nil
	}
	switch {
	case wt.Handed != nil && wt.Handed.used:
		wt.register() // a new token, at the same place
	case wt.woken:
		wt.w.Requeue(wt.Holder.Settings.NodeTimeout) // named by the release, popped, and failed
	}
	return wt.w.Wake(), wt.w.Handed()
}

// settling returns the back-off that settles a split after attempt, which
// failed with err, when it does not count toward the attempts bound (tries,
// 0: none; see settles), and counts it as settled; 0 otherwise.
func (wt *Waiting) settling(ctx context.Context, tries, attempt int, failed engine.Refusal, err error, settleBy time.Time) time.Duration {
	if tries <= 0 || attempt-wt.settled < tries || wt.settled >= maxSettles || !wt.settles(ctx, err, settleBy) {
		return 0
	}
	wt.settled++
	return max(min(settleDelay(failed, wt.settled), settleBy.Sub(wt.Holder.Engine.Now())), 1)
}

// final reports whether a waiting acquisition returns after an attempt
// that returned err, and what: nil on success; err when it is not one that
// a retry may change, when the attempts bound (tries, 0: none) is
// reached, or joined with ctx's error when ctx ended.
func final(ctx context.Context, tries, attempt int, failed engine.Refusal, err error) (bool, error) {
	switch {
	case err == nil:
		return true, nil
	case !errors.Is(err, engine.ErrNotAcquired), failed.Hopeless:
		return true, err
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		if !errors.Is(err, ctxErr) {
			err = errors.Join(err, ctxErr)
		}
		return true, err
	}
	return tries > 0 && attempt >= tries, err
}

// settles reports whether a wait whose attempts bound is reached tries
// again all the same after an attempt that failed with err: the nodes
// were split between contenders (engine.ErrSplit), none holding a quorum,
// and the wait is still within its bound (until: a node timeout after it
// began, or settleAttempts times its first attempt's time when that is
// longer, as on a loaded machine, since the back-offs are multiples of
// it) and its context. A contender that gave way or ranked first then
// tries again soon (see soon), by when the first has completed its quorum
// as a rule: it wins, or is refused because the lock is held. The
// back-off (see settleDelay) ends by until.
func (wt *Waiting) settles(ctx context.Context, err error, until time.Time) bool {
	return errors.Is(err, engine.ErrSplit) && ctx.Err() == nil && wt.Holder.Engine.Now().Before(until)
}

// courtesy lets the waiters go first when this process just released the
// name to them. With notification on, the wait joins the queue behind
// them at once and tries when its turn is announced, as theirs was. It
// does not try when the courtesy ends: that attempt would be out of turn,
// and would land in one of the handoffs that follow, splitting the nodes
// with the waiter whose turn it is.
func (wt *Waiting) courtesy(ctx context.Context) error {
	h := wt.Holder
	d := h.Engine.Waiters.Courtesy(h.Name, h.Engine.Now())
	if d <= 0 {
		return nil
	}
	var wake <-chan string
	var handed <-chan node.Handed
	if h.Settings.Listen {
		wt.w = wt.join()
		wake, handed = wt.w.Wake(), wt.w.Handed()
		d = queued(h.Settings.Retry(), d)
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case wt.released = <-wake:
		wt.woken = true
	case ho := <-handed:
		if err := wt.collect(ctx, ho); err != nil {
			return errors.Join(fmt.Errorf("%w: context done before the attempt", engine.ErrNotAcquired), err)
		}
	case <-ctx.Done():
		return errors.Join(fmt.Errorf("%w: context done before the attempt", engine.ErrNotAcquired), ctx.Err())
	}
	return nil
}

// pause waits after a failed attempt: for the back-off, or until a release
// is announced (an attempt refused locally, or settling a split, does not
// queue). It returns ctx's error when ctx ended first.
func (wt *Waiting) pause(ctx context.Context, attempt int, failed engine.Refusal, settle time.Duration) error {
	cfg := &wt.Holder.Settings
	if wt.w == nil && cfg.Listen && !failed.Local && settle == 0 {
		// Queued and subscribed from now on (in the background): a
		// release announced before that took effect is missed, and costs
		// one back-off.
		wt.w = wt.join()
	}
	wake, handed := wt.listen()
	woke := wt.woken
	wt.released, wt.woken = "", false
	d := settle
	if d == 0 {
		d = wt.delay(attempt, failed, woke)
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case wt.released = <-wake:
		wt.woken = true
	case ho := <-handed:
		return wt.collect(ctx, ho)
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// queued is the wait d of a waiter that is queued and subscribed: its
// turn is announced, and the back-off is only the fallback for a lost
// announcement. A short one would try out of turn, and collide with the
// waiter whose turn it is: at least half the longest back-off.
func queued(rt jitter.Backoff, d time.Duration) time.Duration {
	return max(d, rt.Hi/queuedShare+jitter.N(rt.Hi/queuedShare+1))
}

// delay is the back-off after a failed attempt (see retrier). After a
// lock's attempt that found the lock free on some nodes and ranked first
// among the contenders that split them, yet did not complete its quorum,
// it tries again soon, at a random moment within two attempt times, rather
// than after a full back-off while the lock stays free. Twice at most in a
// row: grants can also come from a node the holder's SET has not reached
// yet, and that is no reason to spin. An attempt that gave way waits for
// the release of the contender it gave way to. Contenders for a
// semaphore's permits name no single competitor to give way to: they all
// wait their back-off, except after an attempt that an announced release
// woke (woke) and some nodes granted: the release had reached those
// nodes and not yet the others, and a reader or a permit tries again as
// soon, and as many times in a row, as a lock does (wt.splits counts the
// soon retries since the wake).
func (wt *Waiting) delay(attempt int, failed engine.Refusal, woke bool) time.Duration {
	rt := wt.Holder.Settings.Retry()
	delay := rt.Delay(attempt)
	if wt.w != nil {
		delay = queued(rt, delay)
	}
	if (wt.Kind >= Lock || woke || wt.splits > 0) && failed.Granted > 0 && !failed.GaveWay && wt.splits < soonInARow {
		wt.splits++
		return min(delay, soon(failed))
	}
	wt.splits = 0
	return delay
}

// settleDelay is the back-off before the k-th attempt that settles a split
// (see settles), failed's. The contender that ranked first (it had grants
// and gave way to no one) tries again soon (see soon); the others wait as
// long again first, so that it can complete its quorum on the nodes they
// let go before they ask for them again. Both ranges double with k, as a
// back-off does: contenders that keep colliding spread out, and a split
// that lasts (keys left by a holder that crashed) costs a few attempts, not
// one every round trip.
func settleDelay(failed engine.Refusal, k int) time.Duration {
	scale := time.Duration(1) << min(k-1, 16)
	d := soon(failed) * scale
	if failed.Granted == 0 || failed.GaveWay {
		d += 2 * failed.Took * scale
	}
	return d
}

// soon is the wait before trying again after a split vote: a random
// moment within two attempt times (failed's), so that the contenders do
// not try again together, and the one that ranked first, which asks the
// others' nodes again as they give way, has completed its quorum by then
// as a rule.
func soon(failed engine.Refusal) time.Duration { return jitter.N(soonAttempts*failed.Took + 1) }

// join puts the wait in the queue of waiters, as a reader's when it is
// one.
func (wt *Waiting) join() *waitq.Waiter {
	switch wt.Kind {
	case HandedLock:
		wt.register()
		return wt.w
	case Reader:
		return wt.Holder.Engine.Waiters.JoinReader(wt.Holder.Name, wt.Holder.Settings.NodeTimeout)
	}
	return wt.Holder.Engine.Waiters.Join(wt.Holder.Name, wt.Holder.Settings.NodeTimeout)
}

// End ends the wait: it takes it out of the queue of waiters.
func (wt *Waiting) End() {
	if wt.w == nil {
		return
	}
	wt.w.Leave(wt.Holder.Settings.NodeTimeout)
	if ho := wt.Handed; ho != nil {
		// Also after an attempt with the token: one cut short by the
		// wait's end may not have reached (nor undone) the nodes that had
		// handed the lock over without the announcement reaching this
		// process, whose keys would hold it, for no one, until their TTL.
		// Orphans does nothing when the attempt won the lock with the
		// token.
		wt.Holder.Engine.Orphans(nil, wt.Holder.Name, ho.token, wt.Holder.Settings.TTL, wt.Holder.Settings.NodeTimeout)
	}
}
