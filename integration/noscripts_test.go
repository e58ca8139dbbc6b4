package integration

import (
	"context"
	"errors"
	"strings"
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

// noScriptsUser creates, on every node, the user an operator who denies
// Lua scripting gives an application (+@all -@scripting), and checks that
// the node refuses it EVAL.
func noScriptsUser(t *testing.T, c nodeSet) {
	t.Helper()
	ctx := timeout(t, time.Minute)
	for _, a := range inspector(t, c) {
		require.NoError(t, a.Do(ctx, "ACL", "SETUSER", "noscripts", "on", ">pw", "~*", "&*", "+@all", "-@scripting").Err())
		u := redis.NewClient(&redis.Options{Addr: a.Options().Addr, Username: "noscripts", Password: "pw"})
		err := u.Eval(ctx, "return 1", nil).Err()
		_ = u.Close()
		require.ErrorContains(t, err, "NOPERM", "the user is refused scripts")
	}
}

// TestWithoutScriptsWorkload runs the Mutex's whole workload as a user
// refused scripts on five Redis 7 nodes (which have no DELEX: every node
// speaks transactions), with no option: contended fenced locks around a
// read-sleep-write counter with one node killed and another paused
// midway, reentrant holds, renewal, the restart delay. No two holders may
// overlap, no update may be lost, fencing tokens must grow with the
// holds, and every node must report the switch.
func TestWithoutScriptsWorkload(t *testing.T) {
	c := startCluster(t, 5)
	noScriptsUser(t, c)
	ctx := timeout(t, 3*time.Minute)
	const workers, rounds = 4, 16
	name := "noscripts:" + t.Name()
	var (
		counter atomic.Int64
		held    atomic.Int64
		faulty  atomic.Bool
		// notConfirmed counts releases confirmed by fewer than a quorum
		notConfirmed atomic.Int64
		mu           sync.Mutex
		windows      []window
		fences       []uint64
		wg           sync.WaitGroup
	)
	origin := time.Now()
	rls := make([]*redlock.Redlock, workers)
	for w := range workers {
		rls[w] = redlockOver(t, userClients(c, "noscripts", "pw"))
		m := newMutex(t, rls[w], name, redlock.WithTTL(5*time.Second), redlock.WithFencing(), redlock.WithRetryDelay(time.Millisecond, 20*time.Millisecond))
		wg.Go(func() {
			for range rounds {
				if !assert.NoError(t, m.Lock(ctx)) {
					return
				}
				start, end := section(m, &counter)
				mu.Lock()
				windows = append(windows, window{w, start, end})
				fences = append(fences, m.Fence())
				mu.Unlock()
				held.Add(1)
				if err := m.Unlock(ctx); err != nil {
					// Once a node is down, a release may confirm fewer
					// than a quorum (the grant had the paused node).
					assert.True(t, faulty.Load() && notHeldOrUnconfirmed(err), "%v", err)
					notConfirmed.Add(1)
				}
			}
		})
	}
	// A minority fails midway: node 4 killed, node 3 paused.
	require.Eventually(t, func() bool { return held.Load() >= workers*rounds/3 }, time.Minute, time.Millisecond)
	faulty.Store(true)
	require.NoError(t, c.Kill(ctx, 4))
	unpause := pauseNodes(t, c, 3)
	require.Eventually(t, func() bool { return held.Load() >= 2*workers*rounds/3 }, time.Minute, time.Millisecond)
	unpause()
	wg.Wait()
	t.Logf("%d holds, %d releases confirmed by fewer than a quorum", held.Load(), notConfirmed.Load())
	assert.Equal(t, int64(workers*rounds), counter.Load(), "lost updates")
	assert.Empty(t, describe(overlaps(windows), origin), "two holders at once")
	for i := 1; i < len(fences); i++ {
		assert.Greater(t, fences[i], fences[i-1], "fencing tokens grow with the holds")
	}
	for _, h := range rls[0].Health()[:3] {
		assert.Equal(t, "transactions", h.Speaks, "node %d", h.Index)
		require.Contains(t, h.FeaturesOff, report.FeatureScripts, "node %d", h.Index)
		assert.ErrorContains(t, h.FeaturesOff[report.FeatureScripts], "NOPERM")
	}

	t.Run("reentrant and renewal", func(t *testing.T) {
		rl := rls[0]
		m := newMutex(t, rl, name+":re", redlock.WithReentrant(), redlock.WithTTL(time.Second), redlock.WithRenewal())
		require.NoError(t, m.Lock(ctx))
		require.NoError(t, m.Lock(ctx), "re-entered")
		time.Sleep(2500 * time.Millisecond) // more than two TTLs: renewal keeps it
		select {
		case <-m.Done():
			t.Fatalf("lost while renewed: %v", m.Err())
		default:
		}
		require.ErrorIs(t, newMutex(t, rls[1], name+":re").TryLock(ctx), redlock.ErrNotAcquired)
		require.NoError(t, m.Unlock(ctx))
		require.ErrorIs(t, newMutex(t, rls[1], name+":re").TryLock(ctx), redlock.ErrNotAcquired, "one hold left")
		require.NoError(t, m.Unlock(ctx))
		// Unlock returns once a quorum released: a node behind (node 3,
		// paused above) or an undo of another process's earlier failed
		// attempt may still refuse one TryLock. A lock kept would refuse
		// for the rest of its TTL (two thirds of a second at least, the
		// renewal having run a third of one before): 300 ms tells them apart.
		other := newMutex(t, rls[1], name+":re")
		require.Eventually(t, func() bool { return other.TryLock(ctx) == nil }, 300*time.Millisecond, 10*time.Millisecond,
			"free after the last Unlock")
		require.NoError(t, other.Unlock(ctx))
	})

	t.Run("restart delay", func(t *testing.T) {
		start := time.Now()
		require.NoError(t, c.Restart(ctx, 4)) // killed above, no persistence: it lost its keys and users
		t.Logf("node 4 restarted in %v", time.Since(start))
		noScriptsUser(t, c)
		admin := inspector(t, c)
		// The others have been up for longer than the delay; node 4 for
		// less than a second.
		m := newMutex(t, rls[2], name+":restart", redlock.WithTTL(2*time.Second), redlock.WithRestartDelay(3*time.Second))
		start = time.Now()
		require.NoError(t, m.Lock(ctx), "a majority of older nodes grants")
		t.Logf("locked in %v", time.Since(start))
		assert.Equal(t, int64(0), admin[4].Exists(ctx, name+":restart").Val(), "the restarted node refused to grant")
		assert.Equal(t, int64(1), admin[0].Exists(ctx, name+":restart").Val())
		require.NoError(t, m.Unlock(ctx))
	})
}

// TestWithoutScriptsStaleRelease: the release of a lock that expired
// never deletes the next holder's key, without scripts as with them.
func TestWithoutScriptsStaleRelease(t *testing.T) {
	c := startCluster(t, 5)
	noScriptsUser(t, c)
	ctx := timeout(t, time.Minute)
	name := "noscripts:" + t.Name()
	first := newMutex(t, redlockOver(t, userClients(c, "noscripts", "pw")), name, redlock.WithTTL(300*time.Millisecond))
	second := newMutex(t, redlockOver(t, userClients(c, "noscripts", "pw")), name, redlock.WithTTL(10*time.Second))
	require.NoError(t, first.Lock(ctx))
	<-first.Done()
	require.NoError(t, second.Lock(ctx))
	// Lock returns at the quorum: the stale release must meet the second
	// holder's key on every node, so wait for the last grant.
	nodes := inspector(t, c)
	require.Eventually(t, func() bool {
		for _, a := range nodes {
			if a.Exists(context.Background(), name).Val() != 1 {
				return false
			}
		}
		return true
	}, 5*time.Second, time.Millisecond, "the second holder's key on every node")
	err := first.Unlock(ctx)
	require.Error(t, err)
	assert.True(t, errors.Is(err, redlock.ErrNotHeld) || errors.Is(err, redlock.ErrLockLost), "%v", err)
	for i, a := range nodes {
		v, err := a.Get(context.Background(), name).Result()
		require.NoError(t, err, "node %d", i)
		assert.NotEmpty(t, v, "node %d: the second holder's key stands", i)
	}
	require.NoError(t, second.Unlock(ctx))
}

// TestWithoutScriptsACLLine creates the user of docs/DEPLOYMENTS.md's line
// for nodes without scripts, exactly as written there, and does what the
// page says works as that user: plain, fenced and reentrant locks with
// renewal and the restart delay, a waiter woken in turn, Inspect and
// ForceUnlock. No node may report a feature off but scripts.
func TestWithoutScriptsACLLine(t *testing.T) {
	c := startCluster(t, 3)
	line := aclLineAfter(t, "The commands such a user needs")
	ctx := timeout(t, 2*time.Minute)
	args := []any{}
	for _, f := range strings.Fields(line) {
		args = append(args, f)
	}
	for _, a := range inspector(t, c) {
		require.NoError(t, a.Do(ctx, args...).Err(), "%s", line)
	}
	rl := redlockOver(t, userClients(c, "locker", "secret"))
	for _, opts := range [][]redlock.LockOption{nil, {redlock.WithFencing()}, {redlock.WithReentrant()}, {redlock.WithRestartDelay(10 * time.Second)}} {
		m := newMutex(t, rl, "locks:job", append(opts, redlock.WithRenewal())...)
		require.NoError(t, m.Lock(ctx), "options %d", len(opts))
		require.NoError(t, m.Extend(ctx))
		require.NoError(t, m.Unlock(ctx))
	}
	holder := newMutex(t, rl, "locks:turn")
	require.NoError(t, holder.Lock(ctx))
	other := redlockOver(t, userClients(c, "locker", "secret"))
	wm := newMutex(t, other, "locks:turn", redlock.WithRetryDelay(2*time.Second, 4*time.Second))
	waiter := lockInBackground(ctx, wm)
	awaitQueued(t, ctx, inspector(t, c), "locks:turn")
	unlocked := time.Now()
	require.NoError(t, holder.Unlock(ctx))
	r := await(t, waiter, 5*time.Second)
	require.NoError(t, r.err)
	assert.Less(t, r.at.Sub(unlocked), time.Second, "woken by the release, not by its back-off")
	// Lock returns at the quorum, and may keep it: the last node's grant
	// follows, or finds the holder's release still on its way there
	// (without scripts a release takes two round trips) and is refused.
	var (
		st  *report.LockState
		err error
	)
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		st, err = rl.Inspect(ctx, "locks:turn")
		if err == nil && st.Held == 3 || time.Now().After(deadline) {
			break
		}
	}
	require.NoError(t, err)
	require.GreaterOrEqual(t, st.Held, st.Quorum, "held on a quorum: %+v", st)
	forced, err := rl.ForceUnlock(ctx, "locks:turn")
	require.NoError(t, err)
	require.Len(t, forced, 3)
	deleted := 0
	for _, f := range forced {
		require.NoError(t, f.Err)
		if f.Deleted {
			deleted++
		}
	}
	assert.Equal(t, st.Held, deleted, "forced where it was held: %+v", forced)
	for _, h := range rl.Health() {
		assert.Equal(t, "transactions", h.Speaks)
		for f := range h.FeaturesOff {
			assert.Equal(t, report.FeatureScripts, f, "node %d: %v", h.Index, h.FeaturesOff[f])
		}
	}
}
