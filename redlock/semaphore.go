package redlock

import (
	"context"
	"time"
)

// Semaphore is a handle on one named counting semaphore of a [Redlock]: at
// most permits holders at a time, across the N nodes. Create it with
// [Redlock.NewSemaphore].
//
// Each node admits at most permits holders of the name; a permit is held
// when a quorum of nodes admitted its holder (see [Semaphore.Quorum]). A
// majority is not enough once permits > 1: with N = 3 and 2 permits, three
// holders admitted by nodes {1,2}, {2,3} and {1,3} would each have a
// majority while every node counts only two. The default quorum,
// N·permits/(permits+1)+1, makes that impossible; [WithQuorum] trades the
// bound for availability.
//
// A Semaphore value is one holder: it holds at most one permit at a time.
// For several permits in one process, use several Semaphore values. It is
// safe for use by several goroutines, in the way a [Mutex] is: Acquire from
// any goroutine waits while the value holds its permit, TryAcquire fails,
// and Release and Extend act on the current permit, whichever goroutine
// took it.
type Semaphore struct {
	sh shared
}

// Name returns the semaphore's name, which is its key on every node.
func (s *Semaphore) Name() string { return s.sh.h.Name }

// Quorum returns how many nodes must admit a holder for it to hold a
// permit: N·permits/(permits+1)+1 (integer division) unless [WithQuorum]
// set it. That is the majority for one permit; for more, N = 5 needs 4
// nodes with 2 or 3 permits (one node may fail) and all 5 from 4 permits
// on (none may fail).
func (s *Semaphore) Quorum() int { return s.sh.h.Quorum }

// TryAcquire makes exactly one attempt to take a permit: it asks every
// node at once to admit a new random token (a script drops the node's
// expired permits, then admits the token if fewer than permits holders are
// left), and succeeds when a quorum admitted it with validity left (see
// [Semaphore.Until]). It returns once the outcome is certain; a node that
// has not answered by the node timeout counts as failed, and a node that
// is down (see [Redlock.Health]) is skipped.
//
// On failure it returns an error wrapping [ErrNotAcquired] (and [ErrHeld]
// when the nodes with no permit free leave no quorum, or this Semaphore
// holds one; [ErrNodesFailed] when failed nodes made the difference), one
// [*report.NodeError] per failed node, and ctx's error if ctx ended. Before
// returning it gives the permit back on every node that had admitted the
// token when the outcome was decided; nodes that failed or had not
// answered, and all of them when ctx has ended, are released in the
// background. If ctx has already ended, TryAcquire makes no attempt. It
// fails at once, without I/O, when this Semaphore already holds a permit
// or another of its acquisitions is in flight.
func (s *Semaphore) TryAcquire(ctx context.Context) error { return s.sh.tryOnce(ctx) }

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
// attempt's causes (one [*report.NodeError] per failed node); when ctx ended, the
// error also wraps ctx.Err(). It returns at once, without retrying, when so
// many nodes failed with [ErrMisconfigured] (a key of another type, a
// different permit count, a missing permission) that no quorum is left to
// admit it.
func (s *Semaphore) Acquire(ctx context.Context) error { return s.sh.wait(ctx) }

// Release gives the permit back: on every node at once, a script drops
// this acquisition's token from the semaphore, so a holder whose permit
// expired cannot free another's. A release that frees a permit announces
// it to waiters on the node (see [Semaphore.Acquire]).
//
// The semaphore stops holding the permit when Release starts, whatever the
// outcome; [Semaphore.Done] closes. It returns nil when a quorum of nodes
// (see [Semaphore.Quorum]) still held the token: no more than the
// semaphore's permits were held at once up to the release, as far as the
// nodes can tell. A node that answers that the token is already gone
// counts as holding it only before the expiry that node itself last
// confirmed and when the same Redis server answered, as for
// [Mutex.Unlock] (an earlier try of this release, resent by the client,
// dropped it).
// Otherwise it returns an error wrapping [ErrNotHeld] and one [*report.NodeError]
// per failed node; nodes that kept the token free it when its TTL passes.
// Release on a semaphore that holds no permit returns ErrNotHeld without
// I/O. A done ctx does not stop the release, and an unconfirmed one then
// wraps ctx.Err(), as for [Mutex.Unlock]. Nodes that have not answered when
// the outcome is certain are released in the background (with a live
// ctx), and a release that cannot be delivered is owed to its node (see
// [Redlock.Health]).
func (s *Semaphore) Release(ctx context.Context) error { return s.sh.release(ctx) }

// Extend re-arms the permit's full TTL on every node that still holds this
// acquisition's token and, when a quorum did, moves the end of the
// validity window to the extension's start + TTL - drift. It never admits
// the token again where its permit expired or was dropped, and it makes no
// attempt once the current validity has run out.
//
// On failure it returns an error wrapping [ErrNotHeld], one [*report.NodeError]
// per failed node, and ctx's error if ctx ended; the validity window is
// then left as it was. When so many nodes answered that they no longer
// hold the token that no quorum can, the permit is lost for good: the
// error also wraps [ErrLockLost] and [Semaphore.Done] closes.
func (s *Semaphore) Extend(ctx context.Context) error { return s.sh.extend(ctx) }

// Until returns the end of the current permit's validity window: until
// then, no more than the bound of holders hold a permit (permits at the
// default quorum; see [WithQuorum]). It is the zero Time when the
// semaphore holds no permit. The Time carries a monotonic clock reading;
// compare it with time.Now or time.Until in this process.
func (s *Semaphore) Until() time.Time { return s.sh.h.Until() }

// Done returns a channel that is closed when the current permit ends: on
// Release, when Extend finds it lost, or when its validity is about to run
// out without an extension (TTL/20 before [Semaphore.Until], so that work
// watching it can stop in time). [Semaphore.Err] then says why. When the
// semaphore holds no permit, Done returns a closed channel. Each permit has
// its own channel: call Done after Acquire.
func (s *Semaphore) Done() <-chan struct{} { return s.sh.h.Done() }

// Err returns nil while the current permit lasts, and once [Semaphore.Done]
// is closed the reason: an error wrapping [ErrLockLost] when the permit was
// lost, or [ErrNotHeld] when it was released or never held.
func (s *Semaphore) Err() error { return s.sh.h.Err() }
