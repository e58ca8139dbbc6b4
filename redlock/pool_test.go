package redlock

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests drive the go-redis transport in pool.go against in-process
// servers: miniredis for the commands and scripts, and a listener that never
// answers for a paused node. Real Redis is exercised in integration/.

func newMiniClients(t *testing.T, n int) ([]*miniredis.Miniredis, []redis.UniversalClient) {
	t.Helper()
	servers := make([]*miniredis.Miniredis, n)
	clients := make([]redis.UniversalClient, n)
	for i := range n {
		servers[i] = miniredis.RunT(t)
		c := redis.NewClient(&redis.Options{Addr: servers[i].Addr()})
		t.Cleanup(func() { _ = c.Close() })
		clients[i] = c
	}
	return servers, clients
}

func TestRedisNodeCommands(t *testing.T) {
	servers, clients := newMiniClients(t, 1)
	s, n := servers[0], newRedisNode(clients[0])
	t.Cleanup(n.close)
	assert.Equal(t, s.Addr(), n.addr())

	ok, _, err := acquireOn(n, &acquireReq{key: "k", token: "t1", ttl: 1500 * time.Millisecond})
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, 1500*time.Millisecond, s.TTL("k"), "PX in milliseconds")
	ok, _, err = acquireOn(n, &acquireReq{key: "k", token: "t2", ttl: time.Second})
	require.NoError(t, err)
	assert.False(t, ok, "NX: held by another value")
	assert.Equal(t, "t1", callOne(n, &acquireReq{key: "k", token: "t2", ttl: time.Second}).holder, "a refusal names the holder")
	ok, _, err = acquireOn(n, &acquireReq{key: "k", token: "t1", ttl: time.Second})
	require.NoError(t, err)
	assert.True(t, ok, "a retried SET that was applied counts as granted")
	assert.Equal(t, 1500*time.Millisecond, s.TTL("k"), "a retry does not re-arm the TTL")

	ok, err = extendOn(n, &extendReq{key: "k", token: "t2", ttl: 5 * time.Second})
	require.NoError(t, err)
	assert.False(t, ok, "extend with a foreign token")
	ok, err = extendOn(n, &extendReq{key: "k", token: "t1", ttl: 5 * time.Second})
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, 5*time.Second, s.TTL("k"))

	ok, err = releaseOn(n, &releaseReq{key: "k", token: "t2"})
	require.NoError(t, err)
	assert.False(t, ok, "release with a foreign token")
	assert.True(t, s.Exists("k"))
	ok, err = releaseOn(n, &releaseReq{key: "k", token: "t1"})
	require.NoError(t, err)
	assert.True(t, ok)
	assert.False(t, s.Exists("k"))

	ok, err = extendOn(n, &extendReq{key: "k", token: "t1", ttl: 5 * time.Second})
	require.NoError(t, err)
	assert.False(t, ok)
	assert.False(t, s.Exists("k"), "extend must never re-create the key")

	rep := callOne(n, &releaseReq{key: "k", token: "t1"})
	require.NoError(t, rep.err)
	assert.True(t, rep.gone, "a release resent after it was applied finds the key gone")
	assert.False(t, rep.ok)

	s.HSet("hash", "f", "v")
	s.SetTTL("hash", time.Minute)
	ok, _, err = acquireOn(n, &acquireReq{key: "hash", token: "t1", ttl: time.Second})
	require.NoError(t, err)
	assert.False(t, ok, "a reentrant lock (a hash with an expiry) is held by another")
	rep = callOne(n, &releaseReq{key: "hash", token: "t1"})
	require.NoError(t, rep.err)
	assert.False(t, rep.ok || rep.gone, "release on a key of another type: not ours, and not gone")
	ok, err = extendOn(n, &extendReq{key: "hash", token: "t1", ttl: time.Second})
	require.NoError(t, err)
	assert.False(t, ok, "extend on a key of another type: not ours")

	// What no lock leaves: another program uses the name.
	s.HSet("plainhash", "f", "v")
	_, err = s.Lpush("list", "a")
	require.NoError(t, err)
	for _, key := range []string{"plainhash", "list"} {
		_, _, err = acquireOn(n, &acquireReq{key: key, token: "t1", ttl: time.Second})
		require.True(t, misconfigured(err), "the plain acquire script says so: %v", err)
		assert.ErrorContains(t, err, "not a lock", key)
		_, _, err = acquireOn(n, &acquireReq{key: key, token: "t1", ttl: time.Second, fenceKey: fenceKey(key)})
		assert.True(t, misconfigured(err), "the acquire script says so too: %v", err)
		assert.ErrorContains(t, err, "not a lock", key)
		_, _, err = acquireOn(n, &acquireReq{key: key, token: "t1", ttl: time.Second, reentrant: true})
		assert.True(t, misconfigured(err), "and the reentrant one: %v", err)
	}
}

func TestRedisMutexOnMiniredis(t *testing.T) {
	servers, clients := newMiniClients(t, 3)
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

// silentListener accepts connections and never answers, as a paused node
// does; it closes them all when the test ends.
func silentListener(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return l.Addr().String()
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
	servers, clients := newMiniClients(t, 2)
	var silent []redis.UniversalClient
	for range 3 {
		c := redis.NewClient(&redis.Options{Addr: silentListener(t), ContextTimeoutEnabled: contextTimeout})
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

func TestRedisNodeFenceScripts(t *testing.T) {
	servers, clients := newMiniClients(t, 1)
	s, n := servers[0], newRedisNode(clients[0])
	t.Cleanup(n.close)
	req := &acquireReq{key: "k", token: "t1", ttl: time.Second, fenceKey: fenceKey("k")}

	ok, counter, err := acquireOn(n, req)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Zero(t, counter, "no counter yet")
	assert.Equal(t, time.Second, s.TTL("k"))
	ok, _, err = acquireOn(n, req)
	require.NoError(t, err)
	assert.True(t, ok, "a resent acquire of the same token is granted")

	commit := fenceReq{key: "k", token: "t1", fenceKey: fenceKey("k"), fence: 5}
	ok, err = fenceOn(n, &commit)
	require.NoError(t, err)
	assert.True(t, ok)
	got, err := s.Get(fenceKey("k"))
	require.NoError(t, err)
	assert.Equal(t, "5", got)
	assert.Zero(t, s.TTL(fenceKey("k")), "the counter never expires")
	commit.fence = 3
	ok, err = fenceOn(n, &commit)
	require.NoError(t, err)
	assert.True(t, ok)
	got, _ = s.Get(fenceKey("k"))
	assert.Equal(t, "5", got, "never lowered")

	other := &acquireReq{key: req.key, token: "t2", ttl: req.ttl, fenceKey: req.fenceKey}
	ok, counter, err = acquireOn(n, other)
	require.NoError(t, err)
	assert.False(t, ok, "held")
	assert.Equal(t, uint64(5), counter, "a refusal reports the counter too")
	ok, err = fenceOn(n, &fenceReq{key: "k", token: "t2", fenceKey: fenceKey("k"), fence: 9})
	require.NoError(t, err)
	assert.False(t, ok, "not the holder")
	got, _ = s.Get(fenceKey("k"))
	assert.Equal(t, "9", got, "raised even where the lock is not held")

	require.NoError(t, s.Set(fenceKey("bad"), "x"))
	_, _, err = acquireOn(n, &acquireReq{key: "bad", token: "t", ttl: time.Second, fenceKey: fenceKey("bad")})
	assert.ErrorContains(t, err, "not a number")

	re := &acquireReq{key: "r", token: "owner", ttl: time.Second, reentrant: true, fenceKey: fenceKey("r")}
	for range 2 {
		ok, _, err = acquireOn(n, re)
		require.NoError(t, err)
		require.True(t, ok)
	}
	undo := undoRequest(re)
	ok, err = releaseOn(n, undo)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "1", s.HGet("r", "owner"), "an undo drops one hold")
	ok, err = releaseOn(n, undo)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.False(t, s.Exists("r"), "and deletes the key with the last")
}

func TestSetFenced(t *testing.T) {
	servers, clients := newMiniClients(t, 1)
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

// callOne sends o to n and waits for the reply, for tests of one node.
func callOne(n node, o op) reply {
	ch := make(chan reply, 1)
	n.do(context.Background(), time.Now().Add(time.Minute), o, func(r reply) { ch <- r })
	return <-ch
}

func acquireOn(n node, r *acquireReq) (bool, uint64, error) {
	rep := callOne(n, r)
	return rep.ok, rep.counter, rep.err
}

func releaseOn(n node, r *releaseReq) (bool, error) {
	rep := callOne(n, r)
	return rep.ok, rep.err
}

func extendOn(n node, r *extendReq) (bool, error) {
	rep := callOne(n, r)
	return rep.ok, rep.err
}

func fenceOn(n node, r *fenceReq) (bool, error) {
	rep := callOne(n, r)
	return rep.ok, rep.err
}
