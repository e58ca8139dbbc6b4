package report

import (
	"context"
	"time"
)

// Observation. A Redlock or a Mutex given redlock.WithObserver reports what it
// does to the Observer on the paths that run anyway: when a call starts and
// returns, when an acquisition ends, when a node call fails. Without one,
// each of those places costs a nil check and nothing else: no allocation,
// no closure, no clock reading. The package redlockotel implements it with
// OpenTelemetry; the library itself still never logs.

// Observer watches the operations of a [Redlock] or redlock.Mutex (see
// redlock.WithObserver). Its methods are called synchronously on the goroutines
// named in their docs, some of them the node's own, whose replies wait
// meanwhile: they must return quickly and never block, and they must be
// safe for concurrent use. An Observer must not call back into the Mutex
// that reports to it.
type Observer interface {
	// OpStart is called when redlock.Mutex.Lock, redlock.Mutex.TryLock, redlock.Mutex.Unlock
	// or redlock.Mutex.Extend starts (likewise redlock.Semaphore.Acquire,
	// redlock.Semaphore.TryAcquire, redlock.Semaphore.Release and redlock.Semaphore.Extend,
	// whose permits end with LeaseEnd too), and when renewal starts an extension, on
	// the goroutine of that call (a renewal worker's for its extensions:
	// one that blocks there delays the renewal of every lock of the
	// Redlock), after the nil-context check. ctx is the caller's (for renewal, the context
	// that bounds the hold). It returns the context the operation goes on
	// with: ctx itself or a context derived from it (with a span, say),
	// whose values every node call of the operation carries, so that they
	// reach [Observer.NodeFailed] and the client's own hooks.
	OpStart(ctx context.Context, op Op) context.Context
	// OpEnd is called once for every OpStart, when the operation returns,
	// on the same goroutine, with the context OpStart returned.
	OpEnd(ctx context.Context, op Op, res OpResult)
	// LeaseEnd is called once per acquisition when it ends: when Unlock
	// starts (the last Unlock of a reentrant lock), or when it is lost,
	// on the goroutine that found the loss (Extend's caller, renewal, or
	// the timer that ends a lease whose validity is about to run out),
	// before redlock.Mutex.Done closes.
	LeaseEnd(l Lease)
	// NodeFailed is called for every node call that fails, including those
	// that end after their operation returned: on the node's own goroutine
	// when the reply comes in, on the caller's when the call is not sent
	// (the node is down, its queue is full), and on a timer's when the node
	// timeout passes with no reply. A call fails when it returns an error,
	// or has not answered within the node timeout: it is reported then,
	// when the library stops waiting for it, with e.Err wrapping
	// [ErrNodeTimeout] (a silent node's client may hold the call for
	// seconds more). If such a call later ends with an error of its own,
	// that error is reported too, with e.Late set: count the reports
	// without Late to count each failed call once.
	// Background calls (releases owed to a node, the waiters' queues)
	// report to the Redlock's Observer with a background context; ctx is
	// otherwise the one OpStart returned for the operation.
	NodeFailed(ctx context.Context, e *NodeError)
}

// OpKind says which call an [Op] is.
type OpKind uint8

// The calls an [Observer] sees.
const (
	OpLock         OpKind = iota + 1 // Mutex.Lock (and LockWithin with a positive wait, Do)
	OpTryLock                        // Mutex.TryLock (and LockWithin with no wait)
	OpUnlock                         // Mutex.Unlock
	OpExtend                         // Mutex.Extend, or an extension by renewal
	OpAcquire                        // Semaphore.Acquire
	OpTryAcquire                     // Semaphore.TryAcquire
	OpRelease                        // Semaphore.Release
	OpExtendPermit                   // Semaphore.Extend
	OpRLock                          // RWMutex.RLock (and DoRead)
	OpTryRLock                       // RWMutex.TryRLock
	OpRUnlock                        // RWMutex.RUnlock
	OpExtendRead                     // RWMutex.Extend of a read lock, or its renewal
)

// String returns the method's name: "Lock", "TryLock", "Unlock", "Extend",
// for a redlock.Semaphore "Acquire", "TryAcquire", "Release", "ExtendPermit", and
// for a redlock.RWMutex's read lock "RLock", "TryRLock", "RUnlock", "ExtendRead"
// (its write lock's calls are a Mutex's).
func (k OpKind) String() string {
	if k == 0 || int(k) >= len(opNames) {
		return "unknown"
	}
	return opNames[k]
}

// opNames are the OpKinds' names, by value.
var opNames = [...]string{OpLock: "Lock", OpTryLock: "TryLock", OpUnlock: "Unlock", OpExtend: "Extend",
	OpAcquire: "Acquire", OpTryAcquire: "TryAcquire", OpRelease: "Release", OpExtendPermit: "ExtendPermit",
	OpRLock: "RLock", OpTryRLock: "TryRLock", OpRUnlock: "RUnlock", OpExtendRead: "ExtendRead"}

// Op is one call an [Observer] sees.
type Op struct {
	Kind OpKind
	// Name is the lock's name.
	Name string
	// Renewal is set for an extension started by renewal (redlock.WithRenewal,
	// redlock.Redlock.Do) rather than by a call to Extend.
	Renewal bool
}

// OpResult is how a call an [Observer] saw ended.
type OpResult struct {
	// Err is what the call returned: nil when it acquired, released or
	// extended the lock.
	Err error
	// Canceled is set when the call failed and the caller's context had
	// ended: for Lock, the context given to Lock (to redlock.Mutex.LockWithin,
	// not its wait: a wait that ran out is a failure, not a cancellation).
	Canceled bool
	// Attempts is, for Lock and TryLock, how many attempts the call made
	// (each is one TryLock; 0 when it returned before its first); 0 for
	// Unlock and Extend.
	Attempts int
}

// Lease is one acquisition that ended, as [Observer.LeaseEnd] sees it.
type Lease struct {
	// Name is the lock's name.
	Name string
	// Acquired is when the attempt that acquired the lock started, the
	// start of its validity. It carries a monotonic reading: time.Since
	// gives how long the lock was held.
	Acquired time.Time
	// Lost is set when the acquisition ended before Unlock: Err then wraps
	// redlock.ErrLockLost.
	Lost bool
	// Err is why it ended, as redlock.Mutex.Err says.
	Err error
}
