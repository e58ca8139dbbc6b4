package node_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node"
)

// A Ring node subscribes on every shard: a message published on either
// shard reaches it, and each shard counts the subscription (a release
// hands the lock over only where its server counts the waiter). Close
// ends it without a goroutine left (goleak, in TestMain).
func TestRingSubscribesEveryShard(t *testing.T) {
	a, b := miniredis.RunT(t), miniredis.RunT(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": a.Addr(), "b": b.Addr()}})
	t.Cleanup(func() { _ = ring.Close() })
	n := node.NewRedis(ring)
	t.Cleanup(n.Close)
	same := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"y": b.Addr(), "x": a.Addr()}})
	t.Cleanup(func() { _ = same.Close() })
	assert.Equal(t, node.ClientAddr(ring), node.ClientAddr(same), "a Ring is named by its shards")

	s := n.Subscribe()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	require.NoError(t, s.Subscribe(ctx, "c1", "c2"))
	// SUBSCRIBE is sent, not confirmed, when Subscribe returns.
	for _, srv := range []*miniredis.Miniredis{a, b} {
		require.Eventually(t, func() bool {
			got := srv.PubSubNumSub("c1", "c2")
			return got["c1"] == 1 && got["c2"] == 1
		}, 5*time.Second, time.Millisecond, "%s counts the subscription", srv.Addr())
	}
	a.Publish("c1", "from a")
	b.Publish("c2", "from b")
	got := map[string]string{}
	for range 2 {
		select {
		case m := <-s.Messages():
			got[m.Channel] = m.Payload
		case <-ctx.Done():
			require.FailNow(t, "a message did not arrive", "got %v", got)
		}
	}
	assert.Equal(t, map[string]string{"c1": "from a", "c2": "from b"}, got)

	require.NoError(t, s.Unsubscribe(ctx, "c1"))
	assert.Eventually(t, func() bool { return b.PubSubNumSub("c1")["c1"] == 0 }, 5*time.Second, time.Millisecond, "unsubscribed")
	require.NoError(t, s.Close())
	_, open := <-s.Messages()
	assert.False(t, open, "Close closes Messages")
}

// A sharded node's batch may hold a call that carries no command (a Clock
// reads no TIME there) beside a call of one command: the one command is
// sent, whichever call holds it (the first call's was taken for it, and
// indexed out of range).
func TestShardedBatchWithEmptyCall(t *testing.T) {
	srv := miniredis.RunT(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": srv.Addr()}})
	t.Cleanup(func() { _ = ring.Close() })
	n := node.NewRedis(ring)
	t.Cleanup(n.Close)
	for range 200 {
		replies := make(chan node.Reply, 2)
		deadline := time.Now().Add(5 * time.Second)
		n.Do(t.Context(), deadline, node.Clock{}, func(r node.Reply) { replies <- r })
		n.Do(t.Context(), deadline, &node.Queue{Changes: []node.QueueChange{{Lock: "k", Member: "m", Remove: true}}},
			func(r node.Reply) { replies <- r })
		for range 2 {
			<-replies
		}
	}
}
