package redlock

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock/internal/node/nodetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests drive the facade over the go-redis transport against
// in-process servers: miniredis for the commands and scripts, and a
// listener that never answers for a paused node. Real Redis is exercised
// in integration/; the transport's own tests are in internal/node.

func TestRedisMutexOnMiniredis(t *testing.T) {
	servers, clients := nodetest.Miniredis(t, 3)
	r, err := New(clients)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, r.Close(context.Background())) })
	m, err := r.NewMutex("orders:1", WithTTL(time.Second))
	require.NoError(t, err)
	require.NoError(t, m.Lock(t.Context()))
	servers[0].Close() // a minority goes down
	require.NoError(t, m.Extend(t.Context()))
	require.NoError(t, m.Unlock(t.Context()))
	require.NoError(t, r.Close(t.Context()))
	assert.False(t, servers[1].Exists("orders:1"))
	assert.False(t, servers[2].Exists("orders:1"))
}

// TestNodeTimeoutWithDefaultClientOptions checks that a silent node costs one
// node timeout even though go-redis, at its default options, applies no
// context deadline to socket reads (its own read timeout is 3s), and that
// the next attempt does not wait for it at all: the node is down.
func TestNodeTimeoutWithDefaultClientOptions(t *testing.T) {
	testNodeTimeout(t, false)
}

// The same with ContextTimeoutEnabled: the library gives go-redis no
// deadline, so the option changes nothing here.
func TestNodeTimeoutWithContextTimeoutEnabled(t *testing.T) {
	testNodeTimeout(t, true)
}

func testNodeTimeout(t *testing.T, contextTimeout bool) {
	t.Helper()
	servers, clients := nodetest.Miniredis(t, 2)
	var silent []redis.UniversalClient
	for range 3 {
		c := redis.NewClient(&redis.Options{Addr: nodetest.SilentListener(t), ContextTimeoutEnabled: contextTimeout})
		t.Cleanup(func() { _ = c.Close() })
		silent = append(silent, c)
	}
	r, err := New(append(clients, silent...), WithNodeTimeout(100*time.Millisecond))
	require.NoError(t, err)
	m, err := r.NewMutex("k")
	require.NoError(t, err)

	start := time.Now()
	err = m.TryLock(t.Context())
	took := time.Since(start)
	require.ErrorIs(t, err, ErrNotAcquired)
	assert.ErrorIs(t, err, ErrNodeTimeout)
	assert.Less(t, took, time.Second, "TryLock waited for the client's 3s read timeout")
	assert.Len(t, NodeErrors(err), 3)
	assert.False(t, servers[0].Exists("k"), "the failed attempt was released on a responsive node")

	start = time.Now()
	err = m.TryLock(t.Context())
	require.ErrorIs(t, err, ErrNotAcquired)
	assert.Less(t, time.Since(start), 50*time.Millisecond, "down nodes are skipped, not waited for")
	for _, ne := range NodeErrors(err) {
		assert.ErrorIs(t, ne, ErrNodeDown)
	}
	health := r.Health()
	for i, h := range health {
		assert.Equal(t, i >= 2, h.Down, "node %d", i)
	}
	// The abandoned calls end at the client's read timeout; Close waits.
	start = time.Now()
	require.NoError(t, r.Close(t.Context()))
	t.Logf("Close waited %v for the abandoned calls", time.Since(start))
}

func TestSetFenced(t *testing.T) {
	servers, clients := nodetest.Miniredis(t, 1)
	s, c := servers[0], clients[0]
	ctx := t.Context()
	require.NoError(t, SetFenced(ctx, c, "res", "a", 3))
	require.NoError(t, SetFenced(ctx, c, "res", "b", 3), "the same holder writes again")
	err := SetFenced(ctx, c, "res", "stale", 2)
	require.ErrorIs(t, err, ErrStaleFence)
	got, _ := s.Get("res")
	assert.Equal(t, "b", got)
	require.NoError(t, SetFenced(ctx, c, "res", "c", 10))
	got, _ = s.Get("res:fence")
	assert.Equal(t, "10", got)
	assert.ErrorIs(t, SetFenced(ctx, c, "res", "x", 0), ErrInvalidArgument)
	assert.ErrorIs(t, SetFenced(ctx, c, "res", "x", 1<<53), ErrInvalidArgument)
	assert.ErrorIs(t, SetFenced(nil, c, "res", "x", 1), ErrInvalidArgument) //nolint:staticcheck // a nil context is the point
}
