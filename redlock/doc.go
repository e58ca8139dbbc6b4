// Package redlock implements Redlock: one lock held by majority across N
// independent Redis masters, so that it stays available while a minority of
// them are down, slow or restarting.
//
// # Use
//
//	rl, err := redlock.New([]redis.UniversalClient{c1, c2, c3, c4, c5})
//	mu, err := rl.NewMutex("orders:42", redlock.WithTTL(10*time.Second))
//	if err := mu.Lock(ctx); err != nil { ... }
//	defer mu.Unlock(context.WithoutCancel(ctx))
//	// work until mu.Until(), or Extend before it
//
// To hold a lock while work runs, [Redlock.Do] acquires, renews (see
// [WithRenewal]) and releases, and cancels the work's context when the lock
// is lost; a [Mutex] reports loss through [Mutex.Done] and [Mutex.Err].
// Waiting Locks are woken when a release is announced ([WithNotification]);
// [WithReentrant] makes the Mutex value the lock's owner, with a hold count.
//
// # The algorithm
//
// An acquisition notes its start on the monotonic clock, sends
// SET name token NX PX ttl with a fresh random token to every node at once
// (each call bounded by the node timeout), and decides as soon as the outcome
// is certain: granted by a quorum of N/2+1, or no longer reachable. It holds
// the lock only with a quorum and validity left, validity being
// TTL - elapsed - (TTL × drift factor + 2ms). A failed attempt releases on
// every node that may hold its token. Release and extend are Lua scripts
// that act only on a key that still holds the caller's token.
//
// # What it guarantees, and what it does not
//
// While a holder's validity window lasts ([Mutex.Until]), no other client
// holds a quorum for the same name, provided that: fewer than a quorum of
// nodes lose the key during the window (a node restarted without persistence
// forgets locks at once), the nodes' clocks run at most the drift factor
// faster than this process's monotonic clock, and no node's clock jumps.
//
// It cannot stop a holder from acting after its window: a process paused
// (garbage collection, a stalled VM) or a request delayed in the network
// past [Mutex.Until] may still reach the resource after another holder took
// over. Check [Mutex.Until] before each step, keep the work short against the
// TTL, and have the resource reject stale holders where correctness matters.
package redlock
