package redlock

import (
	"context"
	"errors"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/node/nodetest"

	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReentrantHoldCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		m := newFakeMutex(t, r, "k", WithReentrant())
		require.NoError(t, m.Lock(t.Context()))
		require.NoError(t, m.Lock(t.Context()), "the owner takes it again")
		require.NoError(t, m.TryLock(t.Context()))
		synctest.Wait()
		for _, f := range fs {
			var e nodetest.Entry
			f.Faults(func(n *nodetest.Fake) { e = n.Data["k"] })
			assert.True(t, e.Hash)
			assert.Equal(t, 3, e.Holds, "%s: hold count on the node", f.Name)
		}
		other := newFakeMutex(t, r, "k", WithReentrant())
		require.ErrorIs(t, other.TryLock(t.Context()), ErrNotAcquired, "another owner is refused")
		plain := newFakeMutex(t, r, "k")
		require.ErrorIs(t, plain.TryLock(t.Context()), ErrNotAcquired, "a plain mutex is refused")

		require.NoError(t, m.Unlock(t.Context()))
		require.NoError(t, m.Unlock(t.Context()))
		synctest.Wait()
		assert.Equal(t, 5, keyOn(fs, "k"), "held until the last Unlock")
		require.ErrorIs(t, other.TryLock(t.Context()), ErrNotAcquired)
		require.NoError(t, m.Unlock(t.Context()))
		synctest.Wait()
		assert.Zero(t, keyOn(fs, "k"), "the key goes with the last hold")
		require.ErrorIs(t, m.Unlock(t.Context()), ErrNotHeld, "one Unlock too many")
		require.NoError(t, other.TryLock(t.Context()))
		require.NoError(t, other.Unlock(t.Context()))
	})
}

func TestReentrantLastUnlockDropsDivergentHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		m := newFakeMutex(t, r, "k", WithReentrant())
		require.NoError(t, m.Lock(t.Context()))
		synctest.Wait()
		fs[4].Faults(func(n *nodetest.Fake) { n.Err = errBoom })
		require.NoError(t, m.Lock(t.Context())) // node 4 misses a hold...
		fs[4].Faults(func(n *nodetest.Fake) { n.Err = nil })
		fs[0].Faults(func(n *nodetest.Fake) { n.Err = errBoom })
		require.NoError(t, m.Unlock(t.Context())) // ...node 0 misses a release
		fs[0].Faults(func(n *nodetest.Fake) { n.Err = nil })
		synctest.Wait()
		require.NoError(t, m.Unlock(t.Context()))
		synctest.Wait()
		assert.Zero(t, keyOn(fs, "k"), "the last Unlock drops every hold, whatever the counts")
	})
}

func TestReentrantRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3)
		m := newFakeMutex(t, r, "k", WithReentrant(), WithTTL(300*time.Millisecond), WithRenewal())
		require.NoError(t, m.Lock(t.Context()))
		require.NoError(t, m.Lock(t.Context()))
		time.Sleep(2 * time.Second)
		assert.NoError(t, m.Err())
		assert.Equal(t, 3, keyOn(fs, "k"))
		require.NoError(t, m.Unlock(t.Context()))
		require.NoError(t, m.Unlock(t.Context()))
		synctest.Wait()
		assert.Zero(t, keyOn(fs, "k"))
	})
}

// A failed re-lock must not take away a hold the owner already had on a
// node that the re-lock never reached.
func TestReentrantFailedRelockKeepsHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3)
		m := newFakeMutex(t, r, "k", WithReentrant())
		require.NoError(t, m.Lock(t.Context()))
		synctest.Wait()
		for _, f := range fs[1:] { // the re-lock fails there without effect; releases work
			f.Faults(func(n *nodetest.Fake) { n.Err, n.ErrOnly = errBoom, "acquire" })
		}
		require.ErrorIs(t, m.TryLock(t.Context()), ErrNotAcquired)
		synctest.Wait()
		for _, f := range fs[1:] {
			f.Faults(func(n *nodetest.Fake) { n.Err, n.ErrOnly = nil, "" })
		}
		assert.Equal(t, 3, keyOn(fs, "k"), "the failed re-lock released the owner's own holds")
		other := newFakeMutex(t, r, "k", WithReentrant())
		require.ErrorIs(t, other.TryLock(t.Context()), ErrNotAcquired, "two holders")
		require.NoError(t, m.Unlock(t.Context()))
	})
}

// Two goroutines' first Lock on one reentrant Mutex: the same owner, so two
// holds, and the lock stays until both Unlock.
func TestReentrantConcurrentFirstLocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3)
		for _, f := range fs {
			f.Faults(func(n *nodetest.Fake) { n.Delay = time.Millisecond })
		}
		m := newFakeMutex(t, r, "k", WithReentrant())
		errs := make(chan error, 2)
		for range 2 {
			go func() { errs <- m.TryLock(t.Context()) }()
		}
		require.NoError(t, <-errs)
		require.NoError(t, <-errs)
		require.NoError(t, m.Unlock(t.Context()))
		synctest.Wait()
		assert.Equal(t, 3, keyOn(fs, "k"), "one Unlock freed a lock held twice")
		assert.NoError(t, m.Err())
		require.NoError(t, m.Unlock(t.Context()))
		synctest.Wait()
		assert.Zero(t, keyOn(fs, "k"))
	})
}

// Dropping one hold never frees the lock, even if a release is applied
// twice on a node (a client that resends it).
func TestReentrantDoubleReleaseKeepsLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, fs := newFakeRedlock(t, 1)
		f := fs[0]
		req := &node.Acquire{Shape: node.Reentrant, Key: "k", Token: "owner", TTL: time.Second}
		for range 2 {
			rep := callOne(f, req)
			require.NoError(t, rep.Err)
			require.True(t, rep.OK)
		}
		for range 3 { // one release too many, as a resend would do
			rep := callOne(f, &node.Release{Shape: node.Reentrant, Key: "k", Token: "owner", Drop: node.DropOne})
			require.NoError(t, rep.Err)
			assert.True(t, rep.OK)
		}
		assert.Equal(t, 1, keyOn(fs, "k"))
		rep := callOne(f, &node.Release{Shape: node.Reentrant, Key: "k", Token: "owner", Drop: node.DropAll})
		require.NoError(t, rep.Err)
		assert.True(t, rep.OK)
		assert.Zero(t, keyOn(fs, "k"))
	})
}

// A re-lock racing with the final Unlock never leaves the key behind: where
// the release came first, the re-lock finds no key and creates none.
func TestReentrantRelockRacingUnlockLeavesNoKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3)
		m := newFakeMutex(t, r, "k", WithReentrant())
		require.NoError(t, m.Lock(t.Context()))
		synctest.Wait()
		for _, f := range fs { // the re-lock's scripts arrive late
			f.Faults(func(n *nodetest.Fake) { n.OpDelay = map[string]time.Duration{"acquire": 50 * time.Millisecond} })
		}
		relocked := make(chan error, 1)
		go func() { relocked <- m.TryLock(t.Context()) }() // one attempt: Lock would retry and rightly win
		time.Sleep(10 * time.Millisecond)
		require.NoError(t, m.Unlock(t.Context())) // the final release, first on every node
		assert.ErrorIs(t, <-relocked, ErrNotAcquired)
		time.Sleep(time.Second)
		synctest.Wait()
		assert.Zero(t, keyOn(fs, "k"), "a re-lock re-created a released lock")
	})
}

// A re-lock waits, on each node, for the holds already on their way there:
// one that overtook the first SET would find no key and take no hold.
func TestReentrantRelockWaitsForFirstSet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3)
		m := newFakeMutex(t, r, "k", WithReentrant())
		fs[2].Faults(func(n *nodetest.Fake) { n.Delay = 50 * time.Millisecond })
		require.NoError(t, m.Lock(t.Context())) // decided by nodes 0 and 1
		fs[2].Faults(func(n *nodetest.Fake) { n.Delay = 0 })
		require.NoError(t, m.Lock(t.Context()))
		time.Sleep(time.Second)
		synctest.Wait()
		var holds int
		fs[2].Faults(func(n *nodetest.Fake) { holds = n.Data["k"].Holds })
		assert.Equal(t, 2, holds, "the re-lock overtook the first SET on the slow node")
		require.NoError(t, m.Unlock(t.Context()))
		require.NoError(t, m.Unlock(t.Context()))
	})
}

// A failed first acquisition of a reentrant lock frees the nodes that
// granted it: its undo must delete a hash whose only hold it created, or
// the lock stays taken there until the TTL.
func TestReentrantFailedFirstLockLeavesNoKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5, WithReentrant())
		for _, f := range fs[:3] {
			f.Faults(func(n *nodetest.Fake) {
				n.Data["k"] = nodetest.Entry{Value: "other-owner", Expires: time.Now().Add(time.Hour), Hash: true, Holds: 1}
			})
		}
		m := newFakeMutex(t, r, "k")
		require.ErrorIs(t, m.TryLock(t.Context()), ErrNotAcquired)
		synctest.Wait()
		assert.Zero(t, keyOn(fs[3:], "k"), "the two grants are undone")
	})
}

// A hold an earlier acquisition left on a node (its release failed there)
// is another's to the Mutex's next acquisition: it is neither counted nor
// re-armed, so that it ends with its TTL. Were it the owner's, every
// attempt would re-arm it, and owners that each left one on a node of
// their own would refuse one another for ever (the simulator found it).
func TestReentrantLeftHoldIsNotReArmed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3)
		m := newFakeMutex(t, r, "k", WithReentrant(), WithTTL(10*time.Second))
		require.NoError(t, m.Lock(t.Context()))
		synctest.Wait()
		left := fs[0].Expiry("k")
		fs[0].Faults(func(n *nodetest.Fake) { n.Err = errors.New("down") })
		require.NoError(t, m.Unlock(t.Context()), "released on 2 of 3")
		// Unlock returns at the quorum: node 0's call must have failed
		// before node 0 is healed, or it releases the hold after all.
		synctest.Wait()
		fs[0].Faults(func(n *nodetest.Fake) { n.Err = nil })

		time.Sleep(time.Second)
		require.NoError(t, m.Lock(t.Context()), "nodes 1 and 2")
		synctest.Wait()
		v, _ := fs[0].Get("k")
		assert.NotEqual(t, m.live().Token, v, "the left hold is not the new acquisition's")
		assert.Equal(t, left, fs[0].Expiry("k"), "nor re-armed by it")
		require.NoError(t, m.Unlock(t.Context()))
	})
}

// A reentrant Lock that queued, then won with an attempt of its own,
// leaves the nodes' queues in the background. Its Unlock right after
// names the next waiter, not that ended wait, whose announcement no one
// takes up: the next waiter would sleep out its back-off of seconds.
func TestReentrantUnlockNamesTheNextWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		for _, f := range fs {
			f.Set("k", "other", time.Hour)
		}
		first := newFakeMutex(t, r, "k", WithReentrant(), WithRetryDelay(10*time.Millisecond, 20*time.Millisecond))
		next := newFakeMutex(t, r, "k", WithReentrant(), WithRetryDelay(5*time.Second, 10*time.Second))
		gotFirst, gotNext := make(chan error, 1), make(chan error, 1)
		go func() { gotFirst <- first.Lock(t.Context()) }()
		synctest.Wait() // refused, queued and subscribed on every node
		go func() { gotNext <- next.Lock(t.Context()) }()
		synctest.Wait() // queued behind it, in a back-off of seconds
		for _, f := range fs {
			f.Faults(func(n *nodetest.Fake) { n.OpDelay = map[string]time.Duration{"queue": time.Second} }) // the wait's exit lands late
			f.Faults(func(n *nodetest.Fake) { delete(n.Data, "k") })                                        // free: first's next attempt wins by itself
		}
		require.NoError(t, <-gotFirst)
		start := time.Now()
		require.NoError(t, first.Unlock(t.Context()))
		require.NoError(t, <-gotNext)
		assert.Less(t, time.Since(start), time.Second, "the next waiter took the lock at the announcement, not after its back-off")
		require.NoError(t, next.Unlock(t.Context()))
	})
}

// TestReentrantReentryIsNotCourteous re-enters a reentrant lock that this
// process took right after another of its Mutexes released it to waiters:
// the courtesy (let the waiters just released go first) is not for the
// holder's own re-entry, which no waiter can take meanwhile. It once
// waited a queued back-off there, half the longest at least.
func TestReentrantReentryIsNotCourteous(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		other, err := newRedlock(nodetest.Nodes(fs)) // another process on the same nodes
		require.NoError(t, err)
		defer func() { require.NoError(t, other.Close(context.Background())) }()
		slow := WithRetryDelay(5*time.Second, 10*time.Second)
		first := newFakeMutex(t, r, "k", WithReentrant(), slow)
		next := newFakeMutex(t, r, "k", WithReentrant(), slow)
		far := newFakeMutex(t, other, "k", WithReentrant(), slow)
		require.NoError(t, first.Lock(t.Context()))
		gotNext, gotFar := make(chan error, 1), make(chan error, 1)
		go func() { gotNext <- next.Lock(t.Context()) }()
		synctest.Wait()              // refused, queued first
		time.Sleep(time.Millisecond) // far's wait begins later: its place is behind
		go func() { gotFar <- far.Lock(t.Context()) }()
		synctest.Wait()                               // queued behind it
		require.NoError(t, first.Unlock(t.Context())) // reaches the waiters: the courtesy begins
		require.NoError(t, <-gotNext)
		start := time.Now()
		require.NoError(t, next.Lock(t.Context()), "re-entry")
		assert.Less(t, time.Since(start), time.Millisecond, "the holder re-entered at once, without the courtesy's wait")
		require.NoError(t, next.Unlock(t.Context()))
		require.NoError(t, next.Unlock(t.Context()))
		require.NoError(t, <-gotFar)
		require.NoError(t, far.Unlock(t.Context()))
	})
}
