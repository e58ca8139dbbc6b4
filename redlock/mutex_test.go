package redlock

import (
	"github.com/redlock-go/redlock/internal/node/nodetest"
	"github.com/redlock-go/redlock/redlock/report"

	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var errBoom = errors.New("fake: boom")

func holders(fs []*nodetest.Fake, key, token string) (n int) {
	for _, f := range fs {
		if v, ok := f.Get(key); ok && v == token {
			n++
		}
	}
	return n
}

func keyOn(fs []*nodetest.Fake, key string) (n int) {
	for _, f := range fs {
		if _, ok := f.Get(key); ok {
			n++
		}
	}
	return n
}

func TestTryLockAllGrant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		m := newFakeMutex(t, r, "k", WithTTL(10*time.Second))
		for _, f := range fs {
			f.Faults(func(n *nodetest.Fake) { n.Delay = 3 * time.Millisecond })
		}
		start := time.Now()
		require.NoError(t, m.TryLock(t.Context()))
		assert.Equal(t, 3*time.Millisecond, time.Since(start))
		// Until is start + ttl - drift, whatever the attempt cost.
		assert.Equal(t, start.Add(10*time.Second-102*time.Millisecond), m.Until())
		synctest.Wait()
		assert.Equal(t, 5, holders(fs, "k", tokenOf(m)))
		time.Sleep(time.Second)
		assert.Equal(t, 9*time.Second, fs[0].TTL("k"), "PX ttl set when the node applied it")
	})
}

func TestTryLockMinorityFaults(t *testing.T) {
	for name, fault := range map[string]func(*nodetest.Fake){
		"held elsewhere": func(f *nodetest.Fake) { f.Set("k", "other", time.Minute) },
		"error":          func(f *nodetest.Fake) { f.Faults(func(n *nodetest.Fake) { n.Err = errBoom }) },
		"reply lost":     func(f *nodetest.Fake) { f.Faults(func(n *nodetest.Fake) { n.Lose = true }) },
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r, fs := newFakeRedlock(t, 5)
				m := newFakeMutex(t, r, "k")
				fault(fs[1])
				fault(fs[3])
				require.NoError(t, m.TryLock(t.Context()))
				assert.GreaterOrEqual(t, holders(fs, "k", tokenOf(m)), 3)
			})
		})
	}
}

func TestTryLockMajorityHeldElsewhere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		m := newFakeMutex(t, r, "k")
		for _, f := range fs[:3] {
			f.Set("k", "other", time.Minute)
			f.Faults(func(n *nodetest.Fake) { n.Delay = time.Millisecond }) // 3 and 4 grant first
		}
		err := m.TryLock(t.Context())
		require.ErrorIs(t, err, ErrNotAcquired)
		assert.Empty(t, report.NodeErrors(err), "refusals are not node errors")
		assert.True(t, m.Until().IsZero())
		// Released where it was granted; the other holder's keys untouched.
		for _, f := range fs[:3] {
			v, _ := f.Get("k")
			assert.Equal(t, "other", v)
			assert.Zero(t, f.Count("release"), "%s: a node that answered 'held' must not be released", f.Name)
		}
		for _, f := range fs[3:] {
			_, ok := f.Get("k")
			assert.False(t, ok, "%s still holds the failed attempt's token", f.Name)
		}
	})
}

func TestTryLockMajorityFailingReportsEachNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		m := newFakeMutex(t, r, "k")
		fs[0].Faults(func(n *nodetest.Fake) { n.Err = errBoom })
		fs[2].Faults(func(n *nodetest.Fake) { n.Lose = true }) // applied, reply lost: must be released
		fs[4].Faults(func(n *nodetest.Fake) { n.Err = errBoom })
		err := m.TryLock(t.Context())
		require.ErrorIs(t, err, ErrNotAcquired)
		require.ErrorIs(t, err, errBoom)
		got := report.NodeErrors(err)
		require.Len(t, got, 3)
		idx := []int{got[0].Index, got[1].Index, got[2].Index}
		assert.ElementsMatch(t, []int{0, 2, 4}, idx)
		for _, ne := range got {
			assert.Equal(t, fs[ne.Index].Name, ne.Addr)
		}
		synctest.Wait() // failed nodes are released in the background
		assert.Zero(t, keyOn(fs, "k"), "a failed attempt left a token behind")
		assert.Equal(t, 1, fs[2].Count("release"), "the node whose reply was lost must be released")
	})
}

func TestTryLockDoesNotWaitForUndoOnFailedNodes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		m := newFakeMutex(t, r, "k")
		for _, f := range fs[:3] {
			f.Set("k", "other", time.Minute)
		}
		fs[4].Faults(func(n *nodetest.Fake) {
			n.Lose = true // applied, then failed: must be undone...
			n.OpDelay = map[string]time.Duration{"release": 80 * time.Millisecond}
		})
		start := time.Now()
		require.ErrorIs(t, m.TryLock(t.Context()), ErrNotAcquired)
		assert.Zero(t, time.Since(start), "...but the caller does not wait for a failed node")
		time.Sleep(time.Second)
		assert.Zero(t, keyOn(fs[3:], "k"))
		assert.Equal(t, 1, fs[4].Count("release"))
	})
}

func TestTryLockDecidesAtQuorum(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5, WithNodeTimeout(500*time.Millisecond))
		m := newFakeMutex(t, r, "k")
		for i, f := range fs {
			f.Faults(func(n *nodetest.Fake) { n.Delay = time.Duration(i+1) * 10 * time.Millisecond })
		}
		start := time.Now()
		require.NoError(t, m.TryLock(t.Context()))
		assert.Equal(t, 30*time.Millisecond, time.Since(start), "success is decided by the 3rd fastest node")

		m2 := newFakeMutex(t, r, "k")
		start = time.Now()
		require.ErrorIs(t, m2.TryLock(t.Context()), ErrNotAcquired)
		assert.Equal(t, 30*time.Millisecond, time.Since(start), "failure is decided as soon as a quorum is out of reach")
	})
}

func TestTryLockNodeTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5, WithNodeTimeout(50*time.Millisecond))
		m := newFakeMutex(t, r, "k")
		for _, f := range fs[2:] {
			f.Faults(func(n *nodetest.Fake) { n.Hang = make(chan struct{}) })
		}
		start := time.Now()
		err := m.TryLock(t.Context())
		require.ErrorIs(t, err, ErrNotAcquired)
		assert.Equal(t, 50*time.Millisecond, time.Since(start), "one node timeout, not more")
		got := report.NodeErrors(err)
		require.Len(t, got, 3)
		for _, ne := range got {
			assert.ErrorIs(t, ne, report.ErrNodeTimeout)
			assert.GreaterOrEqual(t, ne.Index, 2)
		}
		assert.NotErrorIs(t, err, context.DeadlineExceeded, "a node timeout is not the caller's deadline")
		assert.Zero(t, keyOn(fs[:2], "k"), "answered nodes are released before TryLock returns")

		// The hung nodes apply the SET late; each is released right after.
		for _, f := range fs[2:] {
			close(f.Hang)
		}
		synctest.Wait()
		assert.Zero(t, keyOn(fs, "k"), "a late SET must be undone")
		for _, f := range fs[2:] {
			assert.Equal(t, []string{"acquire", "release"}, f.Applied, "release must follow the SET it undoes")
		}
	})
}

func TestTryLockNodeTimeoutIsNotTheCallersDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3, WithNodeTimeout(50*time.Millisecond))
		m := newFakeMutex(t, r, "k")
		// A client's own timeout (a dial or pool timeout) wraps
		// context.DeadlineExceeded.
		for _, f := range fs[1:] {
			f.Faults(func(n *nodetest.Fake) { n.Err = fmt.Errorf("dial tcp: %w", context.DeadlineExceeded) })
		}
		err := m.TryLock(t.Context())
		require.ErrorIs(t, err, ErrNotAcquired)
		assert.Len(t, report.NodeErrors(err), 2)
		assert.NotErrorIs(t, err, context.DeadlineExceeded, "only the caller's own deadline may surface as DeadlineExceeded")
		assert.Contains(t, err.Error(), "deadline exceeded", "the original cause stays in the message")
	})
}

func TestTryLockNoValidityLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3, WithNodeTimeout(90*time.Millisecond))
		m := newFakeMutex(t, r, "k", WithTTL(100*time.Millisecond), WithDriftFactor(0))
		for _, f := range fs {
			f.Faults(func(n *nodetest.Fake) { n.Delay = 80 * time.Millisecond }) // validity 100 - 80 - 2 > 0
		}
		require.NoError(t, m.TryLock(t.Context()))
		require.NoError(t, m.Unlock(t.Context()))

		synctest.Wait()
		for _, f := range fs {
			f.Faults(func(n *nodetest.Fake) { n.Delay = 89 * time.Millisecond })
		}
		// 90 - 89 - 2 < 0: a quorum, but no validity.
		m = newFakeMutex(t, r, "k", WithTTL(90*time.Millisecond), WithNodeTimeout(89*time.Millisecond+time.Microsecond), WithDriftFactor(0))
		err := m.TryLock(t.Context())
		require.ErrorIs(t, err, ErrNotAcquired)
		assert.Contains(t, err.Error(), "no validity left")
		time.Sleep(time.Second) // a grant after the decision is released in the background
		assert.Zero(t, keyOn(fs, "k"), "a lock without validity must be released everywhere")
	})
}

func TestTryLockContextCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5, WithNodeTimeout(time.Second))
		m := newFakeMutex(t, r, "k")
		for _, f := range fs {
			f.Faults(func(n *nodetest.Fake) { n.Delay = 100 * time.Millisecond })
		}
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(10*time.Millisecond, cancel)
		start := time.Now()
		err := m.TryLock(ctx)
		assert.Equal(t, 10*time.Millisecond, time.Since(start), "returns when the context ends")
		require.ErrorIs(t, err, ErrNotAcquired)
		require.ErrorIs(t, err, context.Canceled)
		// Cleanup goes on although the caller's context is done.
		synctest.Wait()
		assert.Zero(t, keyOn(fs, "k"))

		// An ended context makes no attempt at all.
		require.ErrorIs(t, m.TryLock(ctx), context.Canceled)
		assert.Equal(t, 1, fs[0].Count("acquire"))
	})
}

func TestTryLockContextCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3)
		m := newFakeMutex(t, r, "k")
		fs[0].Faults(func(n *nodetest.Fake) { n.Hang = make(chan struct{}) })
		fs[1].Faults(func(n *nodetest.Fake) { n.Hang = make(chan struct{}) })
		cause := errors.New("shutting down")
		ctx, cancel := context.WithCancelCause(t.Context())
		time.AfterFunc(time.Millisecond, func() { cancel(cause) })
		err := m.TryLock(ctx)
		assert.ErrorIs(t, err, context.Canceled)
		assert.ErrorIs(t, err, cause)
	})
}

func TestLockRetriesUntilReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		holder := newFakeMutex(t, r, "k")
		waiter := newFakeMutex(t, r, "k", WithNotification(false)) // the back-off alone
		require.NoError(t, holder.Lock(t.Context()))
		time.AfterFunc(time.Second, func() { assert.NoError(t, holder.Unlock(context.Background())) })
		start := time.Now()
		require.NoError(t, waiter.Lock(t.Context()))
		waited := time.Since(start)
		assert.GreaterOrEqual(t, waited, time.Second)
		assert.Less(t, waited, time.Second+defaultRetryDelayMax+time.Millisecond, "back-off is bounded by the max delay")
		attempts := fs[0].Count("acquire") - 1
		// Exponential: 10, ≤20, ≤40, ≤80, ≤160, then ≤200ms apart: at least 1s/200ms attempts.
		assert.GreaterOrEqual(t, attempts, 5)
		synctest.Wait() // every node has answered
		assert.Equal(t, 5, holders(fs, "k", tokenOf(waiter)))
	})
}

func TestLockTriesBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3)
		for _, f := range fs {
			f.Set("k", "other", time.Hour)
		}
		m := newFakeMutex(t, r, "k", WithTries(4), WithRetryDelay(time.Millisecond, time.Millisecond))
		start := time.Now()
		err := m.Lock(t.Context())
		require.ErrorIs(t, err, ErrNotAcquired)
		// Three back-offs between four attempts.
		assert.Equal(t, 3*time.Millisecond, time.Since(start))
		synctest.Wait() // the last attempt may be decided before node 0 saw it
		assert.Equal(t, 4, fs[0].Count("acquire"))
	})
}

func TestLockContextDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3)
		for _, f := range fs {
			f.Set("k", "other", time.Hour)
		}
		m := newFakeMutex(t, r, "k")
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := m.Lock(ctx)
		assert.Equal(t, 300*time.Millisecond, time.Since(start), "Lock returns when the context ends, not after a full back-off")
		require.ErrorIs(t, err, ErrNotAcquired)
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})
}
