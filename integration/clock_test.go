package integration

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClockJumpDropsKeys checks the harness's clock control against real
// servers: a node whose wall clock jumps 60 s ahead drops a key that had
// 20 s left while the others keep it, TIME follows the offset there and
// back, and the node keeps serving (its monotonic clock is not faked).
func TestClockJumpDropsKeys(t *testing.T) {
	c := startCluster(t, 3, WithClocks())
	nodes := inspector(t, c)
	ctx := t.Context()
	key := "clock:" + t.Name()
	for i, n := range nodes {
		require.NoError(t, n.Set(ctx, key, "v", 20*time.Second).Err(), "SET on node %d", i)
	}

	require.NoError(t, c.SetClock(1, 60*time.Second))
	assert.Equal(t, int64(-2), pttl(t, nodes[1], key), "node 1, 60 s ahead, still has the key")
	for _, i := range []int{0, 2} {
		assert.Positive(t, pttl(t, nodes[i], key), "node %d lost the key", i)
	}
	assert.InDelta(t, 60*time.Second, clockSkew(t, nodes[1], nodes[0]), float64(time.Second/2),
		"node 1's TIME minus node 0's")
	require.NoError(t, nodes[1].Ping(ctx).Err(), "node 1 after its clock moved ahead")

	require.NoError(t, c.SetClock(1, 0))
	assert.InDelta(t, 0, clockSkew(t, nodes[1], nodes[0]), float64(time.Second/2),
		"node 1's TIME minus node 0's after its clock came back")
	require.NoError(t, nodes[1].Ping(ctx).Err(), "node 1 after its clock moved back")
	assert.Equal(t, int64(-2), pttl(t, nodes[1], key), "the key came back on node 1")

	// Fractions and negative offsets: libfaketime reads "-2.5".
	require.NoError(t, c.SetClock(2, -2500*time.Millisecond))
	assert.InDelta(t, -2500*time.Millisecond, clockSkew(t, nodes[2], nodes[0]), float64(time.Second/4),
		"node 2's TIME minus node 0's")
	assert.Positive(t, pttl(t, nodes[2], key), "node 2, 2.5 s behind, lost the key")
}

// pttl returns PTTL key on n as Redis replies: milliseconds left, -1 for
// no expiry, -2 for no key.
func pttl(t *testing.T, n *redis.Client, key string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	ms, err := n.Do(ctx, "PTTL", key).Int64()
	require.NoError(t, err)
	return ms
}

// clockSkew returns a's TIME minus b's, b's read before and after a's and
// averaged so that the round trips cancel out.
func clockSkew(t *testing.T, a, b *redis.Client) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	before, err := b.Time(ctx).Result()
	require.NoError(t, err)
	at, err := a.Time(ctx).Result()
	require.NoError(t, err)
	after, err := b.Time(ctx).Result()
	require.NoError(t, err)
	return at.Sub(before.Add(after.Sub(before) / 2))
}

// TestFaketimeOffset checks the offsets SetClock writes against the forms
// libfaketime reads.
func TestFaketimeOffset(t *testing.T) {
	for _, tc := range []struct {
		offset time.Duration
		want   string
	}{
		{0, "+0"},
		{60 * time.Second, "+60"},
		{60500 * time.Millisecond, "+60.5"},
		{-1500 * time.Millisecond, "-1.5"},
		{time.Microsecond, "+0.000001"},
		{-24 * time.Hour, "-86400"},
	} {
		assert.Equal(t, tc.want, faketimeOffset(tc.offset), "offset %v", tc.offset)
	}
}
