package report

import (
	"fmt"
	"slices"

	"github.com/redlock-go/redlock/internal/node"
)

// NodeError reports one node's failure during an operation: a network or
// server error, [ErrNodeTimeout], [ErrNodeDown], [ErrNodeRecovering] or
// redlock.ErrMisconfigured. Operations join one NodeError per
// failed node into the error they return; reach them with [errors.As]:
//
//	var nodeErr *redlock.NodeError
//	if errors.As(err, &nodeErr) { ... }
//
// or walk them all by unwrapping the joined error (Unwrap() []error).
type NodeError struct {
	// Index is the node's position in the clients given to redlock.New.
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

// NodeErrors returns the [*NodeError]s in err's tree, in the order
// [errors.Join] holds them: one per node that failed in the operation that
// returned err before its outcome was certain. A wait cut short in an
// attempt holds two attempts' (see ErrNotAcquired): a node that failed in
// both is named once, by the first found. errors.As finds only the first.
func NodeErrors(err error) []*NodeError {
	var out []*NodeError
	var walk func(error)
	walk = func(err error) {
		if ne, ok := err.(*NodeError); ok { //nolint:errorlint // walking the tree by hand
			if !slices.ContainsFunc(out, func(o *NodeError) bool { return o.Index == ne.Index }) {
				out = append(out, ne)
			}
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

// ErrNodeTimeout is the cause inside a [*NodeError] when a node did not
// answer within the node timeout (see redlock.WithNodeTimeout).
var ErrNodeTimeout = node.ErrNodeTimeout

// ErrNodeDown is the cause inside a [*NodeError] when a request was not
// sent because the node is down: it recently timed out or could not be
// reached, and has not answered since (see redlock.Redlock.Health). The error
// also says for how long (since the first failure this process saw, see
// [NodeHealth.Since]), and why. Nothing was sent, so the request cannot
// have taken effect. A down node is probed in the background and used
// again as soon as it answers.
var ErrNodeDown = node.ErrNodeDown

// ErrNodeRecovering is the cause inside a [*NodeError] when a node refused
// an acquisition because it has been up for less than the restart delay
// (see redlock.WithRestartDelay): it may have forgotten locks it granted before a
// restart. The node changed nothing.
var ErrNodeRecovering = node.ErrNodeRecovering

// ErrNotReplicated is the cause inside a [*NodeError] when, with
// redlock.WithReplicaAck, a node granted or extended the lock (or recorded its
// fencing token) but fewer of its replicas than asked acknowledged the
// write within the timeout: the node does not count for that operation,
// as a failed node does not. The message says how many did.
var ErrNotReplicated = node.ErrNotReplicated
