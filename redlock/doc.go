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
// To hold a lock while work runs, [Redlock.Do] acquires, renews (see
// [WithRenewal]) and releases, and cancels the work's context when the lock
// is lost; a [Mutex] reports loss through [Mutex.Done] and [Mutex.Err].
// Waiting Locks queue on the nodes and take turns, each woken when a
// release names it ([WithNotification]);
// [WithReentrant] makes the Mutex value the lock's owner, with a hold count.
// [WithFencing] gives each acquisition a fencing token ([Mutex.Fence]) for
// the resource to reject stale holders ([SetFenced]); [WithRestartDelay]
// keeps a freshly restarted node from voting.
//
// # Counting semaphores
//
// [Redlock.NewSemaphore] returns a [Semaphore]: up to K holders at once,
// each admitted by a quorum of nodes that each admit at most K. A majority
// is not enough for K > 1, since K+1 holders could each find a majority
// while every node counts only K. K+1 holders on q nodes each fill
// (K+1)·q places of N·K, so the default quorum is the least q with
// (K+1)·q > N·K, N·K/(K+1)+1 (the majority for K = 1); [WithQuorum] lowers
// it for availability, at the cost of up to N·K/q holders.
//
// # The algorithm
//
// An acquisition notes its start on the monotonic clock, sends
// the equivalent of SET name token NX GET PX ttl (a script) with a fresh
// random token to every node at
// once (each call bounded by the node timeout), and decides as soon as the
// outcome is certain: granted by a quorum of N/2+1, or no longer reachable.
// It holds the lock only with a quorum and validity left, validity being
// TTL - elapsed - (TTL × drift factor + 2ms). A failed attempt releases on
// every node that may hold its token, each release sent only once that
// node's SET has returned. Release and extend are Lua scripts that act only
// on a key that still holds the caller's token.
//
// When contenders split the nodes, each refusal names the token that holds
// the node; about one round trip later the attempt that is outranked (a
// competitor holds more nodes, or as many with a greater token) gives way
// and releases, and the one that ranks first asks those nodes again, so
// neither waits for slow or far nodes. TryLock settles such a split: the
// others try again after a short random back-off, so that a free lock goes
// to one of those who try. Giving way is failing, which is always safe.
//
// # Node health
//
// A node that timed out or refused connections is down: operations skip it
// at once, sending nothing, until it answers a background probe
// ([Redlock.Health]). A release that could not be delivered is owed to its
// node and delivered as soon as it answers again.
//
// # What it guarantees, and what it does not
//
// While a holder's validity window lasts ([Mutex.Until]), no other client
// holds a quorum for the same name, provided that: few enough of the nodes
// holding the key lose it during the window (a node restarted without
// persistence forgets locks at once, a clock jumping forward expires them):
// with the key on H of N nodes and quorum Q, fewer than H + Q - N, which is
// two of five when all five hold it but none when a bare quorum of three
// does, as is common under contention; the nodes' clocks run at most the
// drift factor faster than this process's monotonic clock; and no node's
// clock jumps.
//
// It cannot stop a holder from acting after its window: a process paused
// (garbage collection, a stalled VM) or a request delayed in the network
// past [Mutex.Until] may still reach the resource after another holder took
// over. Check [Mutex.Until] before each step, keep the work short against the
// TTL, and have the resource reject stale holders where correctness matters:
// that is what fencing is for.
//
// # Fencing tokens
//
// With [WithFencing] an acquisition takes two round trips. The first is the
// acquisition above, done by a script that also returns the name's counter
// on the node (a key without expiry, name + ":redlock:fence"), read in the
// same atomic step as the grant or refusal. Once a quorum granted, the token
// is T = 1 + the highest counter returned by every node that answered. The
// second round trip raises the counter to T on every node (never lowering
// it) and reports whether the node still held the lock when it did; the
// acquisition succeeds only if a quorum did, with validity left, and is
// released everywhere otherwise.
//
// Claim: if acquisition A succeeded (TryLock returned) before acquisition B
// began, then B's token is greater than A's, provided that some node in both
// W, the nodes that recorded A's token while holding A's lock, and G, the
// nodes that granted B, kept its data from A's record to B's grant.
//
// Why: W and G are both quorums of the same N nodes, so they share a node x.
// On x, A's key was present when A's token was recorded, and B's SET NX
// found no key. B began after A's record, so B's grant on x came after it,
// once A's key had gone; the counter on x was then at least A's token, since
// it never decreases. B read it in its grant, so B's token exceeds A's. The
// same reasoning orders any two successful acquisitions, whatever their
// timing, as their keys were ordered on x: fencing holds even when the
// validity windows themselves overlapped (a clock jump, a pause, a lost key),
// which is exactly when it is needed.
//
// Data loss: the proviso fails only if every node shared by W and G lost its
// counter (a restart without persistence, FLUSHALL, eviction). The record
// goes to every node, and TryLock waits for the nodes that answer about as
// fast as the quorum did: with all nodes up and alike, A's token is on all
// N when TryLock returns, and any minority may lose its data, since G still
// contains a node that kept it. When some nodes missed A's record (down,
// partitioned, slow), fewer losses are tolerated, down to none when W and G
// share a single node; W is always at least a quorum. [WithRestartDelay] does not restore a lost counter: it only keeps
// the node from voting for a while. Keep counters safe with persistence
// (appendonly yes with appendfsync always) and maxmemory-policy noeviction
// or volatile-* (counters have no TTL, so volatile policies never evict
// them).
//
// Costs: one more round trip per acquisition (to the quorum-th fastest
// node), one small key per fenced name per node that stays until deleted,
// and tokens up to 2^53 (scripts compare them as Lua numbers). Gaps in the
// sequence are normal: failed acquisitions may raise counters.
//
// # Restarts
//
// A node restarted without persistence has forgotten the locks it granted:
// with one such node, a second client can gather a quorum while the first
// still holds the lock, and both validity windows overlap. The Redlock
// description asks operators to keep a restarted node down for the longest
// TTL in use. [WithRestartDelay] does it from the client side: the
// acquisition script reads the node's uptime (INFO uptime_in_seconds) and
// refuses while it is below the delay, so no client needs to have seen the
// restart. uptime_in_seconds is computed from the node's wall clock; a jump
// of that clock during the delay shortens or lengthens it. Nodes configured
// with appendonly yes and appendfsync always keep their keys across a
// restart (TTLs keep running while down) and need no delay.
package redlock
