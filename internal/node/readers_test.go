package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/node/goredis"
)

// A reader's grant does not look at the other readers: the fields of
// readers that expired without a release stay until the hash has grown to
// twice its size after the last pruning, which then drops them; a
// release that leaves few fields prunes too, so the last live reader's
// release is announced.
func TestReadersPrunedAsTheyGrow(t *testing.T) {
	s := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	n := goredis.NewNode(c)
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	grant := func(token string, ttl time.Duration) {
		t.Helper()
		rep := callOne(n, &node.Acquire{Shape: node.Read, Key: "k", Token: token, TTL: ttl})
		require.NoError(t, rep.Err)
		require.True(t, rep.OK, token)
	}
	fields := func() int {
		t.Helper()
		n, err := c.HLen(t.Context(), "k").Result()
		require.NoError(t, err)
		return int(n)
	}

	grant("long", time.Minute)
	for i := range 20 {
		grant(fmt.Sprint("short", i), 100*time.Millisecond)
	}
	require.Equal(t, 22, fields(), "the marker and 21 readers: the pruning at 16 fields dropped none")
	time.Sleep(200 * time.Millisecond) // the short readers expire
	for i := range 10 {
		grant(fmt.Sprint("late", i), time.Minute)
	}
	assert.Equal(t, 32, fields(), "below twice the size at the last pruning (2 × 16): nothing dropped")
	grant("late10", time.Minute)
	assert.Equal(t, 13, fields(), "the marker, long and 11 late readers: the 20 expired dropped")

	rel := func(token string) node.Reply {
		t.Helper()
		rep := callOne(n, &node.Release{Shape: node.Read, Key: "k", Token: token, Channel: node.ReleaseChannel("k")})
		require.NoError(t, rep.Err)
		return rep
	}
	for i := range 11 {
		require.True(t, rel(fmt.Sprint("late", i)).OK)
	}
	assert.Equal(t, 2, fields(), "the marker and long")
	assert.True(t, s.Exists("k"))
	require.True(t, rel("long").OK, "the last reader")
	assert.False(t, s.Exists("k"), "freed")
}
