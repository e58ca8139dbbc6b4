package node_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/node/goredis"
	"github.com/redlock-go/redlock/internal/node/nodetest"
)

// The first dial a host refuses is told at once to every running node over
// the client (one per Redlock), and the call that met it fails with it,
// long before go-redis' own retries would have ended it (5 dials 100 ms
// apart, each of 4 tries); a closed node is told no more.
func TestRefusedDialTold(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: nodetest.RefusedAddr(t)})
	t.Cleanup(func() { _ = c.Close() })
	a, b := goredis.NewNode(c), goredis.NewNode(c)
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	var told [2]atomic.Int32
	for i, n := range []*node.Redis{a, b} {
		n.OnRefused(func(err error) {
			assert.ErrorContains(t, err, "connection refused")
			told[i].Add(1)
		})
	}
	acquire := &node.Acquire{Key: "k", Token: "t", TTL: time.Second}

	start := time.Now()
	rep := callOne(a, acquire)
	took := time.Since(start)
	require.Error(t, rep.Err)
	assert.ErrorContains(t, rep.Err, "connection refused")
	assert.NotErrorIs(t, rep.Err, context.Canceled, "cut short by the refusal, not by its caller")
	assert.True(t, node.Unsent(rep.Err))
	assert.Less(t, took, 300*time.Millisecond, "not after go-redis' retries")
	assert.Positive(t, told[0].Load())
	assert.Zero(t, told[1].Load(), "b has made no call: it is not running")

	rep = callOne(b, acquire)
	assert.ErrorContains(t, rep.Err, "connection refused")
	assert.Positive(t, told[1].Load())

	require.NoError(t, a.Close(context.Background()))
	before := told[0].Load()
	rep = callOne(b, acquire)
	assert.ErrorContains(t, rep.Err, "connection refused")
	assert.Equal(t, before, told[0].Load(), "a closed node is told no more")
}
