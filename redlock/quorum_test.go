package redlock

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/redlock-go/redlock/redlock/internal/quorum"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node/nodetest"
)

// nearAndFar returns a Redlock over five fakes: three near nodes (1ms) and
// two far ones (50ms).
func nearAndFar(t *testing.T) (*Redlock, []*nodetest.Fake) {
	t.Helper()
	r, fs := newFakeRedlock(t, 5, WithNodeTimeout(200*time.Millisecond))
	for i, f := range fs {
		d := time.Millisecond
		if i >= 3 {
			d = 50 * time.Millisecond
		}
		f.Faults(func(n *nodetest.Fake) { n.Delay = d })
	}
	return r, fs
}

// Two contenders split the near nodes; the far ones answer 50ms later. The
// one that is outranked gives way about one round trip after the split
// shows, instead of waiting for the far nodes.
func TestSplitVoteLoserGivesWay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := nearAndFar(t)
		// A competitor ("~" ranks above any token) holds two near nodes.
		fs[0].Set("k", "~", time.Minute)
		fs[1].Set("k", "~", time.Minute)
		m := newFakeMutex(t, r, "k")
		start := time.Now()
		_, err := m.tryLock(t.Context(), "", quorum.MaxReasks)
		require.ErrorIs(t, err, ErrNotAcquired)
		assert.Contains(t, err.Error(), "gave way")
		assert.Less(t, time.Since(start), 10*time.Millisecond, "the loser waited for the far nodes")
		synctest.Wait()
		_, held := fs[2].Get("k")
		assert.False(t, held, "its grant was released")
	})
}

// The contender that ranks first asks the nodes its competitor holds again
// once the competitor had time to give way, and completes its quorum
// without waiting for the far nodes.
func TestSplitVoteWinnerAsksAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := nearAndFar(t)
		// A competitor ("0" ranks below any token) holds one near node,
		// and gives way 3ms later.
		fs[0].Set("k", "0", 3*time.Millisecond)
		m := newFakeMutex(t, r, "k")
		start := time.Now()
		_, err := m.tryLock(t.Context(), "", quorum.MaxReasks) // as Lock's attempts do
		require.NoError(t, err)
		took := time.Since(start)
		assert.Less(t, took, 10*time.Millisecond, "the winner waited for the far nodes")
		assert.Greater(t, fs[0].Count("acquire"), 1, "node 0 was asked again")
		v, _ := fs[0].Get("k")
		assert.Equal(t, tokenOf(m), v)
	})
}

// TryLock asks again as Lock's attempts do: the contender that ranks first
// completes its quorum on the near nodes, without waiting for the far ones.
func TestTryLockAsksAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := nearAndFar(t)
		fs[0].Set("k", "0", 3*time.Millisecond)
		m := newFakeMutex(t, r, "k")
		start := time.Now()
		require.NoError(t, m.TryLock(t.Context()))
		assert.Less(t, time.Since(start), 10*time.Millisecond, "the winner waited for the far nodes")
		assert.Greater(t, fs[0].Count("acquire"), 1, "node 0 was asked again")
	})
}

// An attempt that is not split (no grant) neither asks again nor waits.
func TestNoReaskWithoutGrants(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		for _, f := range fs {
			f.Set("k", "0", time.Minute)
		}
		m := newFakeMutex(t, r, "k")
		start := time.Now()
		_, err := m.tryLock(t.Context(), "", quorum.MaxReasks)
		require.ErrorIs(t, err, ErrNotAcquired)
		assert.Zero(t, time.Since(start), "held everywhere: decided at once, no wait for a re-ask")
		time.Sleep(time.Second)
		for _, f := range fs {
			assert.Equal(t, 1, f.Count("acquire"))
		}
	})
}

// An attempt woken by the announced release of a token asks again the
// nodes that still hold that token (their release is on its way), and
// never gives way to it; an attempt not told of the release fails.
func TestReleasedTokenAskedAgain(t *testing.T) {
	for _, told := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			r, fs := newFakeRedlock(t, 3)
			for _, f := range fs {
				f.Faults(func(n *nodetest.Fake) { n.Delay = 100 * time.Microsecond })
			}
			// The holder's release reaches nodes 0 and 1 at 150µs.
			fs[0].Set("k", "released", 150*time.Microsecond)
			fs[1].Set("k", "released", 150*time.Microsecond)
			m := newFakeMutex(t, r, "k")
			released := ""
			if told {
				released = "released"
			}
			_, err := m.tryLock(t.Context(), released, quorum.MaxReasks)
			if told {
				require.NoError(t, err)
				assert.Equal(t, 2, fs[0].Count("acquire"), "asked again")
			} else {
				require.ErrorIs(t, err, ErrNotAcquired)
			}
		})
	}
}
