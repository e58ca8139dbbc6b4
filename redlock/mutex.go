package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redlock-go/redlock/redlock/internal/engine"
	"github.com/redlock-go/redlock/redlock/internal/lease"
	"github.com/redlock-go/redlock/redlock/internal/turn"

	"github.com/redlock-go/redlock/redlock/internal/quorum"

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
	h    lease.Holder
	lock lockKind // what the lock's node operations are (see lockkind.go)
}

// Name returns the lock's name, which is its key on every node.
func (m *Mutex) Name() string { return m.h.Name }

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
// attempt's causes (one [*report.NodeError] per failed node); when ctx ended, the
// error also wraps ctx.Err(). It returns at once, without retrying, when so
// many nodes failed with [ErrMisconfigured] (a missing permission, a key of
// another type, an untrusted certificate) that no quorum is left to grant,
// and when the nodes are found to share a server (an error wrapping
// [ErrInvalidArgument]). With [WithRenewal], ctx also bounds how long the
// lock is kept alive (see [Mutex.TryLock]).
func (m *Mutex) Lock(ctx context.Context) error {
	if ctx == nil {
		return engine.Invalid("nil context")
	}
	_, err := m.lockHopeless(ctx)
	return err
}

// lockHopeless is Lock; it also reports whether the last attempt found so
// many nodes misconfigured that no quorum is left (see tally.hopeless).
func (m *Mutex) lockHopeless(ctx context.Context) (hopeless bool, err error) {
	err = m.h.Observe(ctx, m.h.Call(lease.StepWait), func(ctx context.Context) (int, error) {
		wt := &turn.Waiting{Holder: &m.h, Kind: m.lock.waitAs(&m.h.Settings)}
		attempts, failed, err := wt.Wait(ctx, func(ctx context.Context, released string) (engine.Refusal, error) {
			if wt.Handed != nil {
				return wt.TryHanded(ctx, func(ctx context.Context, token string) (engine.Refusal, error) {
					return m.tryWith(ctx, token, token, released, quorum.MaxReasks)
				})
			}
			return m.tryLock(ctx, released, quorum.MaxReasks)
		})
		hopeless = failed.Hopeless
		return attempts, err
	})
	return hopeless, err
}

// TryLock makes one attempt to acquire the lock, without waiting for a
// holder's release: it sends the equivalent of SET name token NX GET PX
// ttl (a script) to every node at once with a new random token and
// succeeds when a quorum granted it with validity left (see
// [Mutex.Until]). It returns once the outcome is certain, which is when
// the quorum-th fastest node answers, not the slowest; a node that has not
// answered by the node timeout counts as failed, and a node that is down
// (see [Redlock.Health]) is skipped.
//
// A free lock goes to one of those who try it at once. When contenders
// split the nodes, none holding a quorum, the one that ranks first asks
// the others' nodes again as they give way (see the package
// documentation), and the others try again after a short random back-off:
// within about a node timeout one holds the lock, and the others are
// refused because it does. Only a split not settled by then is refused as
// such ([ErrSplit]). A lock that is held is refused at once.
//
// On failure it returns an error wrapping [ErrNotAcquired] and, where the
// attempt can tell, what refused it: [ErrHeld] (another holds the lock, or
// this Mutex does: no node is then asked), [ErrSplit] or
// [ErrNodesFailed]; one [*report.NodeError] per failed node, and ctx's error if
// ctx ended. Before returning it
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
	return m.h.Observe(ctx, m.h.Call(lease.StepTry), func(ctx context.Context) (int, error) {
		wt := &turn.Waiting{Holder: &m.h, Kind: turn.Lock, Once: true}
		attempts, _, err := wt.Wait(ctx, func(ctx context.Context, released string) (engine.Refusal, error) {
			return m.tryLock(ctx, released, quorum.MaxReasks)
		})
		return attempts, err
	})
}

// tryLock is TryLock; on failure it also describes the failed attempt.
// released is a token whose release was just announced: nodes that still
// hold it are about to be free (see spec).
func (m *Mutex) tryLock(ctx context.Context, released string, reasks int) (engine.Refusal, error) {
	if ctx == nil {
		return engine.Refusal{}, engine.Invalid("nil context")
	}
	if err := ctx.Err(); err != nil {
		return engine.Refusal{}, errors.Join(fmt.Errorf("%w: context done before the attempt", ErrNotAcquired), err)
	}
	return m.lock.tryLock(ctx, m, released, reasks)
}

// tryWith is an attempt with token, whose release is announced with
// notice.
func (m *Mutex) tryWith(ctx context.Context, token, notice, released string, reasks int) (engine.Refusal, error) {
	s := m.spec(token, false)
	s.Released, s.Reasks = released, reasks
	g, failed, err := m.h.Engine.Acquire(ctx, s)
	if err != nil {
		return failed, err
	}
	m.h.Take(ctx, token, notice, g)
	return engine.Refusal{}, nil
}

// spec is the acquisition of token by this Mutex; reenter when the owner
// of a reentrant lock already holds it.
func (m *Mutex) spec(token string, reenter bool) engine.Spec {
	cfg := &m.h.Settings
	s := engine.Spec{Op: m.lock.acquire(m.h.Name, token, cfg, reenter), Undo: m.lock.Undo(m.h.Name, token),
		Token: token, Settings: cfg, Report: m.h.Report, Split: true}
	if cfg.Fencing && !reenter {
		s.Fence = m.lock.fence(m.h.Name, token, cfg)
	}
	return s
}

// live returns the Mutex's live lease, nil when it holds none.
func (m *Mutex) live() *lease.Lease { return m.h.Live() }

// Unlock releases the lock: on every node at once, a script deletes the
// key if it still holds this acquisition's token, and announces the
// release to the node's waiters (see [Mutex.Lock]). The mutex stops
// holding the lock when Unlock starts, whatever the outcome ([Mutex.Done]
// closes, renewal stops). With [WithReentrant], Unlock drops one hold and
// releases the lock with the last.
//
// A done ctx does not stop the release: Unlock sends it and waits for
// every node, at most the node timeout. With a live ctx it returns once
// the outcome is certain (when it fails, once every node answered or the
// node timeout passed, so that its error counts every node it can), and
// slower nodes are released in the background.
//
// It returns nil when a quorum confirmed the release (also after Done
// closed): the nodes held the token, or lost it only to an earlier try of
// this release that the client resent. No other client held the lock up
// to the release, as far as the nodes can tell. A node that finds the key
// gone, or another's (a waiter took it after that earlier try), counts only
// before the expiry that node itself last confirmed (a node that missed an
// extension expires the key earlier than [Mutex.Until]) and only when the
// same server answers (its run id: a restart or a failover lost the key).
// Otherwise its error wraps one [*report.NodeError] per failed node, and:
//   - [ErrNotHeld] when no quorum confirmed: another client may have held
//     the lock (without I/O when the mutex holds nothing);
//   - [ErrMisconfigured] instead when nodes that refused the release for a
//     reason no retry changes (a missing ACL permission) left no quorum;
//   - ctx.Err() instead, when ctx had ended and the release is unconfirmed
//     because nodes failed (too few said the token was gone for it to be
//     not held);
//   - [ErrClockJump] instead, when it is unconfirmed because nodes whose
//     clocks jumped ahead, or whose clocks the guard refuses (their grants
//     counted for nothing), found the key without the token (it may have
//     expired there early);
//   - neither ("release not confirmed"), when it is unconfirmed because
//     nodes found the key without the token on a server not known to be
//     the one the lock was taken on (a restart or a failover).
//
// Nodes that kept the token free it when its TTL passes.
func (m *Mutex) Unlock(ctx context.Context) error {
	if ctx == nil {
		return engine.Invalid("nil context")
	}
	return m.h.Observe(ctx, m.h.Call(lease.StepRelease), func(ctx context.Context) (int, error) {
		if dropped, err := m.lock.unlock(ctx, m); dropped {
			return 0, err
		}
		return 0, m.h.Release(ctx, errUnlocked)
	})
}

// errUnlocked is the error of a lease that Unlock ended.
var errUnlocked = fmt.Errorf("%w: unlocked", ErrNotHeld)

// Extend re-arms the lock's full TTL on every node that still holds this
// acquisition's token and, when a quorum did, moves the end of the validity
// window to the extension's start + TTL - drift. Nil means exactly that: a
// quorum of nodes holds the token until the new [Mutex.Until] (each re-armed
// it for the TTL from the extension's start, on its own clock). It never re-creates a key
// that expired or was taken, and it makes no attempt once the current
// validity has run out, since another holder may exist by then.
//
// On failure it returns an error wrapping [ErrNotHeld] ([ErrMisconfigured]
// instead when nodes that refused the extension for a reason no retry
// changes left no quorum), one [*report.NodeError] per failed node, and ctx's
// error if ctx ended; the validity window is then
// left as it was (the lock may still be held until [Mutex.Until]). When so
// many nodes answered that they no longer hold the token that no quorum can
// hold it any more, the lock is lost for good: the error also wraps
// [ErrLockLost] and the acquisition ends ([Mutex.Done] closes). Extend
// returns once a quorum extended; a failed one waits for the other nodes,
// up to the node timeout (unless ctx ended), so that its error counts
// every node and names those the token is gone from. An acquisition that
// was not extended in time ends TTL/20 before its validity, for the work
// to stop ([Mutex.Done] closes then); an Extend in those last moments
// returns [ErrLockLost] without [ErrNotHeld]: the nodes still hold the
// token, but the acquisition has been given up.
func (m *Mutex) Extend(ctx context.Context) error {
	if ctx == nil {
		return engine.Invalid("nil context")
	}
	return m.h.Observe(ctx, m.h.Call(lease.StepExtend), func(ctx context.Context) (int, error) {
		return 0, m.h.ExtendCurrent(ctx)
	})
}

// Until returns the end of the current acquisition's validity window: until
// then, no other holder can have a quorum (under the assumptions stated in
// the package documentation). It is the zero Time when the mutex has never
// held the lock or has unlocked it. After a loss found by Extend, renewal
// or Close it keeps the last window: check [Mutex.Err]. A Time in the past
// means the validity ran out: the lock may be held by someone else now. The Time carries a monotonic clock reading;
// compare it with time.Now or time.Until in this process.
func (m *Mutex) Until() time.Time { return m.h.Until() }

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
	if l := m.h.Live(); l != nil {
		return l.Fence
	}
	return 0
}

// Done returns a channel that is closed when the current acquisition ends:
// on Unlock, when renewal or Extend finds the lock lost, or when its
// validity is about to run out without an extension (TTL/20 before
// [Mutex.Until], so that work watching it can stop in time). [Mutex.Err]
// then says why. When the mutex does not hold the lock, Done returns a
// closed channel. Each acquisition has its own channel: call Done after
// Lock.
func (m *Mutex) Done() <-chan struct{} { return m.h.Done() }

// Err returns nil while the current acquisition lasts, and once
// [Mutex.Done] is closed the reason: an error wrapping [ErrLockLost] when the
// lock was lost, or [ErrNotHeld] when it was unlocked or never held.
func (m *Mutex) Err() error { return m.h.Err() }

// newToken returns a new random token: crypto/rand, so that tokens cannot
// be guessed and never repeat.
func newToken() (string, error) {
	id, err := uuid.NewRandom()
	if err != nil {
		return "", errors.Join(fmt.Errorf("%w: token", ErrNotAcquired), err)
	}
	return id.String(), nil
}
