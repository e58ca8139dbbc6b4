package life

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Work given in bursts runs on the same workers burst after burst; they
// return once idle for Idle, and Wait sees them gone.
func TestWorkersReusedThenIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g Group
		w := &Workers{G: &g, Idle: time.Second}
		var ran atomic.Int64
		burst := func() {
			var wg sync.WaitGroup
			for range 10 {
				wg.Add(1)
				require.True(t, w.Go(time.Time{}, func() {
					time.Sleep(time.Millisecond) // a round trip: the burst overlaps
					ran.Add(1)
					wg.Done()
				}))
			}
			wg.Wait()
			synctest.Wait()
		}
		burst()
		grown := workersAlive()
		assert.Equal(t, 10, grown, "a worker per piece of work in flight")
		for range 5 {
			time.Sleep(500 * time.Millisecond)
			burst()
			assert.Equal(t, grown, workersAlive(), "the same workers, burst after burst")
		}
		assert.EqualValues(t, 60, ran.Load())
		time.Sleep(time.Second)
		synctest.Wait()
		assert.Equal(t, 0, workersAlive(), "idle a second: gone")
		require.NoError(t, g.Wait(t.Context()))
	})
}

// workersAlive counts the goroutines running Workers.work, in the whole
// process: runtime.NumGoroutine would count the other tests' goroutines
// too, which come and go meanwhile (it once saw 9 workers of 10 so).
func workersAlive() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "life.(*Workers).work(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// At Max, what is given beyond waits, and runs in order as workers free.
func TestWorkersBoundedInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g Group
		w := &Workers{G: &g, Max: 2}
		var mu sync.Mutex
		var order []int
		var running, most atomic.Int64
		for i := range 6 {
			w.Go(time.Time{}, func() {
				n := running.Add(1)
				if n > most.Load() {
					most.Store(n)
				}
				mu.Lock()
				order = append(order, i) // as it starts
				mu.Unlock()
				time.Sleep(time.Millisecond)
				running.Add(-1)
			})
		}
		time.Sleep(10 * time.Millisecond)
		assert.EqualValues(t, 2, most.Load(), "at most Max at once")
		mu.Lock()
		assert.Len(t, order, 6)
		// Two at a time, in the order given (two freed at one instant
		// start in either order).
		assert.ElementsMatch(t, []int{2, 3}, order[2:4], "the first two waiting started first")
		assert.ElementsMatch(t, []int{4, 5}, order[4:], "then the next two")
		mu.Unlock()
		g.Stop()
		require.NoError(t, g.Wait(t.Context()))
	})
}

// Closing the group ends the idle workers at once, and nothing new
// starts.
func TestWorkersEndOnClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g Group
		w := &Workers{G: &g, Idle: time.Hour}
		done := make(chan struct{})
		require.True(t, w.Go(time.Time{}, func() { close(done) }))
		<-done
		g.Stop()
		ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
		defer cancel()
		require.NoError(t, g.Wait(ctx), "idle workers return on close, not an hour later")
		assert.False(t, w.Go(time.Time{}, func() { t.Error("ran after close") }))
	})
}

// What waits for a worker runs by its time: the soonest first, those of
// one time in the order given.
func TestWorkersSoonestFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g Group
		w := &Workers{G: &g, Max: 1}
		release := make(chan struct{})
		require.True(t, w.Go(time.Time{}, func() { <-release })) // the one worker, busy
		var mu sync.Mutex
		var order []string
		at := time.Now()
		for _, x := range []struct {
			name string
			by   time.Duration
		}{{"c", 3}, {"a", 1}, {"b1", 2}, {"b2", 2}} {
			require.True(t, w.Go(at.Add(x.by*time.Second), func() {
				mu.Lock()
				order = append(order, x.name)
				mu.Unlock()
			}))
		}
		close(release)
		synctest.Wait()
		mu.Lock()
		assert.Equal(t, []string{"a", "b1", "b2", "c"}, order)
		mu.Unlock()
		g.Stop()
		require.NoError(t, g.Wait(t.Context()))
	})
}
