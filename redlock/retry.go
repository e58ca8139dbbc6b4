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

// Lock's attempts: how long to wait between them, and waiting for a
// release to be announced (the waiters' queue, internal/waitq).

// lockHopeless is Lock, observed when the Mutex has an Observer; it also
// reports whether the last attempt found so many nodes misconfigured that
// no quorum is left (see tally.hopeless).
func (m *Mutex) lockHopeless(ctx context.Context) (hopeless bool, err error) {
	run := func(ctx context.Context) (int, error) {
		attempts, failed, err := m.lock(ctx)
		hopeless = failed.hopeless
		return attempts, err
	}
	if m.cfg.observer != nil {
		return hopeless, m.observe(ctx, Op{Kind: OpLock, Name: m.name}, run)
	}
	_, err = run(ctx)
	return hopeless, err
}

// locking is one Lock call in progress.
type locking struct {
	m        *Mutex
	w        *waitq.Waiter // queued and subscribed; nil until the first wait
	released string        // the token whose announced release woke this Lock
	splits   int           // consecutive attempts that failed with some grants
}

// lock is Lock; it also returns how many attempts it made and what the
// last failed one said of itself.
func (m *Mutex) lock(ctx context.Context) (int, acquisition, error) {
	l := &locking{m: m}
	defer l.leave()
	if err := l.courtesy(ctx); err != nil {
		return 0, acquisition{}, err
	}
	for attempt := 1; ; attempt++ {
		failed, err := m.tryLock(ctx, l.released, maxReasks)
		if done, err := final(ctx, m.cfg.tries, attempt, failed, err); done {
			return attempt, failed, err
		}
		if ctxErr := l.wait(ctx, attempt, failed); ctxErr != nil {
			return attempt, failed, errors.Join(err, ctxErr)
		}
	}
}

// final reports whether Lock (or a semaphore's Acquire) returns after an
// attempt that returned err, and what: nil on success; err when it is not
// one that a retry may change, when the attempts bound (tries, 0: none) is
// reached, or joined with ctx's error when ctx ended.
func final(ctx context.Context, tries, attempt int, failed acquisition, err error) (bool, error) {
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
// lock to them (see courtesy.go). With notification on, the Lock joins the
// queue behind them at once, and tries when its turn is announced or, if
// no announcement comes, after the courtesy and one back-off.
func (l *locking) courtesy(ctx context.Context) error {
	m := l.m
	d := m.r.courtesy.left(m.name, m.r.now())
	if d <= 0 {
		return nil
	}
	var wake <-chan string
	if m.cfg.notify {
		l.w = m.r.waiters.Join(m.name, m.cfg.nodeTimeout)
		wake = l.w.Wake()
		d += m.cfg.delayMin
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-wake:
	case <-ctx.Done():
		return errors.Join(fmt.Errorf("%w: context done before the attempt", ErrNotAcquired), ctx.Err())
	}
	return nil
}

// wait waits after a failed attempt: for the back-off, or until a release
// is announced. It returns ctx's error when ctx ended first.
func (l *locking) wait(ctx context.Context, attempt int, failed acquisition) error {
	m := l.m
	if l.w == nil && m.cfg.notify {
		// Queued and subscribed from now on (in the background): a
		// release announced before that took effect is missed, and costs
		// one back-off.
		l.w = m.r.waiters.Join(m.name, m.cfg.nodeTimeout)
	}
	if l.w != nil && l.released != "" {
		l.w.Requeue(m.cfg.nodeTimeout) // named by the release, popped, and failed
	}
	l.released = ""
	var wake <-chan string
	if l.w != nil {
		wake = l.w.Wake()
	}
	timer := time.NewTimer(l.delay(attempt, failed))
	defer timer.Stop()
	select {
	case <-timer.C:
	case l.released = <-wake:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// delay is the back-off after a failed attempt. Queued and subscribed, a
// waiter's turn is announced, and the back-off is only the fallback for a
// lost announcement: a short one would try out of turn, and collide with
// the waiter whose turn it is. After an attempt that found the lock free
// on some nodes and ranked first among the contenders that split them,
// yet did not complete its quorum, it tries again soon, at a random moment
// within two attempt times, rather than after a full back-off while the
// lock stays free. Twice at most in a row: grants can also come from a
// node the holder's SET has not reached yet, and that is no reason to
// spin. An attempt that gave way waits for the release of the contender
// it gave way to.
func (l *locking) delay(attempt int, failed acquisition) time.Duration {
	cfg := &l.m.cfg
	delay := backoff(attempt, cfg.delayMin, cfg.delayMax)
	if l.w != nil {
		delay = max(delay, cfg.delayMax/2+rand.N(cfg.delayMax/2+1))
	}
	if failed.granted > 0 && !failed.yielded && l.splits < 2 {
		l.splits++
		return min(delay, rand.N(2*failed.took+1))
	}
	l.splits = 0
	return delay
}

// leave takes the Lock out of the queue of waiters.
func (l *locking) leave() {
	if l.w != nil {
		l.w.Leave(l.m.cfg.nodeTimeout)
	}
}

// backoff is the sleep after the given failed attempt: uniformly random in
// [lo, min(hi, lo×2^(attempt-1))].
func backoff(attempt int, lo, hi time.Duration) time.Duration {
	ceiling := hi
	if attempt < 32 {
		if c := lo << (attempt - 1); c > 0 && c < hi {
			ceiling = c
		}
	}
	return lo + rand.N(ceiling-lo+1)
}

// deliver sends the waiters' queue changes, ops[i] to node i (nil:
// nothing), every node at once, and returns once each answered or timeout
// passed, with each node's reply: the fan-out internal/waitq is handed.
func (r *Redlock) deliver(ops []node.Op, timeout time.Duration) []node.Reply {
	report := r.report
	if report != nil {
		// A refusal for good turns the queue off on the node, which
		// reports it once (see featureOff).
		report = func(ctx context.Context, i int, err error, late bool) {
			if !errors.Is(err, ErrMisconfigured) {
				r.report(ctx, i, err, late)
			}
		}
	}
	rd := newRound(context.Background(), r.pool, timeout, report, r.pool.size()).keepReplies()
	for i, op := range ops {
		rd.post(i, op, nil, func(int) bool { return op != nil }, false, false)
	}
	_ = rd.gather(context.Background())
	return rd.replies
}
