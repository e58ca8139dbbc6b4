package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/redlock"
)

// TestRenewalHoldsForTenSeconds: a 1s-TTL lock stays held through 10s of
// work with no gap, checked every 50ms by another client and by the
// holder's own validity window.
func TestRenewalHoldsForTenSeconds(t *testing.T) {
	c := startCluster(t, 5)
	ctx := t.Context()
	key := "renew:" + t.Name()
	rl := newRedlock(t, c)
	probe := newMutex(t, newRedlock(t, c), key)
	probes := 0
	err := rl.Do(ctx, key, func(work context.Context) error {
		end := time.Now().Add(10 * time.Second)
		for time.Now().Before(end) {
			if err := work.Err(); err != nil {
				return err
			}
			require.ErrorIs(t, probe.TryLock(ctx), redlock.ErrNotAcquired, "another client acquired a renewed lock")
			probes++
			time.Sleep(50 * time.Millisecond)
		}
		return nil
	}, redlock.WithTTL(time.Second))
	require.NoError(t, err)
	assert.Greater(t, probes, 100)
	require.NoError(t, probe.TryLock(ctx), "released after the work")
	require.NoError(t, probe.Unlock(ctx))
}

// TestRenewalAcrossKilledMinority: renewal goes on when two of five nodes
// die while the lock is held.
func TestRenewalAcrossKilledMinority(t *testing.T) {
	c := startCluster(t, 5)
	ctx := t.Context()
	key := "renew-minority:" + t.Name()
	m := newMutex(t, newRedlock(t, c), key, redlock.WithTTL(time.Second), redlock.WithRenewal())
	require.NoError(t, m.Lock(ctx))
	require.NoError(t, c.Kill(ctx, 0))
	require.NoError(t, c.Kill(ctx, 4))
	select {
	case <-m.Done():
		t.Fatalf("lock lost with a minority down: %v", m.Err())
	case <-time.After(4 * time.Second):
	}
	assert.True(t, time.Until(m.Until()) > 500*time.Millisecond, "validity keeps moving")
	require.NoError(t, m.Unlock(ctx))
}

// TestRenewalFailsWithMajorityPaused: with three of five nodes paused, the
// holder learns of the loss before its last validity ends (Done for a
// Mutex, a cancelled context with ErrLockLost as cause for Do), and the
// lock is not re-created when the nodes resume.
func TestRenewalFailsWithMajorityPaused(t *testing.T) {
	c := startCluster(t, 5)
	ctx := t.Context()
	key := "renew-paused:" + t.Name()
	rl := newRedlock(t, c, redlock.WithNodeTimeout(100*time.Millisecond))

	var lostAt, lastUntil time.Time
	err := rl.Do(ctx, key, func(work context.Context) error {
		m := redlock.MutexFrom(work)
		time.Sleep(300 * time.Millisecond)
		for _, i := range []int{1, 2, 3} {
			require.NoError(t, c.Pause(ctx, i))
		}
		t.Cleanup(func() {
			for _, i := range []int{1, 2, 3} {
				_ = c.Unpause(context.Background(), i)
			}
		})
		for work.Err() == nil {
			lastUntil = m.Until() // the end of the last validity window
			time.Sleep(5 * time.Millisecond)
		}
		lostAt = time.Now()
		assert.ErrorIs(t, context.Cause(work), redlock.ErrLockLost)
		return work.Err()
	}, redlock.WithTTL(time.Second))
	require.ErrorIs(t, err, redlock.ErrLockLost)
	assert.True(t, lostAt.Before(lastUntil), "Do's work cancelled %v after the validity ended", lostAt.Sub(lastUntil))
	t.Logf("Do's work cancelled %v before its validity ended", lastUntil.Sub(lostAt))
	// The same with a Mutex, whose last validity window is visible.
	m := newMutex(t, rl, key+":mutex", redlock.WithTTL(time.Second), redlock.WithRenewal())
	for _, i := range []int{1, 2, 3} {
		require.NoError(t, c.Unpause(ctx, i))
	}
	require.NoError(t, m.Lock(ctx))
	time.Sleep(400 * time.Millisecond)
	for _, i := range []int{0, 2, 4} {
		require.NoError(t, c.Pause(ctx, i))
	}
	<-m.Done()
	doneAt := time.Now()
	until := m.Until()
	assert.ErrorIs(t, m.Err(), redlock.ErrLockLost)
	assert.True(t, doneAt.Before(until), "Done closed %v after the validity ended", doneAt.Sub(until))
	t.Logf("Mutex lost %v before its validity ended", until.Sub(doneAt))

	for _, i := range []int{0, 1, 2, 3, 4} {
		_ = c.Unpause(ctx, i)
	}
	time.Sleep(1200 * time.Millisecond) // past every TTL
	insp := inspector(t, c)
	assert.Equal(t, []string{"", "", "", "", ""}, values(t, insp, key), "the lost lock was re-created")
	assert.Equal(t, []string{"", "", "", "", ""}, values(t, insp, key+":mutex"), "the lost lock was re-created")
	_ = m.Unlock(ctx)
}

// TestWaiterWokenWithNodeDown: with a node dead and polling set to once a
// second, a waiter still acquires within a few round trips of the release,
// woken by the announcements of the live nodes.
func TestWaiterWokenWithNodeDown(t *testing.T) {
	c := startCluster(t, 5)
	ctx := t.Context()
	key := "wake:" + t.Name()
	require.NoError(t, c.Kill(ctx, 2))
	holder := newMutex(t, newRedlock(t, c), key)
	waiter := newMutex(t, newRedlock(t, c), key, redlock.WithRetryDelay(time.Second, time.Second))
	require.NoError(t, holder.Lock(ctx))
	acquired := make(chan time.Time, 1)
	go func() {
		if assert.NoError(t, waiter.Lock(ctx)) {
			acquired <- time.Now()
		}
	}()
	time.Sleep(1500 * time.Millisecond) // the waiter has subscribed and sleeps
	require.NoError(t, holder.Unlock(ctx))
	released := time.Now()
	got := <-acquired
	handoff := got.Sub(released)
	t.Logf("handoff %v", handoff)
	assert.Less(t, handoff, 300*time.Millisecond, "woken by the release, not by its 1s poll")
	require.NoError(t, waiter.Unlock(ctx))
}

// TestReentrantOnRealNodes: hold counts live in a hash on each node; another
// owner is refused; the key goes with the last Unlock.
func TestReentrantOnRealNodes(t *testing.T) {
	c := startCluster(t, 5)
	ctx := t.Context()
	key := "reentrant:" + t.Name()
	rl := newRedlock(t, c)
	m := newMutex(t, rl, key, redlock.WithReentrant())
	other := newMutex(t, newRedlock(t, c), key, redlock.WithReentrant())
	plain := newMutex(t, rl, key)
	for range 3 {
		require.NoError(t, m.Lock(ctx))
	}
	insp := inspector(t, c)
	time.Sleep(50 * time.Millisecond)
	for i, n := range insp {
		h, err := n.HGetAll(ctx, key).Result()
		require.NoError(t, err)
		require.Len(t, h, 1, "node %d: one owner", i)
		for _, v := range h {
			assert.Equal(t, "3", v, "node %d: hold count", i)
		}
	}
	require.ErrorIs(t, other.TryLock(ctx), redlock.ErrNotAcquired, "another owner")
	require.ErrorIs(t, plain.TryLock(ctx), redlock.ErrNotAcquired, "a plain mutex")
	require.NoError(t, m.Unlock(ctx))
	require.NoError(t, m.Unlock(ctx))
	time.Sleep(50 * time.Millisecond)
	h, err := insp[0].HGetAll(ctx, key).Result()
	require.NoError(t, err)
	for _, v := range h {
		assert.Equal(t, "1", v)
	}
	require.ErrorIs(t, other.TryLock(ctx), redlock.ErrNotAcquired)
	require.NoError(t, m.Unlock(ctx))
	time.Sleep(50 * time.Millisecond)
	for i, n := range insp {
		exists, err := n.Exists(ctx, key).Result()
		require.NoError(t, err)
		assert.Zero(t, exists, "node %d still has the key after the last Unlock", i)
	}
	require.NoError(t, other.TryLock(ctx))
	require.NoError(t, other.Unlock(ctx))
}
