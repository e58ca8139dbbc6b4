package redlock

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReentrantHoldCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		m := newFakeMutex(t, r, "k", WithReentrant())
		require.NoError(t, m.Lock(t.Context()))
		require.NoError(t, m.Lock(t.Context()), "the owner takes it again")
		require.NoError(t, m.TryLock(t.Context()))
		synctest.Wait()
		for _, f := range fs {
			f.mu.Lock()
			e := f.data["k"]
			f.mu.Unlock()
			assert.True(t, e.hash)
			assert.Equal(t, 3, e.holds, "%s: hold count on the node", f.name)
		}
		other := newFakeMutex(t, r, "k", WithReentrant())
		require.ErrorIs(t, other.TryLock(t.Context()), ErrNotAcquired, "another owner is refused")
		plain := newFakeMutex(t, r, "k")
		require.ErrorIs(t, plain.TryLock(t.Context()), ErrNotAcquired, "a plain mutex is refused")

		require.NoError(t, m.Unlock(t.Context()))
		require.NoError(t, m.Unlock(t.Context()))
		synctest.Wait()
		assert.Equal(t, 5, keyOn(fs, "k"), "held until the last Unlock")
		require.ErrorIs(t, other.TryLock(t.Context()), ErrNotAcquired)
		require.NoError(t, m.Unlock(t.Context()))
		synctest.Wait()
		assert.Zero(t, keyOn(fs, "k"), "the key goes with the last hold")
		require.ErrorIs(t, m.Unlock(t.Context()), ErrNotHeld, "one Unlock too many")
		require.NoError(t, other.TryLock(t.Context()))
		require.NoError(t, other.Unlock(t.Context()))
	})
}

func TestReentrantLastUnlockDropsDivergentHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		m := newFakeMutex(t, r, "k", WithReentrant())
		require.NoError(t, m.Lock(t.Context()))
		synctest.Wait()
		fs[4].faults(func(n *fakeNode) { n.err = errBoom })
		require.NoError(t, m.Lock(t.Context())) // node 4 misses a hold...
		fs[4].faults(func(n *fakeNode) { n.err = nil })
		fs[0].faults(func(n *fakeNode) { n.err = errBoom })
		require.NoError(t, m.Unlock(t.Context())) // ...node 0 misses a release
		fs[0].faults(func(n *fakeNode) { n.err = nil })
		synctest.Wait()
		require.NoError(t, m.Unlock(t.Context()))
		synctest.Wait()
		assert.Zero(t, keyOn(fs, "k"), "the last Unlock drops every hold, whatever the counts")
	})
}

func TestReentrantRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3)
		m := newFakeMutex(t, r, "k", WithReentrant(), WithTTL(300*time.Millisecond), WithRenewal())
		require.NoError(t, m.Lock(t.Context()))
		require.NoError(t, m.Lock(t.Context()))
		time.Sleep(2 * time.Second)
		assert.NoError(t, m.Err())
		assert.Equal(t, 3, keyOn(fs, "k"))
		require.NoError(t, m.Unlock(t.Context()))
		require.NoError(t, m.Unlock(t.Context()))
		synctest.Wait()
		assert.Zero(t, keyOn(fs, "k"))
	})
}
