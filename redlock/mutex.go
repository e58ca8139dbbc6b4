package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/redlock-go/redlock/internal/node"
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
	// also are the other names of a multi-name lock (see
	// Redlock.NewMultiMutex), taken with name, all or none; nil otherwise.
	also []string
	// intent is where the write lock of an RWMutex marks a waiting writer
	// (see node.IntentKey), with the value writer, its id; "" for a Mutex.
	intent, writer string
	cfg            config
	// owner is the token of a reentrant Mutex: the same for all its
	// acquisitions, so that it recognises its own lock on the nodes.
	owner string
	// report tells the Mutex's Observer of node failures (nil: none).
	report reportFunc

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
	_, err := m.lockHopeless(ctx)
	return err
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
	if l := m.ownLease(); l != nil {
		return acquisition{}, m.reenter(ctx, l)
	}
	token, err := m.newToken()
	if err != nil {
		return acquisition{}, err
	}
	a, err := m.r.acquire(ctx, try{op: m.acquireOp(token, false), cfg: &m.cfg, report: m.report, released: released, reasks: reasks})
	if err != nil {
		return a, err
	}
	m.hold(ctx, token, a)
	return acquisition{}, nil
}

// ownLease returns the live lease of a reentrant Mutex, nil when it holds
// none or is not reentrant.
func (m *Mutex) ownLease() *lease {
	if !m.cfg.reentrant {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if l := m.lease; l != nil && l.err == nil {
		return l
	}
	return nil
}

// newToken returns the token of a new acquisition: a random one, or the
// owner id of a reentrant Mutex.
func (m *Mutex) newToken() (string, error) {
	if m.cfg.reentrant {
		return m.owner, nil
	}
	id, err := uuid.NewRandom() // crypto/rand: tokens must not be guessable or repeat
	if err != nil {
		return "", errors.Join(fmt.Errorf("%w: token", ErrNotAcquired), err)
	}
	return id.String(), nil
}

// hold makes acquisition a, of token, the Mutex's lease, and starts its
// renewal when asked to.
func (m *Mutex) hold(ctx context.Context, token string, a acquisition) {
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
		return
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
}

// reenter takes one more hold on a reentrant lock that l holds.
func (m *Mutex) reenter(ctx context.Context, l *lease) error {
	// A release meanwhile must not be undone by this: each node applies
	// the Mutex's requests in the order they were sent (one lane per
	// name), so a re-lock never overtakes the first SET, where it would
	// find no key and take no hold.
	a, err := m.r.acquire(ctx, try{op: m.acquireOp(l.token, true), cfg: &m.cfg, report: m.report, reasks: maxReasks})
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
// m.mu held. The window moves to a's if later; later releases follow the
// SETs of both on each node (one lane per name).
func (m *Mutex) addHold(l *lease, a acquisition) {
	l.holds++
	if a.until.After(l.acq.until) {
		l.acq.until = a.until
		l.loss.Reset(m.untilLoss(l))
	}
}

// acquireOp builds the acquire operation for token; reenter when the
// owner already holds the lock.
func (m *Mutex) acquireOp(token string, reenter bool) *node.Acquire {
	op := &node.Acquire{Key: m.name, Also: m.also, Intent: m.intent, Writer: m.writer, Token: token, TTL: m.cfg.ttl, Reentrant: m.cfg.reentrant, Reenter: reenter, Ack: m.cfg.ack}
	if m.cfg.fencing {
		op.FenceKey = node.FenceKey(m.name)
	}
	op.MinUptime = minUptime(m.cfg.restart)
	if m.intent != "" {
		op.IntentTTL = markTTL(&m.cfg)
	}
	return op
}

// markTTL is how long a waiting writer's mark lasts on a node (see
// RWMutex): the TTL, and never less than two of the longest waits between
// a writer's attempts and their node timeouts, so that it does not lapse
// while the writer still tries.
func markTTL(c *config) time.Duration {
	return max(c.ttl, 2*(c.delayMax+c.nodeTimeout)).Truncate(time.Millisecond)
}

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
