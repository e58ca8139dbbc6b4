package redlock

import (
	"context"
	"fmt"
	"strings"
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

// recorder is an Observer that records what it is told. OpStart returns a
// context marked with the operation, so that the tests can tell which
// context later calls carry.
type recorder struct {
	mu    sync.Mutex
	ops   int
	calls []string // in order, as "start Lock k", "end Lock #1", "hold k", "node 2"
	ends  []report.OpResult
	holds []report.Lease
	nodes []nodeFailure
}

type nodeFailure struct {
	err   *report.NodeError
	op    string // the mark of the context it came with: "" when none
	after bool   // reported after the operation it belongs to had ended
}

type markKey struct{}

func (r *recorder) OpStart(ctx context.Context, op report.Op) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops++
	mark := fmt.Sprintf("%s #%d", op.Kind, r.ops)
	if op.Renewal {
		mark = "renewal " + mark
	}
	if prev, _ := ctx.Value(markKey{}).(string); prev != "" {
		mark += " under " + prev
	}
	r.calls = append(r.calls, "start "+mark)
	return context.WithValue(ctx, markKey{}, mark)
}

func (r *recorder) OpEnd(ctx context.Context, _ report.Op, res report.OpResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "end "+mark(ctx))
	r.ends = append(r.ends, res)
}

func (r *recorder) LeaseEnd(h report.Lease) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "hold "+h.Name)
	r.holds = append(r.holds, h)
}

func (r *recorder) NodeFailed(ctx context.Context, e *report.NodeError) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := mark(ctx)
	ended := false
	for _, c := range r.calls {
		ended = ended || m != "" && c == "end "+m
	}
	r.calls = append(r.calls, fmt.Sprintf("node %d", e.Index))
	r.nodes = append(r.nodes, nodeFailure{err: e, op: m, after: ended})
}

func mark(ctx context.Context) string {
	s, _ := ctx.Value(markKey{}).(string)
	return s
}

// snapshot returns copies of what r recorded.
func (r *recorder) snapshot() (calls []string, ends []report.OpResult, holds []report.Lease, nodes []nodeFailure) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...), append([]report.OpResult(nil), r.ends...),
		append([]report.Lease(nil), r.holds...), append([]nodeFailure(nil), r.nodes...)
}

func TestObserverAcquiredAndUnlocked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		r, _ := newFakeRedlock(t, 5, WithObserver(rec))
		m := newFakeMutex(t, r, "k")
		start := time.Now()
		require.NoError(t, m.Lock(t.Context()))
		time.Sleep(time.Second)
		require.NoError(t, m.Unlock(t.Context()))
		synctest.Wait()

		calls, ends, holds, nodes := rec.snapshot()
		assert.Equal(t, []string{"start Lock #1", "end Lock #1", "start Unlock #2", "hold k", "end Unlock #2"}, calls)
		assert.Equal(t, []report.OpResult{{Attempts: 1}, {}}, ends)
		require.Len(t, holds, 1)
		assert.Equal(t, "k", holds[0].Name)
		assert.False(t, holds[0].Lost)
		assert.ErrorIs(t, holds[0].Err, ErrNotHeld)
		assert.Equal(t, start, holds[0].Acquired)
		assert.Equal(t, time.Second, time.Since(holds[0].Acquired))
		assert.Empty(t, nodes)
	})
}

func TestObserverNotAcquired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		r, fs := newFakeRedlock(t, 5, WithObserver(rec))
		for _, f := range fs[:3] {
			f.Set("k", "other", time.Minute)
		}
		m := newFakeMutex(t, r, "k", WithTries(3))
		err := m.Lock(t.Context())
		require.ErrorIs(t, err, ErrNotAcquired)
		require.ErrorIs(t, m.TryLock(t.Context()), ErrNotAcquired)
		synctest.Wait()

		calls, ends, holds, _ := rec.snapshot()
		assert.Equal(t, []string{"start Lock #1", "end Lock #1", "start TryLock #2", "end TryLock #2"}, calls)
		require.Len(t, ends, 2)
		assert.Equal(t, 3, ends[0].Attempts)
		assert.False(t, ends[0].Canceled)
		assert.Equal(t, err, ends[0].Err, "the error Lock returned")
		assert.Equal(t, 1, ends[1].Attempts)
		assert.False(t, ends[1].Canceled)
		assert.ErrorIs(t, ends[1].Err, ErrNotAcquired)
		assert.Empty(t, holds, "nothing was held")
	})
}

func TestObserverCanceled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		r, fs := newFakeRedlock(t, 5, WithObserver(rec))
		for _, f := range fs {
			f.Set("k", "other", time.Minute)
		}
		m := newFakeMutex(t, r, "k")

		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		require.ErrorIs(t, m.Lock(ctx), context.DeadlineExceeded)
		// LockWithin's wait running out is no cancellation: the caller's
		// context lasts.
		require.ErrorIs(t, m.LockWithin(t.Context(), time.Second), context.DeadlineExceeded)
		// An ended context fails TryLock as canceled, with no attempt to the nodes.
		require.ErrorIs(t, m.TryLock(ctx), context.DeadlineExceeded)
		synctest.Wait()

		_, ends, _, _ := rec.snapshot()
		require.Len(t, ends, 3)
		assert.True(t, ends[0].Canceled, "Lock: the caller's context ended")
		assert.Greater(t, ends[0].Attempts, 1)
		assert.False(t, ends[1].Canceled, "LockWithin: the wait ran out")
		assert.ErrorIs(t, ends[1].Err, ErrNotAcquired)
		assert.True(t, ends[2].Canceled, "TryLock with an ended context")
	})
}

func TestObserverLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		r, _ := newFakeRedlock(t, 5, WithObserver(rec))
		m := newFakeMutex(t, r, "k", WithTTL(time.Second))
		start := time.Now()
		require.NoError(t, m.TryLock(t.Context()))
		<-m.Done() // validity about to run out, never extended
		synctest.Wait()
		_, _, holds, _ := rec.snapshot()
		require.Len(t, holds, 1)
		assert.True(t, holds[0].Lost)
		assert.ErrorIs(t, holds[0].Err, ErrLockLost)
		assert.Equal(t, start, holds[0].Acquired)

		_ = m.Unlock(t.Context()) // the keys are still there: released
		_, _, holds, _ = rec.snapshot()
		assert.Len(t, holds, 1, "a lost acquisition ends once: Unlock adds no hold")
	})
}

func TestObserverLossFoundByExtend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		r, fs := newFakeRedlock(t, 5, WithObserver(rec))
		m := newFakeMutex(t, r, "k")
		require.NoError(t, m.TryLock(t.Context()))
		for _, f := range fs {
			f.Set("k", "other", time.Minute) // taken over
		}
		require.ErrorIs(t, m.Extend(t.Context()), ErrLockLost)
		synctest.Wait()
		calls, ends, holds, _ := rec.snapshot()
		assert.Equal(t, []string{"start TryLock #1", "end TryLock #1", "start Extend #2", "hold k", "end Extend #2"}, calls)
		assert.ErrorIs(t, ends[1].Err, ErrLockLost)
		require.Len(t, holds, 1)
		assert.True(t, holds[0].Lost)
	})
}

func TestObserverRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		r, _ := newFakeRedlock(t, 5)
		m := newFakeMutex(t, r, "k", WithObserver(rec), WithTTL(3*time.Second), WithRenewal())
		ctx := context.WithValue(t.Context(), markKey{}, "caller")
		require.NoError(t, m.Lock(ctx))
		time.Sleep(1500 * time.Millisecond) // one renewal, at TTL/3
		require.NoError(t, m.Unlock(ctx))
		synctest.Wait()
		calls, _, _, _ := rec.snapshot()
		// The renewal runs under the caller's context, not Lock's.
		assert.Equal(t, []string{
			"start Lock #1 under caller", "end Lock #1 under caller",
			"start renewal Extend #2 under caller", "end renewal Extend #2 under caller",
			"start Unlock #3 under caller", "hold k", "end Unlock #3 under caller",
		}, calls)
	})
}

func TestObserverNodeFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		r, fs := newFakeRedlock(t, 7, WithObserver(rec), WithNodeTimeout(100*time.Millisecond))
		m := newFakeMutex(t, r, "k")
		fs[0].Faults(func(n *nodetest.Fake) { n.Err = errBoom })
		// Both answer after the operation returned: node 3 fails late, node 4
		// grants too late.
		fs[3].Faults(func(n *nodetest.Fake) { n.Delay, n.Err = 200*time.Millisecond, errBoom })
		fs[4].Faults(func(n *nodetest.Fake) { n.Delay = 300 * time.Millisecond })
		require.NoError(t, m.TryLock(t.Context()))
		synctest.Wait() // node 0's reply, perhaps after the quorum's (no time passes)
		_, _, _, nodes := rec.snapshot()
		require.Len(t, nodes, 1, "node 0 failed at once")
		assert.Equal(t, 0, nodes[0].err.Index)
		assert.Equal(t, "fake0", nodes[0].err.Addr)
		assert.ErrorIs(t, nodes[0].err, errBoom)
		assert.Equal(t, "TryLock #1", nodes[0].op, "with the context of the operation")

		// At the node timeout the library stops waiting for nodes 3 and 4:
		// each is reported then, long before it answers.
		time.Sleep(150 * time.Millisecond)
		synctest.Wait()
		_, _, _, nodes = rec.snapshot()
		require.Len(t, nodes, 3)
		late := map[int]nodeFailure{nodes[1].err.Index: nodes[1], nodes[2].err.Index: nodes[2]}
		require.Contains(t, late, 3)
		require.Contains(t, late, 4)
		for _, f := range late {
			assert.ErrorIs(t, f.err, report.ErrNodeTimeout, "reported when the node timeout passed")
			assert.False(t, f.err.Late)
			assert.Equal(t, "TryLock #1", f.op)
			assert.True(t, f.after, "reported after TryLock returned")
		}

		// Node 3's call then ends with its own error, reported late; node 4
		// grants, too late, and is not reported again.
		time.Sleep(time.Second)
		synctest.Wait()
		_, _, _, nodes = rec.snapshot()
		require.Len(t, nodes, 4)
		assert.Equal(t, 3, nodes[3].err.Index)
		assert.ErrorIs(t, nodes[3].err, errBoom, "the error the call ended with")
		assert.True(t, nodes[3].err.Late, "marked late: the call was counted at its timeout")
		assert.Equal(t, "TryLock #1", nodes[3].op)

		// A node that refuses connections is down: skipped from then on,
		// and reported so.
		fs[3].Faults(func(n *nodetest.Fake) { n.Delay, n.Err = 0, nil })
		fs[4].Faults(func(n *nodetest.Fake) { n.Delay = 0 })
		fs[5].Faults(func(n *nodetest.Fake) { n.Err = errRefused })
		require.NoError(t, m.Unlock(t.Context()))
		synctest.Wait() // the refusal may come after Unlock returned
		require.NoError(t, m.TryLock(t.Context()))
		synctest.Wait()
		_, _, _, nodes = rec.snapshot()
		var five []string
		for _, f := range nodes[4:] {
			if f.err.Index == 5 {
				five = append(five, f.op)
				if f.op == "TryLock #3" {
					assert.ErrorIs(t, f.err, report.ErrNodeDown)
				} else {
					assert.ErrorIs(t, f.err, errRefused)
				}
			}
		}
		assert.Equal(t, []string{"Unlock #2", "TryLock #3"}, five)
	})
}

func TestObserverPerMutex(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec, own := &recorder{}, &recorder{}
		r, fs := newFakeRedlock(t, 3, WithObserver(rec))
		fs[0].Faults(func(n *nodetest.Fake) { n.Err = errBoom })
		silent := newFakeMutex(t, r, "a", WithObserver(nil))
		other := newFakeMutex(t, r, "b", WithObserver(own))
		require.NoError(t, silent.TryLock(t.Context()))
		require.NoError(t, other.TryLock(t.Context()))
		synctest.Wait()
		calls, _, _, _ := rec.snapshot()
		assert.Empty(t, calls, "WithObserver(nil) on NewMutex turns the Redlock's off")
		calls, _, _, _ = own.snapshot()
		// Node 0's failure may come after TryLock decided.
		assert.ElementsMatch(t, []string{"start TryLock #1", "node 0", "end TryLock #1"}, calls)
	})
}

// TestUnsentWording pins the message redlockotel recognises a request
// never sent by (its error.type not_sent).
func TestUnsentWording(t *testing.T) {
	for _, err := range []error{node.ErrUnsent, node.ErrQueueFull, node.ErrClosed} {
		assert.True(t, strings.HasPrefix(err.Error(), "redlock: request not sent"), err.Error())
	}
}

// A permit's and a read lock's renewal runs under the context that bounds
// the hold (the caller's), as a Mutex's does, never under the context the
// Observer returned for the Acquire or RLock that has already ended.
func TestObserverRenewalOfSharedHolds(t *testing.T) {
	r, _, _ := newRW(t, WithTTL(300*time.Millisecond))
	for _, c := range []struct {
		kinds   [3]string
		acquire func(ctx context.Context, rec *recorder) (release func(context.Context) error)
	}{
		{[3]string{"Acquire", "ExtendPermit", "Release"}, func(ctx context.Context, rec *recorder) func(context.Context) error {
			s, err := r.NewSemaphore("jobs", 2, WithObserver(rec), WithRenewal())
			require.NoError(t, err)
			require.NoError(t, s.Acquire(ctx))
			return s.Release
		}},
		{[3]string{"RLock", "ExtendRead", "RUnlock"}, func(ctx context.Context, rec *recorder) func(context.Context) error {
			rw := newRWMutex(t, r, "doc", WithObserver(rec), WithRenewal())
			require.NoError(t, rw.RLock(ctx))
			return rw.RUnlock
		}},
	} {
		rec := &recorder{}
		ctx := context.WithValue(t.Context(), markKey{}, "caller")
		release := c.acquire(ctx, rec)
		require.Eventually(t, func() bool {
			calls, _, _, _ := rec.snapshot()
			return len(calls) >= 4
		}, 5*time.Second, time.Millisecond, "one renewal, at TTL/3")
		require.NoError(t, release(ctx))
		calls, _, _, _ := rec.snapshot()
		assert.Equal(t, []string{
			"start " + c.kinds[0] + " #1 under caller", "end " + c.kinds[0] + " #1 under caller",
			"start renewal " + c.kinds[1] + " #2 under caller", "end renewal " + c.kinds[1] + " #2 under caller",
		}, calls[:4], c.kinds[0])
	}
}
