package goredis_test

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

// A Ring node subscribes on every shard: a message published on either
// shard reaches it, and each shard counts the subscription (a release
// hands the lock over only where its server counts the waiter). Close
// ends it without a goroutine left (goleak, in TestMain).
func TestRingSubscribesEveryShard(t *testing.T) {
	a, b := miniredis.RunT(t), miniredis.RunT(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": a.Addr(), "b": b.Addr()}})
	t.Cleanup(func() { _ = ring.Close() })
	n := goredis.NewNode(ring)
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	same := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"y": b.Addr(), "x": a.Addr()}})
	t.Cleanup(func() { _ = same.Close() })
	assert.Equal(t, goredis.ClientAddr(ring), goredis.ClientAddr(same), "a Ring is named by its shards")

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
	n := goredis.NewNode(ring)
	t.Cleanup(func() { _ = n.Close(context.Background()) })
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

// A Ring with a shard down looks for that shard's keys on the others: a
// lock held there would be granted again. Its node sends nothing then,
// and answers an unsent error, not a grant; with every shard up again, it
// grants.
func TestRingVotesOnlyWhole(t *testing.T) {
	a, b := miniredis.RunT(t), miniredis.RunT(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": a.Addr(), "b": b.Addr()},
		HeartbeatFrequency: 10 * time.Millisecond, DialTimeout: 50 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = ring.Close() })
	n := goredis.NewNode(ring)
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	// A name on a's shard while both are up.
	name := ""
	for i := 0; name == ""; i++ {
		k := fmt.Sprintf("job:%d", i)
		require.NoError(t, ring.Set(t.Context(), k, "x", time.Minute).Err())
		if a.Exists(k) {
			name = k
		}
	}
	a.Close()
	require.Eventually(t, func() bool { return ring.Len() == 1 }, 5*time.Second, time.Millisecond, "the ring sees a down")

	rep := callOne(n, &node.Acquire{Key: name, Token: "t1", TTL: time.Minute})
	require.Error(t, rep.Err)
	assert.False(t, rep.OK, "granted by the ring with a shard down")
	assert.ErrorIs(t, rep.Err, node.ErrUnsent)
	assert.Contains(t, rep.Err.Error(), "1 of the ring's 2 shards are up")
	assert.False(t, b.Exists(name), "the grant was sent to the shard the key moved to")

	require.NoError(t, a.Restart())
	require.Eventually(t, func() bool { return ring.Len() == 2 }, 5*time.Second, time.Millisecond, "the ring sees a again")
	rep = callOne(n, &node.Acquire{Key: name + "x", Token: "t1", TTL: time.Minute})
	require.NoError(t, rep.Err)
	assert.True(t, rep.OK)
}

// callOne sends o to n and waits for its reply.
func callOne(n node.Node, o node.Op) node.Reply {
	ch := make(chan node.Reply, 1)
	n.Do(context.Background(), time.Now().Add(time.Minute), o, func(r node.Reply) { ch <- r })
	return <-ch
}
