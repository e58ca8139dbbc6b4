// Package redlockotel reports what a [redlock.Redlock] does as
// OpenTelemetry metrics and spans: a [report.Observer] built on the
// OpenTelemetry API, given to redlock.New or NewMutex with
// [redlock.WithObserver].
//
//	obs, err := redlockotel.NewObserver() // the global providers
//	rl, err := redlock.New(clients, redlock.WithObserver(obs))
//	reg, err := obs.ObserveHealth(rl)     // optional: node health gauges
//	defer reg.Unregister()
//
// # Metrics
//
// Instruments of the meter named [ScopeName]; no lock name on any of them
// unless [WithLockNameAttribute] is given (names are unbounded):
//
//   - redlock.acquire.duration (histogram, s): one point per Lock or
//     TryLock call, from its start to its return, with redlock.outcome =
//     acquired, not_acquired, or canceled (the caller's context ended first).
//   - redlock.acquire.attempts (histogram, {attempt}): attempts per Lock or
//     TryLock call, with redlock.outcome.
//   - redlock.acquire.active (up-down counter, {call}): Lock and TryLock
//     calls in progress, the callers waiting for a lock.
//   - redlock.hold.duration (histogram, s): one point per acquisition when
//     it ends, from the start of the attempt that acquired it, with
//     redlock.end = unlocked or lost.
//   - redlock.lost (counter, {acquisition}): acquisitions lost.
//   - redlock.node.errors (counter, {error}): every node call that failed,
//     including those that ended after their operation had returned, with
//     server.address and error.type (see [ErrorType]).
//   - redlock.node.up (gauge, 1) and redlock.node.owed_releases (gauge,
//     {release}), per server.address, once [Observer.ObserveHealth] is
//     called: whether the node is up (1) or down and skipped (0), and how
//     many releases wait for it to answer again (see [redlock.Redlock.Health]).
//
// # Spans
//
// Spans of the tracer named [ScopeName], children of the span in the
// caller's context: redlock.Lock, redlock.TryLock, redlock.Unlock and
// redlock.Extend (renewal's extensions too, with redlock.renewal = true,
// under the context given to Lock). Attributes: redlock.lock.name,
// redlock.outcome, and for Lock and TryLock redlock.attempts; a failed call
// sets the span's status to Error with its message. Every node call of the
// operation that failed adds an event redlock.node.error (server.address,
// redlock.node.index, error.type, error.message); node calls carry the
// span in their context, so a go-redis tracing hook nests its spans under it.
package redlockotel
