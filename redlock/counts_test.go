package redlock

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node/nodetest"
	"github.com/redlock-go/redlock/redlock/report"
)

// A failed extension or release counts what the nodes did, not what the
// round had heard when no quorum was left: two nodes failing at once
// decide it before the third, slower, node answers, and that node is
// still counted (it extended, or held the token); one that does not
// answer within the node timeout is said to be unknown.
func TestFailedLapseCountsEveryNode(t *testing.T) {
	for _, c := range []struct {
		name     string
		hang     bool
		extended string
		released string
	}{
		{"the third answers late", false,
			"extended on 1 of 3 nodes, quorum 2", "token found on 1 of 3 nodes, quorum 2"},
		{"the third is silent", true,
			"2 of 3 nodes answered, extended on 0, quorum 2", "2 of 3 nodes answered, token found on 0, quorum 2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r, fs := newFakeRedlock(t, 3)
				m := newFakeMutex(t, r, "k")
				require.NoError(t, m.Lock(t.Context()))
				synctest.Wait()
				fs[0].Faults(func(n *nodetest.Fake) {
					n.Delay = 20 * time.Millisecond // well within the node timeout
					if c.hang {
						n.Hang = make(chan struct{})
					}
				})
				for _, f := range fs[1:] {
					f.Faults(func(n *nodetest.Fake) { n.Err = errBoom })
				}
				// The failed nodes may hold the token: neither verdict
				// is "not held".
				err := m.Extend(t.Context())
				require.ErrorContains(t, err, "extension not confirmed: "+c.extended)
				assert.NotErrorIs(t, err, ErrNotHeld)
				assert.Len(t, report.NodeErrors(err), 2, "the failed nodes, named")

				err = m.Unlock(t.Context())
				require.ErrorContains(t, err, "release not confirmed: "+c.released)
				assert.NotErrorIs(t, err, ErrNotHeld)
				fs[0].Unhang()
				synctest.Wait()
			})
		})
	}
}

// A node that went silent is put down at the next request after its
// silence; it is reported down since the first failure seen (its request
// unanswered at the node timeout), not since that next request: the
// down-time counts the outage this process saw.
func TestDownSinceFirstFailureSeen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3)
		m := newFakeMutex(t, r, "k", WithTTL(time.Minute))
		require.NoError(t, m.Lock(t.Context()))
		synctest.Wait()
		fs[2].Faults(func(n *nodetest.Fake) { n.Hang = make(chan struct{}) })
		start := time.Now()
		require.NoError(t, m.Extend(t.Context()), "nodes 0 and 1 extend it")
		// Node 2's request timed out long ago (and the audit, a second
		// after the first attempt, has not asked it yet).
		time.Sleep(800 * time.Millisecond)
		assert.False(t, r.Health()[2].Down, "a silence is noticed at the next request")

		err := newFakeMutex(t, r, "other").TryLock(t.Context())
		require.NoError(t, err)
		h := r.Health()[2]
		require.True(t, h.Down)
		assert.Equal(t, defaultNodeTimeout, h.Since.Sub(start), "down since its request went unanswered")
		err = newFakeMutex(t, r, "third").TryLock(t.Context())
		require.NoError(t, err)
		require.NoError(t, m.Unlock(t.Context()))
		fs[2].Unhang()
		synctest.Wait()
	})
}
