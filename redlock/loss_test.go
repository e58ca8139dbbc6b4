package redlock_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/redlock"
	"github.com/redlock-go/redlock/redlock/report"
)

// A lease ended by another client's delete (an operator's ForceUnlock)
// says so: the extension names the nodes that answered without the token,
// which no node error does (they answered). Extend hears every node out
// once it failed: all three are named, not the two that decided it.
func TestLostLeaseNamesTheNodesWithoutToken(t *testing.T) {
	addrs, stop := servers(3)
	defer stop()
	// A node timeout that a loaded machine (-race) does not reach: the
	// count is the test, not the timeout.
	rl, done := newRedlock(addrs, redlock.WithNodeTimeout(2*time.Second))
	defer done()
	ctx := t.Context()
	m, err := rl.NewMutex("forced")
	require.NoError(t, err)
	require.NoError(t, m.Lock(ctx))
	out, err := rl.ForceUnlock(ctx, "forced")
	require.NoError(t, err)
	for _, fr := range out {
		require.True(t, fr.Deleted, "deleted on node %d: %v", fr.Index, fr.Err)
	}
	err = m.Extend(ctx)
	require.ErrorIs(t, err, redlock.ErrLockLost)
	assert.Regexp(t, `extended on 0 of 3 nodes, quorum 2; the token is gone from nodes 0, 1 and 2: its key expired there, or another client deleted it \(a forced unlock\)`, err.Error())
	assert.Empty(t, report.NodeErrors(err), "the nodes answered")
}
