package redlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Mutex is a handle on one named lock of a [Redlock]. Create it with
// [Redlock.NewMutex].
//
// A Mutex is safe for use by several goroutines, in the way a sync.Mutex
// is: it belongs to no goroutine. It holds at most one acquisition at a
// time, and each method reads and changes that state atomically. While the
// lock is held, Lock from any goroutine waits (retrying on the nodes, where
// the lock is taken) until it is released; TryLock fails. Unlock and Extend
// act on the current acquisition, whichever goroutine made it; of two
// concurrent Unlocks one releases and the other returns [ErrNotHeld].
// For independent holders, as separate processes would be, use separate
// Mutex values, each with its own acquisitions.
//
// With [WithReentrant] the Mutex value is the lock's owner: Lock and
// TryLock on a Mutex that holds the lock take one more hold instead of
// waiting, and the lock is released when Unlock has been called as many
// times. Goroutines sharing a reentrant Mutex share its ownership.
type Mutex struct {
	r    *Redlock
	name string
	cfg  config
	// owner is the token of a reentrant Mutex: the same for all its
	// acquisitions, so that it recognises its own lock on the nodes.
	owner string
	// gates order a reentrant Mutex's requests on each node: its holds are
	// one lease, whichever acquisition took them (nil when not reentrant:
	// each acquisition has its own).
	gates []*gate

	mu    sync.Mutex // guards lease and the fields of the lease it points to
	lease *lease     // the current acquisition; nil when not held
}

// lease is one acquisition, from the TryLock that made it to its Unlock or
// its loss.
type lease struct {
	token string
	id    string      // unique to the acquisition: announces its release
	acq   acquisition // acq.until moves with every extension
	holds int         // holds taken on a reentrant lock; 1 otherwise
	done  chan struct{}
	err   error       // why the lease ended; set before done is closed
	loss  *time.Timer // ends the lease lossMargin before acq.until
	fence uint64      // the fencing token; 0 when not fenced
}

// lossMargin is how long before the end of validity a lease that was not
// extended counts as lost: [Mutex.Done] closes, and the context of work run
// by [Redlock.Do] is cancelled, this much before another holder may exist,
// to give the work time to stop.
func lossMargin(ttl time.Duration) time.Duration { return ttl / 20 }

// Name returns the lock's name, which is its key on every node.
func (m *Mutex) Name() string { return m.name }

// Lock acquires the lock, trying again until it succeeds, its context ends
// or it has made the number of attempts set by [WithTries] (no bound by
// default). Each attempt is one [Mutex.TryLock].
//
// Between attempts it waits for a randomised back-off (see
// [WithRetryDelay]) or, with notification on (the default, see
// [WithNotification]), until a release of this lock is announced, whichever
// comes first: after its first failed attempt it subscribes to the lock's
// release channel on every node and joins the lock's queue of waiters
// there (both in the background). A release pops the oldest waiter from
// each node's queue and announces itself to that waiter's process only, so
// that waiters take turns instead of all trying at once; with no one
// queued, every waiter is told. A release announced before the
// subscription took effect is missed and costs one back-off, like any lost
// announcement. A Lock right after this process released the lock to a
// waiter joins the queue behind it at once instead of trying (see the
// package documentation).
//
// On failure it returns an error wrapping [ErrNotAcquired] and the last
// attempt's causes (one [*NodeError] per failed node); when ctx ended, the
// error also wraps ctx.Err(). It returns at once, without retrying, when so
// many nodes failed with [ErrMisconfigured] (a missing permission, a key of
// another type, an untrusted certificate) that no quorum is left to grant,
// and when the nodes are found to share a server (an error wrapping
// [ErrInvalidArgument]). With [WithRenewal], ctx also bounds how long the
// lock is kept alive (see [Mutex.TryLock]).
func (m *Mutex) Lock(ctx context.Context) error {
	if ctx == nil {
		return invalid("nil context")
	}
	if m.cfg.observer != nil {
		return m.observe(ctx, Op{Kind: OpLock, Name: m.name}, m.lock)
	}
	_, err := m.lock(ctx)
	return err
}

// lock is Lock; it also returns how many attempts it made.
func (m *Mutex) lock(ctx context.Context) (int, error) {
	var w *waiter
	defer func() {
		if w != nil {
			w.leave()
		}
	}()
	if d := m.r.courtesyLeft(m.name); d > 0 {
		// This process just released the lock to waiters: let them go
		// first (see Redlock.yieldTo). With notification on, it joins the
		// queue behind them at once, and tries when its turn is announced
		// or, if no announcement comes, after the courtesy and one back-off.
		var wake <-chan string
		if m.cfg.notify {
			w = m.r.waiters.join(m.name, m.cfg.nodeTimeout)
			wake = w.wake
			d += m.cfg.delayMin
		}
		timer := time.NewTimer(d)
		select {
		case <-timer.C:
		case <-wake:
			timer.Stop()
		case <-ctx.Done():
			timer.Stop()
			return 0, errors.Join(fmt.Errorf("%w: context done before the attempt", ErrNotAcquired), ctx.Err())
		}
	}
	splits := 0    // consecutive attempts that failed with some grants
	released := "" // the token whose announced release woke this Lock
	for attempt := 1; ; attempt++ {
		failed, err := m.tryLock(ctx, released, maxReasks)
		if err == nil || !errors.Is(err, ErrNotAcquired) || failed.hopeless {
			return attempt, err
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			if !errors.Is(err, ctxErr) {
				err = errors.Join(err, ctxErr)
			}
			return attempt, err
		}
		if m.cfg.tries > 0 && attempt >= m.cfg.tries {
			return attempt, err
		}
		if w == nil && m.cfg.notify {
			// Queued and subscribed from now on (in the background): a
			// release announced before that took effect is missed, and
			// costs one back-off.
			w = m.r.waiters.join(m.name, m.cfg.nodeTimeout)
		}
		if w != nil && released != "" {
			w.requeue() // named by the release, popped, and failed
		}
		released = ""
		var wake <-chan string
		if w != nil {
			wake = w.wake
		}
		delay := backoff(attempt, m.cfg.delayMin, m.cfg.delayMax)
		if w != nil {
			// Queued and subscribed: its turn is announced, and the
			// back-off is only the fallback for a lost announcement. A
			// short one would try out of turn, and collide with the
			// waiter whose turn it is.
			delay = max(delay, m.cfg.delayMax/2+rand.N(m.cfg.delayMax/2+1))
		}
		if failed.granted > 0 && !failed.yielded && splits < 2 {
			// The lock was free on some nodes and this attempt ranked
			// first among the contenders that split them, yet did not
			// complete its quorum: try again soon, at a random moment
			// within two attempt times, rather than after a full back-off
			// while the lock stays free. Twice at most in a row: grants
			// can also come from a node the holder's SET has not reached
			// yet, and that is no reason to spin. An attempt that gave way
			// waits for the release of the contender it gave way to.
			delay = min(delay, rand.N(2*failed.took+1))
			splits++
		} else {
			splits = 0
		}
		timer := time.NewTimer(delay)
		select {
		case <-timer.C:
		case released = <-wake:
			timer.Stop()
		case <-ctx.Done():
			timer.Stop()
			return attempt, errors.Join(err, ctx.Err())
		}
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

// TryLock makes exactly one attempt to acquire the lock: it sends
// the equivalent of SET name token NX GET PX ttl (a script) to every node
// at once with a new random token
// and succeeds when a quorum granted it with validity left (see
// [Mutex.Until]).
// It returns once the outcome is certain, which is when the quorum-th
// fastest node answers, not the slowest; a node that has not answered by the
// node timeout counts as failed, and a node that is down (see
// [Redlock.Health]) is skipped. When contenders split the nodes, an
// attempt that is outranked gives way at once (see the package
// documentation); TryLock does not ask nodes again, as Lock's attempts do,
// so a caller trying in a loop gets a quick answer each time.
//
// On failure it returns an error wrapping [ErrNotAcquired], one [*NodeError]
// per failed node, and ctx's error if ctx ended. Before returning it
// releases the lock on every node that had granted it when the outcome was
// decided; nodes that failed or had not answered, and all of them when ctx
// has ended, are released in the background. If ctx has already ended,
// TryLock makes no attempt.
//
// With [WithRenewal], a successful TryLock starts renewing the lock until
// Unlock, the loss of the lock, the end of ctx or [WithMaxHold]: pass a ctx
// that lasts as long as the lock should. With [WithReentrant], TryLock on a
// Mutex that holds the lock takes one more hold on a quorum and re-arms the
// TTL.
func (m *Mutex) TryLock(ctx context.Context) error {
	if ctx != nil && m.cfg.observer != nil {
		return m.observe(ctx, Op{Kind: OpTryLock, Name: m.name}, m.tryOnce)
	}
	_, err := m.tryLock(ctx, "", 0)
	return err
}

// tryOnce is TryLock as an observed call of one attempt.
func (m *Mutex) tryOnce(ctx context.Context) (int, error) {
	_, err := m.tryLock(ctx, "", 0)
	return 1, err
}

// tryLock is TryLock; on failure it also describes the failed attempt.
// released is a token whose release was just announced: nodes that still
// hold it are about to be free (see acquire).
func (m *Mutex) tryLock(ctx context.Context, released string, reasks int) (acquisition, error) {
	if ctx == nil {
		return acquisition{}, invalid("nil context")
	}
	if err := ctx.Err(); err != nil {
		return acquisition{}, errors.Join(fmt.Errorf("%w: context done before the attempt", ErrNotAcquired), err)
	}
	if m.cfg.reentrant {
		m.mu.Lock()
		l := m.lease
		live := l != nil && l.err == nil
		m.mu.Unlock()
		if live {
			return acquisition{}, m.reenter(ctx, l)
		}
	}
	token := m.owner
	if !m.cfg.reentrant {
		id, err := uuid.NewRandom() // crypto/rand: tokens must not be guessable or repeat
		if err != nil {
			return acquisition{}, errors.Join(fmt.Errorf("%w: token", ErrNotAcquired), err)
		}
		token = id.String()
	}
	a, err := m.r.acquire(ctx, m.acquireReq(token, false), &m.cfg, m.gates, released, reasks)
	if err != nil {
		return a, err
	}
	l := &lease{token: token, id: token, acq: a, holds: 1, done: make(chan struct{}), fence: a.fence}
	if m.cfg.reentrant {
		l.id = uuid.NewString()
	}
	m.mu.Lock()
	if cur := m.lease; m.cfg.reentrant && cur != nil && cur.err == nil {
		// Another goroutine's first TryLock on this Mutex won meanwhile:
		// same owner, so this is one more hold on its acquisition.
		m.addHold(cur, a)
		m.mu.Unlock()
		return acquisition{}, nil
	}
	old := m.lease
	m.lease = l
	l.loss = time.AfterFunc(m.untilLoss(l), func() { m.end(l, fmt.Errorf("%w: validity ran out", ErrLockLost)) })
	m.mu.Unlock()
	if old != nil {
		m.end(old, fmt.Errorf("%w: acquired again", ErrLockLost))
	}
	if m.cfg.renew {
		m.startRenewal(holdContext(ctx), l) // the hold may outlast the wait: see LockWithin
	}
	return acquisition{}, nil
}

// reenter takes one more hold on a reentrant lock that l holds.
func (m *Mutex) reenter(ctx context.Context, l *lease) error {
	// reenter: a release meanwhile must not be undone by this. The
	// Mutex's gates send it, on each node, after the holds already on
	// their way: a re-lock that overtook the first SET would find no key
	// there and take no hold.
	a, err := m.r.acquire(ctx, m.acquireReq(l.token, true), &m.cfg, m.gates, "", maxReasks)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lease != l || l.err != nil {
		// Unlocked or lost meanwhile. Where the release came first the
		// re-lock found no key and created none; where it came after, it
		// dropped the extra hold with the rest.
		return fmt.Errorf("%w: unlocked or lost during the attempt", ErrNotAcquired)
	}
	m.addHold(l, a)
	return nil
}

// addHold counts one more hold on l, taken by acquisition a. Called with
// m.mu held. The window moves to a's if later; both went through the
// Mutex's gates, so later releases wait for the SETs of both on each node.
func (m *Mutex) addHold(l *lease, a acquisition) {
	l.holds++
	if a.until.After(l.acq.until) {
		l.acq.until = a.until
		l.loss.Reset(m.untilLoss(l))
	}
}

// acquireReq builds the acquire request for token; reenter when the owner
// already holds the lock.
func (m *Mutex) acquireReq(token string, reenter bool) *acquireReq {
	r := &acquireReq{key: m.name, token: token, ttl: m.cfg.ttl, reentrant: m.cfg.reentrant, reenter: reenter}
	if m.cfg.fencing {
		r.fenceKey = fenceKey(m.name)
	}
	if m.cfg.restart > 0 {
		// Redis reports uptime_in_seconds as the difference of two
		// truncated wall-clock seconds, which can run up to a second ahead
		// of the time really passed: one more second keeps the node out
		// for at least the delay.
		r.minUptime = int64((m.cfg.restart+time.Second-1)/time.Second) + 1
	}
	return r
}

// fenceKey is where each node keeps the fencing counter of lock name.
func fenceKey(name string) string { return name + ":redlock:fence" }

// untilLoss is how long from now until l counts as lost. Called with m.mu held.
func (m *Mutex) untilLoss(l *lease) time.Duration {
	return time.Until(l.acq.until.Add(-lossMargin(m.cfg.ttl)))
}

// end ends lease l with cause, once; later calls do nothing.
func (m *Mutex) end(l *lease, cause error) {
	m.mu.Lock()
	if l.err != nil {
		m.mu.Unlock()
		return
	}
	l.err = cause
	l.loss.Stop()
	acquired := l.acq.start
	m.mu.Unlock()
	if o := m.cfg.observer; o != nil {
		// Outside m.mu, and before Done closes: whoever sees Done closed
		// finds the end observed.
		m.holdEnded(o, acquired, cause)
	}
	close(l.done) // once: only the call that set l.err gets here
}

// Unlock releases the lock: on every node at once, a script deletes the key
// if it still holds this acquisition's token, so a holder whose lock expired
// and was taken by someone else cannot free the new holder's lock. A release
// that frees the lock announces it to waiters on the node (see [Mutex.Lock]).
//
// The mutex stops holding the lock when Unlock starts, whatever the outcome;
// renewal stops and [Mutex.Done] closes. It returns nil when a quorum of
// nodes still held the token, which means no one else held the lock up to
// the release. A node that answers, while the validity lasts, that the key
// is already gone counts as holding it if the same Redis server answered
// (its run id, unchanged since before the lock was taken): within the
// validity only this release can have deleted it, in an earlier try the
// client resent when its reply was lost. A restart or a failover changes
// the run id: the key was lost, not released. Otherwise it returns an error wrapping [ErrNotHeld] and one
// [*NodeError] per failed node; nodes that kept the token then free it when
// its TTL passes. Unlock on a mutex that does not hold the lock returns
// ErrNotHeld without I/O. Nodes that have not answered when the outcome is
// certain are released in the background, even if ctx ends.
//
// With [WithReentrant], Unlock drops one hold; the mutex keeps the lock
// until the last one is dropped.
func (m *Mutex) Unlock(ctx context.Context) error {
	if ctx == nil {
		return invalid("nil context")
	}
	if m.cfg.observer != nil {
		return m.observe(ctx, Op{Kind: OpUnlock, Name: m.name}, m.unlock)
	}
	_, err := m.unlock(ctx)
	return err
}

// unlock is Unlock, as an observed call of no attempts.
func (m *Mutex) unlock(ctx context.Context) (int, error) {
	m.mu.Lock()
	l := m.lease
	if l == nil {
		m.mu.Unlock()
		return 0, fmt.Errorf("%w: not locked", ErrNotHeld)
	}
	req := &releaseReq{key: m.name, token: l.token, reentrant: m.cfg.reentrant}
	if m.cfg.reentrant && l.holds > 1 && l.err == nil {
		l.holds--
		gates := l.acq.gates
		m.mu.Unlock()
		return 0, m.r.release(ctx, req, gates, &m.cfg, time.Time{}, time.Time{}) // drops one hold
	}
	m.lease = nil
	gates := l.acq.gates
	since, until := l.acq.start, l.acq.until
	if l.err != nil {
		until = time.Time{} // lost: an absent key is no resend
	}
	m.mu.Unlock()
	m.end(l, errUnlocked)
	req.channel, req.notice, req.drop, req.queueKey = releaseChannel(m.name), l.id, dropAll, queueKey(m.name)
	return 0, m.r.release(ctx, req, gates, &m.cfg, since, until)
}

// errUnlocked is the error of a lease that Unlock ended.
var errUnlocked = fmt.Errorf("%w: unlocked", ErrNotHeld)

// Extend re-arms the lock's full TTL on every node that still holds this
// acquisition's token and, when a quorum did, moves the end of the validity
// window to the extension's start + TTL - drift. It never re-creates a key
// that expired or was taken, and it makes no attempt once the current
// validity has run out, since another holder may exist by then.
//
// On failure it returns an error wrapping [ErrNotHeld], one [*NodeError] per
// failed node, and ctx's error if ctx ended; the validity window is then
// left as it was (the lock may still be held until [Mutex.Until]). When so
// many nodes answered that they no longer hold the token that no quorum can
// hold it any more, the lock is lost for good: the error also wraps
// [ErrLockLost] and the acquisition ends ([Mutex.Done] closes).
func (m *Mutex) Extend(ctx context.Context) error {
	if ctx == nil {
		return invalid("nil context")
	}
	if m.cfg.observer != nil {
		return m.observe(ctx, Op{Kind: OpExtend, Name: m.name}, m.extendHeld)
	}
	_, err := m.extendHeld(ctx)
	return err
}

// extendHeld is Extend, as an observed call of no attempts.
func (m *Mutex) extendHeld(ctx context.Context) (int, error) {
	m.mu.Lock()
	l := m.lease
	m.mu.Unlock()
	if l == nil {
		return 0, fmt.Errorf("%w: not locked", ErrNotHeld)
	}
	return 0, m.extend(ctx, l)
}

// extend extends lease l; see Extend.
func (m *Mutex) extend(ctx context.Context, l *lease) error {
	m.mu.Lock()
	a, ended := l.acq, l.err
	m.mu.Unlock()
	if ended != nil {
		return fmt.Errorf("%w: %w", ErrNotHeld, ended)
	}
	start := m.r.now()
	if !start.Before(a.until) {
		return fmt.Errorf("%w: validity ran out %v ago", ErrNotHeld, start.Sub(a.until))
	}
	req := &extendReq{key: m.name, token: l.token, ttl: m.cfg.ttl, reentrant: m.cfg.reentrant}
	if err := m.r.extend(ctx, req, a.gates, &m.cfg); err != nil {
		if errors.Is(err, ErrLockLost) {
			m.end(l, err)
		}
		return err
	}
	next := validUntil(start, m.cfg.ttl, m.cfg.driftFactor)
	if !m.r.now().Before(next) {
		return fmt.Errorf("%w: extended, but no validity left of ttl %v", ErrNotHeld, m.cfg.ttl)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if l.err != nil {
		return fmt.Errorf("%w: %w", ErrNotHeld, l.err)
	}
	l.acq.until = next
	l.loss.Reset(m.untilLoss(l))
	return nil
}

// Until returns the end of the current acquisition's validity window: until
// then, no other holder can have a quorum (under the assumptions stated in
// the package documentation). It is the zero Time when the mutex does not
// hold the lock. A Time in the past means the validity ran out: the lock may
// be held by someone else now. The Time carries a monotonic clock reading;
// compare it with time.Now or time.Until in this process.
func (m *Mutex) Until() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lease == nil {
		return time.Time{}
	}
	return m.lease.acq.until
}

// Fence returns the current acquisition's fencing token (see
// [WithFencing]): greater than the token of every acquisition of this name
// that succeeded before this one began, under the conditions stated in the
// package documentation. Pass it with every write to the resource the lock
// protects, which must refuse a token lower than one it has accepted (see
// [SetFenced]). Work run by [Redlock.Do] reads it with
// MutexFrom(ctx).Fence(). It returns 0 when the mutex does not hold the
// lock (never acquired, unlocked, or lost: once [Mutex.Done] is closed) or
// the lock is not fenced; real tokens start at 1. A reentrant lock
// keeps the token of its first hold.
func (m *Mutex) Fence() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lease == nil || m.lease.err != nil {
		return 0
	}
	return m.lease.fence
}

// closedChan is the Done channel of a mutex that holds nothing.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Done returns a channel that is closed when the current acquisition ends:
// on Unlock, when renewal or Extend finds the lock lost, or when its
// validity is about to run out without an extension (TTL/20 before
// [Mutex.Until], so that work watching it can stop in time). [Mutex.Err]
// then says why. When the mutex does not hold the lock, Done returns a
// closed channel. Each acquisition has its own channel: call Done after
// Lock.
func (m *Mutex) Done() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lease == nil {
		return closedChan
	}
	return m.lease.done
}

// Err returns nil while the current acquisition lasts, and once
// [Mutex.Done] is closed the reason: an error wrapping [ErrLockLost] when the
// lock was lost, or [ErrNotHeld] when it was unlocked or never held.
func (m *Mutex) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lease == nil {
		return fmt.Errorf("%w: not locked", ErrNotHeld)
	}
	return m.lease.err
}
