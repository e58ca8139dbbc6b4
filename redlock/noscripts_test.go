package redlock

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/node/goredis/goredistest"
	"github.com/redlock-go/redlock/redlock/report"
)

// Nodes whose user is refused scripts, over miniredis (whose clients
// answer EVALSHA and EVAL as a Redis 7 user without @scripting is
// answered): the Redlock finds out by itself, and the Mutex works in full.

// refusingNodes returns n miniredis servers and clients that refuse
// scripts.
func refusingNodes(t *testing.T, n int) ([]*miniredis.Miniredis, []redis.UniversalClient) {
	t.Helper()
	servers, clients := goredistest.Miniredis(t, n)
	for _, c := range clients {
		goredistest.RefuseScripts(c.(*redis.Client))
	}
	return servers, clients
}

func TestMutexWithoutScripts(t *testing.T) {
	servers, clients := refusingNodes(t, 3)
	obs := &recorder{}
	r, err := New(clients, WithObserver(obs))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, r.Close(context.Background())) })
	ctx := t.Context()

	m, err := r.NewMutex("orders:1", WithFencing(), WithReentrant(), WithRestartDelay(0))
	require.NoError(t, err)
	require.NoError(t, m.Lock(ctx), "the first refusal switches every node, and the refused calls go again")
	first := m.Fence()
	assert.Positive(t, first)
	require.NoError(t, m.Lock(ctx), "re-entered")
	require.NoError(t, m.Extend(ctx))
	require.NoError(t, m.Unlock(ctx))
	require.NoError(t, m.Unlock(ctx))
	for _, s := range servers {
		assert.Eventually(t, func() bool { return !s.Exists("orders:1") }, time.Second, time.Millisecond, "released on every node")
	}

	other, err := r.NewMutex("orders:1", WithFencing())
	require.NoError(t, err)
	require.NoError(t, other.Lock(ctx))
	assert.Greater(t, other.Fence(), first, "fencing tokens grow without scripts too")
	busy, err := r.NewMutex("orders:1")
	require.NoError(t, err)
	require.ErrorIs(t, busy.TryLock(ctx), ErrNotAcquired, "a held lock refuses another")
	require.NoError(t, other.Unlock(ctx))

	for _, h := range r.Health() {
		assert.Equal(t, "native", h.Speaks, "miniredis answers DELEX: node %d", h.Index)
		assert.Equal(t, report.NodeCaps{Known: true, DelEx: true}, h.Caps, "found once: no INFO server, no SET IFEQ, no DELIFEQ in miniredis")
		assert.Equal(t, "server ?: DELEX IFEQ", h.Caps.String())
		require.Contains(t, h.FeaturesOff, report.FeatureScripts)
		assert.ErrorContains(t, h.FeaturesOff[report.FeatureScripts], "'evalsha'")
	}
	told := 0
	obs.mu.Lock()
	for _, f := range obs.nodes {
		if errors.Is(f.err, ErrMisconfigured) && f.err.Err != nil && strings.Contains(f.err.Err.Error(), "scripts refused") &&
			strings.Contains(f.err.Err.Error(), "DELEX IFEQ") { // the node's capabilities, found before it is told
			told++
		}
	}
	obs.mu.Unlock()
	assert.Equal(t, 3, told, "the switch is reported once per node, with the node's capabilities")
}

// What needs scripts is refused at once, naming scripting, and leaves
// nothing behind; it never waits.
func TestNeedsScriptsRefusedAtOnce(t *testing.T) {
	servers, clients := refusingNodes(t, 3)
	r, err := New(clients, WithoutScripts())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, r.Close(context.Background())) })
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()

	s, err := r.NewSemaphore("pool", 2)
	require.NoError(t, err)
	err = s.Acquire(ctx)
	require.ErrorIs(t, err, ErrMisconfigured)
	assert.ErrorContains(t, err, "+@scripting")
	rw, err := r.NewRWMutex("doc")
	require.NoError(t, err)
	require.ErrorIs(t, rw.RLock(ctx), ErrMisconfigured)
	require.ErrorIs(t, rw.Lock(ctx), ErrMisconfigured)
	mm, err := r.NewMultiMutex([]string{"{t}a", "{t}b"})
	require.NoError(t, err)
	require.ErrorIs(t, mm.Lock(ctx), ErrMisconfigured)
	require.NoError(t, ctx.Err(), "refused at once, not after waiting")
	for _, sv := range servers {
		assert.Empty(t, sv.Keys(), "nothing half-taken")
	}
	for _, h := range r.Health() {
		// "native" once the node was asked whether it has DELEX: an
		// attempt that was hopeless may have ended before a node's turn.
		assert.Contains(t, []string{"native", "transactions"}, h.Speaks)
		assert.NotContains(t, h.FeaturesOff, report.FeatureScripts, "told up front: no refusal was seen")
	}
}

// Contended, with renewal, without scripts: never two holders.
func TestContendedWithoutScripts(t *testing.T) {
	_, clients := refusingNodes(t, 3)
	r, err := New(clients)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, r.Close(context.Background())) })
	var (
		mu      sync.Mutex
		holders int
		counter int
	)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			m, err := r.NewMutex("hot", WithTTL(2*time.Second), WithRenewal())
			if !assert.NoError(t, err) {
				return
			}
			for range 10 {
				if !assert.NoError(t, m.Lock(t.Context())) {
					return
				}
				mu.Lock()
				holders++
				assert.Equal(t, 1, holders, "two holders at once")
				mu.Unlock()
				c := counter
				time.Sleep(time.Millisecond)
				counter = c + 1
				mu.Lock()
				holders--
				mu.Unlock()
				assert.NoError(t, m.Unlock(t.Context()))
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 40, counter, "no update lost")
	for _, h := range r.Health() {
		assert.NotEqual(t, node.Scripts.String(), h.Speaks)
	}
}
