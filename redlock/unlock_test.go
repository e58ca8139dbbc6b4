package redlock

import (
	"github.com/redlock-go/redlock/internal/node/goredis/goredistest"
	"github.com/redlock-go/redlock/internal/node/nodetest"
	"github.com/redlock-go/redlock/redlock/report"

	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUnlock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		m := newFakeMutex(t, r, "k")
		require.ErrorIs(t, m.Unlock(t.Context()), ErrNotHeld, "not locked yet")
		require.NoError(t, m.Lock(t.Context()))
		require.NoError(t, m.Unlock(t.Context()))
		assert.True(t, m.Until().IsZero())
		synctest.Wait()
		assert.Zero(t, keyOn(fs, "k"))
		require.ErrorIs(t, m.Unlock(t.Context()), ErrNotHeld, "already unlocked")
	})
}

// TestUnlockAfterLoss: Unlock after the mutex gave its lease up as lost
// still frees the key on every node, and its error says whether a quorum
// still held the token up to the release (nil: no one else can have held
// the lock) or not (ErrNotHeld: another client may have).
func TestUnlockAfterLoss(t *testing.T) {
	t.Run("keys still there", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r, fs := newFakeRedlock(t, 5)
			m := newFakeMutex(t, r, "k", WithTTL(time.Second))
			require.NoError(t, m.Lock(t.Context()))
			<-m.Done() // TTL/20 before the validity ends, no extension made
			require.ErrorIs(t, m.Err(), ErrLockLost)
			assert.Equal(t, 5, keyOn(fs, "k"), "the keys outlive the validity")
			require.NoError(t, m.Unlock(t.Context()))
			synctest.Wait()
			assert.Zero(t, keyOn(fs, "k"), "Unlock frees the key on every node")
			require.ErrorIs(t, m.Unlock(t.Context()), ErrNotHeld, "nothing is kept across Unlock")
		})
	})
	t.Run("keys expired", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r, _ := newFakeRedlock(t, 5)
			m := newFakeMutex(t, r, "k", WithTTL(time.Second))
			require.NoError(t, m.Lock(t.Context()))
			time.Sleep(time.Second)
			require.ErrorIs(t, m.Err(), ErrLockLost)
			err := m.Unlock(t.Context())
			require.ErrorIs(t, err, ErrNotHeld)
			assert.NotErrorIs(t, err, ErrLockLost)
		})
	})
	t.Run("keys lost on a quorum", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r, fs := newFakeRedlock(t, 5)
			m := newFakeMutex(t, r, "k", WithTTL(time.Minute))
			require.NoError(t, m.Lock(t.Context()))
			synctest.Wait()
			for _, f := range fs[:3] {
				f.Faults(func(n *nodetest.Fake) { delete(n.Data, "k") })
			}
			require.ErrorIs(t, m.Extend(t.Context()), ErrLockLost)
			<-m.Done()
			require.ErrorIs(t, m.Unlock(t.Context()), ErrNotHeld)
			synctest.Wait()
			assert.Zero(t, keyOn(fs, "k"), "the nodes that kept the token free it")
		})
	})
}

// A node's "gone" counts only before the expiry that node itself last
// confirmed, not the lease's. A holds the lock on three nodes (TTL 5 s);
// at +1 s it extends while node 2 loses its requests; node 2's key expires
// at +5 s, at its own time; node 0 restarts without persistence; B takes
// the lock on nodes 0 and 2 while A's validity still runs, and releases
// it. A's Unlock finds the key gone on nodes 0 and 2: node 0 is another
// server now (which may have lost the key, or not: unknown), and node 2
// answers after its own expiry, when the key may have been anyone's (it
// was B's). Counted until the lease's validity, node 2 made A's Unlock
// return nil, a release that claims no one else held the lock while B
// did; now it is not confirmed.
func TestUnlockCountsEachNodeToItsOwnExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3)
		a := newFakeMutex(t, r, "k", WithTTL(5*time.Second))
		require.NoError(t, a.Lock(t.Context()))
		synctest.Wait()
		time.Sleep(time.Second)
		fs[2].Faults(func(n *nodetest.Fake) { n.Err = errCutOff })
		require.NoError(t, a.Extend(t.Context()), "nodes 0 and 1")
		// Extend returns at the quorum: node 2's call must have failed
		// before node 2 is healed, or it extends there after all (one run
		// in about eight under -race).
		synctest.Wait()
		fs[2].Faults(func(n *nodetest.Fake) { n.Err = nil })
		time.Sleep(4*time.Second + 100*time.Millisecond) // node 2's key expired
		fs[0].Restart()
		b := newFakeMutex(t, r, "k", WithTTL(5*time.Second))
		var err error
		for try := 0; try < 50; try++ { // node 2 may be marked down for a while
			if err = b.TryLock(t.Context()); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		require.NoError(t, err, "B on nodes 0 and 2")
		require.True(t, time.Now().Before(a.Until()), "within A's validity")
		require.NoError(t, b.Unlock(t.Context()))
		synctest.Wait()
		err = a.Unlock(t.Context())
		require.Error(t, err, "B held the lock within A's validity")
		require.ErrorContains(t, err, "release not confirmed", "node 0's answer is another server's")
	})
}

func TestUnlockWaitsForStragglingSet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		m := newFakeMutex(t, r, "k")
		fs[3].Faults(func(n *nodetest.Fake) { n.Delay = 30 * time.Millisecond })
		fs[4].Faults(func(n *nodetest.Fake) { n.Delay = 60 * time.Millisecond })
		require.NoError(t, m.TryLock(t.Context())) // decided by nodes 0-2
		for _, f := range fs[3:] {                 // the releases would be fast: only the SETs are slow
			f.Faults(func(n *nodetest.Fake) { n.Delay = 0 })
		}
		start := time.Now()
		require.NoError(t, m.Unlock(t.Context()))
		assert.Zero(t, time.Since(start), "Unlock waits for the quorum, not for the stragglers")
		time.Sleep(time.Second)
		synctest.Wait()
		assert.Zero(t, keyOn(fs, "k"), "a release overtook a late SET and left its key behind")
		for _, f := range fs[3:] {
			assert.Equal(t, []string{"acquire", "release"}, f.Applied, f.Name)
		}
	})
}

func TestUnlockByStaleHolderKeepsNewHolder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		stale := newFakeMutex(t, r, "k", WithTTL(time.Second))
		fresh := newFakeMutex(t, r, "k", WithTTL(time.Minute))
		require.NoError(t, stale.Lock(t.Context()))
		time.Sleep(time.Second) // the stale holder's keys expire
		require.NoError(t, fresh.TryLock(t.Context()))
		err := stale.Unlock(t.Context())
		require.ErrorIs(t, err, ErrNotHeld)
		synctest.Wait()
		assert.Equal(t, 5, holders(fs, "k", tokenOf(fresh)), "the stale Unlock freed the new holder's lock")
	})
}

func TestUnlockMinorityFailing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		m := newFakeMutex(t, r, "k")
		require.NoError(t, m.Lock(t.Context()))
		fs[0].Faults(func(n *nodetest.Fake) { n.Err = errBoom })
		fs[1].Faults(func(n *nodetest.Fake) { n.Err = errBoom })
		require.NoError(t, m.Unlock(t.Context()))
		synctest.Wait()
		fs[0].Faults(func(n *nodetest.Fake) { n.Err = nil })
		fs[1].Faults(func(n *nodetest.Fake) { n.Err = nil })
		require.NoError(t, m.Lock(t.Context()))
		fs[0].Faults(func(n *nodetest.Fake) { n.Err = errBoom })
		fs[1].Faults(func(n *nodetest.Fake) { n.Err = errBoom })
		fs[2].Faults(func(n *nodetest.Fake) { n.Err = errBoom })
		err := m.Unlock(t.Context())
		require.ErrorContains(t, err, "release not confirmed: token found on 2 of 5 nodes, quorum 3")
		assert.NotErrorIs(t, err, ErrNotHeld, "the three failed may hold the token")
		assert.Len(t, report.NodeErrors(err), 3)

		// Three that answered without the token (an extension counts no
		// absent key as its own), beside one that failed: not held.
		for _, f := range fs[:3] {
			f.Faults(func(n *nodetest.Fake) { n.Err = nil })
		}
		require.NoError(t, m.Lock(t.Context()))
		synctest.Wait()
		for _, f := range fs[:3] {
			f.Faults(func(n *nodetest.Fake) { delete(n.Data, "k") })
		}
		fs[3].Faults(func(n *nodetest.Fake) { n.Err = errBoom })
		err = m.Extend(t.Context())
		require.ErrorIs(t, err, ErrNotHeld)
		assert.ErrorIs(t, err, ErrLockLost)
		assert.ErrorContains(t, err, "lock not held: extended on 1 of 5 nodes, quorum 3")
		assert.Len(t, report.NodeErrors(err), 1)
	})
}

func TestExtend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		m := newFakeMutex(t, r, "k", WithTTL(time.Second), WithDriftFactor(0))
		require.ErrorIs(t, m.Extend(t.Context()), ErrNotHeld, "not locked yet")
		require.NoError(t, m.Lock(t.Context()))
		first := m.Until()
		time.Sleep(600 * time.Millisecond)
		start := time.Now()
		require.NoError(t, m.Extend(t.Context()))
		assert.Equal(t, start.Add(time.Second-2*time.Millisecond), m.Until(), "validity counts from the extension's start")
		assert.True(t, m.Until().After(first))
		synctest.Wait() // every node has answered
		assert.Equal(t, time.Second, fs[0].TTL("k"), "full ttl re-armed")
	})
}

func TestExtendNeverRecreates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		m := newFakeMutex(t, r, "k", WithTTL(time.Second))
		require.NoError(t, m.Lock(t.Context()))
		until := m.Until()
		synctest.Wait()            // every node has answered
		for _, f := range fs[:3] { // the key vanishes early on a majority
			f.Faults(func(n *nodetest.Fake) {
				delete(n.Data, "k")
			})
		}
		err := m.Extend(t.Context())
		require.ErrorIs(t, err, ErrNotHeld)
		assert.Equal(t, until, m.Until(), "a failed extension leaves the window as it was")
		assert.Equal(t, 2, keyOn(fs, "k"), "extend must not re-create a key")
	})
}

func TestExtendAfterValidityRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		m := newFakeMutex(t, r, "k", WithTTL(time.Second), WithDriftFactor(0.1))
		require.NoError(t, m.Lock(t.Context()))
		// Keys live for 1s on the nodes, but validity ended at 898ms.
		time.Sleep(950 * time.Millisecond)
		require.ErrorIs(t, m.Extend(t.Context()), ErrNotHeld)
		assert.Zero(t, fs[0].Count("extend"), "no I/O once validity has run out")
	})
}

func TestMutexSharedByGoroutines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		for _, f := range fs {
			f.Faults(func(n *nodetest.Fake) { n.Delay = time.Millisecond })
		}
		m := newFakeMutex(t, r, "k")
		counter, inside := 0, 0
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 5 {
					require.NoError(t, m.Lock(t.Context()))
					inside++
					assert.Equal(t, 1, inside, "two goroutines inside the lock")
					v := counter
					time.Sleep(3 * time.Millisecond)
					counter = v + 1
					inside--
					require.NoError(t, m.Unlock(t.Context()))
				}
			})
		}
		wg.Wait()
		assert.Equal(t, 40, counter)
	})
}

func TestConcurrentUnlockReleasesOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := newFakeRedlock(t, 3)
		m := newFakeMutex(t, r, "k")
		require.NoError(t, m.Lock(t.Context()))
		errs := make(chan error, 2)
		for range 2 {
			go func() { errs <- m.Unlock(t.Context()) }()
		}
		e1, e2 := <-errs, <-errs
		assert.True(t, (e1 == nil) != (e2 == nil), "exactly one Unlock succeeds: %v, %v", e1, e2)
		assert.True(t, errors.Is(e1, ErrNotHeld) || errors.Is(e2, ErrNotHeld))
	})
}

func TestClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := newFakeRedlock(t, 3)
		m := newFakeMutex(t, r, "k")
		require.NoError(t, r.Close(t.Context()))
		require.ErrorIs(t, m.TryLock(t.Context()), ErrClosed)
		require.ErrorIs(t, m.Lock(t.Context()), ErrClosed)
		_, err := r.NewMutex("j")
		require.ErrorIs(t, err, ErrClosed)
	})
}

func TestCloseWaitsForStragglers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3, WithNodeTimeout(10*time.Millisecond))
		m := newFakeMutex(t, r, "k")
		fs[2].Faults(func(n *nodetest.Fake) { n.Delay = time.Second })
		require.NoError(t, m.TryLock(t.Context()))
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		require.ErrorIs(t, r.Close(ctx), context.DeadlineExceeded, "a node call is still running")
		start := time.Now()
		require.NoError(t, r.Close(t.Context()))
		assert.Equal(t, 900*time.Millisecond, time.Since(start))
	})
}

func TestConcurrentCloseDoesNotPanic(t *testing.T) {
	servers, clients := goredistest.Miniredis(t, 3)
	_ = servers
	r, err := New(clients)
	require.NoError(t, err)
	m, err := r.NewMutex("k")
	require.NoError(t, err)
	require.NoError(t, m.Lock(t.Context())) // starts the node workers
	errs := make(chan error, 4)
	for range 4 {
		go func() { errs <- r.Close(context.Background()) }()
	}
	for range 4 {
		require.NoError(t, <-errs)
	}
}

// canceled returns a context that has already ended.
func canceled(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	return ctx
}

// Unlock with a context that ended still releases, waits for the nodes (at
// most the node timeout), and says what they said: nil when a quorum
// confirmed, ErrNotHeld only when they said the token was gone, and
// otherwise (nodes failed) the cancellation, not ErrNotHeld.
func TestUnlockDoneContext(t *testing.T) {
	t.Run("held", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r, fs := newFakeRedlock(t, 3)
			m := newFakeMutex(t, r, "k")
			require.NoError(t, m.Lock(t.Context()))
			fs[2].Faults(func(n *nodetest.Fake) { n.Delay = 30 * time.Millisecond })
			require.NoError(t, m.Unlock(canceled(t)))
			assert.Zero(t, keyOn(fs, "k"), "freed on every node when Unlock returns")
		})
	})
	t.Run("deadline passing during the release", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r, fs := newFakeRedlock(t, 3)
			m := newFakeMutex(t, r, "k")
			require.NoError(t, m.Lock(t.Context()))
			for _, f := range fs[1:] {
				f.Faults(func(n *nodetest.Fake) { n.Delay = 30 * time.Millisecond })
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
			defer cancel()
			require.NoError(t, m.Unlock(ctx))
			assert.Zero(t, keyOn(fs, "k"))
		})
	})
	t.Run("nodes failing", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r, fs := newFakeRedlock(t, 3)
			m := newFakeMutex(t, r, "k")
			require.NoError(t, m.Lock(t.Context()))
			for _, f := range fs[1:] {
				f.Faults(func(n *nodetest.Fake) { n.Hang = make(chan struct{}) })
			}
			start := time.Now()
			err := m.Unlock(canceled(t))
			assert.Equal(t, defaultNodeTimeout, time.Since(start), "waited for the nodes, at most the node timeout")
			require.ErrorIs(t, err, context.Canceled)
			assert.NotErrorIs(t, err, ErrNotHeld, "the lock was held: %v", err)
			assert.ErrorContains(t, err, "release not confirmed")
			assert.ElementsMatch(t, []int{1, 2}, nodeIndexes(report.NodeErrors(err)))
		})
	})
	t.Run("taken by another", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r, fs := newFakeRedlock(t, 3)
			stale := newFakeMutex(t, r, "k", WithTTL(time.Second))
			require.NoError(t, stale.Lock(t.Context()))
			time.Sleep(time.Second) // its keys expire
			fresh := newFakeMutex(t, r, "k")
			require.NoError(t, fresh.TryLock(t.Context()))
			err := stale.Unlock(canceled(t))
			require.ErrorIs(t, err, ErrNotHeld, "the nodes said so")
			assert.ErrorIs(t, err, context.Canceled)
			assert.Equal(t, 3, holders(fs, "k", tokenOf(fresh)))
		})
	})
	t.Run("read lock and semaphore", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r, fs := newFakeRedlock(t, 3)
			rw := newRWMutex(t, r, "rw")
			require.NoError(t, rw.RLock(t.Context()))
			require.NoError(t, rw.RUnlock(canceled(t)))
			s, err := r.NewSemaphore("sem", 2)
			require.NoError(t, err)
			require.NoError(t, s.Acquire(t.Context()))
			require.NoError(t, s.Release(canceled(t)))
			w := newFakeMutex(t, r, "rw")
			require.NoError(t, w.TryLock(t.Context()), "the read lock was released")
			for _, f := range fs {
				assert.Equal(t, 1, f.Count("sem release"), "%s answered before Release returned", f.Name)
			}
		})
	})
}

func nodeIndexes(errs []*report.NodeError) []int {
	out := make([]int, len(errs))
	for i, e := range errs {
		out[i] = e.Index
	}
	return out
}
