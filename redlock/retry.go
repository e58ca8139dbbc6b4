package redlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/waitq"
)

// Waiting for a lease: the attempts of Lock, Acquire and RLock, and the
// wait between them, for the back-off (the retrier) or for a release to be
// announced (the waiters' queue, internal/waitq). Renewal waits with the
// same retrier after a failed extension.

// retrier is the wait between attempts: uniformly random in [lo,
// min(hi, lo×2^(attempt-1))], so that contenders that failed together do
// not try again together.
type retrier struct{ lo, hi time.Duration }

// retry returns the retrier of the options (see WithRetryDelay).
func (c *config) retry() retrier { return retrier{lo: c.delayMin, hi: c.delayMax} }

// delay is the wait after the given failed attempt.
func (rt retrier) delay(attempt int) time.Duration {
	ceiling := rt.hi
	if attempt < 32 {
		if c := rt.lo << (attempt - 1); c > 0 && c < rt.hi {
			ceiling = c
		}
	}
	return rt.lo + rand.N(ceiling-rt.lo+1)
}

// queued is the wait d of a waiter that is queued and subscribed: its
// turn is announced, and the back-off is only the fallback for a lost
// announcement. A short one would try out of turn, and collide with the
// waiter whose turn it is: at least half the longest back-off.
func (rt retrier) queued(d time.Duration) time.Duration {
	return max(d, rt.hi/2+rand.N(rt.hi/2+1))
}

// attemptFunc is one attempt of a waiting acquisition. released is the
// token whose announced release woke it ("" when none did): nodes that
// still hold it are about to be free (see attempt).
type attemptFunc func(ctx context.Context, released string) (refusal, error)

// waiting is one blocking acquisition in progress: Lock, Acquire or RLock.
type waiting struct {
	h *holder
	// courteous lets the waiters that heard this process's last release of
	// the name go first (see courtesy.go); split shortens the wait after
	// an attempt that ranked first among contenders that split the nodes
	// (see delay). Both are a lock's.
	courteous, split bool
	reader           bool          // a reader-writer lock's reader: woken with the others
	w                *waitq.Waiter // queued and subscribed; nil until the first wait
	// handoff queues a plain lock's wait as one that takes the lock handed
	// over (see handoff.go); ho is what it was handed with its token.
	handoff  bool
	ho       *handoffOf
	released string // the token whose announced release woke it
	woken    bool   // the last wait ended with an announced release
	splits   int    // consecutive short waits after split votes
}

// wait makes attempts with try until one succeeds, ctx ends, the attempts
// bound is reached, or the last attempt says no retry can succeed; it
// returns how many attempts it made and what the last failed one said of
// itself.
func (wt *waiting) wait(ctx context.Context, try attemptFunc) (int, refusal, error) {
	defer wt.leave()
	if wt.courteous {
		if err := wt.courtesy(ctx); err != nil {
			return 0, refusal{}, err
		}
	}
	for attempt := 1; ; attempt++ {
		failed, err := try(ctx, wt.released)
		if done, err := final(ctx, wt.h.cfg.tries, attempt, failed, err); done {
			return attempt, failed, err
		}
		// Refused by the value's own state, not by the nodes: wait for its
		// own release without taking a turn in the nodes' queues.
		local := errors.Is(err, errHeldHere) || errors.Is(err, errInFlight)
		if ctxErr := wt.pause(ctx, attempt, failed, local); ctxErr != nil {
			return attempt, failed, errors.Join(err, ctxErr)
		}
	}
}

// final reports whether a waiting acquisition returns after an attempt
// that returned err, and what: nil on success; err when it is not one that
// a retry may change, when the attempts bound (tries, 0: none) is
// reached, or joined with ctx's error when ctx ended.
func final(ctx context.Context, tries, attempt int, failed refusal, err error) (bool, error) {
	switch {
	case err == nil:
		return true, nil
	case !errors.Is(err, ErrNotAcquired), failed.hopeless:
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

// courtesy lets the waiters go first when this process just released the
// name to them (see courtesy.go). With notification on, the wait joins the
// queue behind them at once and tries when its turn is announced, as
// theirs was; a queued waiter's back-off (see queued) is only the fallback
// for an announcement that does not come. It does not try when the
// courtesy ends: that attempt would be out of turn, and would land in one
// of the handoffs that follow, splitting the nodes with the waiter whose
// turn it is.
func (wt *waiting) courtesy(ctx context.Context) error {
	h := wt.h
	d := h.e.courtesy.left(h.name, h.e.now())
	if d <= 0 {
		return nil
	}
	var wake <-chan string
	var handed <-chan waitq.Handed
	if h.cfg.notify {
		wt.w = wt.join()
		wake, handed = wt.w.Wake(), wt.w.Handed()
		d = h.cfg.retry().queued(d)
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case wt.released = <-wake:
		wt.woken = true
	case ho := <-handed:
		if err := wt.collect(ctx, ho); err != nil {
			return errors.Join(fmt.Errorf("%w: context done before the attempt", ErrNotAcquired), err)
		}
	case <-ctx.Done():
		return errors.Join(fmt.Errorf("%w: context done before the attempt", ErrNotAcquired), ctx.Err())
	}
	return nil
}

// pause waits after a failed attempt: for the back-off, or until a release
// is announced (unless the attempt failed locally). It returns ctx's error
// when ctx ended first.
func (wt *waiting) pause(ctx context.Context, attempt int, failed refusal, local bool) error {
	cfg := &wt.h.cfg
	if wt.w == nil && cfg.notify && !local {
		// Queued and subscribed from now on (in the background): a
		// release announced before that took effect is missed, and costs
		// one back-off.
		wt.w = wt.join()
	}
	var wake <-chan string
	var handed <-chan waitq.Handed
	if wt.w != nil {
		switch {
		case wt.ho != nil && wt.ho.used:
			wt.register() // a new token, at the same place
		case wt.woken:
			wt.w.Requeue(cfg.nodeTimeout) // named by the release, popped, and failed
		}
		wake, handed = wt.w.Wake(), wt.w.Handed()
	}
	wt.released, wt.woken = "", false
	timer := time.NewTimer(wt.delay(attempt, failed))
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

// delay is the back-off after a failed attempt (see retrier). After a
// lock's attempt that found the lock free on some nodes and ranked first
// among the contenders that split them, yet did not complete its quorum,
// it tries again soon, at a random moment within two attempt times, rather
// than after a full back-off while the lock stays free. Twice at most in a
// row: grants can also come from a node the holder's SET has not reached
// yet, and that is no reason to spin. An attempt that gave way waits for
// the release of the contender it gave way to. Contenders for a
// semaphore's permits name no single competitor to give way to: they all
// wait their back-off.
func (wt *waiting) delay(attempt int, failed refusal) time.Duration {
	rt := wt.h.cfg.retry()
	delay := rt.delay(attempt)
	if wt.w != nil {
		delay = rt.queued(delay)
	}
	if wt.split && failed.granted > 0 && !failed.yielded && wt.splits < 2 {
		wt.splits++
		return min(delay, rand.N(2*failed.took+1))
	}
	wt.splits = 0
	return delay
}

// join puts the wait in the queue of waiters, as a reader's when it is
// one.
func (wt *waiting) join() *waitq.Waiter {
	if wt.handoff {
		wt.register()
		return wt.w
	}
	if wt.reader {
		return wt.h.e.waiters.JoinReader(wt.h.name, wt.h.cfg.nodeTimeout)
	}
	return wt.h.e.waiters.Join(wt.h.name, wt.h.cfg.nodeTimeout)
}

// leave takes the wait out of the queue of waiters.
func (wt *waiting) leave() {
	if wt.w == nil {
		return
	}
	wt.w.Leave(wt.h.cfg.nodeTimeout)
	if ho := wt.ho; ho != nil && !ho.used {
		// Handed the lock by some nodes, and gave up before an attempt
		// with the token could undo it there.
		for i := range ho.heard {
			wt.h.e.orphan(i, wt.h.name, ho.token, wt.h.cfg.nodeTimeout)
		}
	}
}

// deliver sends the waiters' queue changes, ops[i] to node i (nil:
// nothing), every node at once, and returns once each answered or timeout
// passed, with each node's reply: the fan-out internal/waitq is handed.
func (e *engine) deliver(ops []node.Op, timeout time.Duration) []node.Reply {
	report := e.report
	if report != nil {
		// A refusal for good turns the queue off on the node, which
		// reports it once (see featureOff).
		report = func(ctx context.Context, i int, err error, late bool) {
			if !errors.Is(err, ErrMisconfigured) {
				e.report(ctx, i, err, late)
			}
		}
	}
	rd := newRound(context.Background(), e.pool, timeout, report, e.pool.size()).keepReplies()
	for i, op := range ops {
		rd.post(i, op, nil, func(int) bool { return op != nil }, false, false)
	}
	_ = rd.gather(context.Background())
	return rd.replies
}
