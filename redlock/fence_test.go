package redlock

import (
	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/redlock/report"

	"github.com/redlock-go/redlock/internal/node/nodetest"

	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFenceIncreasesAcrossHolders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5, WithFencing())
		a := newFakeMutex(t, r, "k")
		b := newFakeMutex(t, r, "k")
		assert.Zero(t, a.Fence(), "not held")
		var last uint64
		for i := range 6 {
			m := a
			if i%2 == 1 {
				m = b
			}
			require.NoError(t, m.TryLock(t.Context()))
			assert.Greater(t, m.Fence(), last, "acquisition %d", i)
			last = m.Fence()
			require.NoError(t, m.Unlock(t.Context()))
			assert.Zero(t, m.Fence(), "unlocked")
		}
		assert.Equal(t, uint64(6), last, "one more per acquisition when nothing fails")
		synctest.Wait()
		for _, f := range fs {
			assert.Equal(t, uint64(6), f.Counter(node.FenceKey("k")), "%s: the token reached every node", f.Name)
		}
		plain := newFakeMutex(t, r, "k2", WithTTL(time.Second))
		other, err := r.NewMutex("k2", WithTTL(time.Second))
		require.NoError(t, err)
		require.NoError(t, plain.TryLock(t.Context()))
		assert.Equal(t, uint64(1), plain.Fence(), "each name counts on its own")
		time.Sleep(2 * time.Second) // expires without Unlock
		require.NoError(t, other.TryLock(t.Context()))
		assert.Equal(t, uint64(2), other.Fence(), "after an expiry too")
	})
}

func TestFenceOffIsZero(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3)
		m := newFakeMutex(t, r, "k")
		require.NoError(t, m.TryLock(t.Context()))
		assert.Zero(t, m.Fence())
		synctest.Wait()
		assert.Zero(t, fs[0].Count("fence"), "no second round trip without WithFencing")
		require.NoError(t, m.Unlock(t.Context()))
	})
}

// The token is one more than the highest counter any answering node
// returned, whether that node granted or refused.
func TestFenceReadsEveryAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5, WithFencing())
		fs[0].Counters[node.FenceKey("k")] = 41 // a node that will refuse, first
		fs[0].Set("k", "someone", time.Hour)
		for _, f := range fs[1:] {
			f.Faults(func(n *nodetest.Fake) { n.Delay = time.Millisecond })
		}
		fs[4].Counters[node.FenceKey("k")] = 7
		m := newFakeMutex(t, r, "k")
		require.NoError(t, m.TryLock(t.Context()))
		assert.Equal(t, uint64(42), m.Fence())
		synctest.Wait()
		for _, f := range fs {
			assert.Equal(t, uint64(42), f.Counter(node.FenceKey("k")), f.Name)
		}
	})
}

// An acquisition whose token reached fewer than a quorum of nodes holding
// the lock fails and leaves no key behind: a token known to a minority
// could be overtaken by a later holder's.
func TestFenceNeedsQuorumOfRecords(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5, WithFencing())
		for _, f := range fs[:3] {
			f.Faults(func(n *nodetest.Fake) { n.Err, n.ErrOnly = errBoom, "fence" })
		}
		m := newFakeMutex(t, r, "k")
		err := m.TryLock(t.Context())
		require.ErrorIs(t, err, ErrNotAcquired)
		assert.ErrorIs(t, err, errBoom)
		assert.Regexp(t, `recorded on [0-2] of 5 nodes holding the lock, quorum 3`, err.Error())
		assert.Zero(t, m.Fence())
		synctest.Wait()
		assert.Zero(t, keyOn(fs, "k"), "released on every node")

		// The lock vanishing between the grant and the record (it expired on
		// a majority) fails the same way.
		for _, f := range fs[:3] {
			f.Faults(func(n *nodetest.Fake) { n.Err, n.ErrOnly = nil, "" })
			f.Faults(func(n *nodetest.Fake) { n.OpDelay = map[string]time.Duration{"fence": 2 * time.Second} })
		}
		short := newFakeMutex(t, r, "k", WithTTL(time.Second), WithNodeTimeout(900*time.Millisecond))
		err = short.TryLock(t.Context())
		require.ErrorIs(t, err, ErrNotAcquired)
		// The three nodes that timed out are down: the release owed to
		// them goes out as soon as they answer a probe, long before the
		// TTL would free the key.
		time.Sleep(100 * time.Millisecond)
		assert.Zero(t, keyOn(fs, "k"))
	})
}

func TestFenceReentrantKeepsToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5, WithFencing(), WithReentrant())
		m := newFakeMutex(t, r, "k")
		require.NoError(t, m.Lock(t.Context()))
		require.NoError(t, m.Lock(t.Context()))
		assert.Equal(t, uint64(1), m.Fence())
		synctest.Wait()
		assert.Equal(t, 1, fs[0].Count("fence"), "a re-lock records no new token")
		require.NoError(t, m.Unlock(t.Context()))
		assert.Equal(t, uint64(1), m.Fence(), "still held once")
		require.NoError(t, m.Unlock(t.Context()))
		require.NoError(t, m.Lock(t.Context()))
		assert.Equal(t, uint64(2), m.Fence())
		require.NoError(t, m.Unlock(t.Context()))
	})
}

func TestFenceFromDo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := newFakeRedlock(t, 3)
		var fences []uint64
		for range 2 {
			require.NoError(t, r.Do(t.Context(), "job", func(ctx context.Context) error {
				fences = append(fences, MutexFrom(ctx).Fence())
				return nil
			}, WithFencing()))
		}
		assert.Equal(t, []uint64{1, 2}, fences)
	})
}

// FuzzFenceMonotonic runs random histories of acquisitions, releases,
// expiries and node faults (no data loss) over five fake nodes, and checks
// the fencing promise: an acquisition's token is greater than the token of
// every acquisition that succeeded before it began. Each byte is one step.
func FuzzFenceMonotonic(f *testing.F) {
	f.Add([]byte{0, 1, 0, 4, 0, 9, 0, 2, 3, 0})
	f.Add([]byte{0, 0x12, 0x22, 0x32, 0x21, 0, 0x13, 5, 0x44, 0, 0x15, 1, 6, 0})
	f.Add([]byte{6, 6, 6, 0x20, 0x30, 7, 0x10, 0x35, 0x45, 6, 7, 0x55, 0x11})
	f.Add([]byte{0x02, 0x13, 0x23, 0x33, 0x06, 0x16, 0x07, 0x27, 0x14, 0x24, 0x34, 0x06, 0x16, 0x26})
	f.Fuzz(func(t *testing.T, steps []byte) {
		if len(steps) > 64 {
			steps = steps[:64]
		}
		synctest.Test(t, func(t *testing.T) {
			runFenceModel(t, steps)
		})
	})
}

// fenceFaults are the fence model's node faults, by action: each turns
// one on, or off again.
var fenceFaults = map[byte]func(n *nodetest.Fake){
	2: func(n *nodetest.Fake) { // down, or back up
		if n.Err == nil {
			n.Err, n.ErrOnly = errBoom, ""
		} else {
			n.Err = nil
		}
	},
	3: func(n *nodetest.Fake) { n.Lose = !n.Lose }, // replies lost, or back
	4: func(n *nodetest.Fake) { // slow: answers after the node timeout, or fast again
		if n.Delay == 0 {
			n.Delay = 80 * time.Millisecond
		} else {
			n.Delay = 0
		}
	},
	7: func(n *nodetest.Fake) { // the token record fails here, or works again
		if n.Err == nil {
			n.Err, n.ErrOnly = errBoom, "fence"
		} else {
			n.Err = nil
		}
	},
}

// runFenceModel interprets steps: the low 3 bits pick the action, the high
// bits its target (a mutex or a node).
func runFenceModel(t *testing.T, steps []byte) {
	t.Helper()
	const ttl = time.Second
	r, fs := newFakeRedlock(t, 5, WithFencing(), WithTTL(ttl), WithNodeTimeout(50*time.Millisecond))
	ms := make([]*Mutex, 3)
	for i := range ms {
		ms[i] = newFakeMutex(t, r, "k")
	}
	var (
		mu       sync.Mutex
		highest  uint64 // highest token of the acquisitions that have succeeded
		violates []string
	)
	try := func(m *Mutex) {
		mu.Lock()
		before := highest
		mu.Unlock()
		if m.TryLock(t.Context()) != nil {
			return
		}
		got := m.Fence()
		mu.Lock()
		defer mu.Unlock()
		if got <= before {
			violates = append(violates, fmt.Sprintf("token %d after %d had succeeded", got, before))
		}
		highest = max(highest, got)
	}
	for _, s := range steps {
		target := int(s >> 3)
		m, node := ms[target%len(ms)], fs[target%len(fs)]
		switch a := s & 7; a {
		case 0:
			try(m)
		case 1:
			_ = m.Unlock(t.Context())
		case 5: // time passes; a TTL or more expires every key
			time.Sleep(ttl / 2 * time.Duration(1+target%3))
		case 6: // two attempts at once: neither precedes the other
			var wg sync.WaitGroup
			for _, m := range []*Mutex{ms[target%3], ms[(target+1)%3]} {
				wg.Go(func() { try(m) })
			}
			wg.Wait()
		default:
			node.Faults(fenceFaults[a])
		}
		synctest.Wait()
	}
	for _, f := range fs {
		f.Faults(func(n *nodetest.Fake) { n.Err, n.Lose, n.Delay = nil, false, 0 })
	}
	for _, m := range ms {
		_ = m.Unlock(t.Context())
	}
	assert.Empty(t, violates, "steps %v", steps)
}

// With no node losing its data, the fuzz seeds all hold; this test pins one
// long history so that `go test` (no -fuzz) covers many steps.
func TestFenceModelLongHistory(t *testing.T) {
	steps := make([]byte, 0, 512)
	x := uint32(12345)
	for range cap(steps) {
		x = x*1103515245 + 12345
		steps = append(steps, byte(x>>16))
	}
	for i := 0; i < len(steps); i += 64 {
		synctest.Test(t, func(t *testing.T) { runFenceModel(t, steps[i:i+64]) })
	}
}

// The data-loss hazard the package documentation states: A's token reached
// only nodes 0-2; node 2 restarts without persistence; B is granted by
// nodes 2-4, none of which knows A's token, and gets a token no greater.
// Fencing cannot be monotonic when the only node the two quorums share lost
// its data. It holds when A's token reached every node (the second half).
func TestFenceDataLossHazard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5, WithFencing(), WithTTL(time.Second), WithNodeTimeout(50*time.Millisecond))
		a := newFakeMutex(t, r, "k")
		b := newFakeMutex(t, r, "k")
		for _, f := range fs[3:] {
			f.Faults(func(n *nodetest.Fake) { n.Err = errBoom })
		}
		require.NoError(t, a.TryLock(t.Context()))
		require.Equal(t, uint64(1), a.Fence())
		require.NoError(t, a.Unlock(t.Context()))
		for _, f := range fs[3:] {
			f.Faults(func(n *nodetest.Fake) { n.Err = nil })
		}
		fs[2].Restart()
		for _, f := range fs[:2] {
			f.Faults(func(n *nodetest.Fake) { n.Err = errBoom })
		}
		require.NoError(t, b.TryLock(t.Context()))
		assert.Equal(t, uint64(1), b.Fence(), "not greater: the hazard")
		require.NoError(t, b.Unlock(t.Context()))

		// Now every node records the tokens; any one node losing its data
		// (here two of five) leaves a node in every quorum that knows.
		for _, f := range fs[:2] {
			f.Faults(func(n *nodetest.Fake) { n.Err = nil })
		}
		require.NoError(t, a.TryLock(t.Context()))
		top := a.Fence()
		require.NoError(t, a.Unlock(t.Context()))
		synctest.Wait()
		fs[0].Restart()
		fs[1].Restart()
		for _, f := range fs[3:] {
			f.Faults(func(n *nodetest.Fake) { n.Err = errBoom })
		}
		require.NoError(t, b.TryLock(t.Context()))
		assert.Greater(t, b.Fence(), top)
		require.NoError(t, b.Unlock(t.Context()))
	})
}

func TestRestartDelayRefusesRecentNodes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5, WithTTL(2*time.Second), WithRestartDelay(2500*time.Millisecond))
		time.Sleep(time.Hour) // every node has been up long
		a := newFakeMutex(t, r, "k")
		b := newFakeMutex(t, r, "k")
		require.NoError(t, a.TryLock(t.Context()), "held on every node")
		synctest.Wait()
		fs[0].Restart()
		fs[1].Restart()
		for _, f := range fs[2:] { // the restarted nodes answer first
			f.Faults(func(n *nodetest.Fake) { n.Delay = 10 * time.Millisecond })
		}
		err := b.TryLock(t.Context())
		require.ErrorIs(t, err, ErrNotAcquired, "the restarted nodes forgot A's lock but must not vote")
		assert.ErrorIs(t, err, report.ErrNodeRecovering)
		var nodeErrs []int
		for _, e := range report.NodeErrors(err) {
			nodeErrs = append(nodeErrs, e.Index)
		}
		assert.ElementsMatch(t, []int{0, 1}, nodeErrs)
		synctest.Wait()
		for _, f := range fs[2:] {
			f.Faults(func(n *nodetest.Fake) { n.Delay = 0 })
		}
		assert.Zero(t, keyOn(fs[:2], "k"), "a refusing node changes nothing")

		require.NoError(t, a.Unlock(t.Context()))
		err = b.TryLock(t.Context())
		require.NoError(t, err, "3 long-running nodes are a quorum")
		require.NoError(t, b.Unlock(t.Context()))
		time.Sleep(2 * time.Second)
		synctest.Wait()
		c := newFakeMutex(t, r, "k")
		for _, f := range fs[2:4] {
			f.Faults(func(n *nodetest.Fake) { n.Err = errBoom })
		}
		err = c.TryLock(t.Context())
		require.ErrorIs(t, err, report.ErrNodeRecovering, "2 s is less than the 2.5 s delay")
		time.Sleep(time.Second)
		err = c.TryLock(t.Context())
		require.ErrorIs(t, err, report.ErrNodeRecovering, "3 s: the delay rounded up, plus the second Redis' uptime may run ahead")
		time.Sleep(time.Second)
		require.NoError(t, c.TryLock(t.Context()), "votes again once up 4 s")
		require.NoError(t, c.Unlock(t.Context()))
		assert.True(t, errors.Is(err, report.ErrNodeRecovering))
	})
}

func TestRestartDelayOption(t *testing.T) {
	_, err := newRedlock(nil, WithRestartDelay(-time.Second))
	assert.ErrorIs(t, err, ErrInvalidArgument)
	ns := nodetest.Nodes(nodetest.Fakes(3))
	_, err = newRedlock(ns, WithTTL(10*time.Second), WithRestartDelay(5*time.Second))
	require.ErrorIs(t, err, ErrInvalidArgument, "shorter than the ttl protects nothing")
	assert.Contains(t, err.Error(), "at least the ttl")
	r, err := newRedlock(ns, WithTTL(10*time.Second), WithRestartDelay(10*time.Second))
	require.NoError(t, err)
	m, err := r.NewMutex("k")
	require.NoError(t, err)
	assert.Equal(t, int64(11), m.spec("t", false).Op.(*node.Acquire).MinUptime, "one second for uptime's truncation")
	m, err = r.NewMutex("k", WithTTL(time.Second), WithRestartDelay(1500*time.Millisecond))
	require.NoError(t, err)
	assert.Equal(t, int64(3), m.spec("t", false).Op.(*node.Acquire).MinUptime, "rounded up to whole seconds, plus one")
	require.NoError(t, r.Close(t.Context()))
}
