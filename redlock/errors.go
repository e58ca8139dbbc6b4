package redlock

import (
	"context"

	"github.com/redlock-go/redlock/redlock/internal/engine"
	"github.com/redlock-go/redlock/redlock/report"

	"github.com/redlock-go/redlock/redlock/internal/quorum"

	"github.com/redlock-go/redlock/internal/node"
)

// ErrMisconfigured is the cause inside a [*report.NodeError] when a node
// refused a request in a way that no retry can change until someone changes
// the deployment (NOPERM, WRONGPASS, a failed TLS handshake, a key at the
// lock's name that is not a lock...: see docs/DEPLOYMENTS.md, "Errors that
// no retry changes"). The error also wraps the node's own error.
//
// [Mutex.Lock] stops at once, without retrying, when such nodes leave no
// quorum to grant the lock; fewer are tolerated like any failed minority.
// [Mutex.Unlock] and [Mutex.Extend] refused this way by so many nodes
// return an error wrapping ErrMisconfigured, not [ErrNotHeld] or
// [ErrLockLost]. A node that refuses only an optional feature (the
// waiters' queue, INFO) fails nothing: see [report.NodeHealth.FeaturesOff].
var ErrMisconfigured = node.ErrMisconfigured

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

// ErrClosed is returned by every call on a [Redlock] or its mutexes that
// would talk to the nodes after [Redlock.Close], [Redlock.Inspect] and
// [Redlock.ForceUnlock] included (Unlock or Extend of a mutex that holds
// nothing still return [ErrNotHeld] without I/O).
var ErrClosed = engine.ErrClosed

// wordsError is a sentinel in the words of the primitive that returns it
// ("redlock: permit not acquired"): errors.Is finds the sentinel.
type wordsError struct {
	msg string
	err error
}

func (e *wordsError) Error() string { return e.msg }
func (e *wordsError) Unwrap() error { return e.err }

// nodeError is node i of nodes failing with err.
func nodeError(nodes []node.Node, i int, err error) *report.NodeError {
	return &report.NodeError{Index: i, Addr: nodes[i].Addr(), Err: err}
}

// reporter returns the function that tells o of the failures of nodes,
// nil when o is nil.
func reporter(o report.Observer, nodes []node.Node) quorum.ReportFunc {
	if o == nil {
		return nil
	}
	return func(ctx context.Context, i int, err error, late bool) {
		e := nodeError(nodes, i, err)
		e.Late = late
		o.NodeFailed(ctx, e)
	}
}
