// Package engine is what every primitive of a Redlock runs on, under the
// public API: one acquisition (an attempt of an operation under its rule
// and quorum, fenced when won, undone when not), one release and one
// extension round, the lease a primitive value holds through its holder
// (validity, loss, renewal), the wait for a turn (the queue of waiters,
// the courtesy, the lock handed over), the identifier of the nodes'
// servers, the clock watch, and the lifetime of everything it starts
// (Engine.Close).
//
// It stands on internal/quorum (the pool, rounds and tallies), the nodes
// (internal/node) and the waiters (internal/waitq). It knows nothing of
// the facade: no option, Observer, public error type or audit. The facade
// hands it what it must tell (a holder's Events, the ReportFunc of node
// failures, the function that makes a node's failure into the public
// error, the Admission every acquisition passes) and exports its
// sentinels under their own names.
package engine
