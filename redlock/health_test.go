package redlock

import (
	"github.com/redlock-go/redlock/internal/node/nodetest"
	"github.com/redlock-go/redlock/redlock/report"

	"errors"
	"net"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var errRefused = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}

// A node that timed out is skipped at once by later operations, without a
// request, until it answers a probe; then it is used again.
func TestDownNodeSkippedUntilProbeAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5, WithNodeTimeout(50*time.Millisecond))
		for _, f := range fs[3:] {
			f.Faults(func(n *nodetest.Fake) { n.Delay = time.Millisecond })
		}
		hang := make(chan struct{})
		fs[0].Faults(func(n *nodetest.Fake) { n.Hang = hang })
		for _, f := range fs[1:3] { // the quorum needs node 0
			f.Faults(func(n *nodetest.Fake) { n.Err = errBoom })
		}

		m := newFakeMutex(t, r, "k")
		start := time.Now()
		require.ErrorIs(t, m.TryLock(t.Context()), ErrNotAcquired)
		assert.Equal(t, 51*time.Millisecond, time.Since(start), "the first attempt waits one node timeout, and undoes its grants")
		h := r.Health()
		require.True(t, h[0].Down)
		assert.ErrorIs(t, h[0].Err, report.ErrNodeTimeout)
		calls := fs[0].Count("acquire")

		start = time.Now()
		err := m.TryLock(t.Context())
		require.ErrorIs(t, err, ErrNotAcquired)
		assert.Zero(t, time.Since(start), "a down node is not waited for")
		require.NotEmpty(t, report.NodeErrors(err))
		assert.ErrorIs(t, report.NodeErrors(err)[0], report.ErrNodeDown)
		assert.Equal(t, calls, fs[0].Count("acquire"), "nothing is sent to a down node")

		close(hang) // the node answers again: the next probe brings it back
		time.Sleep(probeMax)
		synctest.Wait()
		assert.False(t, r.Health()[0].Down)
		fs[1].Faults(func(n *nodetest.Fake) { n.Err = nil })
		fs[2].Faults(func(n *nodetest.Fake) { n.Err = nil })
		require.NoError(t, m.TryLock(t.Context()))
	})
}

// withRefusedNode returns a Redlock over three fakes whose third refuses
// connections, after one TryLock that found it so: it is down.
func withRefusedNode(t *testing.T) (*Redlock, []*nodetest.Fake) {
	t.Helper()
	r, fs := newFakeRedlock(t, 3)
	fs[2].Faults(func(n *nodetest.Fake) { n.Err = errRefused })
	m := newFakeMutex(t, r, "k")
	require.NoError(t, m.TryLock(t.Context()))
	synctest.Wait()
	require.True(t, r.Health()[2].Down)
	return r, fs
}

// A node whose connections are refused is down at once, whatever the node
// timeout, and is probed until it accepts them again.
func TestRefusedNodeDownAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := withRefusedNode(t)
		probes := fs[2].Count("ping")
		time.Sleep(time.Second)
		assert.Greater(t, fs[2].Count("ping"), probes+3, "probed while down")
		// The waits are random, their bound doubling from probeFirst to
		// probeMax (jitter.Backoff): about 11 in a second, and far fewer
		// than at probeFirst apart.
		assert.LessOrEqual(t, fs[2].Count("ping"), probes+int(time.Second/probeFirst)/2, "at growing intervals, up to probeMax")
		fs[2].Faults(func(n *nodetest.Fake) { n.Err = nil })
		time.Sleep(probeMax)
		synctest.Wait()
		assert.False(t, r.Health()[2].Down)
		probes = fs[2].Count("ping")
		time.Sleep(time.Second)
		assert.Equal(t, probes, fs[2].Count("ping"), "no probes once up")
	})
}

// A node answering slowly while other replies from it keep arriving is not
// put down by one late request; one that stays silent for a node timeout
// while requests wait is, even when every operation decided without it.
func TestSilenceNoticedWithoutWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5, WithNodeTimeout(50*time.Millisecond))
		hang := make(chan struct{})
		fs[4].Faults(func(n *nodetest.Fake) { n.Hang = hang })
		m := newFakeMutex(t, r, "k")
		for range 3 {
			require.NoError(t, m.TryLock(t.Context()), "the quorum never needs node 4")
			require.NoError(t, m.Unlock(t.Context()))
			time.Sleep(40 * time.Millisecond)
		}
		assert.True(t, r.Health()[4].Down, "silent for more than a node timeout with requests waiting")
		assert.False(t, r.Health()[0].Down)
		close(hang)
	})
}

// A release that could not be delivered is owed to its node and delivered
// once the node answers again, long before the TTL would free the key.
func TestOwedUndoDeliveredWhenNodeAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		for _, f := range fs[:3] {
			f.Set("k", "other", 100*time.Millisecond) // held elsewhere: the attempt fails
		}
		// Node 4 applies the SET but the reply is lost; then its
		// connections are refused: the undo cannot be delivered.
		fs[4].Faults(func(n *nodetest.Fake) { n.Lose, n.Err, n.ErrOnly = true, errRefused, "release" })
		m := newFakeMutex(t, r, "k", WithTTL(time.Minute))
		require.ErrorIs(t, m.TryLock(t.Context()), ErrNotAcquired)
		synctest.Wait()
		_, held := fs[4].Get("k")
		require.True(t, held, "the SET was applied")
		h := r.Health()[4]
		require.True(t, h.Down)
		assert.Equal(t, 1, h.OwedReleases)

		time.Sleep(time.Second) // still down: still owed
		assert.Equal(t, 1, r.Health()[4].OwedReleases)
		fs[4].Faults(func(n *nodetest.Fake) { n.Lose, n.Err, n.ErrOnly = false, nil, "" })
		time.Sleep(probeMax)
		synctest.Wait()
		_, held = fs[4].Get("k")
		assert.False(t, held, "delivered once the node answered")
		assert.Equal(t, []string{"acquire", "release"}, fs[4].Applied)
		assert.Zero(t, r.Health()[4].OwedReleases)
		require.NoError(t, m.TryLock(t.Context()), "the lock is free again")
	})
}

// An Unlock that could not reach a node is owed too.
func TestOwedReleaseAfterUnlock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		m := newFakeMutex(t, r, "k", WithTTL(time.Minute))
		require.NoError(t, m.TryLock(t.Context()))
		synctest.Wait()
		fs[0].Faults(func(n *nodetest.Fake) { n.Err = errRefused })
		require.NoError(t, m.Unlock(t.Context()))
		synctest.Wait()
		_, held := fs[0].Get("k")
		require.True(t, held)
		fs[0].Faults(func(n *nodetest.Fake) { n.Err = nil })
		time.Sleep(probeMax)
		synctest.Wait()
		_, held = fs[0].Get("k")
		assert.False(t, held)
	})
}

// A probe that gets an error reply (a node that answers NOAUTH or LOADING)
// counts as an answer: the node is up; only a network failure keeps it down.
func TestProbeErrorReplyIsAnAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := withRefusedNode(t)
		fs[2].Faults(func(n *nodetest.Fake) { n.Err = errors.New("LOADING Redis is loading the dataset in memory") })
		time.Sleep(probeMax)
		synctest.Wait()
		assert.False(t, r.Health()[2].Down)
		fs[2].Faults(func(n *nodetest.Fake) { n.Err = nil })
	})
}

// probeFirst and probeMax are the shortest and the longest interval
// between a down node's probes (internal/quorum, whose TestProbeBounds
// pins them).
const probeFirst, probeMax = 20 * time.Millisecond, 200 * time.Millisecond
