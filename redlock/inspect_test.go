package redlock

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/node/nodetest"
	"github.com/redlock-go/redlock/redlock/report"
)

func TestInspectHeldAndFree(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		fs[3].Faults(func(n *nodetest.Fake) { n.Err = errBoom })
		m := newFakeMutex(t, r, "k", WithTTL(10*time.Second), WithFencing())
		require.NoError(t, m.Lock(t.Context()))
		time.Sleep(time.Second) // every node answered

		s, err := r.Inspect(t.Context(), "k")
		require.NoError(t, err)
		assert.Equal(t, "k", s.Name)
		assert.Equal(t, tokenOf(m), s.Holder)
		assert.Equal(t, 4, s.Held)
		assert.Equal(t, 3, s.Quorum)
		assert.True(t, s.Locked())
		assert.Equal(t, 4, s.Reachable())
		require.Len(t, s.Nodes, 5)
		for i, ns := range s.Nodes {
			assert.Equal(t, i, ns.Index)
			assert.Equal(t, fs[i].Name, ns.Addr)
			if i == 3 {
				var nodeErr *report.NodeError
				require.ErrorAs(t, ns.Err, &nodeErr)
				assert.Equal(t, 3, nodeErr.Index)
				assert.ErrorIs(t, ns.Err, errBoom)
				assert.False(t, ns.Held)
				continue
			}
			assert.NoError(t, ns.Err)
			assert.True(t, ns.Held)
			assert.Equal(t, 9*time.Second, ns.TTL)
			assert.Equal(t, tokenOf(m), ns.Holder)
			assert.Equal(t, 1, ns.Holds)
			assert.False(t, ns.Reentrant)
			assert.Equal(t, m.Fence(), ns.Fence)
		}
		fence := m.Fence()
		require.NoError(t, m.Unlock(t.Context()))
		synctest.Wait() // the releases still in flight

		s, err = r.Inspect(t.Context(), "k")
		require.NoError(t, err)
		assert.False(t, s.Locked())
		assert.Empty(t, s.Holder)
		assert.Zero(t, s.Held)
		for i, ns := range s.Nodes {
			if i == 3 {
				continue
			}
			assert.False(t, ns.Held)
			assert.Zero(t, ns.TTL)
			assert.Empty(t, ns.Holder)
			assert.Equal(t, fence, ns.Fence, "the counter outlives the lock")
		}
		for _, f := range fs {
			assert.Zero(t, f.Count("acquire")-1, "Inspect sends no acquisition")
		}
	})
}

func TestInspectReentrantAndSplit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		m := newFakeMutex(t, r, "re", WithReentrant())
		require.NoError(t, m.Lock(t.Context()))
		require.NoError(t, m.Lock(t.Context()))
		synctest.Wait() // the holds still in flight
		s, err := r.Inspect(t.Context(), "re")
		require.NoError(t, err)
		assert.Equal(t, 5, s.Held)
		for _, ns := range s.Nodes {
			assert.True(t, ns.Reentrant)
			assert.Equal(t, 2, ns.Holds)
			assert.Equal(t, m.live().Token, ns.Holder)
		}

		// Two holders split the nodes: the summary names the one on more.
		fs[0].Set("split", "a", time.Minute)
		fs[1].Set("split", "b", time.Minute)
		fs[2].Set("split", "b", time.Minute)
		s, err = r.Inspect(t.Context(), "split")
		require.NoError(t, err)
		assert.Equal(t, "b", s.Holder)
		assert.Equal(t, 2, s.Held)
		assert.False(t, s.Locked())
	})
}

func TestInspectSilentNodeTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3, WithNodeTimeout(50*time.Millisecond))
		fs[1].Faults(func(n *nodetest.Fake) { n.Delay = time.Hour })
		start := time.Now()
		s, err := r.Inspect(t.Context(), "k")
		require.NoError(t, err)
		assert.Equal(t, 50*time.Millisecond, time.Since(start), "one node timeout, not the silent node's delay")
		assert.ErrorIs(t, s.Nodes[1].Err, report.ErrNodeTimeout)
		assert.Equal(t, 2, s.Reachable())
		fs[1].Faults(func(n *nodetest.Fake) { n.Delay = 0 })
		// Close waits for a node call only as long as the library could
		// still wait for it: the silent call is the client's, and ends
		// when the client gives up (here, the hour passes).
		time.Sleep(time.Hour)
	})
}

func TestInspectAndForceUnlockBadInput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := newFakeRedlock(t, 3)
		//nolint:staticcheck // a nil context on purpose
		_, err := r.Inspect(nil, "k")
		require.ErrorIs(t, err, ErrInvalidArgument)
		_, err = r.Inspect(t.Context(), "")
		require.ErrorIs(t, err, ErrInvalidArgument)
		//nolint:staticcheck // a nil context on purpose
		_, err = r.ForceUnlock(nil, "k")
		require.ErrorIs(t, err, ErrInvalidArgument)
		_, err = r.ForceUnlock(t.Context(), "")
		require.ErrorIs(t, err, ErrInvalidArgument)

		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		s, err := r.Inspect(ctx, "k")
		require.ErrorIs(t, err, context.Canceled)
		require.NotNil(t, s, "the state read so far")

		require.NoError(t, r.Close(t.Context()))
		_, err = r.Inspect(t.Context(), "k")
		require.ErrorIs(t, err, ErrClosed)
		_, err = r.ForceUnlock(t.Context(), "k")
		require.ErrorIs(t, err, ErrClosed)
	})
}

func TestForceUnlock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		fs[4].Faults(func(n *nodetest.Fake) { n.Err = errBoom })
		holder := newFakeMutex(t, r, "k", WithFencing())
		require.NoError(t, holder.Lock(t.Context()))
		synctest.Wait() // the grants and records still in flight
		token, fence := tokenOf(holder), holder.Fence()

		// A waiter polling once a minute: only the announcement can wake it.
		other, err := newRedlock(nodetest.Nodes(fs), WithRetryDelay(time.Minute, time.Minute))
		require.NoError(t, err)
		defer func() { require.NoError(t, other.Close(context.Background())) }()
		waiter, err := other.NewMutex("k", WithFencing())
		require.NoError(t, err)
		got := make(chan time.Time, 1)
		go func() {
			assert.NoError(t, waiter.Lock(t.Context()))
			got <- time.Now()
		}()
		time.Sleep(time.Second) // queued and subscribed

		forced := time.Now()
		out, err := r.ForceUnlock(t.Context(), "k")
		require.NoError(t, err, "a failed node is reported per node")
		require.Len(t, out, 5)
		for i, fr := range out[:4] {
			assert.Equal(t, i, fr.Index)
			assert.NoError(t, fr.Err)
			assert.True(t, fr.Deleted, "node %d", i)
			assert.Equal(t, token, fr.Holder)
			assert.False(t, fr.Reentrant)
		}
		assert.ErrorIs(t, out[4].Err, errBoom)
		assert.False(t, out[4].Deleted)

		assert.Less(t, (<-got).Sub(forced), 10*time.Millisecond, "the waiter woke on the announcement")
		assert.Greater(t, waiter.Fence(), fence, "the counter was kept: the next token is greater")
		for _, f := range fs[:4] {
			assert.GreaterOrEqual(t, f.Counter(node.FenceKey("k")), fence)
		}

		// The holder finds out at its next extension, and its lease ends
		// by its validity at the latest.
		require.ErrorIs(t, holder.Extend(t.Context()), ErrNotHeld)
		<-holder.Done()
		assert.ErrorIs(t, holder.Err(), ErrLockLost)
		require.NoError(t, waiter.Unlock(t.Context()))
		synctest.Wait()

		// Nothing held: nothing deleted, no error.
		out, err = r.ForceUnlock(t.Context(), "k")
		require.NoError(t, err)
		for _, fr := range out[:4] {
			assert.False(t, fr.Deleted)
			assert.Empty(t, fr.Holder)
		}
	})
}

func TestForceUnlockReentrant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3)
		m := newFakeMutex(t, r, "re", WithReentrant())
		require.NoError(t, m.Lock(t.Context()))
		require.NoError(t, m.Lock(t.Context()))
		synctest.Wait() // the holds still in flight
		out, err := r.ForceUnlock(t.Context(), "re")
		require.NoError(t, err)
		for _, fr := range out {
			assert.True(t, fr.Deleted)
			assert.True(t, fr.Reentrant)
			assert.Equal(t, m.live().Token, fr.Holder)
		}
		assert.Zero(t, keyOn(fs, "re"), "every hold is gone")
	})
}

func TestLockWithinBoundsTheWaitOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := newFakeRedlock(t, 5)
		m := newFakeMutex(t, r, "k", WithTTL(time.Second), WithRenewal())
		start := time.Now()
		require.NoError(t, m.LockWithin(t.Context(), 100*time.Millisecond))
		time.Sleep(10 * time.Second)
		require.NoError(t, m.Err(), "renewed long after the wait ended (held %v)", time.Since(start))
		assert.True(t, m.Until().After(time.Now()))
		require.NoError(t, m.Unlock(t.Context()))

		// The contrast: Lock with a context that ends stops renewing.
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		require.NoError(t, m.Lock(ctx))
		<-m.Done()
		assert.ErrorIs(t, m.Err(), ErrLockLost)
	})
}

func TestLockWithinRenewalEndsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3)
		m := newFakeMutex(t, r, "k", WithTTL(time.Second), WithRenewal())
		ctx, cancel := context.WithCancel(t.Context())
		require.NoError(t, m.LockWithin(ctx, time.Second))
		time.Sleep(700 * time.Millisecond) // two extensions
		cancel()
		<-m.Done()
		assert.Equal(t, 2, fs[0].Count("extend"))
		assert.ErrorIs(t, m.Err(), ErrLockLost, "the lease runs out once renewal stops")
	})
}

func TestLockWithinWaitPasses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := newFakeRedlock(t, 5)
		holder := newFakeMutex(t, r, "k", WithTTL(time.Minute))
		require.NoError(t, holder.Lock(t.Context()))
		m := newFakeMutex(t, r, "k")
		start := time.Now()
		err := m.LockWithin(t.Context(), 2*time.Second)
		assert.Equal(t, 2*time.Second, time.Since(start))
		require.ErrorIs(t, err, ErrNotAcquired)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Contains(t, err.Error(), "not acquired within 2s")

		// The caller's context ending first is reported as such.
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		err = m.LockWithin(ctx, time.Hour)
		require.ErrorIs(t, err, ErrNotAcquired)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.NotContains(t, err.Error(), "within")
	})
}

func TestLockWithinZeroIsOneAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		holder := newFakeMutex(t, r, "k")
		require.NoError(t, holder.Lock(t.Context()))
		m := newFakeMutex(t, r, "k")
		require.ErrorIs(t, m.LockWithin(t.Context(), 0), ErrNotAcquired)
		synctest.Wait()
		assert.Equal(t, 2, fs[0].Count("acquire"), "the holder's and one attempt")
		require.ErrorIs(t, m.LockWithin(t.Context(), -time.Second), ErrInvalidArgument)
		//nolint:staticcheck // a nil context on purpose
		require.ErrorIs(t, m.LockWithin(nil, time.Second), ErrInvalidArgument)
		require.NoError(t, holder.Unlock(t.Context()))
		require.NoError(t, m.LockWithin(t.Context(), 0))
	})
}

// TestInspectSemaphoreKinds reads a semaphore on the fakes: its holders
// across the nodes, a holder short of the quorum, and a name whose nodes
// disagree on its kind.
func TestInspectSemaphoreKinds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		fs[4].Faults(func(n *nodetest.Fake) { n.Err = errBoom })
		s := newFakeSemaphore(t, r, "sem", 3, WithTTL(10*time.Second))
		require.NoError(t, s.TryAcquire(t.Context()))
		synctest.Wait()
		fs[0].Sems["sem"].Holders["short"] = time.Now().Add(time.Minute) // admitted on one node only

		st, err := r.Inspect(t.Context(), "sem")
		require.NoError(t, err)
		assert.Equal(t, report.KindSemaphore, st.Kind)
		assert.Empty(t, st.Holder)
		assert.Zero(t, st.Held)
		require.NotNil(t, st.Semaphore)
		assert.Equal(t, 3, st.Semaphore.Permits)
		assert.Equal(t, 4, st.Semaphore.Quorum, "5·3/4+1")
		assert.Equal(t, []report.PermitHolder{{Token: permitOf(s), Nodes: 4}, {Token: "short", Nodes: 1}}, st.Semaphore.Holders)
		assert.Equal(t, 1, st.Semaphore.Held())
		assert.Equal(t, []report.NodePermit{{Token: permitOf(s), TTL: 10 * time.Second}, {Token: "short", TTL: time.Minute}}, st.Nodes[0].Permits)
		assert.ErrorIs(t, st.Nodes[4].Err, errBoom)
		assert.Empty(t, st.Nodes[4].Kind)

		// A lock on two nodes, a semaphore on two: the lock wins the tie.
		fs[0].Set("mixed", "tok", time.Minute)
		fs[1].Set("mixed", "tok", time.Minute)
		for _, f := range fs[2:4] {
			f.Sems["mixed"] = &nodetest.Sem{Permits: 2, Holders: map[string]time.Time{"p": time.Now().Add(time.Minute)}}
		}
		st, err = r.Inspect(t.Context(), "mixed")
		require.NoError(t, err)
		assert.Equal(t, report.KindLock, st.Kind)
		assert.Nil(t, st.Semaphore)
		assert.Equal(t, "tok", st.Holder)
		assert.Equal(t, report.KindSemaphore, st.Nodes[2].Kind)
		assert.Equal(t, 2, st.Nodes[2].PermitCount)

		// One more semaphore node: now the semaphore's, and no lock holder.
		fs[4].Faults(func(n *nodetest.Fake) { n.Err = nil })
		fs[4].Sems["mixed"] = &nodetest.Sem{Permits: 2, Holders: map[string]time.Time{"p": time.Now().Add(time.Minute)}}
		st, err = r.Inspect(t.Context(), "mixed")
		require.NoError(t, err)
		assert.Equal(t, report.KindSemaphore, st.Kind)
		assert.Empty(t, st.Holder)
		assert.Zero(t, st.Held)
		assert.Equal(t, []report.PermitHolder{{Token: "p", Nodes: 3}}, st.Semaphore.Holders)
		assert.Equal(t, report.KindLock, st.Nodes[0].Kind, "each node still says what it holds")
	})
}

// A wait whose deadline cuts its last attempt short says what the attempt
// before found: the lock is held (ErrHeld), not merely "not acquired"
// (redlock run's exit 75 rests on it).
func TestWaitCutShortSaysWhatItFound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		holder := newFakeMutex(t, r, "k", WithTTL(time.Minute))
		require.NoError(t, holder.Lock(t.Context()))
		synctest.Wait()
		for _, f := range fs {
			f.Faults(func(n *nodetest.Fake) { n.Delay = 100 * time.Millisecond })
		}
		// The first attempt ends at 100 ms, refused; the second starts by
		// 120 ms and is out when the wait ends, at 150.
		m := newFakeMutex(t, r, "k", WithNodeTimeout(time.Second), WithRetryDelay(10*time.Millisecond, 20*time.Millisecond))
		err := m.LockWithin(t.Context(), 150*time.Millisecond)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorIs(t, err, ErrHeld, "%v", err)
		assert.Contains(t, err.Error(), "held by another, as the last attempt that could tell found, ")
		assert.Equal(t, 2, fs[0].Count("acquire")-1, "the holder's, then two attempts")
	})
}

// TestWaitCutShortCountsWhatItFound: the failed nodes a cut wait's
// verdict stands on are in its error. Three of five nodes fail, each after
// 100 ms: each attempt finds too many failed to say anything else
// (ErrNodesFailed, three node errors); the third is out when the wait ends
// at 300 ms, before any node answered it. report.NodeErrors names the
// three, once each (redlock run's "3 of 5 nodes failed" counts them; it
// said "0 of 5" when the verdict carried the class alone).
func TestWaitCutShortCountsWhatItFound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		for i, f := range fs {
			f.Faults(func(n *nodetest.Fake) {
				n.Delay = 100 * time.Millisecond
				if i < 3 {
					n.Err = errors.New("broken")
				}
			})
		}
		m := newFakeMutex(t, r, "k", WithNodeTimeout(time.Second), WithRetryDelay(10*time.Millisecond, 20*time.Millisecond))
		err := m.LockWithin(t.Context(), 300*time.Millisecond)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorIs(t, err, ErrNodesFailed, "%v", err)
		var failed []int
		for _, ne := range report.NodeErrors(err) {
			failed = append(failed, ne.Index)
		}
		assert.ElementsMatch(t, []int{0, 1, 2}, failed, "%v", err)
	})
}
