package redlock

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/redlock-go/redlock/internal/node/nodetest"
	"github.com/redlock-go/redlock/redlock/report"

	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDoneWithoutRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := newFakeRedlock(t, 3)
		m := newFakeMutex(t, r, "k", WithTTL(time.Second), WithDriftFactor(0))
		select {
		case <-m.Done():
		default:
			t.Fatal("Done of a mutex that holds nothing must be closed")
		}
		require.ErrorIs(t, m.Err(), ErrNotHeld)
		start := time.Now()
		require.NoError(t, m.Lock(t.Context()))
		assert.NoError(t, m.Err())
		<-m.Done()
		// until = 998ms; lost TTL/20 = 50ms before it.
		assert.Equal(t, 948*time.Millisecond, time.Since(start))
		assert.True(t, time.Now().Before(m.Until()), "Done closes before the validity ends")
		assert.ErrorIs(t, m.Err(), ErrLockLost)

		// Given up, but the nodes hold the token until the validity's
		// end: an Extend then says lost, not "not held" (the simulator's
		// seed 251 found it saying not held); past the end, not held.
		err := m.Extend(t.Context())
		require.ErrorIs(t, err, ErrLockLost)
		assert.NotErrorIs(t, err, ErrNotHeld, "%v", err)
		time.Sleep(time.Until(m.Until()))
		assert.ErrorIs(t, m.Extend(t.Context()), ErrNotHeld)
	})
}

// An Extend whose round is in flight when the acquisition is given up
// (TTL/20 before its validity ends) extended the token on the nodes: it
// says lost, not "not held" (the simulator's seed 2048).
func TestExtendGivenUpMeanwhile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3)
		m := newFakeMutex(t, r, "k", WithTTL(time.Second), WithDriftFactor(0))
		require.NoError(t, m.Lock(t.Context()))
		time.Sleep(time.Until(m.Until()) - 100*time.Millisecond)
		for _, f := range fs {
			f.Faults(func(n *nodetest.Fake) { n.OpDelay = map[string]time.Duration{"extend": 80 * time.Millisecond} })
		}
		err := m.Extend(t.Context())
		require.ErrorIs(t, err, ErrLockLost, "given up while it ran")
		assert.NotErrorIs(t, err, ErrNotHeld, "%v", err)
		synctest.Wait()
		for _, f := range fs {
			assert.Equal(t, 1, f.Count("extend"), "%s extended", f.Name)
		}
	})
}

func TestRenewalSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		m := newFakeMutex(t, r, "k", WithTTL(900*time.Millisecond), WithRenewal())
		other := newFakeMutex(t, r, "k")
		start := time.Now()
		require.NoError(t, m.Lock(t.Context()))
		for i := 1; i <= 30; i++ {
			time.Sleep(time.Until(start.Add(time.Duration(i) * 300 * time.Millisecond)))
			synctest.Wait()
			assert.Equal(t, i, fs[0].Count("extend"), "one extension per TTL/3")
			// The window always reaches past the next renewal.
			assert.True(t, m.Until().After(time.Now().Add(300*time.Millisecond)))
			require.ErrorIs(t, other.TryLock(t.Context()), ErrNotAcquired, "the renewed lock lapsed at %v", time.Since(start))
		}
		assert.NoError(t, m.Err())
		require.NoError(t, m.Unlock(t.Context()))
		time.Sleep(2 * time.Second)
		assert.Equal(t, 30, fs[0].Count("extend"), "renewal stops on Unlock")
	})
}

func TestRenewalStopsWithHolderContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3)
		m := newFakeMutex(t, r, "k", WithTTL(time.Second), WithRenewal())
		ctx, cancel := context.WithCancel(t.Context())
		require.NoError(t, m.Lock(ctx))
		time.Sleep(700 * time.Millisecond) // two extensions
		cancel()
		<-m.Done()
		assert.Equal(t, 2, fs[0].Count("extend"))
		assert.ErrorIs(t, m.Err(), ErrLockLost, "the lease runs out once renewal stops")
	})
}

func TestRenewalMaxHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3)
		m := newFakeMutex(t, r, "k", WithTTL(300*time.Millisecond), WithRenewal(), WithMaxHold(time.Second))
		start := time.Now()
		require.NoError(t, m.Lock(t.Context()))
		<-m.Done()
		held := time.Since(start)
		assert.Equal(t, 9, fs[0].Count("extend"), "every 100ms, none at or after max hold")
		assert.Greater(t, held, time.Second)
		assert.LessOrEqual(t, held, time.Second+300*time.Millisecond, "max hold plus at most one TTL")
		assert.ErrorIs(t, m.Err(), ErrLockLost)
		assert.EqualError(t, m.Err(), "redlock: lock lost: validity ran out (renewal stopped at the maximum hold, WithMaxHold(1s))")
	})
}

func TestRenewalFailsWhenMajorityStalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5, WithNodeTimeout(50*time.Millisecond))
		m := newFakeMutex(t, r, "k", WithTTL(time.Second), WithRenewal())
		require.NoError(t, m.Lock(t.Context()))
		synctest.Wait()
		for _, f := range fs[:3] {
			f.Faults(func(n *nodetest.Fake) { n.Hang = make(chan struct{}) })
		}
		<-m.Done()
		assert.ErrorIs(t, m.Err(), ErrLockLost)
		assert.ErrorContains(t, m.Err(), "redlock: lock lost: validity ran out\nthe last extension failed: redlock: extension not confirmed: extended on 2 of 5 nodes, quorum 3")
		var failed []int
		for _, ne := range report.NodeErrors(m.Err()) {
			failed = append(failed, ne.Index)
		}
		assert.ElementsMatch(t, []int{0, 1, 2}, failed, "the nodes that failed are named: %v", m.Err())
		assert.True(t, time.Now().Before(m.Until()), "loss is signalled before the validity ends")
		assert.Greater(t, fs[3].Count("extend"), 2, "failed extensions are retried")
		// No extension after the loss; the key is not re-created.
		n := fs[3].Count("extend")
		time.Sleep(5 * time.Second)
		assert.Equal(t, n, fs[3].Count("extend"))
		assert.Zero(t, keyOn(fs, "k"))
	})
}

func TestRenewalFindsLockTaken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		m := newFakeMutex(t, r, "k", WithTTL(time.Second), WithRenewal())
		require.NoError(t, m.Lock(t.Context()))
		synctest.Wait()
		for _, f := range fs[:3] { // the keys vanish (a node's clock jumped) and another takes them
			f.Set("k", "thief", time.Minute)
		}
		start := time.Now()
		<-m.Done()
		// The first renewal is due TTL/3 after the attempt, moved earlier
		// to the grid line before it (a twentieth of the period).
		took := time.Since(start)
		assert.True(t, took > time.Second/3-time.Second/60 && took <= time.Second/3,
			"lost at the first renewal, not at the end of validity: after %v", took)
		assert.ErrorIs(t, m.Err(), ErrLockLost)
		assert.ErrorIs(t, m.Extend(t.Context()), ErrNotHeld)
		v, _ := fs[0].Get("k")
		assert.Equal(t, "thief", v)
	})
}

func TestCloseStopsRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3)
		m := newFakeMutex(t, r, "k", WithTTL(3*time.Second), WithRenewal())
		require.NoError(t, m.Lock(t.Context()))
		start := time.Now()
		require.NoError(t, r.Close(t.Context()))
		assert.Zero(t, time.Since(start), "Close does not wait for the lease to run out")
		assert.Zero(t, fs[0].Count("extend"))
	})
}

// A held lock costs no goroutine while it waits for its next extension,
// and the extensions of locks taken within a few milliseconds of one
// another fall due at the same instants (see renewGrid), so that each
// node is asked for them together.
func TestRenewalHoldsManyLocksWithoutGoroutines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		seen := &renewalStarts{}
		r, fs := newFakeRedlock(t, 3)
		warm := newFakeMutex(t, r, "warm")
		require.NoError(t, warm.Lock(t.Context()))
		require.NoError(t, warm.Unlock(t.Context()))
		synctest.Wait()
		before := runtime.NumGoroutine()
		const locks = 100
		ms := make([]*Mutex, locks)
		for i := range ms {
			ms[i] = newFakeMutex(t, r, fmt.Sprint("k", i), WithTTL(3*time.Second), WithRenewal(), WithObserver(seen))
			require.NoError(t, ms[i].Lock(t.Context()))
			time.Sleep(2 * time.Millisecond) // taken over 200 ms
		}
		synctest.Wait()
		assert.LessOrEqual(t, runtime.NumGoroutine()-before, 5, "goroutines for %d locks held", locks)
		time.Sleep(3 * time.Second) // three periods
		for _, m := range ms {
			require.NoError(t, m.Err(), "held throughout")
		}
		ext := fs[0].Count("extend")
		assert.GreaterOrEqual(t, ext, 2*locks, "each lock extended every second")
		// Taken over 200 ms, on a grid of 50 ms: at most 5 instants per
		// period, whatever the number of locks.
		assert.LessOrEqual(t, seen.instants(), 3*5, "the instants %d extensions started at", ext)
		// The workers that made them return a second after their last;
		// the next extensions, due within a second, start new ones.
		assert.LessOrEqual(t, runtime.NumGoroutine()-before, locks/4, "goroutines while extensions fall due")
		for _, m := range ms {
			require.NoError(t, m.Unlock(t.Context()))
		}
		time.Sleep(time.Second + time.Millisecond)
		synctest.Wait()
		assert.LessOrEqual(t, runtime.NumGoroutine()-before, 5, "goroutines a second after the last extension")
	})
}

// renewalStarts is an Observer that counts the distinct instants at
// which renewal started extensions.
type renewalStarts struct {
	mu sync.Mutex
	at map[time.Time]bool
}

func (s *renewalStarts) OpStart(ctx context.Context, op report.Op) context.Context {
	if op.Renewal {
		s.mu.Lock()
		if s.at == nil {
			s.at = map[time.Time]bool{}
		}
		s.at[time.Now()] = true
		s.mu.Unlock()
	}
	return ctx
}

func (s *renewalStarts) instants() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.at)
}

func (*renewalStarts) OpEnd(context.Context, report.Op, report.OpResult) {}
func (*renewalStarts) LeaseEnd(report.Lease)                             {}
func (*renewalStarts) NodeFailed(context.Context, *report.NodeError)     {}
