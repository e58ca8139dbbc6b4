// Package engine is what every primitive of a Redlock runs on, under the
// public API: one acquisition (an attempt of an operation under its rule
// and quorum, fenced when won, undone when not), one release and one
// extension round, the back-off between attempts, the identifier of the
// nodes' servers, the clock watch, the record of the leases held, and the
// lifetime of everything it starts (Engine.Close).
//
// It stands on internal/quorum (the pool, rounds and tallies), the nodes
// (internal/node) and the waiters (internal/waitq). It knows nothing of
// the lease (internal/lease), the turn (internal/turn) or the facade: no
// option, Observer, public error type or audit. The layers above hand it
// what it must tell (the ReportFunc of node failures, the function that
// makes a node's failure into the public error, the Admission every
// acquisition passes, each lease as a Held) and the facade exports its
// sentinels under their own names.
package engine
