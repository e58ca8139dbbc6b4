package integration

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/redlock"
	"github.com/redlock-go/redlock/redlock/report"
)

// String shows a window in milliseconds from the first start of a run.
func (w window) String(origin time.Time) string {
	return fmt.Sprintf("worker %d [%.3fms, %.3fms]", w.worker,
		float64(w.start.Sub(origin))/1e6, float64(w.end.Sub(origin))/1e6)
}

// describe lists overlapping pairs readably.
func describe(pairs [][2]window, origin time.Time) []string {
	out := make([]string, len(pairs))
	for i, p := range pairs {
		out[i] = p[0].String(origin) + " overlaps " + p[1].String(origin)
	}
	return out
}

// window is one holder's critical section: from Lock's return to the
// earlier of Unlock's call and the end of validity, on one monotonic clock.
type window struct {
	worker     int
	start, end time.Time
}

// overlaps returns the pairs of windows that overlap.
func overlaps(ws []window) [][2]window {
	sorted := slices.Clone(ws)
	slices.SortFunc(sorted, func(a, b window) int { return a.start.Compare(b.start) })
	var out [][2]window
	for i := 1; i < len(sorted); i++ {
		for j := i - 1; j >= 0 && j >= i-5; j-- {
			if sorted[i].start.Before(sorted[j].end) {
				out = append(out, [2]window{sorted[j], sorted[i]})
			}
		}
	}
	return out
}

func TestOverlapsDetects(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	assert.Empty(t, overlaps([]window{{0, at(0), at(10)}, {1, at(10), at(20)}, {2, at(25), at(30)}}))
	assert.Len(t, overlaps([]window{{0, at(0), at(10)}, {1, at(9), at(20)}}), 1)
	assert.Len(t, overlaps([]window{{1, at(9), at(20)}, {0, at(0), at(30)}, {2, at(25), at(40)}}), 2)
}

// TestContention runs workers with independent clients (as separate
// processes would have) around a non-atomic read-sleep-write counter. A
// broken lock loses updates and lets validity windows overlap.
func TestContention(t *testing.T) {
	c := startCluster(t, 5)
	const workers, rounds = 6, 12
	var (
		counter atomic.Int64 // read and written separately: only the lock makes it safe
		mu      sync.Mutex
		windows []window
		wg      sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	origin := time.Now()
	for w := range workers {
		rl := newRedlock(t, c)
		m := newMutex(t, rl, "contention:"+t.Name(), redlock.WithTTL(5*time.Second), redlock.WithRetryDelay(time.Millisecond, 20*time.Millisecond))
		wg.Go(func() {
			for range rounds {
				if !assert.NoError(t, m.Lock(ctx)) {
					return
				}
				start, end := section(m, &counter)
				assert.True(t, time.Now().Before(m.Until()), "validity ran out inside a 2ms section")
				mu.Lock()
				windows = append(windows, window{w, start, end})
				mu.Unlock()
				assert.NoError(t, m.Unlock(ctx))
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(workers*rounds), counter.Load(), "lost updates")
	assert.Len(t, windows, workers*rounds)
	assert.Empty(t, describe(overlaps(windows), origin), "two holders at once")
}

// section is a critical section around counter, read and written
// separately (only the lock makes it safe), of about 2 ms; it returns the
// window it ran in, cut at m's validity.
func section(m *redlock.Mutex, counter *atomic.Int64) (start, end time.Time) {
	start = time.Now()
	v := counter.Load()
	time.Sleep(2 * time.Millisecond)
	counter.Store(v + 1)
	end = time.Now()
	if until := m.Until(); until.Before(end) {
		end = until
	}
	return start, end
}

// TestMinorityKilledWhileHeld: the holder keeps the lock and releases it on
// the surviving majority; another client then acquires it.
func TestMinorityKilledWhileHeld(t *testing.T) {
	c := startCluster(t, 5)
	ctx := t.Context()
	key := "minority:" + t.Name()
	holder := newMutex(t, newRedlock(t, c), key)
	other := newMutex(t, newRedlock(t, c), key)
	require.NoError(t, holder.Lock(ctx))

	require.NoError(t, c.Kill(ctx, 0))
	require.NoError(t, c.Kill(ctx, 3))
	err := other.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired, "acquired while held")
	require.NoError(t, holder.Extend(ctx), "extend on the surviving majority")
	require.NoError(t, holder.Unlock(ctx), "unlock on the surviving majority")

	lockCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	require.NoError(t, other.Lock(lockCtx))
	assert.True(t, time.Now().Before(other.Until()))
	require.NoError(t, other.Unlock(ctx))
}

// TestMajorityDown: with three of five nodes killed, TryLock fails with
// one NodeError per dead node, within about one node timeout.
func TestMajorityDown(t *testing.T) {
	c := startCluster(t, 5)
	ctx := t.Context()
	const nodeTimeout = 300 * time.Millisecond
	m := newMutex(t, newRedlock(t, c, redlock.WithNodeTimeout(nodeTimeout)), "majority:"+t.Name())
	for _, i := range []int{1, 2, 4} {
		require.NoError(t, c.Kill(ctx, i))
	}
	start := time.Now()
	err := m.TryLock(ctx)
	took := time.Since(start)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	errs := report.NodeErrors(err)
	assert.ElementsMatch(t, []int{1, 2, 4}, indexes(errs))
	for _, e := range errs {
		assert.Equal(t, c.Addr(e.Index), e.Addr)
	}
	assert.Less(t, took, 2*nodeTimeout, "took %v", took)
	assert.True(t, m.Until().IsZero())
	insp := inspector(t, c)
	// The failed attempt's undo goes out in the background as TryLock
	// returns: it lands within a node timeout.
	want := []string{"", "<down>", "<down>", "", "<down>"}
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, want, values(t, insp, m.Name()), "the failed attempt left its token on a live node")
	}, 2*nodeTimeout, 10*time.Millisecond)
}

// TestMajorityPaused: paused nodes do not answer at all; at go-redis'
// default options (3s read timeout, no context deadline on sockets) TryLock
// must still return after one node timeout.
func TestMajorityPaused(t *testing.T) {
	c := startCluster(t, 5)
	ctx := t.Context()
	const nodeTimeout = 300 * time.Millisecond
	rl := newRedlock(t, c, redlock.WithNodeTimeout(nodeTimeout))
	m := newMutex(t, rl, "paused:"+t.Name())
	require.NoError(t, m.TryLock(ctx)) // warm the connections
	require.NoError(t, m.Unlock(ctx))
	for _, i := range []int{0, 2, 3} {
		require.NoError(t, c.Pause(ctx, i))
	}
	start := time.Now()
	err := m.TryLock(ctx)
	took := time.Since(start)
	for _, i := range []int{0, 2, 3} {
		require.NoError(t, c.Unpause(ctx, i))
	}
	requireTimedOut(t, err, took, nodeTimeout, 0, 2, 3)
	// The paused nodes apply the SET when they resume; each is released
	// right after its reply. Close waits for those background calls.
	ctxClose, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, rl.Close(ctxClose))
	assert.Equal(t, []string{"", "", "", "", ""}, values(t, inspector(t, c), m.Name()),
		"a failed attempt left its token behind")
}

// TestTwoPaused: with two of five nodes paused, the lock is still acquired,
// as fast as the third-fastest node answers.
func TestTwoPaused(t *testing.T) {
	c := startCluster(t, 5)
	ctx := t.Context()
	const nodeTimeout = 500 * time.Millisecond
	m := newMutex(t, newRedlock(t, c, redlock.WithNodeTimeout(nodeTimeout)), "twopaused:"+t.Name())
	require.NoError(t, c.Pause(ctx, 1))
	require.NoError(t, c.Pause(ctx, 4))
	t.Cleanup(func() {
		_ = c.Unpause(context.Background(), 1)
		_ = c.Unpause(context.Background(), 4)
	})
	start := time.Now()
	require.NoError(t, m.TryLock(ctx))
	took := time.Since(start)
	assert.Less(t, took, nodeTimeout/2, "took %v: waited for the paused nodes", took)
	insp := inspector(t, c)
	got := values(t, []*redis.Client{insp[0], insp[2], insp[3]}, m.Name())
	assert.NotEmpty(t, got[0])
	assert.Equal(t, []string{got[0], got[0], got[0]}, got, "the token is on the three live nodes")
	require.NoError(t, m.Unlock(ctx))
}

// TestStaleUnlock: a holder whose TTL passed cannot free the lock of the
// holder that took over.
func TestStaleUnlock(t *testing.T) {
	c := startCluster(t, 5)
	ctx := t.Context()
	key := "stale:" + t.Name()
	stale := newMutex(t, newRedlock(t, c), key, redlock.WithTTL(300*time.Millisecond), redlock.WithNodeTimeout(50*time.Millisecond))
	fresh := newMutex(t, newRedlock(t, c), key, redlock.WithTTL(time.Minute))
	require.NoError(t, stale.Lock(ctx))
	time.Sleep(400 * time.Millisecond) // the stale holder's keys expire
	require.NoError(t, fresh.TryLock(ctx))
	time.Sleep(50 * time.Millisecond) // TryLock returns at quorum: let every SET land
	insp := inspector(t, c)
	before := values(t, insp, key)
	assert.Equal(t, []string{before[0], before[0], before[0], before[0], before[0]}, before)

	err := stale.Unlock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotHeld)
	time.Sleep(50 * time.Millisecond) // let any straggling release land
	assert.Equal(t, before, values(t, insp, key), "the stale Unlock touched the new holder's keys")
	require.ErrorIs(t, stale.Extend(ctx), redlock.ErrNotHeld)
	require.ErrorIs(t, newMutex(t, newRedlock(t, c), key).TryLock(ctx), redlock.ErrNotAcquired, "lock freed")
	require.NoError(t, fresh.Unlock(ctx))
}

// TestFailedAcquisitionLeavesNoToken: an attempt that loses to another
// holder releases every node it took, including one that answered late.
func TestFailedAcquisitionLeavesNoToken(t *testing.T) {
	c := startCluster(t, 5)
	ctx := t.Context()
	key := "leftover:" + t.Name()
	insp := inspector(t, c)
	for _, i := range []int{0, 1, 2} {
		require.NoError(t, insp[i].Set(ctx, key, "foreign", time.Minute).Err())
	}
	rl := newRedlock(t, c, redlock.WithNodeTimeout(200*time.Millisecond))
	m := newMutex(t, rl, key)
	require.NoError(t, c.Pause(ctx, 4)) // answers only after the attempt failed
	start := time.Now()
	err := m.TryLock(ctx)
	took := time.Since(start)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	assert.Empty(t, report.NodeErrors(err), "three refusals decide before node 4 times out")
	assert.Less(t, took, 200*time.Millisecond, "took %v", took)
	// Node 3's grant and the third refusal race: a grant in before the
	// outcome was decided is released before TryLock returns, one that
	// came after it right after, in the background. Either way it is gone
	// at once, and no other node changed.
	assert.Eventually(t, func() bool { return insp[3].Exists(ctx, key).Val() == 0 }, time.Second, 5*time.Millisecond,
		"node 3 granted and must be released")
	assert.Equal(t, []string{"foreign", "foreign", "foreign", "", "<down>"}, values(t, insp, key))

	time.Sleep(300 * time.Millisecond)
	require.NoError(t, c.Unpause(ctx, 4))
	ctxClose, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, rl.Close(ctxClose))
	assert.Equal(t, []string{"foreign", "foreign", "foreign", "", ""}, values(t, insp, key),
		"node 4 applied the SET late and must be released after it")
}

// TestRestartWithoutPersistence: a node restarted without persistence has
// forgotten the lock. One such node of five leaves the lock safe when the
// key is on all five (a holder with a bare quorum of three would not be:
// see TestFaultRestartWithoutPersistence); a majority of them lets a second
// holder in while the first one's validity lasts,
// which is the hazard docs/ALGORITHM.md documents (fencing or appendfsync always
// are the answers).
func TestRestartWithoutPersistence(t *testing.T) {
	c := startCluster(t, 5)
	ctx := t.Context()
	key := "restart:" + t.Name()
	first := newMutex(t, newRedlock(t, c), key, redlock.WithTTL(time.Minute))
	second := newMutex(t, newRedlock(t, c), key, redlock.WithTTL(time.Minute))
	require.NoError(t, first.Lock(ctx))
	insp := inspector(t, c)

	require.NoError(t, c.Stop(ctx, 0))
	require.NoError(t, c.Restart(ctx, 0))
	assert.Empty(t, values(t, insp, key)[0], "the restarted node forgot the lock")
	err := second.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired, "one forgetful node of five must not let a second holder in")
	// Node 0 may grant after three refusals decided the attempt: it is then
	// released in the background, right after its reply.
	time.Sleep(200 * time.Millisecond)
	assert.Empty(t, values(t, insp, key)[0], "the failed attempt's token was released on the restarted node")

	require.NoError(t, c.Kill(ctx, 1))
	require.NoError(t, c.Restart(ctx, 1))
	require.NoError(t, c.Kill(ctx, 2))
	require.NoError(t, c.Restart(ctx, 2))
	// Lock, not TryLock: the killed nodes may still be down for this
	// Redlock until its probes see them answer.
	lockCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	require.NoError(t, second.Lock(lockCtx), "three forgetful nodes: the documented hazard")
	assert.True(t, time.Now().Before(first.Until()), "both hold a valid lock")
	assert.True(t, time.Now().Before(second.Until()))
	require.NoError(t, second.Unlock(ctx))
	err = first.Unlock(ctx)
	require.True(t, notHeldOrUnconfirmed(err), "%v", err)
}

// TestResentReleaseOnRealNodes: a release that finds its key already gone
// on the server it was taken on, within the validity, is an earlier try of
// the same release (go-redis resends a command whose reply timed out), so
// Unlock succeeds; the release scripts say which server answered so that a
// restart is not taken for one (TestRestartWithoutPersistence).
func TestResentReleaseOnRealNodes(t *testing.T) {
	c := startCluster(t, 5)
	ctx := t.Context()
	insp := inspector(t, c)
	rl := newRedlock(t, c)
	for _, reentrant := range []bool{false, true} {
		key := fmt.Sprintf("resent:%s:%v", t.Name(), reentrant)
		var opts []redlock.LockOption
		if reentrant {
			opts = append(opts, redlock.WithReentrant())
		}
		m := newMutex(t, rl, key, opts...)
		require.NoError(t, m.Lock(ctx))
		time.Sleep(50 * time.Millisecond) // Lock returns at quorum: let every SET land
		for _, n := range insp {
			require.NoError(t, n.Del(ctx, key).Err()) // as the first try of the release would
		}
		assert.NoError(t, m.Unlock(ctx), "reentrant %v: the same servers, within the validity", reentrant)
	}
}

// TestRestartWithPersistence: with appendfsync always, nodes killed and
// restarted while a lock is held come back with its keys, so no second
// holder gets in even when a majority restarts: the setting that makes
// delayed restarts unnecessary.
func TestRestartWithPersistence(t *testing.T) {
	c := startCluster(t, 5, WithPersistence())
	ctx := t.Context()
	key := "persist:" + t.Name()
	first := newMutex(t, newRedlock(t, c), key, redlock.WithTTL(time.Minute))
	second := newMutex(t, newRedlock(t, c), key, redlock.WithTTL(time.Minute))
	require.NoError(t, first.Lock(ctx))
	time.Sleep(50 * time.Millisecond) // every node applied the SET
	insp := inspector(t, c)
	held := values(t, insp, key)
	for _, i := range []int{0, 2, 4} {
		require.NoError(t, c.Kill(ctx, i))
		require.NoError(t, c.Restart(ctx, i))
	}
	assert.Equal(t, held, values(t, insp, key), "the restarted nodes kept the lock")
	require.ErrorIs(t, second.TryLock(ctx), redlock.ErrNotAcquired, "a second holder got in after restarts with persistence")
	require.NoError(t, first.Unlock(ctx))
	// Unlock returned at the quorum: a node may still hold first's token,
	// and one TryLock, outranked there, would give way (the split-vote
	// rule). Lock asks again.
	require.NoError(t, second.LockWithin(ctx, 5*time.Second))
	require.NoError(t, second.Unlock(ctx))
}
