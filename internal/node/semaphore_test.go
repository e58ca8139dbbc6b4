package node_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/node/goredis"
	"github.com/redlock-go/redlock/internal/node/goredis/goredistest"
)

// The semaphore's scripts on miniredis: admission up to the count, a
// resend, expiry by the node's clock, release, extend, the permit count
// and keys of other types.
func TestRedisNodeSemaphoreScripts(t *testing.T) {
	servers, clients := goredistest.Miniredis(t, 1)
	s, n := servers[0], goredis.NewNode(clients[0])
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	acquire := func(token string, permits int) node.Reply {
		return callOne(n, &node.Acquire{Shape: node.Semaphore, Key: "sem", Token: token, TTL: time.Second, Permits: permits})
	}

	for _, tok := range []string{"a", "b"} {
		rep := acquire(tok, 2)
		require.NoError(t, rep.Err)
		assert.True(t, rep.OK, tok)
	}
	rep := acquire("c", 2)
	require.NoError(t, rep.Err)
	assert.False(t, rep.OK, "two permits, two holders: full")
	assert.Equal(t, 2, node.SemGrantOf(rep).Holders)
	rep = acquire("a", 2)
	require.NoError(t, rep.Err)
	assert.True(t, rep.OK, "a resent acquire of a holder is granted again")
	assert.False(t, acquire("c", 2).OK, "and takes no second place")
	assert.Equal(t, "2", mustGet(t, s.Get, node.PermitsKey("sem")))
	assert.Positive(t, s.TTL("sem"), "the semaphore expires with its last permit")
	assert.Positive(t, s.TTL(node.PermitsKey("sem")))

	rep = acquire("c", 3)
	require.ErrorIs(t, rep.Err, node.ErrMisconfigured, "another count while holders live")
	assert.ErrorContains(t, rep.Err, "has 2 permits on this node, this one asks for 3")

	rep = callOne(n, &node.Extend{Shape: node.Semaphore, Key: "sem", Token: "c", TTL: 5 * time.Second})
	require.NoError(t, rep.Err)
	assert.False(t, rep.OK, "extend never admits")
	rep = callOne(n, &node.Extend{Shape: node.Semaphore, Key: "sem", Token: "a", TTL: 5 * time.Second})
	require.NoError(t, rep.Err)
	assert.True(t, rep.OK)
	score, err := s.ZScore("sem", "a")
	require.NoError(t, err)
	assert.InDelta(t, float64(time.Now().Add(5*time.Second).UnixMilli()), score, 1000)

	rep = callOne(n, &node.Release{Shape: node.Semaphore, Key: "sem", Token: "b", Channel: node.ReleaseChannel("sem"), QueueKey: node.QueueKey("sem")})
	require.NoError(t, rep.Err)
	assert.True(t, rep.OK)
	rep = callOne(n, &node.Release{Shape: node.Semaphore, Key: "sem", Token: "b", Channel: node.ReleaseChannel("sem")})
	require.NoError(t, rep.Err)
	assert.False(t, rep.OK)
	assert.True(t, node.ReleasedOf(rep).Gone, "a release resent after it was applied finds the token gone")
	rep = acquire("c", 2)
	require.NoError(t, rep.Err)
	assert.True(t, rep.OK, "a released permit is free again")

	// Expiry by the node's own clock: a holder whose score has passed is
	// dropped by the next acquisition, and its extend and release fail.
	s.SetTime(time.Now().Add(10 * time.Second)) // miniredis' TIME: the node's clock jumps
	rep = callOne(n, &node.Extend{Shape: node.Semaphore, Key: "sem", Token: "c", TTL: time.Second})
	require.NoError(t, rep.Err)
	assert.False(t, rep.OK, "an expired permit is not extended")
	rep = acquire("d", 2)
	require.NoError(t, rep.Err)
	assert.True(t, rep.OK)
	assert.WithinDuration(t, time.Now().Add(10*time.Second), rep.Time, time.Second, "a grant carries the node's time")
	assert.ElementsMatch(t, []string{"d"}, mustMembers(t, s, "sem"), "the expired permits were dropped")
	rep = acquire("e", 3)
	require.ErrorIs(t, rep.Err, node.ErrMisconfigured, "the count stays while d lives")
	rep = callOne(n, &node.Release{Shape: node.Semaphore, Key: "sem", Token: "d", Channel: node.ReleaseChannel("sem")})
	require.NoError(t, rep.Err)
	assert.True(t, rep.OK)
	assert.False(t, s.Exists("sem"), "the last release deletes the semaphore")
	assert.False(t, s.Exists(node.PermitsKey("sem")))
	rep = acquire("e", 3)
	require.NoError(t, rep.Err)
	assert.True(t, rep.OK, "with no holder left, another count may start")
}

// A semaphore refuses a name another kind of key uses, and a lock refuses
// a semaphore's name: both as misconfigured, never as "held".
func TestRedisNodeSemaphoreWrongType(t *testing.T) {
	_, clients := goredistest.Miniredis(t, 1)
	n := goredis.NewNode(clients[0])
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	ok, _, err := acquireOn(n, &node.Acquire{Key: "lock", Token: "t", TTL: time.Second})
	require.NoError(t, err)
	require.True(t, ok)
	for _, op := range []node.Op{
		&node.Acquire{Shape: node.Semaphore, Key: "lock", Token: "a", TTL: time.Second, Permits: 2},
		&node.Extend{Shape: node.Semaphore, Key: "lock", Token: "a", TTL: time.Second},
		&node.Release{Shape: node.Semaphore, Key: "lock", Token: "a", Channel: node.ReleaseChannel("lock")},
	} {
		rep := callOne(n, op)
		require.Error(t, rep.Err, op.Name())
		assert.True(t, node.Misconfigured(rep.Err), "%s: %v", op.Name(), rep.Err)
		assert.ErrorContains(t, rep.Err, "not a semaphore")
	}
	rep := callOne(n, &node.Acquire{Shape: node.Semaphore, Key: "sem", Token: "a", TTL: time.Second, Permits: 2})
	require.NoError(t, rep.Err)
	require.True(t, rep.OK)
	_, _, err = acquireOn(n, &node.Acquire{Key: "sem", Token: "t", TTL: time.Second})
	require.Error(t, err)
	assert.True(t, node.Misconfigured(err), "a lock on a semaphore's name: %v", err)
	_, _, err = acquireOn(n, &node.Acquire{Key: "sem", Token: "t", TTL: time.Second, MinUptime: 0, FenceKey: node.FenceKey("sem")})
	require.Error(t, err)
	assert.True(t, node.Misconfigured(err), "the fenced acquire too: %v", err)
}

func mustGet(t *testing.T, get func(string) (string, error), key string) string {
	t.Helper()
	v, err := get(key)
	require.NoError(t, err)
	return v
}

// mustMembers returns the members of the sorted set key.
func mustMembers(t *testing.T, s *miniredis.Miniredis, key string) []string {
	t.Helper()
	m, err := s.ZMembers(key)
	require.NoError(t, err)
	return m
}
