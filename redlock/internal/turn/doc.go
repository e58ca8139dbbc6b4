// Package turn is the wait for a lock: Waiting runs attempts until one
// succeeds (or its context, its attempt bound or a hopeless refusal ends
// it), and between them waits for the back-off or for a release announced
// on the nodes, queued in the name's queue of waiters; a plain lock's
// release may hand the lock over to the oldest queued waiter (handoff.go).
// turn.go states the whole policy, and the invariant that makes each vote
// true, in one comment.
//
// It stands on internal/lease (the Holder a won wait's lease goes to) and
// internal/engine (attempts, grants, the waiters' queue), and knows
// nothing of the facade.
package turn
