package redlock

import (
	"context"
	"time"
)

// Semaphore is a handle on one named counting semaphore of a [Redlock]: at
// most permits holders at a time, across the N nodes. Create it with
// [Redlock.NewSemaphore]. A permit is held when a quorum of nodes, each
// admitting at most permits holders of the name, admitted its holder (see
// [Semaphore.Quorum]): more than a majority, once permits > 1.
//
// A Semaphore value is one holder: it holds at most one permit at a time;
// for several permits in one process, use several values. It is safe for
// use by several goroutines, in the way a [Mutex] is: Acquire waits while
// the value holds its permit, TryAcquire fails, and Release and Extend act
// on the current permit, whichever goroutine took it.
type Semaphore struct {
	sh shared
}

// Name returns the semaphore's name, which is its key on every node.
func (s *Semaphore) Name() string { return s.sh.h.Name }

// Quorum returns how many nodes must admit a holder for it to hold a
// permit: N·permits/(permits+1)+1 (integer division), the majority for one
// permit, unless [WithQuorum] set it.
func (s *Semaphore) Quorum() int { return s.sh.h.Quorum }

// TryAcquire makes exactly one attempt to take a permit: it asks every
// node at once to admit a new random token (a script drops the node's
// expired permits, then admits the token if fewer than permits holders are
// left), and succeeds when a quorum admitted it with validity left (see
// [Semaphore.Until]). It returns once the outcome is certain and undoes a
// failed attempt, as [Mutex.TryLock] does (without its split-vote rule).
//
// On failure it returns an error wrapping [ErrNotAcquired] (and [ErrHeld]
// when the nodes with no permit free leave no quorum, or this Semaphore
// holds one; [ErrNodesFailed] when failed nodes made the difference), one
// [*report.NodeError] per failed node, and ctx's error if ctx ended. If ctx
// has already ended, it makes no attempt. It fails at once, without I/O,
// when this Semaphore already holds a permit or another of its
// acquisitions is in flight.
func (s *Semaphore) TryAcquire(ctx context.Context) error { return s.sh.tryOnce(ctx) }

// Acquire takes a permit, trying again until it succeeds, its context ends
// or it has made the number of attempts set by [WithTries] (no bound by
// default). Each attempt is one [Semaphore.TryAcquire]; between attempts
// it waits as [Mutex.Lock] does, for a back-off or the announcement of a
// permit's release, queued with the semaphore's waiters. While this
// Semaphore holds a permit, or another of its acquisitions is in flight,
// Acquire waits until the permit is released.
//
// On failure it returns an error wrapping [ErrNotAcquired] and the last
// attempt's causes (one [*report.NodeError] per failed node); when ctx
// ended, the error also wraps ctx.Err(). It returns at once, without
// retrying, when so many nodes failed with [ErrMisconfigured] that no
// quorum is left to admit it.
func (s *Semaphore) Acquire(ctx context.Context) error { return s.sh.wait(ctx) }

// Release gives the permit back: on every node at once, a script drops
// this acquisition's token from the semaphore (so a holder whose permit
// expired cannot free another's) and announces a freed permit to the
// node's waiters. The semaphore stops holding the permit when Release
// starts, whatever the outcome; [Semaphore.Done] closes.
//
// It returns nil when a quorum of nodes (see [Semaphore.Quorum]) still
// held the token, counted as for [Mutex.Unlock]: no more than the
// semaphore's permits were held at once up to the release, as far as the
// nodes can tell. Otherwise it returns an error with one
// [*report.NodeError] per failed node, wrapping [ErrNotHeld] when it holds
// no permit (without I/O) or when the nodes' answers leave no quorum
// holding the token, and saying "release not confirmed" when failed nodes
// left it unconfirmed, as [Mutex.Unlock] does; nodes that kept the token
// free it when its TTL passes. A done ctx, slow nodes and undelivered
// releases are handled as by Mutex.Unlock.
func (s *Semaphore) Release(ctx context.Context) error { return s.sh.release(ctx) }

// Extend re-arms the permit's full TTL on every node that still holds this
// acquisition's token, as [Mutex.Extend] does for a lock: it moves
// [Semaphore.Until] when a quorum did, never admits the token again where
// its permit expired or was dropped, and makes no attempt once the
// validity has run out. On failure it returns an error with one
// [*report.NodeError] per failed node, and ctx's error if ctx ended; when
// the nodes' answers leave no quorum that can hold the token, the permit
// is lost: the error wraps [ErrNotHeld] and [ErrLockLost], and
// [Semaphore.Done] closes; when failed nodes left it unconfirmed, it says
// "extension not confirmed", as [Mutex.Extend] does.
func (s *Semaphore) Extend(ctx context.Context) error { return s.sh.extend(ctx) }

// Until returns the end of the current permit's validity window: until
// then, no more than the bound of holders hold a permit (permits at the
// default quorum; see [WithQuorum]). It is the zero Time when the
// semaphore holds no permit. The Time carries a monotonic clock reading;
// compare it with time.Now or time.Until in this process.
func (s *Semaphore) Until() time.Time { return s.sh.h.Until() }

// Done returns a channel that is closed when the current permit ends: on
// Release, when Extend finds it lost, or TTL/20 before [Semaphore.Until]
// without an extension, so that work watching it can stop in time.
// [Semaphore.Err] then says why. When the semaphore holds no permit, Done
// returns a closed channel. Each permit has its own channel: call Done
// after Acquire.
func (s *Semaphore) Done() <-chan struct{} { return s.sh.h.Done() }

// Err returns nil while the current permit lasts, and once [Semaphore.Done]
// is closed the reason: an error wrapping [ErrLockLost] when the permit was
// lost, or [ErrNotHeld] when it was released or never held.
func (s *Semaphore) Err() error { return s.sh.h.Err() }
