package redlock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node/nodetest"
	"github.com/redlock-go/redlock/redlock/report"
)

func TestReplicaAckOptions(t *testing.T) {
	for _, opts := range [][]Option{
		{WithReplicaAck(0, 10*time.Millisecond)},
		{WithReplicaAck(1, 0)},
		{WithReplicaAck(1, 1500*time.Microsecond)},
		{WithReplicaAck(1, 100*time.Millisecond)}, // the default node timeout
		{WithNodeTimeout(50 * time.Millisecond), WithReplicaAck(1, 60*time.Millisecond)},
	} {
		_, err := newRedlock(nodetest.Nodes(nodetest.Fakes(3)), opts...)
		assert.ErrorIs(t, err, ErrInvalidArgument)
	}
	fs := nodetest.Fakes(3)
	fs[0].Sharded = true
	_, err := newRedlock(nodetest.Nodes(fs), WithReplicaAck(1, 10*time.Millisecond))
	require.ErrorIs(t, err, ErrInvalidArgument)
	assert.Contains(t, err.Error(), "Redis Cluster")
	r, _ := newFakeRedlock(t, 3)
	_, err = r.NewMutex("k", WithReplicaAck(1, 10*time.Millisecond))
	assert.NoError(t, err)
}

// A grant its node's replicas did not acknowledge does not count: with two
// of three unacknowledged the acquisition fails and is undone everywhere;
// with one, it succeeds without that node, which the Observer hears of.
// Extensions and fencing tokens are acknowledged too.
func TestReplicaAckCounts(t *testing.T) {
	rec := &recorder{}
	r, fs := newFakeRedlock(t, 3, WithObserver(rec), WithReplicaAck(1, 20*time.Millisecond))
	for _, f := range fs {
		f.Faults(func(n *nodetest.Fake) { n.Acked = 1 })
	}
	fs[1].Faults(func(n *nodetest.Fake) { n.Acked = 0 })
	fs[2].Faults(func(n *nodetest.Fake) { n.Acked = 0 })
	m := newFakeMutex(t, r, "k", WithFencing())
	err := m.TryLock(t.Context())
	require.ErrorIs(t, err, ErrNotAcquired)
	ne := report.NodeErrors(err)
	require.Len(t, ne, 2)
	for _, e := range ne {
		assert.ErrorIs(t, e, report.ErrNotReplicated)
		assert.Contains(t, e.Error(), "0 of 1 replicas acknowledged within 20ms")
	}
	require.Eventually(t, func() bool {
		for _, f := range fs {
			if _, held := f.Get("k"); held {
				return false
			}
		}
		return true
	}, time.Second, time.Millisecond, "undone on every node")

	fs[1].Faults(func(n *nodetest.Fake) { n.Acked = 1 })
	require.NoError(t, m.TryLock(t.Context()), "two acknowledged of three")
	assert.Positive(t, m.Fence())
	require.Eventually(t, func() bool {
		_, _, _, nodes := rec.snapshot()
		for _, f := range nodes {
			if f.err.Index == 2 && f.op == "TryLock #2" {
				return true
			}
		}
		return false
	}, time.Second, time.Millisecond, "the node it did without is reported")
	require.NoError(t, m.Extend(t.Context()))
	fs[0].Faults(func(n *nodetest.Fake) { n.Acked = 0 })
	err = m.Extend(t.Context())
	require.ErrorContains(t, err, "extension not confirmed", "one acknowledged extension of three")
	assert.NotErrorIs(t, err, ErrNotHeld, "the two unacknowledged may hold the token")
	assert.NotErrorIs(t, err, ErrLockLost)
	assert.ErrorIs(t, err, report.ErrNotReplicated)
	require.NoError(t, m.Unlock(t.Context()), "releases need no acknowledgement")
}
