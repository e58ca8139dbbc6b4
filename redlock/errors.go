package redlock

import (
	"context"
	"fmt"

	"github.com/redlock-go/redlock/redlock/internal/engine"

	"github.com/redlock-go/redlock/redlock/internal/quorum"

	"github.com/redlock-go/redlock/internal/node"
)

// ErrNotAcquired is returned by [Mutex.Lock], [Mutex.TryLock] and
// [Mutex.LockWithin] (and by [Semaphore.Acquire] and [Semaphore.TryAcquire]
// for a permit) when no quorum of nodes granted the lock within its
// validity: the lock is held elsewhere, too many nodes failed, or the
// nodes answered too slowly for any validity to remain. The returned error also wraps one [*NodeError] per
// node that failed before the outcome was certain (a node still silent then
// is not waited for, nor reported) and, when the caller's context ended, the
// context's error. When the attempt can tell what refused it, the error
// also wraps one of [ErrHeld], [ErrSplit] and [ErrNodesFailed], which
// each wrap ErrNotAcquired; when it cannot (the context ended first, a
// quorum granted too late), ErrNotAcquired alone.
var ErrNotAcquired = engine.ErrNotAcquired

// ErrHeld wraps [ErrNotAcquired]: the lock is held by another. A lock's
// acquisition ([Mutex.Lock], [Mutex.TryLock], an [RWMutex]'s write lock)
// returns it when one other holder holds the lock on a quorum of the
// nodes that answered, or when this value holds it already (no node is
// then asked). A permit's or a read lock's acquisition returns it when the
// nodes that refused it (no permit free; a writer holds the lock or waits
// for it) are so many that no quorum is left to admit it, or when this
// value holds one. Skip the work another runs: errors.Is(err, ErrHeld).
var ErrHeld = engine.ErrHeld

// ErrSplit wraps [ErrNotAcquired]: contenders split the nodes between
// them, none holding a quorum, and the split was not settled within about
// a node timeout (see [Mutex.TryLock]); the lock may be free a moment
// later. Only a lock's acquisition returns it: the refusals of a permit or
// a read lock do not name their holders.
var ErrSplit = engine.ErrSplit

// ErrNodesFailed wraps [ErrNotAcquired]: nodes failed (see
// [NodeErrors]: timeouts, down, refusing), so many that the refusals alone
// do not account for the lock not being acquired. It says nothing of
// whether another holds the lock. With [ErrMisconfigured] inside the node
// errors, no retry helps until the deployment is fixed.
var ErrNodesFailed = engine.ErrNodesFailed

// ErrNotHeld is returned by [Mutex.Unlock] and [Mutex.Extend] (and by
// [Semaphore.Release] and [Semaphore.Extend] for a permit) when the
// mutex does not hold the lock: it was never acquired, was already
// unlocked, its validity ran out (Extend), or fewer than a quorum of nodes
// still held this acquisition's token. The returned error wraps one
// [*NodeError] per node that failed. Once the caller's context has ended,
// Unlock (RUnlock, Release) returns it only when the nodes said the token
// was gone; a release that failing nodes left unconfirmed returns instead
// an error wrapping ctx.Err() (see [Mutex.Unlock]). A release that nodes
// whose clocks jumped ahead left unconfirmed (the key absent there may
// have expired early, or been deleted by the release's own earlier try)
// returns an error wrapping [ErrClockJump], not ErrNotHeld; so does,
// without ErrClockJump ("release not confirmed"), one that nodes answered
// from a server not known to be the one the lock was taken on (a restart
// or a failover may have lost the key, or one the process did not learn of
// in time came before the lock, and the release's earlier try deleted it).
var ErrNotHeld = engine.ErrNotHeld

// ErrLockLost means an acquisition ended before Unlock: its validity ran
// out without an extension, or so many nodes answered that they no longer
// hold its token (the key expired or was taken) that no quorum can hold it
// any more, which no extension can repair (the same for a [Semaphore]'s
// permit). [Mutex.Err] returns it once [Mutex.Done] is closed, [Mutex.Extend]
// wraps it when the loss is certain (and returns it without [ErrNotHeld]
// between Done closing and [Mutex.Until]: given up, still held on the
// nodes), and it is the cause
// ([context.Cause]) of the context [Redlock.Do] gives its function.
var ErrLockLost = engine.ErrLockLost

// ErrClockJump marks a node that does not vote because its clock jumped,
// or disagrees with this process's (see [WithClockTolerance]): in a
// [NodeError], in [NodeHealth.Clock], with [ErrLockLost] in the cause
// of a lease lost because nodes that granted it jumped ahead, and in the
// error of a release those nodes left unconfirmed (see [ErrNotHeld]). A
// clock stepped back keeps keys longer than their TTL: the node stops
// voting for a while, but no lease is lost to it.
var ErrClockJump = quorum.ErrClockJump

// ErrNodeTimeout is the cause inside a [*NodeError] when a node did not
// answer within the node timeout (see [WithNodeTimeout]).
var ErrNodeTimeout = node.ErrNodeTimeout

// ErrNodeDown is the cause inside a [*NodeError] when a request was not
// sent because the node is down: it recently timed out or could not be
// reached, and has not answered since (see [Redlock.Health]). The error
// also says for how long (since the first failure this process saw, see
// [NodeHealth.Since]), and why. Nothing was sent, so the request cannot
// have taken effect. A down node is probed in the background and used
// again as soon as it answers.
var ErrNodeDown = node.ErrNodeDown

// ErrNodeRecovering is the cause inside a [*NodeError] when a node refused
// an acquisition because it has been up for less than the restart delay
// (see [WithRestartDelay]): it may have forgotten locks it granted before a
// restart. The node changed nothing.
var ErrNodeRecovering = node.ErrNodeRecovering

// ErrMisconfigured is the cause inside a [*NodeError] when a node refused a
// request in a way that no retry can change, until someone changes the
// deployment: the user lacks a permission (NOPERM), the password or user is
// wrong (NOAUTH, WRONGPASS), a script's keys are in different cluster slots
// (CROSSSLOT), the lock's key holds something that is not a lock (another
// program uses the name), the node does not know a command the lock needs,
// or the TLS handshake failed (an untrusted or mismatched certificate, TLS
// spoken to a plain port). The error also wraps the node's own error.
//
// [Mutex.Lock] stops at once, instead of waiting for its context to end,
// when so many nodes fail this way that no quorum is left to grant the
// lock: retrying would fail the same way. Fewer such nodes are tolerated
// like any failed minority, and reported in the errors of operations.
// [Mutex.Unlock] and [Mutex.Extend] refused this way by so many nodes
// return an error wrapping ErrMisconfigured itself, not [ErrNotHeld] or
// [ErrLockLost]: the lock was refused, not found lost. A node that refuses
// only an optional feature (the waiters' queue, INFO) fails nothing: see
// [NodeHealth.Off].
var ErrMisconfigured = node.ErrMisconfigured

// ErrNotReplicated is the cause inside a [*NodeError] when, with
// [WithReplicaAck], a node granted or extended the lock (or recorded its
// fencing token) but fewer of its replicas than asked acknowledged the
// write within the timeout: the node does not count for that operation,
// as a failed node does not. The message says how many did.
var ErrNotReplicated = node.ErrNotReplicated

// ErrStaleFence is returned by [SetFenced] when the resource already
// accepted a write with a higher fencing token: the writer's lock was taken
// over by a later holder, and its write is refused.
var ErrStaleFence = engine.ErrStaleFence

// ErrInvalidArgument is wrapped by every error that reports bad input: from
// [New], [Redlock.NewMutex] and [Redlock.NewSemaphore] for bad clients, names, permits or options, from
// the [Mutex] methods for a nil context, from [Mutex.LockWithin] for a
// negative wait, and from [Redlock.Inspect] and [Redlock.ForceUnlock] for
// a nil context or an empty name.
var ErrInvalidArgument = engine.ErrInvalidArgument

// ErrClosed is returned by every call on a [Redlock], and on its mutexes,
// that would talk to the nodes after [Redlock.Close] ([Redlock.Inspect] and
// [Redlock.ForceUnlock] included) (Unlock or Extend of a
// mutex that holds nothing still return [ErrNotHeld] without I/O).
var ErrClosed = engine.ErrClosed

// NodeError reports one node's failure during an operation: a network or
// server error, [ErrNodeTimeout], [ErrNodeDown], [ErrNodeRecovering] or
// [ErrMisconfigured]. Operations join one NodeError per
// failed node into the error they return; reach them with [errors.As]:
//
//	var nodeErr *redlock.NodeError
//	if errors.As(err, &nodeErr) { ... }
//
// or walk them all by unwrapping the joined error (Unwrap() []error).
type NodeError struct {
	// Index is the node's position in the clients given to [New].
	Index int
	// Addr is the node's address as its client reports it.
	Addr string
	// Err is the cause.
	Err error
	// Late is set only in [Observer.NodeFailed], on the second report of
	// one node call: the call was reported with [ErrNodeTimeout] when the
	// library stopped waiting for it, and Err is the error it ended with
	// afterwards (a refused dial, say). Count failures without it, and
	// each call is counted once.
	Late bool
}

// Error says which node failed and why.
func (e *NodeError) Error() string {
	return fmt.Sprintf("redlock: node %d (%s): %v", e.Index, e.Addr, e.Err)
}

// Unwrap returns the cause, so errors.Is(err, redlock.ErrNodeTimeout) works.
func (e *NodeError) Unwrap() error { return e.Err }

// wordsError is a sentinel in the words of the primitive that returns it
// ("redlock: permit not acquired"): errors.Is finds the sentinel.
type wordsError struct {
	msg string
	err error
}

func (e *wordsError) Error() string { return e.msg }
func (e *wordsError) Unwrap() error { return e.err }

// NodeErrors returns every [*NodeError] in err's tree, in the order
// [errors.Join] holds them: one per node that failed in the operation that
// returned err before its outcome was certain. errors.As finds only the
// first.
func NodeErrors(err error) []*NodeError {
	var out []*NodeError
	var walk func(error)
	walk = func(err error) {
		if ne, ok := err.(*NodeError); ok { //nolint:errorlint // walking the tree by hand
			out = append(out, ne)
			return
		}
		switch u := err.(type) { //nolint:errorlint // walking the tree by hand
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	return out
}

// nodeError is node i of nodes failing with err.
func nodeError(nodes []node.Node, i int, err error) *NodeError {
	return &NodeError{Index: i, Addr: nodes[i].Addr(), Err: err}
}

// reporter returns the function that tells o of the failures of nodes,
// nil when o is nil.
func reporter(o Observer, nodes []node.Node) quorum.ReportFunc {
	if o == nil {
		return nil
	}
	return func(ctx context.Context, i int, err error, late bool) {
		e := nodeError(nodes, i, err)
		e.Late = late
		o.NodeFailed(ctx, e)
	}
}
