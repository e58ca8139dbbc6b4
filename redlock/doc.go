// Package redlock implements Redlock: one lock held by majority across N
// independent Redis masters, so that it stays available while a minority of
// them are down, slow or restarting.
//
// # Use
//
//	rl, err := redlock.New(clients) // one go-redis client per master, default options
//	mu, err := rl.NewMutex("orders:42", redlock.WithTTL(10*time.Second))
//	if err := mu.LockWithin(ctx, 5*time.Second); err != nil { ... }
//	defer mu.Unlock(context.WithoutCancel(ctx))
//	// work until mu.Until(), or mu.Extend(ctx) before it
//
// [Redlock.Do] acquires, renews ([WithRenewal]) and releases around a
// function, and cancels its context when the lock is lost; a [Mutex]
// reports a loss through [Mutex.Done] and [Mutex.Err]. Waiting Locks take
// turns, each woken when a release names it ([WithNotification]).
// [WithReentrant] makes the Mutex the lock's owner, with a hold count;
// [WithFencing] gives each acquisition a token ([Mutex.Fence]) for the
// resource to refuse stale holders ([SetFenced]); [WithRestartDelay] keeps
// a freshly restarted node from voting. [Redlock.NewRWMutex],
// [Redlock.NewSemaphore] (K holders at once) and [Redlock.NewMultiMutex]
// (several names as one) are the other primitives. What the library
// reports (each node's health and audit, what the nodes hold for a name,
// the calls a report.Observer sees) is in package
// github.com/redlock-go/redlock/redlock/report.
//
// # The algorithm
//
// An acquisition notes its start on the monotonic clock, asks every node
// at once for the key (SET name token NX PX ttl, or a script), each call
// bounded by the node timeout, and decides as soon as the outcome is
// certain. It holds the lock only with a quorum of N/2+1 grants and
// validity left: TTL - elapsed - (TTL × drift factor + 2ms). A failed
// attempt releases on every node that may hold its token. Release and
// extend act only on a key that still holds the caller's token. A down
// node is skipped until it answers a background probe, and a release it
// missed is delivered when it does.
//
// # What it guarantees, and what it does not
//
// While a holder's validity lasts ([Mutex.Until]), no other client holds a
// quorum for the same name, provided that few enough of the nodes that
// hold the key lose it meanwhile (a restart without persistence, a clock
// jumping forward) and that the nodes' clocks run at most the drift
// factor faster than this process's. It cannot stop a holder from acting
// after its validity (a paused process, a delayed request): have the
// resource refuse stale holders with fencing tokens where that matters.
// docs/ALGORITHM.md states each guarantee, its limits and the fencing
// token's proof.
package redlock
