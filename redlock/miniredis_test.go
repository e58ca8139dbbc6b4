package redlock

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock/internal/node/goredis/goredistest"
	"github.com/redlock-go/redlock/internal/node/nodetest"
	"github.com/redlock-go/redlock/redlock/report"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests drive the facade over the go-redis transport against
// in-process servers: miniredis for the commands and scripts, and a
// listener that never answers for a paused node. Real Redis is exercised
// in integration/; the transport's own tests are in internal/node.

func TestRedisMutexOnMiniredis(t *testing.T) {
	servers, clients := goredistest.Miniredis(t, 3)
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
	servers, clients := goredistest.Miniredis(t, 2)
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
	assert.ErrorIs(t, err, report.ErrNodeTimeout)
	assert.Less(t, took, time.Second, "TryLock waited for the client's 3s read timeout")
	assert.Len(t, report.NodeErrors(err), 3)
	assert.False(t, servers[0].Exists("k"), "the failed attempt was released on a responsive node")

	start = time.Now()
	err = m.TryLock(t.Context())
	require.ErrorIs(t, err, ErrNotAcquired)
	assert.Less(t, time.Since(start), 50*time.Millisecond, "down nodes are skipped, not waited for")
	for _, ne := range report.NodeErrors(err) {
		assert.ErrorIs(t, ne, report.ErrNodeDown)
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

// Two nodes with a wrong password and one with none leave no quorum: the
// first attempt fails at once, as misconfigured, and names each node's
// refusal. go-redis fails a new connection's AUTH with an error reply that
// it does not put on a pipeline's commands (a grant and its TIME): they
// were read as answered with nothing, and Lock waited for its back-off.
func TestLockStopsOnWrongPasswords(t *testing.T) {
	clients := make([]redis.UniversalClient, 5)
	for i := range clients {
		s := miniredis.RunT(t)
		s.RequireAuth("secret")
		pass := "secret"
		switch i {
		case 0, 1:
			pass = "wrong"
		case 2:
			pass = ""
		}
		c := redis.NewClient(&redis.Options{Addr: s.Addr(), Password: pass})
		t.Cleanup(func() { _ = c.Close() })
		clients[i] = c
	}
	rec := &recorder{}
	r, err := New(clients, WithNodeTimeout(time.Second), WithObserver(rec)) // a loaded machine is no node failure here
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, r.Close(context.Background())) })
	m, err := r.NewMutex("k")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	err = m.Lock(ctx)
	require.ErrorIs(t, err, ErrNotAcquired)
	require.ErrorIs(t, err, ErrMisconfigured)
	assert.ErrorContains(t, err, "misconfigured nodes: 3")
	assert.NoError(t, ctx.Err(), "Lock returned before its context ended")
	_, ends, _, failures := rec.snapshot()
	require.Len(t, ends, 1)
	assert.Equal(t, 1, ends[0].Attempts, "refused at the first attempt")
	for _, f := range failures {
		assert.NotContains(t, f.err.Error(), "unexpected", "node %d", f.err.Index)
	}
	for _, ne := range report.NodeErrors(err) {
		want := map[int]string{0: "WRONGPASS", 1: "WRONGPASS", 2: "NOAUTH"}[ne.Index]
		require.NotEmpty(t, want, "node %d did not fail: %v", ne.Index, ne)
		assert.ErrorIs(t, ne, ErrMisconfigured)
		assert.ErrorContains(t, ne, want)
	}
	assert.Len(t, report.NodeErrors(err), 3)
	// Health says so as Lock returns, before any audit: the nodes answer
	// (none is down), and refuse.
	for _, h := range r.Health() {
		assert.False(t, h.Down, "node %d", h.Index)
		want := map[int]string{0: "WRONGPASS", 1: "WRONGPASS", 2: "NOAUTH"}[h.Index]
		if want == "" {
			assert.NoError(t, h.Misconfigured, "node %d", h.Index)
			continue
		}
		require.ErrorIs(t, h.Misconfigured, ErrMisconfigured, "node %d", h.Index)
		assert.ErrorContains(t, h.Misconfigured, want, "node %d", h.Index)
		assert.Nil(t, h.Audit, "node %d: no audit ran yet", h.Index)
	}
	require.Eventually(t, func() bool { return len(r.e.IDs.Reg.Missing()) == 0 }, 5*time.Second, time.Millisecond,
		"every node was asked who it is")
	for _, h := range r.Health() {
		assert.NotContains(t, h.FeaturesOff, report.FeatureClock, "node %d: a wrong password refuses the client, not TIME", h.Index)
		assert.NotContains(t, h.FeaturesOff, report.FeatureIdentify, "node %d: nor INFO", h.Index)
	}
}

// At go-redis' default options a failed dial is retried 5 times, 100 ms
// apart, apart from the call: the call ends long after the node timeout.
// The node's timeout still names the dial's failure, and a certificate
// no one trusts is ErrMisconfigured from the first attempt. A refused
// connection is certain at once: the call fails with it, before the node
// timeout, and the node is down.
func TestTimeoutNamesDialFailure(t *testing.T) {
	const nodeTimeout = 300 * time.Millisecond // a loaded machine's first handshake fits; go-redis' retries (400 ms and more) do not
	t.Run("certificate", func(t *testing.T) {
		clients := make([]redis.UniversalClient, 3)
		for i := range clients {
			c := redis.NewClient(&redis.Options{Addr: nodetest.UntrustedTLSListener(t), TLSConfig: nodetest.UntrustedTLS()})
			t.Cleanup(func() { _ = c.Close() })
			clients[i] = c
		}
		rec := &recorder{}
		r, err := New(clients, WithNodeTimeout(nodeTimeout), WithObserver(rec))
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, r.Close(context.Background())) })
		m, err := r.NewMutex("k")
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		err = m.Lock(ctx)
		require.ErrorIs(t, err, ErrNotAcquired)
		require.ErrorIs(t, err, ErrMisconfigured)
		assert.NoError(t, ctx.Err(), "Lock returned before its context ended")
		_, ends, _, _ := rec.snapshot()
		require.Len(t, ends, 1)
		assert.Equal(t, 1, ends[0].Attempts, "refused at the first attempt")
		t.Log(err)
		require.Len(t, report.NodeErrors(err), 3)
		for _, ne := range report.NodeErrors(err) {
			assert.ErrorIs(t, ne, report.ErrNodeTimeout, "node %d", ne.Index)
			assert.ErrorIs(t, ne, ErrMisconfigured, "node %d", ne.Index)
			assert.ErrorContains(t, ne, "last dial")
			assert.ErrorContains(t, ne, "x509: certificate signed by unknown authority")
		}
	})
	t.Run("refused", func(t *testing.T) {
		_, clients := goredistest.Miniredis(t, 2)
		for range 3 {
			c := redis.NewClient(&redis.Options{Addr: nodetest.RefusedAddr(t)})
			t.Cleanup(func() { _ = c.Close() })
			clients = append(clients, c)
		}
		r, err := New(clients, WithNodeTimeout(nodeTimeout))
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, r.Close(context.Background())) })
		m, err := r.NewMutex("k")
		require.NoError(t, err)
		start := time.Now()
		err = m.TryLock(t.Context())
		took := time.Since(start)
		require.ErrorIs(t, err, ErrNotAcquired)
		assert.NotErrorIs(t, err, ErrMisconfigured, "a refused connection may be a node restarting")
		assert.Less(t, took, nodeTimeout, "the refusals end the attempt")
		t.Log(err)
		require.Len(t, report.NodeErrors(err), 3)
		for _, ne := range report.NodeErrors(err) {
			assert.GreaterOrEqual(t, ne.Index, 2)
			assert.NotErrorIs(t, ne, report.ErrNodeTimeout, "node %d: a refusal is no timeout", ne.Index)
			assert.ErrorContains(t, ne, "connection refused")
			assert.NotErrorIs(t, ne, context.DeadlineExceeded)
			assert.NotErrorIs(t, ne, context.Canceled)
		}
		for _, h := range r.Health()[2:] {
			assert.True(t, h.Down, "node %d", h.Index)
		}
	})
}

func TestSetFenced(t *testing.T) {
	servers, clients := goredistest.Miniredis(t, 1)
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

// TestInspectSemaphoreOnMiniredis reads a semaphore through inspect.lua:
// its kind, permit count and each node's live permits; a lock is still a
// lock, and a key of another type still a node error.
func TestInspectSemaphoreOnMiniredis(t *testing.T) {
	servers, clients := goredistest.Miniredis(t, 3)
	r, err := New(clients, WithNodeTimeout(time.Second)) // a loaded machine is no node failure here
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, r.Close(context.Background())) })
	a, err := r.NewSemaphore("jobs", 2, WithTTL(10*time.Second))
	require.NoError(t, err)
	b, err := r.NewSemaphore("jobs", 2, WithTTL(20*time.Second))
	require.NoError(t, err)
	require.NoError(t, a.TryAcquire(t.Context()))
	require.NoError(t, b.TryAcquire(t.Context()))
	// Wait for every node's grant (a quorum suffices to return).
	require.Eventually(t, func() bool {
		for _, s := range servers {
			if n, _ := s.ZMembers("jobs"); len(n) != 2 {
				return false
			}
		}
		return true
	}, time.Second, time.Millisecond)
	// A third holder admitted on one node only: not a quorum.
	_, err = clients[2].ZAdd(t.Context(), "jobs", redis.Z{Score: float64(time.Now().Add(time.Minute).UnixMilli()), Member: "stray"}).Result()
	require.NoError(t, err)

	s, err := r.Inspect(t.Context(), "jobs")
	require.NoError(t, err)
	assert.Equal(t, report.KindSemaphore, s.Kind)
	assert.Empty(t, s.Holder, "a semaphore has no lock holder")
	assert.Zero(t, s.Held)
	assert.False(t, s.Locked())
	assert.Equal(t, 2, s.Quorum, "the lock quorum field is unchanged")
	require.NotNil(t, s.Semaphore)
	assert.Equal(t, 2, s.Semaphore.Permits)
	assert.Equal(t, 3, s.Semaphore.Quorum, "3·2/3+1")
	assert.Equal(t, 2, s.Semaphore.Held())
	tokA, tokB := permitOf(a), permitOf(b)
	first, second := min(tokA, tokB), max(tokA, tokB)
	assert.Equal(t, []report.PermitHolder{{Token: first, Nodes: 3}, {Token: second, Nodes: 3}, {Token: "stray", Nodes: 1}}, s.Semaphore.Holders)
	for i, ns := range s.Nodes {
		require.NoError(t, ns.Err, "node %d", i)
		assert.Equal(t, report.KindSemaphore, ns.Kind)
		assert.Equal(t, 2, ns.PermitCount)
		assert.False(t, ns.Held)
		want := 2
		if i == 2 {
			want = 3
		}
		require.Len(t, ns.Permits, want, "node %d", i)
		assert.Equal(t, tokA, ns.Permits[0].Token, "soonest to expire first")
		assert.InDelta(t, 10*time.Second, ns.Permits[0].TTL, float64(time.Second))
		assert.Equal(t, tokB, ns.Permits[1].Token)
		assert.InDelta(t, 20*time.Second, ns.Permits[1].TTL, float64(time.Second))
	}

	// Expired permits not yet dropped are not shown: a's, 15s later by
	// node 0's clock, and one written in the past.
	servers[0].SetTime(time.Now().Add(15 * time.Second))
	_, err = clients[0].ZAdd(t.Context(), "jobs", redis.Z{Score: float64(time.Now().Add(-time.Second).UnixMilli()), Member: "old"}).Result()
	require.NoError(t, err)
	s, err = r.Inspect(t.Context(), "jobs")
	require.NoError(t, err)
	require.Len(t, s.Nodes[0].Permits, 1, "by the node's clock, only b's permit is live")
	assert.Equal(t, tokB, s.Nodes[0].Permits[0].Token)
	assert.InDelta(t, 5*time.Second, s.Nodes[0].Permits[0].TTL, float64(time.Second))

	// A lock still reads as a lock; another type is still an error.
	m, err := r.NewMutex("plain")
	require.NoError(t, err)
	require.NoError(t, m.Lock(t.Context()))
	s, err = r.Inspect(t.Context(), "plain")
	require.NoError(t, err)
	assert.Equal(t, report.KindLock, s.Kind)
	assert.Nil(t, s.Semaphore)
	assert.Equal(t, report.KindLock, s.Nodes[0].Kind)
	assert.Nil(t, s.Nodes[0].Permits)
	_, err = clients[1].ZAdd(t.Context(), "forever", redis.Z{Score: 1, Member: "x"}).Result()
	require.NoError(t, err)
	s, err = r.Inspect(t.Context(), "forever")
	require.NoError(t, err)
	assert.ErrorIs(t, s.Nodes[1].Err, ErrMisconfigured, "a sorted set without expiry is no semaphore")
	assert.Empty(t, s.Kind)
	s, err = r.Inspect(t.Context(), "nothing")
	require.NoError(t, err)
	assert.Empty(t, s.Kind)
	assert.Nil(t, s.Semaphore)
}

// Another program's sorted set (no expiry) at a semaphore's name is no
// semaphore: an acquisition is refused as misconfigured and leaves its
// members alone, even those scored like expired permits; a release or an
// extension of a token it does not hold is refused the same way.
func TestSemaphoreLeavesAlienSortedSet(t *testing.T) {
	_, clients := goredistest.Miniredis(t, 3)
	r, err := New(clients)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, r.Close(context.Background())) })
	for _, c := range clients {
		require.NoError(t, c.ZAdd(t.Context(), "scores", redis.Z{Score: 1, Member: "a"}, redis.Z{Score: 2, Member: "b"}).Err())
	}
	s, err := r.NewSemaphore("scores", 3)
	require.NoError(t, err)
	err = s.TryAcquire(t.Context())
	require.ErrorIs(t, err, ErrNotAcquired)
	assert.ErrorIs(t, err, ErrMisconfigured)
	for i, c := range clients {
		assert.Equal(t, []string{"a", "b"}, c.ZRange(t.Context(), "scores", 0, -1).Val(), "node %d", i)
		assert.Equal(t, time.Duration(-1), c.PTTL(t.Context(), "scores").Val(), "node %d", i)
	}
}
