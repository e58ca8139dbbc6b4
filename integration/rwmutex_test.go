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
	"github.com/redlock-go/redlock/redlock/report"
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
	l := &rwLedger{t: t}
	origin := time.Now()
	opts := []redlock.Option{redlock.WithTTL(3 * time.Second), redlock.WithNodeTimeout(100 * time.Millisecond),
		redlock.WithRetryDelay(time.Millisecond, 30*time.Millisecond)}
	opts = append(opts, more...)
	var wg sync.WaitGroup
	for w := range readers + writers {
		rw, err := newRedlock(t, c, opts...).NewRWMutex(name)
		require.NoError(t, err)
		wg.Go(func() {
			for range rounds {
				if !l.round(ctx, rw, w, w < readers) {
					return
				}
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
			l.write(readers+writers, plain.Until)
			l.unlocked(plain.Unlock(ctx), "mutex", readers+writers)
		}
	})
	all := (readers + writers + 1) * rounds
	if faults {
		faultMidway(t, ctx, c, l.done, all, false)
	}
	wg.Wait()

	assert.Equal(t, all, l.sections, "every holder finished: no writer starved, no deadlock")
	assert.Equal(t, l.writes, l.counter, "lost writes")
	clashes, reads := l.clashes()
	readersAtOnce := mostAtOnce(reads)
	assert.Empty(t, describe(clashes, origin), "a writer beside another holder")
	t.Logf("%d holds, %d writes; at most %d readers at once", l.sections, l.writes, readersAtOnce)
	assert.GreaterOrEqual(t, readersAtOnce, 2, "readers hold together")
}

// rwLedger is what the holders of rwContention did.
type rwLedger struct {
	t        *testing.T
	mu       sync.Mutex
	windows  []rwWindow
	counter  int // written by writers only: read, sleep, write back
	writes   int
	sections int
}

// round is one hold of rw by worker w, a read or a write; it reports
// whether the worker goes on.
func (l *rwLedger) round(ctx context.Context, rw *redlock.RWMutex, w int, reader bool) bool {
	if reader {
		if !assert.NoError(l.t, rw.RLock(ctx), "reader %d", w) {
			return false
		}
		start := time.Now()
		time.Sleep(time.Duration(5+rand.N(10)) * time.Millisecond)
		l.record(w, false, start, rw.Until())
		l.unlocked(rw.RUnlock(ctx), "reader", w)
		return true
	}
	if !assert.NoError(l.t, rw.Lock(ctx), "writer %d", w) {
		return false
	}
	l.write(w, rw.Until)
	l.unlocked(rw.Unlock(ctx), "writer", w)
	return true
}

// unlocked checks an unlock: it may fail when nodes answer after the node
// timeout (a paused node, or a busy machine under -race); the hold then
// ends at its TTL, and the windows stay as recorded.
func (l *rwLedger) unlocked(err error, who string, w int) {
	if err != nil {
		assert.True(l.t, notHeldOrUnconfirmed(err), "%s %d: %v", who, w, err)
		l.t.Logf("%s %d: unlock failed: %v", who, w, err)
	}
}

// record adds worker w's hold from start to now, or to until if sooner.
func (l *rwLedger) record(w int, write bool, start time.Time, until time.Time) {
	end := time.Now()
	if until.Before(end) {
		end = until
	}
	l.mu.Lock()
	l.windows = append(l.windows, rwWindow{window{w, start, end}, write})
	l.sections++
	l.mu.Unlock()
}

// write is a writer's hold: read the counter, sleep, write it back.
func (l *rwLedger) write(w int, until func() time.Time) {
	start := time.Now()
	l.mu.Lock()
	read := l.counter
	l.mu.Unlock()
	time.Sleep(2 * time.Millisecond)
	l.mu.Lock()
	l.counter = read + 1 // lost if another writer wrote meanwhile
	l.writes++
	l.mu.Unlock()
	l.record(w, true, start, until())
}

// done is how many holds have ended.
func (l *rwLedger) done() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sections
}

// clashes are the pairs of holds, one of them a write, that overlap; reads
// the read holds.
func (l *rwLedger) clashes() (clashes [][2]window, reads []window) {
	for i, a := range l.windows {
		if !a.write {
			reads = append(reads, a.window)
		}
		for _, b := range l.windows[i+1:] {
			if (a.write || b.write) && a.start.Before(b.end) && b.start.Before(a.end) {
				clashes = append(clashes, [2]window{a.window, b.window})
			}
		}
	}
	return clashes, reads
}

// faultMidway pauses node 1 of c once a fifth of all holds are done and
// kills node 3 at two fifths, both while the holders contend (done counts
// the holds so far); with more, it then waits for another fifth, with
// both faults in. Node 1 is resumed at the end of the test.
func faultMidway(t *testing.T, ctx context.Context, c nodeSet, done func() int, all int, more bool) {
	t.Helper()
	t.Cleanup(func() { _ = c.Unpause(context.Background(), 1) })
	for i, step := range []func() error{func() error { return c.Pause(ctx, 1) }, func() error { return c.Kill(ctx, 3) }} {
		require.Eventually(t, func() bool { return done() >= all*(i+1)/5 }, time.Minute, time.Millisecond)
		require.NoError(t, step())
		if !more {
			assert.Less(t, done(), all, "a fault after the holders were done")
		}
	}
	if more {
		after := done() + all/5
		require.Eventually(t, func() bool { return done() >= after }, time.Minute, time.Millisecond, "holds with both faults in")
	}
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
		assert.ErrorIs(t, err, report.ErrNodeRecovering, "every node has been up for seconds, not an hour")
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
