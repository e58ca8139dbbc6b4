package redlock

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node/nodetest"
)

// A process that unlocks and at once locks the same name again holds it on
// every live node: Unlock returns at the quorum, and the new acquisition
// must not reach a node before this process's release there did, or that
// node refuses it for the old key (each node applies a name's requests in order: see node.Laned).
func TestRelockWaitsForOwnRelease(t *testing.T) {
	for _, reentrant := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			r, fs := newFakeRedlock(t, 5)
			var opts []LockOption
			if reentrant {
				opts = append(opts, WithReentrant())
			}
			m := newFakeMutex(t, r, "k", opts...)
			require.NoError(t, m.TryLock(t.Context()))
			synctest.Wait()
			for _, f := range fs[3:] { // their releases land after the quorum's
				f.Faults(func(n *nodetest.Fake) { n.OpDelay = map[string]time.Duration{"release": 10 * time.Millisecond} })
			}
			require.NoError(t, m.Unlock(t.Context()))
			require.NoError(t, m.TryLock(t.Context()))
			time.Sleep(time.Second) // every release and acquisition lands
			synctest.Wait()
			for i, f := range fs {
				got, held := f.Get("k")
				assert.True(t, held, "reentrant %v: node %d holds nothing", reentrant, i)
				assert.Equal(t, tokenOf(m), got, "reentrant %v: node %d", reentrant, i)
			}
		})
	}
}

// An attempt decided while its request to a node still waits there behind
// this process's release of the name is undone on that node once the
// request has gone out: the undo must not hold the request back in turn.
func TestUndoBehindOwnReleaseDoesNotDeadlock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		m := newFakeMutex(t, r, "k")
		require.NoError(t, m.TryLock(t.Context()))
		synctest.Wait()
		fs[4].Faults(func(n *nodetest.Fake) { n.OpDelay = map[string]time.Duration{"release": 10 * time.Millisecond} })
		require.NoError(t, m.Unlock(t.Context()))
		for _, f := range fs[:3] { // taken by another process at once
			f.Set("k", "other", time.Minute)
		}
		require.ErrorIs(t, m.TryLock(t.Context()), ErrNotAcquired)
		time.Sleep(time.Second)
		synctest.Wait()
		assert.Equal(t, 2, fs[4].Count("acquire"), "the second attempt's request reached node 4")
		_, held := fs[4].Get("k")
		assert.False(t, held, "and was undone there")
	})
}
