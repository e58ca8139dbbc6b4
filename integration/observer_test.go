package integration

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/redlock"
	"github.com/redlock-go/redlock/redlock/report"
)

// failures is an Observer that records when each node failure reached it.
type failures struct {
	mu  sync.Mutex
	got []failure
}

type failure struct {
	at time.Time
	e  *report.NodeError
}

func (f *failures) OpStart(ctx context.Context, _ report.Op) context.Context { return ctx }
func (*failures) OpEnd(context.Context, report.Op, report.OpResult)          {}
func (*failures) LeaseEnd(report.Lease)                                      {}
func (f *failures) NodeFailed(_ context.Context, e *report.NodeError) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, failure{at: time.Now(), e: e})
}

// of returns node i's failures reported since since.
func (f *failures) of(i int, since time.Time) []failure {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []failure
	for _, x := range f.got {
		if x.e.Index == i && !x.at.Before(since) {
			out = append(out, x)
		}
	}
	return out
}

// A node that stops answering is reported to the Observer when the library
// stops waiting for it, at the node timeout, not when go-redis gives up
// (its read timeout for a paused node, seconds of dial retries for a
// killed one), at go-redis' default options; a later error of the same
// call is marked late, so each call is counted once.
func TestNodeFailureSeenAtTimeout(t *testing.T) {
	c := startCluster(t, 5)
	obs := &failures{}
	const timeout = 200 * time.Millisecond
	rl := newRedlock(t, c, redlock.WithObserver(obs), redlock.WithNodeTimeout(timeout))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m := newMutex(t, rl, "observed:"+t.Name())
	require.NoError(t, m.Lock(ctx)) // warm connections
	require.NoError(t, m.Unlock(ctx))
	// Within the node timeout plus a margin for a loaded machine; go-redis'
	// own give-ups (3 s read timeout, ~1.7 s of dial retries) are far past it.
	const within = timeout + 600*time.Millisecond

	check := func(t *testing.T, node int, fault func() error) {
		t.Helper()
		require.NoError(t, fault())
		start := time.Now()
		require.NoError(t, m.TryLock(ctx), "four nodes grant")
		require.Eventually(t, func() bool { return len(obs.of(node, start)) > 0 }, 5*time.Second, 5*time.Millisecond,
			"node %d's failure never reported", node)
		first := obs.of(node, start)[0]
		assert.Less(t, first.at.Sub(start), within, "reported %v after the call started", first.at.Sub(start))
		assert.ErrorIs(t, first.e, report.ErrNodeTimeout)
		assert.False(t, first.e.Late)
		require.NoError(t, m.Unlock(ctx)) // skips the node, now down
		time.Sleep(4 * time.Second)       // go-redis gives up on the first call
		counted := 0
		for _, f := range obs.of(node, start) {
			if !f.e.Late && !errors.Is(f.e, report.ErrNodeDown) { // not the calls skipped since
				counted++
			}
		}
		assert.Equal(t, 1, counted, "the failed call is counted once: %v", obs.of(node, start))
	}
	t.Run("paused", func(t *testing.T) {
		t.Cleanup(func() { _ = c.Unpause(context.Background(), 1) })
		check(t, 1, func() error { return c.Pause(ctx, 1) })
	})
	t.Run("killed", func(t *testing.T) {
		check(t, 3, func() error { return c.Kill(ctx, 3) })
	})
}
