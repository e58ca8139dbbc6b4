package redlock

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redlock-go/redlock/redlock/internal/quorum"
	"github.com/redlock-go/redlock/redlock/report"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node/nodetest"
)

func newFakeSemaphore(t *testing.T, r *Redlock, name string, permits int, opts ...LockOption) *Semaphore {
	t.Helper()
	s, err := r.NewSemaphore(name, permits, opts...)
	require.NoError(t, err)
	return s
}

// permitOf returns the token of s's current permit, "" when none.
func permitOf(s *Semaphore) string {
	if l := s.sh.h.Current(); l != nil {
		return l.Token
	}
	return ""
}

// admittedOn counts the fakes on which token holds a live permit of key.
func admittedOn(fs []*nodetest.Fake, key, token string) int {
	n := 0
	for _, f := range fs {
		for _, h := range f.Holders(key) {
			if h == token {
				n++
			}
		}
	}
	return n
}

func TestSemQuorum(t *testing.T) {
	for _, c := range []struct{ n, k, q int }{
		{1, 1, 1}, {3, 1, 2}, {5, 1, 3}, {7, 1, 4}, {4, 1, 3},
		{3, 2, 3}, {5, 2, 4}, {5, 3, 4}, {5, 4, 5}, {5, 100, 5}, {7, 2, 5}, {7, 3, 6}, {9, 2, 7},
	} {
		assert.Equal(t, c.q, quorum.Permits(c.n, c.k), "N=%d K=%d", c.n, c.k)
		if c.k == 1 {
			assert.Equal(t, quorum.Majority(c.n), quorum.Permits(c.n, c.k), "one permit is a lock: a majority")
		}
	}
	// The price table of the README: N=5 tolerates 2 failed nodes with one
	// permit, 1 with two or three, none from four on.
	for k, tolerated := range map[int]int{1: 2, 2: 1, 3: 1, 4: 0, 5: 0, 1 << 40: 0} {
		assert.Equal(t, tolerated, 5-quorum.Permits(5, k), "K=%d", k)
	}
	assert.Equal(t, 5, semBound(5, 2, 2), "WithQuorum(2): at most N·K/q holders")
	assert.Equal(t, 2, semBound(5, 2, 4))
}

// semBound is how many holders a semaphore of k permits over n nodes may
// have at once when each needs only q nodes (WithQuorum's documented
// bound): at most n·k/q, since each fills q of the n·k places.
func semBound(n, k, q int) int { return n * k / q }

// admits reports whether h holders can each be admitted by q of n nodes
// while no node admits more than k: a search over every way to choose
// their nodes (holders are alike, so each chooses a node set at or after
// the previous one's).
func admits(n, k, q, h int) bool {
	var sets [][]int
	var pick func(from int, set []int)
	pick = func(from int, set []int) {
		if len(set) == q {
			sets = append(sets, append([]int(nil), set...))
			return
		}
		for i := from; i < n; i++ {
			pick(i+1, append(set, i))
		}
	}
	pick(0, nil)
	load := make([]int, n)
	var place func(holder, from int) bool
	place = func(holder, from int) bool {
		if holder == h {
			return true
		}
		for si := from; si < len(sets); si++ {
			if fits(load, sets[si], k) {
				for _, i := range sets[si] {
					load[i]++
				}
				ok := place(holder+1, si)
				for _, i := range sets[si] {
					load[i]--
				}
				if ok {
					return true
				}
			}
		}
		return false
	}
	return place(0, 0)
}

func fits(load, set []int, k int) bool {
	for _, i := range set {
		if load[i] >= k {
			return false
		}
	}
	return true
}

// The default quorum is exactly the least that admits no K+1 holders: by
// search over every placement, for N ≤ 7 and K ≤ 5, K+1 holders cannot
// each have it, and they can with one node less (so the search can fail).
func TestSemQuorumNeverOverAdmits(t *testing.T) {
	for n := 1; n <= 7; n++ {
		for k := 1; k <= 5; k++ {
			q := quorum.Permits(n, k)
			assert.False(t, admits(n, k, q, k+1), "N=%d K=%d: %d holders each on %d nodes", n, k, k+1, q)
			if q > 1 {
				assert.True(t, admits(n, k, q-1, k+1), "N=%d K=%d: quorum %d is not the least", n, k, q)
			}
		}
	}
}

// WithQuorum's bound: with q nodes each, at most N·K/q holders.
func TestSemBoundIsTight(t *testing.T) {
	for n := 1; n <= 5; n++ {
		for k := 1; k <= 3; k++ {
			for q := 1; q <= n; q++ {
				b := semBound(n, k, q)
				assert.True(t, admits(n, k, q, b), "N=%d K=%d q=%d: %d holders", n, k, q, b)
				assert.False(t, admits(n, k, q, b+1), "N=%d K=%d q=%d: %d holders", n, k, q, b+1)
			}
		}
	}
}

// The same with Semaphores on fake nodes: K+1 holders acquire in turn,
// each reaching only the nodes of an adversarial plan (the others fail),
// spread so that no node is asked by more than K of them. At the default
// quorum the last is refused; at one node less, all K+1 hold a permit at
// once.
func TestSemaphoreNoOverAdmission(t *testing.T) {
	for _, c := range []struct{ n, k int }{{3, 2}, {4, 3}, {5, 2}, {5, 3}, {6, 4}, {7, 2}, {7, 3}, {7, 5}} {
		for _, tooSmall := range []bool{false, true} {
			q := quorum.Permits(c.n, c.k)
			var opts []LockOption
			if tooSmall {
				q--
				opts = append(opts, WithQuorum(q))
			}
			t.Run(fmt.Sprintf("N=%d,K=%d,q=%d", c.n, c.k, q), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					r, fs := newFakeRedlock(t, c.n)
					held := 0
					for h := 0; h <= c.k; h++ {
						s := newFakeSemaphore(t, r, "sem", c.k, opts...)
						plan := map[int]bool{}
						for j := range q {
							plan[(h*q+j)%c.n] = true
						}
						for i, f := range fs {
							f.Faults(func(n *nodetest.Fake) { n.Err = nil })
							if !plan[i] {
								f.Faults(func(n *nodetest.Fake) { n.Err = errBoom })
							}
						}
						if s.TryAcquire(t.Context()) == nil {
							held++
						}
						synctest.Wait()
					}
					for i, f := range fs {
						assert.LessOrEqual(t, len(f.Holders("sem")), c.k, "node %d", i)
					}
					if tooSmall {
						assert.Equal(t, c.k+1, held, "a quorum too small admits K+1 holders")
					} else {
						assert.Equal(t, c.k, held, "K holders, never K+1")
					}
				})
			})
		}
	}
}

func TestSemaphoreAdmitsUpToPermits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		a := newFakeSemaphore(t, r, "sem", 2)
		b := newFakeSemaphore(t, r, "sem", 2)
		c := newFakeSemaphore(t, r, "sem", 2)
		assert.Equal(t, 4, a.Quorum())
		assert.Equal(t, "sem", a.Name())
		require.NoError(t, a.TryAcquire(t.Context()))
		require.NoError(t, b.TryAcquire(t.Context()))
		synctest.Wait() // b's fifth node too: TryAcquire returned at the quorum
		err := c.TryAcquire(t.Context())
		require.ErrorIs(t, err, ErrNotAcquired)
		assert.ErrorContains(t, err, "0 of 5 nodes admitted, quorum 4")
		assert.ErrorIs(t, a.TryAcquire(t.Context()), ErrNotAcquired, "one Semaphore value, one permit")
		synctest.Wait()
		assert.Equal(t, 5, admittedOn(fs, "sem", permitOf(a)))
		require.NoError(t, a.Release(t.Context()))
		require.ErrorIs(t, a.Release(t.Context()), ErrNotHeld)
		require.NoError(t, c.TryAcquire(t.Context()))
		require.NoError(t, b.Release(t.Context()))
		require.NoError(t, c.Release(t.Context()))
		synctest.Wait()
		for _, f := range fs {
			assert.Empty(t, f.Holders("sem"))
		}
	})
}

// A failed attempt gives its permit back on the nodes that admitted it.
func TestSemaphoreFailedAttemptUndone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		for _, f := range fs[:3] {
			f.Faults(func(n *nodetest.Fake) {
				n.Sems["sem"] = &nodetest.Sem{Permits: 1, Holders: map[string]time.Time{"other": time.Now().Add(time.Minute)}}
			})
		}
		s := newFakeSemaphore(t, r, "sem", 1)
		err := s.TryAcquire(t.Context())
		require.ErrorIs(t, err, ErrNotAcquired)
		assert.ErrorContains(t, err, "of 5 nodes admitted, quorum 3")
		synctest.Wait() // a node that admitted after the decision is released in the background
		for i, f := range fs[3:] {
			assert.Empty(t, f.Holders("sem"), "node %d", 3+i)
		}
	})
}

// Extend and Release count against the semaphore's quorum, not a majority.
func TestSemaphoreExtendAndReleaseNeedItsQuorum(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		s := newFakeSemaphore(t, r, "sem", 2) // quorum 4
		require.NoError(t, s.TryAcquire(t.Context()))
		synctest.Wait()
		tok := permitOf(s)
		for _, f := range fs[:2] { // expired there early, say: 3 of 5 left
			f.Faults(func(n *nodetest.Fake) { delete(n.Sems["sem"].Holders, tok) })
		}
		err := s.Extend(t.Context())
		require.ErrorIs(t, err, ErrNotHeld)
		assert.ErrorIs(t, err, ErrLockLost, "2 nodes refused: 4 can no longer hold it")
		<-s.Done()
		require.ErrorIs(t, s.Err(), ErrLockLost)
		require.ErrorIs(t, s.Release(t.Context()), ErrNotHeld)

		require.NoError(t, s.TryAcquire(t.Context()))
		synctest.Wait()
		for _, f := range fs[:2] {
			f.Faults(func(n *nodetest.Fake) { n.Err = errBoom })
		}
		err = s.Release(t.Context())
		require.ErrorContains(t, err, "release not confirmed", "held on 3 of 5, quorum 4")
		assert.NotErrorIs(t, err, ErrNotHeld, "the two failed may hold the permit")
		assert.Len(t, report.NodeErrors(err), 2)
	})
}

func TestSemaphoreValidityAndExtend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := newFakeRedlock(t, 3)
		s := newFakeSemaphore(t, r, "sem", 2, WithTTL(time.Second))
		assert.True(t, s.Until().IsZero())
		select {
		case <-s.Done():
		default:
			t.Fatal("Done is open with no permit")
		}
		start := time.Now()
		require.NoError(t, s.TryAcquire(t.Context()))
		assert.Equal(t, start.Add(time.Second-12*time.Millisecond), s.Until(), "start + ttl - drift")
		require.NoError(t, s.Err())
		time.Sleep(500 * time.Millisecond)
		require.NoError(t, s.Extend(t.Context()))
		assert.Equal(t, time.Now().Add(time.Second-12*time.Millisecond), s.Until())
		<-s.Done()
		assert.Equal(t, start.Add(500*time.Millisecond+time.Second-12*time.Millisecond-50*time.Millisecond), time.Now(),
			"lost TTL/20 before the end of validity")
		require.ErrorIs(t, s.Err(), ErrLockLost)
		err := s.Extend(t.Context())
		require.ErrorIs(t, err, ErrLockLost, "given up before the validity's end")
		require.NotErrorIs(t, err, ErrNotHeld, "the nodes hold the permit still")
		time.Sleep(time.Until(s.Until()))
		require.ErrorIs(t, s.Extend(t.Context()), ErrNotHeld)
		require.NoError(t, s.TryAcquire(t.Context()), "a lost permit frees the value for another")
	})
}

// A quorum that comes too late for any validity is no permit, and is
// given back.
func TestSemaphoreNoValidityLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3, WithTTL(200*time.Millisecond), WithNodeTimeout(199*time.Millisecond))
		for _, f := range fs {
			f.Faults(func(n *nodetest.Fake) { n.Delay = 196 * time.Millisecond }) // validity: 200 - 4 - 2 ms
		}
		s := newFakeSemaphore(t, r, "sem", 2)
		err := s.TryAcquire(t.Context())
		require.ErrorIs(t, err, ErrNotAcquired)
		assert.ErrorContains(t, err, "no validity left")
		synctest.Wait()
		for _, f := range fs {
			assert.Empty(t, f.Holders("sem"))
		}
	})
}

// A release the client resent after its reply was lost finds its token
// gone on the same server: it still counts as held.
func TestSemaphoreReleaseResent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		s := newFakeSemaphore(t, r, "sem", 3)
		require.NoError(t, s.TryAcquire(t.Context()))
		for _, f := range fs {
			f.Faults(func(n *nodetest.Fake) { n.Resend = true })
		}
		require.NoError(t, s.Release(t.Context()))
	})
}

// A waiting Acquire is woken by a release's announcement, at once, not
// after its back-off.
func TestSemaphoreAcquireWakesOnRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		for _, f := range fs {
			f.Faults(func(n *nodetest.Fake) { n.Delay = time.Millisecond })
		}
		holders := []*Semaphore{newFakeSemaphore(t, r, "sem", 2), newFakeSemaphore(t, r, "sem", 2)}
		for _, h := range holders {
			require.NoError(t, h.Acquire(t.Context()))
		}
		waiter := newFakeSemaphore(t, r, "sem", 2, WithRetryDelay(70*time.Millisecond, 70*time.Millisecond))
		got := make(chan time.Time)
		go func() {
			assert.NoError(t, waiter.Acquire(t.Context()))
			got <- time.Now()
		}()
		time.Sleep(time.Second)
		require.NoError(t, holders[1].Release(t.Context()))
		released := time.Now()
		assert.Equal(t, time.Millisecond, (<-got).Sub(released), "one round trip after the release")
		require.NoError(t, waiter.Release(t.Context()))
		require.NoError(t, holders[0].Release(t.Context()))
	})
}

// Acquire on a Semaphore that holds its permit waits for its release.
func TestSemaphoreAcquireWaitsForItsOwnPermit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := newFakeRedlock(t, 3)
		s := newFakeSemaphore(t, r, "sem", 2)
		require.NoError(t, s.Acquire(t.Context()))
		done := make(chan error)
		go func() { done <- s.Acquire(t.Context()) }()
		time.Sleep(time.Second)
		select {
		case err := <-done:
			t.Fatalf("Acquire returned %v while the permit was held", err)
		default:
		}
		require.NoError(t, s.Release(t.Context()))
		require.NoError(t, <-done)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		err := s.Acquire(ctx)
		require.ErrorIs(t, err, ErrNotAcquired)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.NoError(t, s.Release(t.Context()))
	})
}

func TestSemaphoreOptions(t *testing.T) {
	r, _ := newFakeRedlock(t, 5)
	for name, try := range map[string]func() error{
		"permits 0":         func() error { _, err := r.NewSemaphore("s", 0); return err },
		"empty name":        func() error { _, err := r.NewSemaphore("", 1); return err },
		"quorum 0":          func() error { _, err := r.NewSemaphore("s", 2, WithQuorum(0)); return err },
		"quorum above N":    func() error { _, err := r.NewSemaphore("s", 2, WithQuorum(6)); return err },
		"reentrant":         func() error { _, err := r.NewSemaphore("s", 2, WithReentrant()); return err },
		"fencing":           func() error { _, err := r.NewSemaphore("s", 2, WithFencing()); return err },
		"quorum on a mutex": func() error { _, err := r.NewMutex("m", WithQuorum(3)); return err },
		"quorum on New":     func() error { _, err := newRedlock(nodetest.Nodes(nodetest.Fakes(3)), WithQuorum(2)); return err },
		"nil context":       func() error { return newFakeSemaphore(t, r, "s", 1).Acquire(nil) }, //nolint:staticcheck // on purpose
	} {
		assert.ErrorIs(t, try(), ErrInvalidArgument, name)
	}
	s := newFakeSemaphore(t, r, "s", 2, WithQuorum(2))
	assert.Equal(t, 2, s.Quorum())
	r2, _ := newFakeRedlock(t, 5, WithFencing(), WithReentrant())
	assert.Equal(t, 4, newFakeSemaphore(t, r2, "s", 3).Quorum(), "the mutexes' defaults do not apply")
}

// A Semaphore reports its calls and permits to its Observer, with the
// semaphore's own kinds.
func TestSemaphoreObserved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		r, fs := newFakeRedlock(t, 5, WithObserver(rec))
		s := newFakeSemaphore(t, r, "sem", 2, WithTTL(time.Second))
		require.NoError(t, s.Acquire(t.Context()))
		require.NoError(t, s.Extend(t.Context()))
		require.NoError(t, s.Release(t.Context()))
		synctest.Wait() // the release is done on every node
		fs[0].Faults(func(n *nodetest.Fake) { n.Err = errBoom })
		require.NoError(t, s.TryAcquire(t.Context()))
		<-s.Done() // not extended: lost
		synctest.Wait()
		calls, ends, holds, nodes := rec.snapshot()
		calls = slices.DeleteFunc(calls, func(c string) bool { return c == "node 0" }) // before or after the quorum
		assert.Equal(t, []string{"start Acquire #1", "end Acquire #1", "start ExtendPermit #2", "end ExtendPermit #2",
			"start Release #3", "hold sem", "end Release #3", "start TryAcquire #4", "end TryAcquire #4", "hold sem"}, calls)
		assert.Equal(t, []report.OpResult{{Attempts: 1}, {}, {}, {Attempts: 1}}, ends)
		require.Len(t, holds, 2)
		assert.False(t, holds[0].Lost)
		assert.True(t, holds[1].Lost)
		assert.ErrorIs(t, holds[1].Err, ErrLockLost)
		require.Len(t, nodes, 1)
		assert.ErrorIs(t, nodes[0].err, errBoom)
	})
}

// A permit's or a read lock's refusal says so in its own words, counts the
// nodes that answered, and names the quorum rule that applied.
func TestRefusalWords(t *testing.T) {
	r, fs := newFakeRedlock(t, 3)
	fs[2].Faults(func(n *nodetest.Fake) { n.Err = errBoom })
	s := newFakeSemaphore(t, r, "words:sem", 2)
	err := s.TryAcquire(t.Context())
	require.ErrorIs(t, err, ErrNotAcquired)
	assert.ErrorContains(t, err, "redlock: permit not acquired: ")
	assert.ErrorContains(t, err, "nodes admitted, quorum 3; 1 of 3 nodes failed")
	assert.ErrorContains(t, err, ": a 2-permit semaphore on 3 nodes needs 3 of them")
	assert.ErrorContains(t, err, "WithQuorum")
	assert.NotContains(t, err.Error(), "lock not acquired")

	q := newFakeSemaphore(t, r, "words:q", 2, WithQuorum(3))
	assert.ErrorContains(t, q.TryAcquire(t.Context()), "quorum 3 set by WithQuorum")

	fs[1].Faults(func(n *nodetest.Fake) { n.Err = errBoom })
	rw, err := r.NewRWMutex("words:rw")
	require.NoError(t, err)
	err = rw.TryRLock(t.Context())
	require.ErrorIs(t, err, ErrNotAcquired)
	assert.ErrorContains(t, err, "redlock: read lock not acquired: ")
	assert.ErrorContains(t, err, "nodes admitted, quorum 2; 2 of 3 nodes failed")
	assert.ErrorContains(t, err, ": a read lock needs a majority\n")

	m := newFakeMutex(t, r, "words:lock")
	err = m.TryLock(t.Context())
	assert.ErrorContains(t, err, "redlock: lock not acquired: ")
	assert.ErrorContains(t, err, "nodes granted, quorum 2; 2 of 3 nodes failed")
}
