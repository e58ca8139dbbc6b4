package redlock

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/redlock-go/redlock/internal/waitq"
)

// Acquire takes a permit, trying again until it succeeds, its context ends
// or it has made the number of attempts set by [WithTries] (no bound by
// default). Each attempt is one [Semaphore.TryAcquire].
//
// Between attempts it waits for a randomised back-off (see
// [WithRetryDelay]) or, with notification on (the default, see
// [WithNotification]), until a release of a permit is announced, whichever
// comes first: after its first failed attempt it subscribes to the
// semaphore's release channel on every node and joins its queue of waiters
// there, as a waiting [Mutex.Lock] does. A release pops the oldest waiter
// and announces itself to that waiter's process only, so that waiters
// take turns; a missed announcement costs one back-off. While this
// Semaphore holds a permit, or another of its acquisitions is in flight,
// its attempts fail at once, without I/O: Acquire then waits until the
// permit is released.
//
// On failure it returns an error wrapping [ErrNotAcquired] and the last
// attempt's causes (one [*NodeError] per failed node); when ctx ended, the
// error also wraps ctx.Err(). It returns at once, without retrying, when so
// many nodes failed with [ErrMisconfigured] (a key of another type, a
// different permit count, a missing permission) that no quorum is left to
// admit it.
func (s *Semaphore) Acquire(ctx context.Context) error {
	return s.observe(ctx, s.kind.kinds()[0], s.acquire)
}

// acquire is Acquire; it also returns how many attempts it made.
func (s *Semaphore) acquire(ctx context.Context) (int, error) {
	if ctx == nil {
		return 0, invalid("nil context")
	}
	w := &permitWait{s: s}
	defer w.leave()
	for attempt := 1; ; attempt++ {
		failed, err := s.tryAcquire(ctx)
		if done, err := final(ctx, s.cfg.tries, attempt, failed, err); done {
			return attempt, err
		}
		// Refused here, not by the nodes: wait for this Semaphore's own
		// release without taking a turn in the nodes' queues.
		local := errors.Is(err, errHeldHere) || errors.Is(err, errInFlight)
		if ctxErr := w.wait(ctx, attempt, local); ctxErr != nil {
			return attempt, errors.Join(err, ctxErr)
		}
	}
}

// permitWait is one Acquire's waiting between attempts.
type permitWait struct {
	s     *Semaphore
	w     *waitq.Waiter // queued and subscribed; nil until the first wait
	woken bool          // the last wait ended with an announced release
}

// wait waits after a failed attempt: for the back-off, or until a release
// is announced (unless the attempt failed locally). It returns ctx's error
// when ctx ended first.
func (p *permitWait) wait(ctx context.Context, attempt int, local bool) error {
	cfg := &p.s.cfg
	if p.w == nil && cfg.notify && !local {
		// Queued and subscribed from now on (in the background): a release
		// announced before that took effect is missed, and costs one
		// back-off.
		p.w = p.s.r.waiters.Join(p.s.name, cfg.nodeTimeout)
	}
	delay := backoff(attempt, cfg.delayMin, cfg.delayMax)
	var wake <-chan string
	if p.w != nil {
		if p.woken {
			p.w.Requeue(cfg.nodeTimeout) // popped by the release that woke it, and failed
		}
		wake = p.w.Wake()
		// Queued, the back-off is only the fallback for a lost
		// announcement: a short one would try out of turn.
		delay = max(delay, cfg.delayMax/2+rand.N(cfg.delayMax/2+1))
	}
	p.woken = false
	timer := time.NewTimer(delay)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-wake:
		p.woken = true
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// leave takes the Acquire out of the queue of waiters.
func (p *permitWait) leave() {
	if p.w != nil {
		p.w.Leave(p.s.cfg.nodeTimeout)
	}
}
