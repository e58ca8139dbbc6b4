package node_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/node/goredis"
	"github.com/redlock-go/redlock/internal/node/goredis/goredistest"
)

// A write asked to be acknowledged sends WAIT after it, and fails with
// ErrNotReplicated when fewer replicas than asked have it (miniredis has
// none: WAIT answers 0); the write itself stands. A refusal needs no
// acknowledgement, and the zero Ack sends no WAIT.
func TestAckWaitsForReplicas(t *testing.T) {
	servers, clients := goredistest.Miniredis(t, 1)
	s, n := servers[0], goredis.NewNode(clients[0])
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	ack := node.Ack{Replicas: 1, Timeout: 20 * time.Millisecond}

	rep := callOne(n, &node.Acquire{Key: "k", Token: "t1", TTL: time.Second, Ack: ack})
	require.ErrorIs(t, rep.Err, node.ErrNotReplicated)
	assert.Contains(t, rep.Err.Error(), "0 of 1 replicas acknowledged within 20ms")
	v, _ := s.Get("k")
	assert.Equal(t, "t1", v, "the write stands: the caller undoes it")

	rep = callOne(n, &node.Acquire{Key: "k", Token: "t2", TTL: time.Second, Ack: ack})
	require.NoError(t, rep.Err, "a refusal wrote nothing to acknowledge")
	assert.False(t, rep.OK)
	assert.Equal(t, "t1", node.GrantOf(rep).Holder)

	rep = callOne(n, &node.Extend{Key: "k", Token: "t1", TTL: 5 * time.Second, Ack: ack})
	require.ErrorIs(t, rep.Err, node.ErrNotReplicated, "an extension is acknowledged too")
	rep = callOne(n, &node.Fence{Key: "k", Token: "t1", FenceKey: node.FenceKey("k"), Fence: 7, Ack: ack})
	require.ErrorIs(t, rep.Err, node.ErrNotReplicated, "so is a fencing token")

	assert.True(t, callOne(n, &node.Extend{Key: "k", Token: "t1", TTL: 5 * time.Second}).OK, "no Ack: no WAIT")
	assert.NoError(t, (node.Ack{}).Short(0))
	assert.NoError(t, ack.Short(1))
	assert.NoError(t, ack.Short(2), "more replicas than asked")
}
