package redlock

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/node/nodetest"
	"github.com/redlock-go/redlock/redlock/report"
)

// What a refused acquisition says (ErrHeld, ErrSplit, ErrNodesFailed),
// and TryLock settling a split so that a free lock goes to one of those
// who try it.

// splitNodes returns a Redlock over three fakes 100µs away, nodes 0 and 2
// held by two competitors until ttl: "~" ranks above any token, "!" below
// any. An attempt wins node 1 alone, and gives way to "~".
func splitNodes(t *testing.T, ttl time.Duration) (*Redlock, []*nodetest.Fake) {
	t.Helper()
	r, fs := newFakeRedlock(t, 3)
	for _, f := range fs {
		f.Faults(func(n *nodetest.Fake) { n.Delay = 100 * time.Microsecond })
	}
	fs[0].Set("k", "~", ttl)
	fs[2].Set("k", "!", ttl)
	return r, fs
}

// A TryLock that split the nodes with competitors, none holding a quorum,
// tries again after a short back-off, and takes the lock once they let
// it go, within the node timeout.
func TestTryLockSettlesSplit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := splitNodes(t, 2*time.Millisecond)
		m := newFakeMutex(t, r, "k")
		start := time.Now()
		require.NoError(t, m.TryLock(t.Context()))
		assert.Less(t, time.Since(start), defaultNodeTimeout, "settled within the node timeout")
		assert.Greater(t, fs[1].Count("acquire"), 1, "tried again")
		assert.GreaterOrEqual(t, holders(fs, "k", tokenOf(m)), 2)
	})
}

// A split that does not settle within the node timeout is refused as a
// split: no one holds a quorum, and no node failed.
func TestTryLockSplitUnsettled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := splitNodes(t, time.Minute)
		m := newFakeMutex(t, r, "k")
		start := time.Now()
		err := m.TryLock(t.Context())
		took := time.Since(start)
		require.ErrorIs(t, err, ErrSplit)
		assert.ErrorIs(t, err, ErrNotAcquired)
		assert.NotErrorIs(t, err, ErrHeld)
		assert.NotErrorIs(t, err, ErrNodesFailed)
		assert.Empty(t, report.NodeErrors(err))
		assert.Contains(t, err.Error(), "redlock: lock not acquired: split: no one holds a quorum: ")
		assert.GreaterOrEqual(t, took, defaultNodeTimeout, "tried for a node timeout")
		assert.Less(t, took, 2*defaultNodeTimeout, "bounded by about a node timeout")
		time.Sleep(time.Millisecond) // the releases, in the background
		_, held := fs[1].Get("k")
		assert.False(t, held, "the last attempt's grant was released")
	})
}

// A lock held by another on a quorum is refused at once, as held, each
// node asked once.
func TestTryLockHeldIsQuick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3)
		for _, f := range fs {
			f.Set("k", "other", time.Minute)
		}
		m := newFakeMutex(t, r, "k")
		start := time.Now()
		err := m.TryLock(t.Context())
		require.ErrorIs(t, err, ErrHeld)
		assert.ErrorIs(t, err, ErrNotAcquired)
		assert.NotErrorIs(t, err, ErrSplit)
		assert.Zero(t, time.Since(start))
		assert.Contains(t, err.Error(), "redlock: lock not acquired: held by another: 0 of 3 nodes granted, quorum 2; another holds it on")
		synctest.Wait()
		for _, f := range fs {
			assert.Equal(t, 1, f.Count("acquire"), f.Name)
		}
	})
}

// Nodes that fail so many that the refusals alone do not account for the
// refusal: nodes failed, whether or not another holds the lock.
func TestTryLockNodesFailed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3)
		fs[0].Set("k", "other", time.Minute)
		fs[1].Faults(func(n *nodetest.Fake) { n.Err = errBoom })
		fs[2].Faults(func(n *nodetest.Fake) { n.Err = errBoom })
		err := newFakeMutex(t, r, "k").TryLock(t.Context())
		require.ErrorIs(t, err, ErrNodesFailed)
		assert.ErrorIs(t, err, ErrNotAcquired)
		assert.NotErrorIs(t, err, ErrHeld)
		assert.NotErrorIs(t, err, ErrSplit)
		assert.NotEmpty(t, report.NodeErrors(err))
	})
}

// TryLock on a Mutex that holds the lock is refused as held, by this very
// Mutex, without asking the nodes (which hold its token).
func TestTryLockOnHoldingMutex(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3)
		m := newFakeMutex(t, r, "k")
		require.NoError(t, m.TryLock(t.Context()))
		synctest.Wait()
		err := m.TryLock(t.Context())
		require.ErrorIs(t, err, ErrHeld)
		assert.ErrorIs(t, err, ErrNotAcquired)
		assert.Equal(t, "redlock: lock not acquired: held by this Mutex, no node was asked", err.Error())
		for _, f := range fs {
			assert.Equal(t, 1, f.Count("acquire"), f.Name)
		}
		require.NoError(t, m.Unlock(t.Context()))
	})
}

// far is a fake node d away from one client: its requests reach the node
// d after they are sent, in the order they were sent.
type far struct {
	*nodetest.Fake
	d    time.Duration
	q    chan func()
	done chan struct{}
}

func newFar(f *nodetest.Fake, d time.Duration) *far {
	n := &far{Fake: f, d: d, q: make(chan func(), 1024), done: make(chan struct{})}
	go n.run()
	return n
}

func (n *far) run() {
	defer close(n.done)
	for call := range n.q {
		call()
	}
}

// Do implements node.Node.
func (n *far) Do(ctx context.Context, sendBy time.Time, op node.Op, done func(node.Reply)) {
	at := time.Now().Add(n.d)
	n.q <- func() {
		time.Sleep(time.Until(at))
		n.Fake.Do(ctx, sendBy, op, done)
	}
}

// Close implements node.Node.
func (n *far) Close(context.Context) error {
	close(n.q)
	<-n.done
	return nil
}

// Eight contenders TryLock a free lock at the same instant, round after
// round, each nearest to one of three nodes (contender i is 100µs from
// node i mod 3, further from the others), so that their first requests
// split the nodes three ways every round: one wins each round, and the
// others are refused because it holds the lock.
func TestTryLockFreeGoesToOneFake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := nodetest.Fakes(3)
		const contenders, rounds = 8, 30
		ms := make([]*Mutex, contenders)
		for i := range ms {
			nodes := make([]node.Node, len(fs))
			for j, f := range fs {
				nodes[j] = newFar(f, time.Duration(100+30*((i+3-j)%3))*time.Microsecond)
			}
			r, err := newRedlock(nodes)
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, r.Close(context.Background())) })
			ms[i] = newFakeMutex(t, r, "k")
		}
		for round := range rounds {
			errs := make([]error, contenders)
			var wg sync.WaitGroup
			for i, m := range ms {
				wg.Go(func() { errs[i] = m.TryLock(t.Context()) })
			}
			wg.Wait()
			var winners []int
			for i, err := range errs {
				if err == nil {
					winners = append(winners, i)
					continue
				}
				assert.ErrorIs(t, err, ErrHeld, "round %d, contender %d", round, i)
			}
			require.Len(t, winners, 1, "round %d: %v", round, errs)
			require.NoError(t, ms[winners[0]].Unlock(t.Context()))
			synctest.Wait()
		}
	})
}

// A semaphore's and a reader's refusals say the same, in their words: no
// permit free on a quorum is held by others; a read lock refused by a
// writer is held by another, and a write lock refused by readers too.
func TestSharedRefusalsHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := newFakeRedlock(t, 3)
		s1 := newFakeSemaphore(t, r, "sem", 1)
		require.NoError(t, s1.TryAcquire(t.Context()))
		err := newFakeSemaphore(t, r, "sem", 1).TryAcquire(t.Context())
		require.ErrorIs(t, err, ErrHeld)
		assert.ErrorIs(t, err, ErrNotAcquired)
		assert.Contains(t, err.Error(), "redlock: permit not acquired: held by others: 0 of 3 nodes admitted")
		assert.ErrorIs(t, s1.TryAcquire(t.Context()), ErrHeld, "this semaphore holds its permit")

		writer, err := r.NewRWMutex("rw")
		require.NoError(t, err)
		require.NoError(t, writer.TryLock(t.Context()))
		reader, err := r.NewRWMutex("rw")
		require.NoError(t, err)
		err = reader.TryRLock(t.Context())
		require.ErrorIs(t, err, ErrHeld)
		assert.Contains(t, err.Error(), "redlock: read lock not acquired: held by a writer, or one waits")
		assert.ErrorIs(t, writer.TryRLock(t.Context()), ErrHeld, "this RWMutex holds the write lock")
		require.NoError(t, writer.Unlock(t.Context()))

		require.NoError(t, reader.TryRLock(t.Context()))
		err = writer.TryLock(t.Context())
		require.ErrorIs(t, err, ErrHeld, "readers hold it")
		assert.NotErrorIs(t, err, ErrSplit)
		require.NoError(t, reader.RUnlock(t.Context()))
	})
}
