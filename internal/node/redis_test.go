package node_test

import (
	"github.com/redlock-go/redlock/internal/node"

	"context"
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock/internal/node/goredis"
	"github.com/redlock-go/redlock/internal/node/goredis/goredistest"
	"github.com/redlock-go/redlock/internal/node/nodetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests drive the node (redis.go) over the go-redis transport (package goredis) against in-process
// servers: miniredis for the commands and scripts, and a listener that never
// answers for a paused node. Real Redis is exercised in integration/.

func TestRedisNodeCommands(t *testing.T) {
	servers, clients := goredistest.Miniredis(t, 1)
	s, n := servers[0], goredis.NewNode(clients[0])
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	assert.Equal(t, s.Addr(), n.Addr())

	ok, _, err := acquireOn(n, &node.Acquire{Key: "k", Token: "t1", TTL: 1500 * time.Millisecond})
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, 1500*time.Millisecond, s.TTL("k"), "PX in milliseconds")
	ok, _, err = acquireOn(n, &node.Acquire{Key: "k", Token: "t2", TTL: time.Second})
	require.NoError(t, err)
	assert.False(t, ok, "NX: held by another value")
	assert.Equal(t, "t1", callOne(n, &node.Acquire{Key: "k", Token: "t2", TTL: time.Second}).Value.(node.Grant).Holder, "a refusal names the holder")
	ok, _, err = acquireOn(n, &node.Acquire{Key: "k", Token: "t1", TTL: time.Second})
	require.NoError(t, err)
	assert.True(t, ok, "a retried SET that was applied counts as granted")
	assert.Equal(t, time.Second, s.TTL("k"), "the grant of a key that holds the token already re-arms its TTL (a lock handed over)")

	ok, err = extendOn(n, &node.Extend{Key: "k", Token: "t2", TTL: 5 * time.Second})
	require.NoError(t, err)
	assert.False(t, ok, "extend with a foreign token")
	ok, err = extendOn(n, &node.Extend{Key: "k", Token: "t1", TTL: 5 * time.Second})
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, 5*time.Second, s.TTL("k"))

	ok, err = releaseOn(n, &node.Release{Key: "k", Token: "t2"})
	require.NoError(t, err)
	assert.False(t, ok, "release with a foreign token")
	assert.True(t, s.Exists("k"))
	ok, err = releaseOn(n, &node.Release{Key: "k", Token: "t1"})
	require.NoError(t, err)
	assert.True(t, ok)
	assert.False(t, s.Exists("k"))

	ok, err = extendOn(n, &node.Extend{Key: "k", Token: "t1", TTL: 5 * time.Second})
	require.NoError(t, err)
	assert.False(t, ok)
	assert.False(t, s.Exists("k"), "extend must never re-create the key")

	rep := callOne(n, &node.Release{Key: "k", Token: "t1"})
	require.NoError(t, rep.Err)
	assert.True(t, node.ReleasedOf(rep).Gone, "a release resent after it was applied finds the key gone")
	assert.False(t, rep.OK)

	s.HSet("hash", "f", "v")
	s.SetTTL("hash", time.Minute)
	ok, _, err = acquireOn(n, &node.Acquire{Key: "hash", Token: "t1", TTL: time.Second})
	require.NoError(t, err)
	assert.False(t, ok, "a reentrant lock (a hash with an expiry) is held by another")
	rep = callOne(n, &node.Release{Key: "hash", Token: "t1"})
	require.NoError(t, rep.Err)
	assert.False(t, rep.OK || node.ReleasedOf(rep).Gone, "release on a key of another type: not ours, and not gone")
	ok, err = extendOn(n, &node.Extend{Key: "hash", Token: "t1", TTL: time.Second})
	require.NoError(t, err)
	assert.False(t, ok, "extend on a key of another type: not ours")

	// What no lock leaves: another program uses the name.
	s.HSet("plainhash", "f", "v")
	_, err = s.Lpush("list", "a")
	require.NoError(t, err)
	for _, key := range []string{"plainhash", "list"} {
		_, _, err = acquireOn(n, &node.Acquire{Key: key, Token: "t1", TTL: time.Second})
		require.True(t, node.Misconfigured(err), "the plain acquire script says so: %v", err)
		assert.ErrorContains(t, err, "not a lock", key)
		_, _, err = acquireOn(n, &node.Acquire{Key: key, Token: "t1", TTL: time.Second, FenceKey: node.FenceKey(key)})
		assert.True(t, node.Misconfigured(err), "the acquire script says so too: %v", err)
		assert.ErrorContains(t, err, "not a lock", key)
		_, _, err = acquireOn(n, &node.Acquire{Shape: node.Reentrant, Key: key, Token: "t1", TTL: time.Second})
		assert.True(t, node.Misconfigured(err), "and the reentrant one: %v", err)
	}
}

func TestRedisNodeFenceScripts(t *testing.T) {
	servers, clients := goredistest.Miniredis(t, 1)
	s, n := servers[0], goredis.NewNode(clients[0])
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	req := &node.Acquire{Key: "k", Token: "t1", TTL: time.Second, FenceKey: node.FenceKey("k")}

	ok, counter, err := acquireOn(n, req)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Zero(t, counter, "no counter yet")
	assert.Equal(t, time.Second, s.TTL("k"))
	ok, _, err = acquireOn(n, req)
	require.NoError(t, err)
	assert.True(t, ok, "a resent acquire of the same token is granted")

	commit := node.Fence{Key: "k", Token: "t1", FenceKey: node.FenceKey("k"), Fence: 5}
	ok, err = fenceOn(n, &commit)
	require.NoError(t, err)
	assert.True(t, ok)
	got, err := s.Get(node.FenceKey("k"))
	require.NoError(t, err)
	assert.Equal(t, "5", got)
	assert.Zero(t, s.TTL(node.FenceKey("k")), "the counter never expires")
	commit.Fence = 3
	ok, err = fenceOn(n, &commit)
	require.NoError(t, err)
	assert.True(t, ok)
	got, _ = s.Get(node.FenceKey("k"))
	assert.Equal(t, "5", got, "never lowered")

	other := &node.Acquire{Key: req.Key, Token: "t2", TTL: req.TTL, FenceKey: req.FenceKey}
	ok, counter, err = acquireOn(n, other)
	require.NoError(t, err)
	assert.False(t, ok, "held")
	assert.Equal(t, uint64(5), counter, "a refusal reports the counter too")
	ok, err = fenceOn(n, &node.Fence{Key: "k", Token: "t2", FenceKey: node.FenceKey("k"), Fence: 9})
	require.NoError(t, err)
	assert.False(t, ok, "not the holder")
	got, _ = s.Get(node.FenceKey("k"))
	assert.Equal(t, "9", got, "raised even where the lock is not held")

	require.NoError(t, s.Set(node.FenceKey("bad"), "x"))
	_, _, err = acquireOn(n, &node.Acquire{Key: "bad", Token: "t", TTL: time.Second, FenceKey: node.FenceKey("bad")})
	assert.ErrorContains(t, err, "not a number")

	re := &node.Acquire{Shape: node.Reentrant, Key: "r", Token: "owner", TTL: time.Second, FenceKey: node.FenceKey("r")}
	for range 2 {
		ok, _, err = acquireOn(n, re)
		require.NoError(t, err)
		require.True(t, ok)
	}
	undo := &node.Release{Shape: node.Reentrant, Key: re.Key, Token: re.Token, Drop: node.DropUndo}
	ok, err = releaseOn(n, undo)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "1", s.HGet("r", "owner"), "an undo drops one hold")
	ok, err = releaseOn(n, undo)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.False(t, s.Exists("r"), "and deletes the key with the last")
}

// callOne sends o to n and waits for the reply, for tests of one node.
func callOne(n node.Node, o node.Op) node.Reply {
	ch := make(chan node.Reply, 1)
	n.Do(context.Background(), time.Now().Add(time.Minute), o, func(r node.Reply) { ch <- r })
	return <-ch
}

func acquireOn(n node.Node, r node.Op) (bool, uint64, error) {
	rep := callOne(n, r)
	return rep.OK, node.GrantOf(rep).Counter, rep.Err
}

func releaseOn(n node.Node, r node.Op) (bool, error) {
	rep := callOne(n, r)
	return rep.OK, rep.Err
}

func extendOn(n node.Node, r node.Op) (bool, error) {
	rep := callOne(n, r)
	return rep.OK, rep.Err
}

func fenceOn(n node.Node, r *node.Fence) (bool, error) {
	rep := callOne(n, r)
	return rep.OK, rep.Err
}

// A stalled node's queue is bounded: requests beyond it fail at once,
// unsent, and cost no goroutine.
func TestStalledNodeQueueIsBounded(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: nodetest.SilentListener(t), MaxRetries: -1, ReadTimeout: 500 * time.Millisecond})
	t.Cleanup(func() { _ = c.Close() })
	n := goredis.NewNode(c)
	before := runtime.NumGoroutine()
	var full, done atomic.Int32
	// The node.Workers take up to node.MaxBatch requests each, the queue holds
	// node.QueueLen more.
	const sent = node.QueueLen + node.Workers*node.MaxBatch + 200
	for range sent {
		n.Do(context.Background(), time.Now().Add(50*time.Millisecond), &node.Acquire{Key: "k", Token: "t", TTL: time.Second}, func(rep node.Reply) {
			if errors.Is(rep.Err, node.ErrQueueFull) {
				full.Add(1)
			}
			done.Add(1)
		})
	}
	assert.GreaterOrEqual(t, full.Load(), int32(200), "the requests beyond the queue fail at once")
	assert.LessOrEqual(t, runtime.NumGoroutine()-before, node.Workers+2+10, "no goroutine per request")
	require.NoError(t, n.Close(context.Background()))
	assert.Equal(t, int32(sent), done.Load(), "every request is answered once")
}

// A client whose password is wrong, or missing, gets the server's refusal
// as its error, from the first request on and whichever way the node is
// spoken to. go-redis fails a new connection's HELLO or AUTH with an error
// reply that it does not put on a pipeline's commands: a grant, sent with
// the TIME that ends its batch, then looked answered with nothing.
func TestRedisNodeAuthRefused(t *testing.T) {
	for _, tc := range []struct {
		name, user, pass, want string
	}{
		{"wrong password", "", "wrong", "WRONGPASS"},
		{"no password", "", "", "NOAUTH"},
		{"wrong user", "nobody", "secret", "WRONGPASS"},
	} {
		for _, way := range []node.Way{node.Scripts, node.Transactions} {
			t.Run(tc.name+"/"+way.String(), func(t *testing.T) {
				s := miniredis.RunT(t)
				s.RequireAuth("secret")
				c := redis.NewClient(&redis.Options{Addr: s.Addr(), Username: tc.user, Password: tc.pass})
				t.Cleanup(func() { _ = c.Close() })
				n := goredis.NewNode(c)
				n.SetWay(way)
				t.Cleanup(func() { _ = n.Close(context.Background()) })
				for _, op := range []node.Op{
					&node.Acquire{Key: "k", Token: "t", TTL: time.Second},
					&node.Acquire{Key: "k", Token: "t", TTL: time.Second, FenceKey: node.FenceKey("k")},
					&node.Extend{Key: "k", Token: "t", TTL: time.Second},
					&node.Release{Key: "k", Token: "t"},
				} {
					rep := callOne(n, op)
					require.Error(t, rep.Err, op.Name())
					assert.True(t, node.Misconfigured(rep.Err), "%s: %v", op.Name(), rep.Err)
					assert.ErrorContains(t, rep.Err, tc.want, op.Name())
					assert.False(t, rep.OK)
				}
			})
		}
	}
}

// A failed dial is known as it happens, before go-redis' own dial retries
// (5, 100 ms apart, at its default options) end the call, and forgotten
// once a dial succeeds.
func TestRedisNodeLastDialFailure(t *testing.T) {
	t.Run("certificate", func(t *testing.T) {
		c := redis.NewClient(&redis.Options{Addr: nodetest.UntrustedTLSListener(t), TLSConfig: nodetest.UntrustedTLS()})
		t.Cleanup(func() { _ = c.Close() })
		n := goredis.NewNode(c)
		t.Cleanup(func() { _ = n.Close(context.Background()) })
		assert.Nil(t, n.LastDialFailure(), "nothing dialled yet")
		replied := make(chan node.Reply, 1)
		sent := time.Now()
		n.Do(context.Background(), time.Now().Add(time.Minute), &node.Acquire{Key: "k", Token: "t", TTL: time.Second}, func(r node.Reply) { replied <- r })
		require.Eventually(t, func() bool { return n.LastDialFailure() != nil }, 5*time.Second, time.Millisecond)
		f := n.LastDialFailure()
		assert.ErrorContains(t, f.Err, "certificate signed by unknown authority")
		assert.True(t, node.Misconfigured(f.Err), "%v", f.Err)
		assert.False(t, f.At.Before(sent))
		rep := <-replied // once go-redis gave up
		assert.True(t, node.Misconfigured(rep.Err), "%v", rep.Err)
	})
	for _, tc := range []struct {
		name   string
		client func(addr string) redis.UniversalClient
	}{
		{"cluster shard", func(addr string) redis.UniversalClient {
			return redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}, TLSConfig: nodetest.UntrustedTLS()})
		}},
		{"ring shard", func(addr string) redis.UniversalClient {
			return redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": addr}, TLSConfig: nodetest.UntrustedTLS()})
		}},
		{"reset in the TLS handshake", func(addr string) redis.UniversalClient {
			return redis.NewClient(&redis.Options{Addr: addr, TLSConfig: nodetest.UntrustedTLS()})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, want := nodetest.UntrustedTLSListener(t), "certificate signed by unknown authority"
			if strings.HasPrefix(tc.name, "reset") {
				addr, want = nodetest.ResetListener(t), "connection reset by peer"
			}
			c := tc.client(addr)
			t.Cleanup(func() { _ = c.Close() })
			n := goredis.NewNode(c)
			t.Cleanup(func() { _ = n.Close(context.Background()) })
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			n.Do(ctx, time.Now().Add(time.Minute), &node.Acquire{Key: "k", Token: "t", TTL: time.Second}, func(node.Reply) {})
			require.Eventually(t, func() bool { return n.LastDialFailure() != nil }, 5*time.Second, time.Millisecond)
			assert.ErrorContains(t, n.LastDialFailure().Err, want)
		})
	}
	t.Run("reset before the first reply", func(t *testing.T) {
		// One try: the dial succeeds, and its connection is reset before
		// the first reply.
		f := oneTryFailure(t, nodetest.ResetListener(t))
		assert.ErrorContains(t, f.Err, "read: connection reset by peer")
	})
	t.Run("refused, then up", func(t *testing.T) {
		addr := nodetest.RefusedAddr(t)
		n, f := oneTry(t, addr)
		assert.ErrorContains(t, f.Err, "connection refused")
		assert.False(t, node.Misconfigured(f.Err))

		s := miniredis.NewMiniRedis()
		require.NoError(t, s.StartAddr(addr))
		t.Cleanup(s.Close)
		rep := callOne(n, &node.Acquire{Key: "k", Token: "t", TTL: time.Second})
		require.NoError(t, rep.Err)
		assert.True(t, rep.OK)
		assert.Nil(t, n.LastDialFailure(), "a dial succeeded since")
	})
}

// oneTry makes one acquisition on a node at addr whose client tries once
// (no command or dial retries), which fails, and returns the node and its
// last dial failure.
func oneTry(t *testing.T, addr string) (*node.Redis, *node.DialFailure) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, DialerRetries: 1, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	n := goredis.NewNode(c)
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	rep := callOne(n, &node.Acquire{Key: "k", Token: "t", TTL: time.Second})
	require.Error(t, rep.Err)
	f := n.LastDialFailure()
	require.NotNil(t, f, "the dial's failure, or its connection's before the first reply")
	return n, f
}

// oneTryFailure is oneTry's dial failure.
func oneTryFailure(t *testing.T, addr string) *node.DialFailure {
	t.Helper()
	_, f := oneTry(t, addr)
	return f
}
