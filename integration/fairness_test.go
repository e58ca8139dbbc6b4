package integration

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/redlock"
	"github.com/redlock-go/redlock/redlock/report"
)

// TestFairHandoffBound checks the bound docs/ALGORITHM.md states for the
// handoff ("Handoff"): eight processes loop Lock, a hold, Unlock on one
// name, each Lock right after its own Unlock, so that a releaser competes
// with the seven waiters it just released to. With notification on (the
// default), a waiter queued behind k others gets the lock within k holds
// and k+1 handoffs; with eight contenders no Lock may wait longer than
// seven holds and eight handoffs, and no contender may take more than
// twice its share. Polling only (notification off) breaks both, which
// shows the test can fail: the releaser, trying first, keeps winning.
func TestFairHandoffBound(t *testing.T) {
	c := startCluster(t, 5)
	for _, notify := range []bool{true, false} {
		t.Run(map[bool]string{true: "notify", false: "poll"}[notify], func(t *testing.T) {
			waits, shares := contend(t, c, notify)
			longest := slices.Max(waits)
			share := float64(slices.Max(shares)) / float64(sum(shares))
			t.Logf("%d acquisitions, shares %v, longest wait %v (bound %v)", len(waits), shares, longest, fairBound)
			if !notify {
				assert.True(t, longest > fairBound || share > 2.0/fairContenders,
					"polling only, the bound held: the test cannot tell fair from unfair")
				return
			}
			assert.LessOrEqual(t, longest, fairBound, "a waiter waited past the bound")
			assert.LessOrEqual(t, share, 2.0/fairContenders, "a contender took more than twice its share")
		})
	}
}

const (
	fairContenders = 8
	fairHold       = 10 * time.Millisecond
	// fairHandoff is what the test allows one handoff: a release that
	// reaches the next waiter and its attempt, two round trips, which take
	// a few milliseconds on a loaded machine under -race.
	fairHandoff = 30 * time.Millisecond
	// fairBound is seven holds and eight handoffs.
	fairBound = (fairContenders-1)*fairHold + fairContenders*fairHandoff
)

// contend runs the contenders for 3 s after each took the lock twice
// (their subscriptions are in place by then), and returns every Lock's
// wait and each contender's acquisitions in that time.
func contend(t *testing.T, c *Cluster, notify bool) ([]time.Duration, []int) {
	t.Helper()
	name := "fair:" + t.Name()
	ctx := timeout(t, time.Minute)
	var (
		mu       sync.Mutex
		waits    []time.Duration
		shares   = make([]int, fairContenders)
		warm     sync.WaitGroup
		measured atomic.Bool
		overlap  atomic.Int32
		inside   atomic.Int32
		wg       sync.WaitGroup
		end      = make(chan struct{})
	)
	warm.Add(fairContenders)
	for i := range fairContenders {
		m := newMutex(t, newRedlock(t, c, redlock.WithNotification(notify)), name)
		wg.Go(func() {
			var once sync.Once
			defer once.Do(warm.Done) // also when it returns early
			for n := 0; ; n++ {
				select {
				case <-end:
					return
				default:
				}
				counted := measured.Load()
				start := time.Now()
				if err := m.Lock(ctx); err != nil {
					if !errors.Is(err, context.Canceled) {
						t.Errorf("contender %d: %v", i, err)
					}
					return
				}
				waited := time.Since(start)
				if inside.Add(1) != 1 {
					overlap.Add(1)
				}
				time.Sleep(fairHold)
				inside.Add(-1)
				if counted {
					mu.Lock()
					waits = append(waits, waited)
					shares[i]++
					mu.Unlock()
				}
				if err := m.Unlock(ctx); err != nil {
					// A loaded machine may let nodes pass the 100 ms node
					// timeout: the release still lands (or the key
					// expires), and the overlap check stays. Any other
					// error fails the test.
					if !errors.Is(err, report.ErrNodeTimeout) {
						t.Errorf("contender %d: %v", i, err)
						return
					}
					t.Logf("contender %d: %v", i, err)
				}
				if n == 1 {
					once.Do(warm.Done)
				}
			}
		})
	}
	warm.Wait()
	measured.Store(true)
	time.Sleep(3 * time.Second)
	close(end)
	wg.Wait()
	require.Zero(t, overlap.Load(), "two holders at once")
	require.NotEmpty(t, waits)
	return waits, shares
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}
