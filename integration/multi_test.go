package integration

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/redlock"
	"github.com/redlock-go/redlock/redlock/report"
)

// Multi-name locks against plain locks on their names, from separate
// Redlocks (as separate processes would be): two multi-name locks whose
// names overlap in opposite orders ([a b], [c b]) and a plain lock on each
// name contend; every holder records a window per name it holds and
// increments a read-sleep-write counter per name. No two windows of one
// name may overlap and no update may be lost; every worker must finish
// (no deadlock), with or without a minority of nodes paused and killed.
func TestMultiMutexContention(t *testing.T) {
	t.Run("healthy", func(t *testing.T) { multiContention(t, startCluster(t, 5), false) })
	t.Run("minority paused and killed", func(t *testing.T) { multiContention(t, startCluster(t, 5), true) })
}

// multiLedger is what the holders of multiContention did, by name.
type multiLedger struct {
	t        *testing.T
	mu       sync.Mutex
	windows  map[string][]window
	counters map[string]int
	sections map[string]int
}

// section is one hold of m, on names, by worker w: read each name's
// counter, sleep, write each back; it reports whether the worker goes on.
func (l *multiLedger) section(ctx context.Context, m *redlock.Mutex, w int, names []string, faults bool) bool {
	if !assert.NoError(l.t, m.Lock(ctx), "worker %d", w) {
		return false
	}
	start := time.Now()
	read := make(map[string]int, len(names))
	l.mu.Lock()
	for _, n := range names {
		read[n] = l.counters[n]
	}
	l.mu.Unlock()
	time.Sleep(2 * time.Millisecond)
	end := time.Now()
	if until := m.Until(); until.Before(end) {
		end = until
	}
	l.mu.Lock()
	for _, n := range names {
		l.counters[n] = read[n] + 1 // lost if another holder wrote meanwhile
		l.sections[n]++
		l.windows[n] = append(l.windows[n], window{w, start, end})
	}
	l.mu.Unlock()
	if err := m.Unlock(ctx); err != nil && faults {
		// A lock granted by a bare quorum that included the node just
		// killed is found on too few nodes: its keys expire at their
		// TTL, and its window is recorded.
		assert.True(l.t, notHeldOrUnconfirmed(err), "worker %d: %v", w, err)
		l.t.Logf("worker %d: unlock: %v", w, err)
	} else {
		assert.NoError(l.t, err, "worker %d", w)
	}
	return true
}

// total is how many sections have ended, over every name.
func (l *multiLedger) total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, v := range l.sections {
		n += v
	}
	return n
}

// multiContention runs the contention on c's nodes, pausing node 1 and
// killing node 3 midway when faults is set; more options follow the
// holders' own (a longer node timeout for a machine under load).
func multiContention(t *testing.T, c nodeSet, faults bool, more ...redlock.Option) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	name := func(s string) string { return "{multi:" + t.Name() + "}:" + s }
	holders := [][]string{{"a", "b"}, {"c", "b"}, {"a"}, {"b"}, {"c"}}
	const rounds = 15
	l := &multiLedger{t: t, windows: map[string][]window{}, counters: map[string]int{}, sections: map[string]int{}}
	var wg sync.WaitGroup
	origin := time.Now()
	faulted := make(chan struct{})
	opts := []redlock.Option{redlock.WithTTL(3 * time.Second), redlock.WithNodeTimeout(100 * time.Millisecond),
		redlock.WithRetryDelay(time.Millisecond, 30*time.Millisecond)}
	opts = append(opts, more...)
	for w, own := range holders {
		names := make([]string, len(own))
		for i, s := range own {
			names[i] = name(s)
		}
		rl := newRedlock(t, c, opts...)
		m, err := rl.NewMultiMutex(names)
		require.NoError(t, err)
		wg.Go(func() {
			// With faults, the workers go on past their rounds until the
			// faults are in and some sections ran under them.
			for i := 0; i < rounds || faults && !closed(faulted); i++ {
				if !l.section(ctx, m, w, names, faults) {
					return
				}
			}
		})
	}
	if faults {
		all := 0
		for _, own := range holders {
			all += rounds * len(own)
		}
		faultMidway(t, ctx, c, l.total, all, true)
		close(faulted)
	}
	wg.Wait()
	for _, s := range []string{"a", "b", "c"} {
		n := name(s)
		assert.Equal(t, l.sections[n], l.counters[n], "lost updates on %s", s)
		assert.Empty(t, describe(overlaps(l.windows[n]), origin), "two holders of %s at once", s)
	}
	if !faults {
		assert.Equal(t, 3*rounds, l.sections[name("b")], "every worker on b finished")
	} else {
		assert.GreaterOrEqual(t, l.sections[name("b")], 3*rounds, "every worker on b finished its rounds")
	}
}

// A node up for less than the restart delay refuses a multi-name lock as
// it refuses a plain one, changing nothing.
func TestMultiMutexRestartDelay(t *testing.T) {
	c := startCluster(t, 3)
	rl := newRedlock(t, c, redlock.WithRestartDelay(time.Hour))
	m, err := rl.NewMultiMutex([]string{"{delay}:a", "{delay}:b"}, redlock.WithTTL(time.Minute))
	require.NoError(t, err)
	err = m.TryLock(t.Context())
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	assert.ErrorIs(t, err, report.ErrNodeRecovering, "every node has been up for seconds, not an hour")
	assert.Equal(t, []string{"", "", ""}, values(t, inspector(t, c), "{delay}:a"))
}

// closed reports whether ch is closed.
func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
