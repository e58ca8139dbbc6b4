package redlock

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redlock-go/redlock/redlock/internal/quorum"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/node/nodetest"
)

// acquires counts the acquisitions the fakes were sent.
func acquires(fs []*nodetest.Fake) (n int) {
	for _, f := range fs {
		n += f.Count("acquire")
	}
	return n
}

// handedOver runs a holder's Unlock to a waiter of its own process that
// has waited for wait; it returns when the release was sent, the waiter's
// Mutex and its Lock's error.
func handedOver(ctx context.Context, t *testing.T, r *Redlock, wait time.Duration, opts ...LockOption) (time.Time, *Mutex, error) {
	t.Helper()
	holder := newFakeMutex(t, r, "k")
	require.NoError(t, holder.Lock(t.Context()))
	synctest.Wait() // held on every node
	waiter := newFakeMutex(t, r, "k", opts...)
	got := make(chan error, 1)
	go func() { got <- waiter.Lock(ctx) }()
	time.Sleep(wait)
	synctest.Wait() // queued and subscribed
	unlocked := time.Now()
	require.NoError(t, holder.Unlock(t.Context()))
	err := <-got
	synctest.Wait()
	return unlocked, waiter, err
}

// A waiter handed the lock by every node takes it with no attempt, and
// its validity counts from its registration, before the release: the keys
// handed to it were set after that.
func TestHandoffValidityCountsFromRegistration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		unlocked, w, err := handedOver(t.Context(), t, r, time.Second, WithRetryDelay(time.Hour, time.Hour))
		require.NoError(t, err)
		// 5 for the holder's attempt, 5 for the waiter's first; an attempt
		// after the handoff would be 5 more.
		assert.Equal(t, 10, acquires(fs), "no attempt after the handoff")
		assert.True(t, w.Until().Before(unlocked.Add(defaultTTL-time.Second/2)), "validity from the registration, a second before the release: %v", w.Until().Sub(unlocked))
		assert.True(t, w.Until().After(unlocked.Add(defaultTTL-2*time.Second)), "%v", w.Until().Sub(unlocked))
		// The quorum that handed it over holds the waiter's token. A node
		// whose release came after the quorum either handed the lock over
		// too or, when the winner's exit from its queue came first, left
		// it free: both orders are right, and neither lets anyone else in.
		holds := 0
		for _, f := range fs {
			v, ok := f.Get("k")
			assert.True(t, !ok || v == tokenOf(w), "%s holds %q: the waiter's token or nothing", f.Name, v)
			if ok {
				holds++
			}
		}
		assert.GreaterOrEqual(t, holds, quorum.Majority(len(fs)), "a quorum holds the waiter's token")
		require.NoError(t, w.Unlock(t.Context()))
	})
}

// A waiter that has waited longer than half the TTL without polling makes
// an attempt with the token it was handed: the keys are re-armed, and the
// validity counts from the attempt.
func TestHandoffAfterLongWaitAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		unlocked, w, err := handedOver(t.Context(), t, r, defaultTTL*3/5, WithRetryDelay(time.Hour, time.Hour))
		require.NoError(t, err)
		assert.Equal(t, 15, acquires(fs), "an attempt on every node after the handoff")
		assert.False(t, w.Until().Before(unlocked.Add(defaultTTL-time.Second)), "validity from the attempt: %v", w.Until().Sub(unlocked))
		require.NoError(t, w.Unlock(t.Context()))
	})
}

// Handed the lock by fewer nodes than a quorum, a waiter makes an attempt
// with the token: those nodes grant it, the others are asked.
func TestHandoffBelowQuorumAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		for _, f := range fs[2:] {
			f.Faults(func(n *nodetest.Fake) { n.Mute = true }) // their handoffs are never heard
		}
		_, w, err := handedOver(t.Context(), t, r, time.Second, WithRetryDelay(time.Hour, time.Hour))
		require.NoError(t, err)
		assert.Equal(t, 15, acquires(fs), "an attempt after the two handoffs")
		for _, f := range fs {
			v, _ := f.Get("k")
			assert.Equal(t, tokenOf(w), v, "%s", f.Name)
		}
		require.NoError(t, w.Unlock(t.Context()))
	})
}

// Handed the lock by the near nodes, a waiter waits for the far ones
// beyond the 5 ms of its own window, as long as their round trip, rather
// than make an attempt that costs another: across data centres the
// handoffs of one release come a round trip apart.
func TestHandoffWaitsForFarNodes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		for _, f := range fs[2:] {
			f.Faults(func(n *nodetest.Fake) { n.Delay = 20 * time.Millisecond })
		}
		_, w, err := handedOver(t.Context(), t, r, time.Second, WithRetryDelay(time.Hour, time.Hour))
		require.NoError(t, err)
		assert.Equal(t, 10, acquires(fs), "no attempt after the handoffs, 20 ms apart")
		require.NoError(t, w.Unlock(t.Context()))
	})
}

// A waiter that gives up after some nodes handed it the lock, before an
// attempt with the token, releases it there: nothing stays held until the
// TTL.
func TestHandoffGivenUpIsReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		for _, f := range fs[2:] {
			f.Faults(func(n *nodetest.Fake) { n.Mute = true })
		}
		// It gives up within the window in which it waits for more
		// handoffs after the first.
		ctx, cancel := context.WithTimeout(t.Context(), time.Second+handoffWindow/2)
		defer cancel()
		_, _, err := handedOver(ctx, t, r, time.Second, WithRetryDelay(time.Hour, time.Hour))
		require.ErrorIs(t, err, ErrNotAcquired)
		for _, f := range fs {
			_, held := f.Get("k")
			assert.False(t, held, "%s: released", f.Name)
		}
	})
}

// Handoffs pass the identity rule that attempts pass: two configured nodes
// found to be one server (here only after the first acquisition's wait
// for identities gave up on them) would count that server's one handoff
// twice. The waiter does not take the lock with them; its attempt with
// the token is refused as every attempt then is.
func TestHandoffVotesOfOneServerDoNotCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3)
		for _, f := range []*nodetest.Fake{fs[0], fs[2]} {
			f.Faults(func(n *nodetest.Fake) {
				n.IDs = []string{"run-shared"}
				n.OpDelay = map[string]time.Duration{"identify": 500 * time.Millisecond}
			})
		}
		holder := newFakeMutex(t, r, "k")
		require.NoError(t, holder.Lock(t.Context()), "identities not known yet")
		waiter := newFakeMutex(t, r, "k", WithRetryDelay(time.Hour, time.Hour))
		got := make(chan error, 1)
		go func() { got <- waiter.Lock(t.Context()) }()
		time.Sleep(time.Second) // queued; the identities have come in since
		synctest.Wait()
		require.NoError(t, holder.Unlock(t.Context()))
		err := <-got
		require.ErrorIs(t, err, ErrInvalidArgument, "nodes 0 and 2 are one server")
		assert.ErrorContains(t, err, "same Redis server")
	})
}

// A handoff that reaches this process after its wait ended is released
// as an orphan. A node that is down to this process then (a process paused
// for longer than its waits: every node timed out) is owed the release,
// delivered once it answers again: dropped, the key held the lock for no
// one until its TTL, and this process's own next TryLock was refused as
// held by another (the simulator's seed 1010).
func TestOrphanReleaseOwedToADownNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3)
		fs[0].Set("k", "handed", time.Minute) // handed over to a wait that has ended
		fs[0].Faults(func(n *nodetest.Fake) { n.Hang = make(chan struct{}) })
		require.NoError(t, newFakeMutex(t, r, "a").TryLock(t.Context()), "nodes 1 and 2")
		time.Sleep(2 * defaultNodeTimeout)
		require.NoError(t, newFakeMutex(t, r, "b").TryLock(t.Context()), "nodes 1 and 2")
		require.True(t, r.Health()[0].Down, "node 0 is down to this process")
		r.e.Orphans([]int{0}, "k", "handed", time.Minute, defaultNodeTimeout)
		fs[0].Unhang()
		fs[0].Faults(func(n *nodetest.Fake) { n.Hang = nil })
		require.Eventually(t, func() bool {
			_, held := fs[0].Get("k")
			return !held
		}, 10*time.Second, 10*time.Millisecond, "the orphan's release reached node 0 once it answered")
	})
}

// A node whose key was gone when the holder released (it expired there,
// or the node missed the handoff that gave the holder the lock) hands the
// free lock over all the same: otherwise it would be left out of every
// later handoff.
func TestHandoffIncludesNodeLeftOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		holder := newFakeMutex(t, r, "k")
		require.NoError(t, holder.Lock(t.Context()))
		synctest.Wait()
		fs[0].Faults(func(n *nodetest.Fake) { delete(n.Data, "k") })
		waiter := newFakeMutex(t, r, "k", WithRetryDelay(time.Hour, time.Hour))
		got := make(chan error, 1)
		go func() { got <- waiter.Lock(t.Context()) }()
		time.Sleep(time.Second)
		synctest.Wait()
		_, held := fs[0].Get("k")
		require.False(t, held, "free on node 0: the waiter's failed first attempt was undone there")
		// Node 0 applies the release first: the waiter, handed the lock by
		// the others within the handoff window, leaves the queues only
		// after that (its exit, sent in the background, could otherwise
		// reach node 0 first, which then has no one to hand over to).
		for _, f := range fs[1:] {
			f.Faults(func(n *nodetest.Fake) { n.OpDelay = map[string]time.Duration{"release": handoffWindow / 2} })
		}
		require.NoError(t, holder.Unlock(t.Context()))
		require.NoError(t, <-got)
		synctest.Wait()
		v, _ := fs[0].Get("k")
		assert.Equal(t, tokenOf(waiter), v, "handed over where the holder had no key")
		require.NoError(t, waiter.Unlock(t.Context()))
	})
}

// The clock guard judges a handoff as it judges a reply: the handoffs of
// nodes whose clocks are a minute off do not count, and the attempt that
// follows is refused by them too, after a short wait (the node's time
// checked as a reply's) and after a long one (checked without being
// recorded).
func TestHandoffFromSkewedNodesDoesNotCount(t *testing.T) {
	for _, wait := range []time.Duration{500 * time.Millisecond, 3 * time.Second} {
		t.Run(wait.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r, fs := newFakeRedlock(t, 5)
				holder := newFakeMutex(t, r, "k")
				require.NoError(t, holder.Lock(t.Context()))
				synctest.Wait()
				waiter := newFakeMutex(t, r, "k", WithRetryDelay(time.Hour, time.Hour))
				ctx, cancel := context.WithTimeout(t.Context(), wait+2*time.Second)
				defer cancel()
				got := make(chan error, 1)
				go func() { got <- waiter.Lock(ctx) }()
				time.Sleep(wait)
				synctest.Wait()
				for _, f := range fs[:3] {
					f.Faults(func(n *nodetest.Fake) { n.ClockOffset = time.Minute })
				}
				require.NoError(t, holder.Unlock(t.Context()))
				require.ErrorIs(t, <-got, ErrNotAcquired, "three votes refused: no quorum")
				synctest.Wait()
				for _, f := range fs {
					_, held := f.Get("k")
					assert.False(t, held, "%s: the waiter's token undone", f.Name)
				}
			})
		})
	}
}

// On a Redis Cluster a message reaches every master's subscribers, while
// PUBLISH and PUBSUB NUMSUB count those of the master that runs the
// release (nodetest's Elsewhere). A release there hands nothing over
// unless its own server counts the waiter's process: a waiter that heard
// a handoff holds the key on that node, and no one else can take the
// lock while it holds it.
func TestHandoffOnClusterHoldsTheKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		other, _ := newRedlock(nodetest.Nodes(fs)) // another process on the same nodes
		t.Cleanup(func() { require.NoError(t, other.Close(context.Background())) })
		for _, f := range fs {
			f.Faults(func(n *nodetest.Fake) { n.Elsewhere = true })
		}
		_, w, err := handedOver(t.Context(), t, r, time.Second, WithRetryDelay(time.Hour, time.Hour))
		require.NoError(t, err)
		for _, f := range fs {
			v, _ := f.Get("k")
			assert.Equal(t, tokenOf(w), v, "%s holds the waiter's token", f.Name)
		}
		intruder := newFakeMutex(t, other, "k")
		assert.ErrorIs(t, intruder.TryLock(t.Context()), ErrNotAcquired, "the lock is held")
		require.NoError(t, w.Unlock(t.Context()))
	})
}

// handoffWindow is how long a waiter that heard one node hand it the lock
// waits for the others (internal/turn, whose TestBounds pins it).
const handoffWindow = 5 * time.Millisecond

// A Lock that queued, then won with an attempt of its own, leaves the
// nodes' queues in the background. An Unlock right after must not hand
// the lock over to that wait, which has ended: the release removes the
// holder's own member first, and frees the lock on the quorum that
// answered (a handoff to a wait that ended is orphaned, and holds the
// lock until the orphan's release, or its TTL after Close).
func TestUnlockHandsNothingToItsOwnEndedWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		for _, f := range fs {
			f.Set("k", "other", time.Hour)
		}
		m := newFakeMutex(t, r, "k")
		got := make(chan error, 1)
		go func() { got <- m.Lock(t.Context()) }()
		synctest.Wait() // refused, queued and subscribed on every node, in its back-off
		for _, f := range fs {
			f.Faults(func(n *nodetest.Fake) { n.OpDelay = map[string]time.Duration{"queue": time.Second} }) // the wait's exit lands late
			f.Faults(func(n *nodetest.Fake) { delete(n.Data, "k") })                                        // free: the next attempt wins by itself
		}
		require.NoError(t, <-got)
		require.NoError(t, m.Unlock(t.Context()))
		held := 0
		for _, f := range fs {
			if _, ok := f.Get("k"); ok {
				held++
			}
		}
		assert.Less(t, held, quorum.Majority(len(fs)), "the lock is free on a quorum when Unlock returns")
	})
}

// A handed token's failed attempt that no competitor won (a split: two
// holders of two nodes and one) hands back what it took, announced, to
// each node's next waiter (Mutex.tryHanded); the nodes it took are free or
// handed on, never left with its token.
func TestHandedAttemptAfterASplitHandsOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		for i, h := range []string{"a", "a", "b"} {
			fs[2+i].Set("k", h, time.Minute)
		}
		for _, f := range fs {
			f.Faults(func(n *nodetest.Fake) { n.Queues = map[string]map[string]int64{node.QueueKey("k"): {"next": 1}} })
		}
		m := newFakeMutex(t, r, "k")
		_, err := m.tryHanded(t.Context(), "t", "", "", nil)
		require.ErrorIs(t, err, ErrNotAcquired)
		synctest.Wait()
		for i, f := range fs[:2] {
			v, _ := f.Get("k")
			assert.NotEqual(t, "t", v, "node %d keeps the failed attempt's token", i)
			f.Faults(func(n *nodetest.Fake) { assert.Positive(t, n.Published, "node %d: its undo announced nothing", i) })
		}
	})
}
