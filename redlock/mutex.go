package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/redlock/internal/engine"
	"github.com/redlock-go/redlock/redlock/internal/lease"
	"github.com/redlock-go/redlock/redlock/internal/turn"

	"github.com/redlock-go/redlock/redlock/internal/quorum"

	"github.com/google/uuid"
)

// Mutex is a handle on one named lock of a [Redlock]. Create it with
// [Redlock.NewMutex].
//
// A Mutex is safe for use by several goroutines and, like a sync.Mutex,
// belongs to no goroutine: it holds at most one acquisition at a time,
// each method reads and changes that state atomically, and Unlock and
// Extend act on the current acquisition, whichever goroutine made it.
// While the lock is held, Lock waits and TryLock fails. For independent
// holders, use separate Mutex values. With [WithReentrant] the Mutex value
// is the lock's owner, shared by the goroutines that use it.
type Mutex struct {
	h    lease.Holder
	lock lockKind // what the lock's node operations are (see lockkind.go)
}

// Name returns the lock's name, which is its key on every node.
func (m *Mutex) Name() string { return m.h.Name }

// Lock acquires the lock, trying again until it succeeds, its context ends
// or it has made the number of attempts set by [WithTries] (no bound by
// default). Each attempt is one [Mutex.TryLock]. Between attempts it waits
// for a randomised back-off ([WithRetryDelay]) or, with notification on,
// until a release of the lock is announced ([WithNotification]).
//
// On failure it returns an error wrapping [ErrNotAcquired] and the last
// attempt's causes (one [*report.NodeError] per failed node); when ctx
// ended, the error also wraps ctx.Err(). It returns at once, without
// retrying, when so many nodes failed with [ErrMisconfigured] that no
// quorum is left to grant, and when the nodes are found to share a server
// (an error wrapping [ErrInvalidArgument]). With [WithRenewal], ctx also
// bounds how long the lock is kept alive.
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
	ctx, end := m.h.Observe(ctx, m.h.Call(lease.StepWait))
	wt := &turn.Waiting{Holder: &m.h, Kind: m.lock.waitAs(&m.h.Settings)}
	attempts, failed, err := waitTurn(ctx, wt, func(ctx context.Context) (engine.Refusal, error) { return m.attempt(ctx, wt) })
	return failed.Hopeless, end(attempts, err)
}

// waitTurn makes the attempts of the wait wt, each with try, as the turn
// says (see turn.Waiting), and returns how many it made and what the last
// failed one said of itself.
func waitTurn(ctx context.Context, wt *turn.Waiting, try func(context.Context) (engine.Refusal, error)) (int, engine.Refusal, error) {
	defer wt.End()
	if err := wt.Begin(ctx); err != nil {
		return 0, engine.Refusal{}, err
	}
	for {
		failed, err := try(ctx)
		if done, err := wt.After(ctx, failed, err); done {
			return wt.Attempts(), failed, err
		}
	}
}

// attempt is one attempt of the wait wt: with the token the lock was
// handed with, when it was (see turn.Waiting.UseHanded).
func (m *Mutex) attempt(ctx context.Context, wt *turn.Waiting) (engine.Refusal, error) {
	if wt.Handed == nil {
		return m.tryLock(ctx, wt.Released(), quorum.MaxReasks)
	}
	token, took, err := wt.UseHanded(ctx)
	if took || err != nil {
		return engine.Refusal{}, err
	}
	return m.tryHanded(ctx, token, wt.Member(), wt.Released(), wt.Handoffs())
}

// tryHanded is the attempt with token, which releases handed this Mutex's
// wait on some nodes (see turn/handoff.go). When it fails and no
// competitor holds a quorum (the handoffs split between waiters whose
// places the nodes saw in different orders), its undo is a release that
// hands the lock over in turn: the nodes that handed it this token hand it
// to their next waiter at once, rather than lie free, unannounced, until
// the waiters' back-offs end (engine.Spec.HandOver). member is the wait's
// own member of the queues, which the release removes first. handed
// receives the token's handoffs: a node that refused the attempt and
// hands the lock over to token while it is out counts as a grant
// (engine.Spec.Handed).
func (m *Mutex) tryHanded(ctx context.Context, token, member, released string, handed <-chan node.Handed) (engine.Refusal, error) {
	s := m.spec(token, false)
	s.HandOver = handingOver(m.h.Name, token, member)
	s.Handed = handed
	return m.acquire(ctx, s, token, released, quorum.MaxReasks)
}

// TryLock makes one attempt to acquire the lock, without waiting for a
// holder's release: it asks every node at once to set the key to a new
// random token (SET name token NX GET PX ttl, or a script) and succeeds
// when a quorum granted it with validity left (see [Mutex.Until]). It
// returns once the outcome is certain; a node that has not answered by the
// node timeout counts as failed, and a node that is down (see
// [Redlock.Health]) is skipped. Contenders that split the nodes settle
// within about a node timeout (see docs/ALGORITHM.md, "Split votes").
// [WithRenewal] and [WithReentrant] say what TryLock does with them.
//
// On failure it returns an error wrapping [ErrNotAcquired] and, where the
// attempt can tell, what refused it: [ErrHeld] (another holds the lock, or
// this Mutex does: no node is then asked), [ErrSplit] or [ErrNodesFailed];
// one [*report.NodeError] per failed node, and ctx's error if ctx ended.
// The failed attempt is released on every node that may hold its token,
// some in the background. If ctx has already ended, it makes no attempt.
func (m *Mutex) TryLock(ctx context.Context) error {
	ctx, end := m.h.Observe(ctx, m.h.Call(lease.StepTry))
	wt := &turn.Waiting{Holder: &m.h, Kind: turn.Lock, Once: true}
	attempts, _, err := waitTurn(ctx, wt, func(ctx context.Context) (engine.Refusal, error) {
		return m.tryLock(ctx, wt.Released(), quorum.MaxReasks)
	})
	return end(attempts, err)
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
	return m.acquire(ctx, m.spec(token, false), notice, released, reasks)
}

// acquire makes the acquisition s, and takes the lock with notice when it
// succeeds.
func (m *Mutex) acquire(ctx context.Context, s engine.Spec, notice, released string, reasks int) (engine.Refusal, error) {
	s.Released, s.Reasks = released, reasks
	g, failed, err := m.h.Engine.Acquire(ctx, s)
	if err != nil {
		return failed, err
	}
	m.h.Take(ctx, s.Token, notice, g)
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
// release to the node's waiters. The mutex stops holding the lock when
// Unlock starts, whatever the outcome ([Mutex.Done] closes, renewal
// stops). With [WithReentrant], Unlock drops one hold and releases the
// lock with the last. A done ctx does not stop the release: Unlock then
// waits for every node, at most the node timeout. With a live ctx it
// returns once the outcome is certain (a failure, once every node answered
// or the node timeout passed), and slower nodes are released in the
// background.
//
// It returns nil when a quorum confirmed the release (also after Done
// closed): no other client held the lock up to the release, as far as the
// nodes can tell (docs/API.md, ErrNotHeld, says when a node that finds the
// key gone or another's confirms). Otherwise the error wraps one
// [*report.NodeError] per failed node and [ErrNotHeld] when the mutex
// holds nothing (without I/O) or when so many nodes answered that the
// token was gone that no quorum held it; or instead: [ErrMisconfigured]
// when nodes that refused it for good left no quorum; "release not
// confirmed" when failed nodes left it unconfirmed (they may have held the
// token), wrapping ctx.Err() when ctx had ended; [ErrClockJump] when nodes
// whose clocks jumped ahead, or that the clock guard refuses, left it
// unconfirmed; and neither ("release not confirmed") when nodes answered
// from a server not known to be the one the lock was taken on. Nodes that
// kept the token free it when its TTL passes.
func (m *Mutex) Unlock(ctx context.Context) error {
	if ctx == nil {
		return engine.Invalid("nil context")
	}
	ctx, end := m.h.Observe(ctx, m.h.Call(lease.StepRelease))
	if dropped, err := m.lock.unlock(ctx, m); dropped {
		return end(0, err)
	}
	return end(0, m.h.Release(ctx, errUnlocked))
}

// errUnlocked is the error of a lease that Unlock ended.
var errUnlocked = fmt.Errorf("%w: unlocked", ErrNotHeld)

// Extend re-arms the lock's full TTL on every node that still holds this
// acquisition's token and, when a quorum did, moves [Mutex.Until] to the
// extension's start + TTL - drift: nil means a quorum of nodes holds the
// token until then. It never re-creates a key that expired or was taken,
// and makes no attempt once the validity has run out. It returns once a
// quorum extended; a failed one waits for the other nodes, up to the node
// timeout (unless ctx ended), so that its error counts every node and
// names those the token is gone from.
//
// On failure it returns an error with one [*report.NodeError] per failed
// node, and ctx's error if ctx ended; Until is then left as it was. When
// so many nodes answered that the token is gone that no quorum can hold
// it any more, the lock is lost: the error wraps [ErrNotHeld] and
// [ErrLockLost], and [Mutex.Done] closes. When failed nodes left it
// neither confirmed nor refuted, it says "extension not confirmed",
// without either: the lock stays held until Until. [ErrMisconfigured]
// instead when nodes that refused it for good left no quorum.
// From Done closing, TTL/20 before Until, Extend returns [ErrLockLost]
// without [ErrNotHeld]: the acquisition has been given up.
func (m *Mutex) Extend(ctx context.Context) error {
	if ctx == nil {
		return engine.Invalid("nil context")
	}
	ctx, end := m.h.Observe(ctx, m.h.Call(lease.StepExtend))
	return end(0, m.h.ExtendCurrent(ctx))
}

// Until returns the end of the current acquisition's validity window:
// until then, no other holder can have a quorum (under the assumptions
// stated in the package documentation). It is the zero Time when the mutex
// has never held the lock or has unlocked it; after a loss it keeps the
// last window (check [Mutex.Err]); a Time in the past means the lock may
// be held by someone else now. Compare it with time.Now or time.Until in
// this process: it carries a monotonic clock reading.
func (m *Mutex) Until() time.Time { return m.h.Until() }

// Fence returns the current acquisition's fencing token (see
// [WithFencing] and [SetFenced]): greater than the token of every
// acquisition of this name that succeeded before this one began, under the
// conditions stated in the package documentation. It returns 0 when the
// mutex does not hold the lock (once [Mutex.Done] is closed) or the lock
// is not fenced; real tokens start at 1. A reentrant lock keeps the token
// of its first hold.
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
