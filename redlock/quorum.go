package redlock

import "github.com/redlock-go/redlock/redlock/internal/engine"

// The quorum rule. A lock is held when a quorum of the nodes, N/2+1 of
// N, granted it and validity remains (its TTL less the time the attempt
// took and the clock drift allowance, see clock.go); a semaphore's permit
// needs N·K/(K+1)+1 of them (see [WithQuorum]). Every verdict an acquisition,
// extension or release returns is one of the errors below, each saying
// what the nodes answered to make it true.

// ErrNotAcquired is returned by [Mutex.Lock], [Mutex.TryLock] and
// [Mutex.LockWithin] (and by [Semaphore.Acquire] and [Semaphore.TryAcquire]
// for a permit) when no quorum of nodes granted the lock within its
// validity: it is held elsewhere, too many nodes failed, or the nodes
// answered too slowly. The error also wraps one [*report.NodeError] per
// node that failed before the outcome was certain (a node still silent
// then is not reported), the context's error when it ended, and, when the
// attempt can tell what refused it, one of [ErrHeld], [ErrSplit] and
// [ErrNodesFailed], which each wrap ErrNotAcquired. A wait (Lock,
// LockWithin, Acquire, RLock) whose end cut its last attempt short also
// wraps the error of the last attempt that could tell (its class and its
// node errors: [report.NodeErrors] names each node once), and says how
// long before the wait ended it returned.
var ErrNotAcquired = engine.ErrNotAcquired

// ErrHeld wraps [ErrNotAcquired]: the lock is held by another. A lock's
// acquisition returns it when one other holder holds the lock on a quorum
// of the nodes that answered, or when this value holds it already (no node
// is then asked); a permit's or a read lock's, when the nodes that refused
// it (no permit free; a writer holds the lock or waits for it) leave no
// quorum, or when this value holds one. Skip the work another runs:
// errors.Is(err, ErrHeld).
var ErrHeld = engine.ErrHeld

// ErrSplit wraps [ErrNotAcquired]: contenders split the nodes between
// them, none holding a quorum, and the split was not settled within about
// a node timeout (see [Mutex.TryLock]); the lock may be free a moment
// later. Only a lock's acquisition returns it: the refusals of a permit or
// a read lock do not name their holders.
var ErrSplit = engine.ErrSplit

// ErrNodesFailed wraps [ErrNotAcquired]: nodes failed (see
// [report.NodeErrors]: timeouts, down, refusing), so many that the refusals alone
// do not account for the lock not being acquired. It says nothing of
// whether another holds the lock. With [ErrMisconfigured] inside the node
// errors, no retry helps until the deployment is fixed.
var ErrNodesFailed = engine.ErrNodesFailed

// ErrNotHeld is returned by [Mutex.Unlock] and [Mutex.Extend] (and by
// [Semaphore.Release] and [Semaphore.Extend] for a permit) when the mutex
// does not hold the lock: it was never acquired, was already unlocked, its
// validity ran out (Extend), or so many nodes answered that they no longer
// hold this acquisition's token that the others cannot make a quorum (N-Q+1
// of them: 3 of 5, 2 of 3). The error wraps one [*report.NodeError] per
// node that failed. A release or an extension that failed nodes left
// neither confirmed nor refuted (the nodes that failed may hold the token,
// with those that answered yes) returns another error, "release not
// confirmed" or "extension not confirmed", as do a release that clocks
// that jumped or a server not known to be the one the lock was taken on
// leave unconfirmed: see [Mutex.Unlock] and [Mutex.Extend].
var ErrNotHeld = engine.ErrNotHeld

// ErrLockLost means an acquisition (or a [Semaphore]'s permit) ended before
// Unlock: its validity ran out without an extension, or so many nodes
// answered that they no longer hold its token that no quorum can hold it
// any more. [Mutex.Err] returns it once [Mutex.Done] is closed,
// [Mutex.Extend] wraps it when the loss is certain (and returns it without
// [ErrNotHeld] between Done closing and [Mutex.Until]: given up, still held
// on the nodes), and it is the cause ([context.Cause]) of the context
// [Redlock.Do] gives its function.
var ErrLockLost = engine.ErrLockLost

// WithQuorum sets how many nodes must grant a [Semaphore]'s permit, for
// callers who prefer availability to a strict bound: with q nodes, at most
// N·permits/q holders (integer division) may hold a permit at once. q must
// be in [1, N]. Only [Redlock.NewSemaphore] accepts it: [New] and
// [Redlock.NewMutex] return an error wrapping [ErrInvalidArgument], since a
// lock's quorum is always a majority. Default: N·permits/(permits+1)+1
// (integer division), the least quorum that admits no more than permits
// holders (see [Semaphore.Quorum]).
func WithQuorum(q int) LockOption {
	return optionFunc(func(c *config) error {
		if q < 1 {
			return engine.Invalid("quorum must be at least 1, got %d", q)
		}
		c.Quorum = q
		return nil
	})
}

// WithSafeQuorum makes every acquisition (a lock, a permit, a read lock)
// refuse while fewer than its quorum of nodes were found safe by their
// last audit (see [Redlock.Audit]): audited, without an unsafe finding.
// The first acquisition waits for the first audit, at most until its
// context ends; a refused one returns at once, with an error wrapping
// [ErrNotAcquired] that names the nodes, and starts another audit (at most
// every five seconds). Default: off, the audit only
// reports.
func WithSafeQuorum() Option {
	return redlockOption(func(c *config) error {
		c.SafeQuorum = true
		return nil
	})
}

// errQuorumOption is the error of WithQuorum given to New or NewMutex.
var errQuorumOption = engine.Invalid("WithQuorum applies to semaphores only: a lock's quorum is a majority")
