package integration

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/redlock"
)

// A reader-writer lock on five real nodes: readers, writers and a plain
// Mutex of the same name contend, each with its own Redlock (its own
// connections, as separate processes). Each records the window it may rely
// on, [its lock returned, min(its unlock started, Until)], on the monotonic
// clock. No writer's window may overlap any other window, readers' windows
// should overlap one another, and no write is lost.

func TestRWMutexContention(t *testing.T) {
	t.Run("healthy", func(t *testing.T) { rwContention(t, startCluster(t, 5), false) })
	t.Run("minority paused and killed", func(t *testing.T) { rwContention(t, startCluster(t, 5), true) })
}

// rwWindow is one hold: a read, or a write (by an RWMutex or a Mutex).
type rwWindow struct {
	window
	write bool
}

// rwContention runs the contention on c's nodes, pausing node 1 and
// killing node 3 midway when faults is set; more options follow the
// holders' own (a longer node timeout for a machine under load).
func rwContention(t *testing.T, c nodeSet, faults bool, more ...redlock.Option) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	name := "rw:" + t.Name()
	const readers, writers, rounds = 4, 2, 15
	var (
		mu       sync.Mutex
		windows  []rwWindow
		counter  int // written by writers only: read, sleep, write back
		writes   int
		sections int
		wg       sync.WaitGroup
		// unlocked checks an unlock: it may fail when nodes answer after
		// the node timeout (a paused node, or a busy machine under -race);
		// the hold then ends at its TTL, and the windows stay as recorded.
		unlocked = func(err error, who string, w int) {
			if err != nil {
				assert.ErrorIs(t, err, redlock.ErrNotHeld, "%s %d", who, w)
				t.Logf("%s %d: unlock failed: %v", who, w, err)
				return
			}
		}
	)
	origin := time.Now()
	opts := []redlock.Option{redlock.WithTTL(3 * time.Second), redlock.WithNodeTimeout(100 * time.Millisecond),
		redlock.WithRetryDelay(time.Millisecond, 30*time.Millisecond)}
	opts = append(opts, more...)
	record := func(w int, write bool, start time.Time, until time.Time) {
		end := time.Now()
		if until.Before(end) {
			end = until
		}
		mu.Lock()
		windows = append(windows, rwWindow{window{w, start, end}, write})
		sections++
		mu.Unlock()
	}
	write := func(w int, until func() time.Time) {
		start := time.Now()
		mu.Lock()
		read := counter
		mu.Unlock()
		time.Sleep(2 * time.Millisecond)
		mu.Lock()
		counter = read + 1 // lost if another writer wrote meanwhile
		writes++
		mu.Unlock()
		record(w, true, start, until())
	}
	for w := range readers + writers {
		rw, err := newRedlock(t, c, opts...).NewRWMutex(name)
		require.NoError(t, err)
		wg.Go(func() {
			for range rounds {
				if w < readers {
					if !assert.NoError(t, rw.RLock(ctx), "reader %d", w) {
						return
					}
					start := time.Now()
					time.Sleep(time.Duration(5+rand.N(10)) * time.Millisecond)
					record(w, false, start, rw.Until())
					unlocked(rw.RUnlock(ctx), "reader", w)
					continue
				}
				if !assert.NoError(t, rw.Lock(ctx), "writer %d", w) {
					return
				}
				write(w, rw.Until)
				unlocked(rw.Unlock(ctx), "writer", w)
			}
		})
	}
	plain, err := newRedlock(t, c, opts...).NewMutex(name)
	require.NoError(t, err)
	wg.Go(func() {
		for range rounds {
			if !assert.NoError(t, plain.Lock(ctx), "the Mutex") {
				return
			}
			write(readers+writers, plain.Until)
			unlocked(plain.Unlock(ctx), "mutex", readers+writers)
		}
	})
	all := (readers + writers + 1) * rounds
	if faults {
		// Node 1 paused once a fifth of the holds are done, node 3 killed
		// at two fifths: both while the holders contend.
		done := func() int {
			mu.Lock()
			defer mu.Unlock()
			return sections
		}
		t.Cleanup(func() { _ = c.Unpause(context.Background(), 1) })
		for i, step := range []func() error{func() error { return c.Pause(ctx, 1) }, func() error { return c.Kill(ctx, 3) }} {
			require.Eventually(t, func() bool { return done() >= all*(i+1)/5 }, time.Minute, time.Millisecond)
			require.NoError(t, step())
			assert.Less(t, done(), all, "a fault after the holders were done")
		}
	}
	wg.Wait()

	assert.Equal(t, all, sections, "every holder finished: no writer starved, no deadlock")
	assert.Equal(t, writes, counter, "lost writes")
	var clashes [][2]window
	var reads []window
	for i, a := range windows {
		if !a.write {
			reads = append(reads, a.window)
		}
		for _, b := range windows[i+1:] {
			if (a.write || b.write) && a.start.Before(b.end) && b.start.Before(a.end) {
				clashes = append(clashes, [2]window{a.window, b.window})
			}
		}
	}
	readersAtOnce := mostAtOnce(reads)
	assert.Empty(t, describe(clashes, origin), "a writer beside another holder")
	t.Logf("%d holds, %d writes; at most %d readers at once", sections, writes, readersAtOnce)
	assert.GreaterOrEqual(t, readersAtOnce, 2, "readers hold together")
}

// mostAtOnce returns the largest number of windows that share an instant;
// windows that only touch do not.
func mostAtOnce(ws []window) int {
	var log permitLog
	for _, w := range ws {
		log.add(w.worker, w.start, w.end)
	}
	most, _ := log.maxOverlap()
	return most
}

// A node up for less than the restart delay refuses readers and writers,
// changing nothing; on real Redis the readers' hash keeps its marker out
// of ForceUnlock's report.
func TestRWMutexRestartDelay(t *testing.T) {
	c := startCluster(t, 3)
	rl := newRedlock(t, c, redlock.WithRestartDelay(time.Hour))
	rw, err := rl.NewRWMutex("rw:delay", redlock.WithTTL(time.Minute))
	require.NoError(t, err)
	for _, take := range []func(context.Context) error{rw.TryRLock, rw.TryLock} {
		err = take(t.Context())
		require.ErrorIs(t, err, redlock.ErrNotAcquired)
		assert.ErrorIs(t, err, redlock.ErrNodeRecovering, "every node has been up for seconds, not an hour")
	}
	for _, n := range inspector(t, c) {
		assert.Zero(t, n.Exists(t.Context(), "rw:delay", "rw:delay:redlock:writer").Val())
	}

	plain := newRedlock(t, c)
	reader, err := plain.NewRWMutex("rw:forced")
	require.NoError(t, err)
	require.NoError(t, reader.RLock(t.Context()))
	out, err := plain.ForceUnlock(t.Context(), "rw:forced")
	require.NoError(t, err)
	for _, fr := range out {
		if fr.Deleted {
			assert.NotEqual(t, "redlock:readers", fr.Holder, "a reader's token, not the marker")
		}
	}
	require.ErrorIs(t, reader.Extend(t.Context()), redlock.ErrLockLost)
}
