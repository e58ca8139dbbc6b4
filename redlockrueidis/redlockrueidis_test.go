package redlockrueidis_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock/redlock"
	"github.com/redlock-go/redlock/redlockrueidis"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clients returns a rueidis client of each of n new miniredis servers
// (which know no CLIENT TRACKING: the clients cache nothing), closed when
// t ends.
func clients(t *testing.T, n int) []rueidis.Client {
	t.Helper()
	out := make([]rueidis.Client, n)
	for i := range out {
		s := miniredis.RunT(t)
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.Addr()}, DisableCache: true})
		require.NoError(t, err)
		t.Cleanup(c.Close)
		out[i] = c
	}
	return out
}

// TestEveryKindOverRueidis takes, extends, hands over and releases every
// kind of lock over rueidis clients: Mutexes plain, fenced and reentrant,
// an RWMutex's read and write locks, a semaphore's permits, and a
// multi-name lock.
func TestEveryKindOverRueidis(t *testing.T) {
	rl, err := redlockrueidis.New(clients(t, 3))
	require.NoError(t, err)
	defer func() { require.NoError(t, rl.Close(context.Background())) }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for name, opts := range map[string][]redlock.LockOption{
		"plain": nil, "fenced": {redlock.WithFencing()}, "reentrant": {redlock.WithReentrant()},
	} {
		t.Run(name, func(t *testing.T) {
			m, err := rl.NewMutex("lock:"+name, opts...)
			require.NoError(t, err)
			require.NoError(t, m.Lock(ctx))
			require.NoError(t, m.Extend(ctx))
			other, err := rl.NewMutex("lock:"+name, opts...)
			require.NoError(t, err)
			require.ErrorIs(t, other.TryLock(ctx), redlock.ErrNotAcquired, "held by the first")
			done := make(chan error, 1)
			go func() { done <- other.LockWithin(ctx, 10*time.Second) }()
			time.Sleep(20 * time.Millisecond)
			require.NoError(t, m.Unlock(ctx))
			require.NoError(t, <-done, "the waiter takes it once released")
			require.ErrorIs(t, m.Unlock(ctx), redlock.ErrNotHeld)
			require.NoError(t, other.Unlock(ctx))
		})
	}
	t.Run("rwmutex", func(t *testing.T) {
		rw, err := rl.NewRWMutex("rw")
		require.NoError(t, err)
		require.NoError(t, rw.RLock(ctx))
		require.NoError(t, rw.Extend(ctx), "the read lock")
		w, err := rl.NewRWMutex("rw")
		require.NoError(t, err)
		require.Error(t, w.TryLock(ctx), "a reader holds it")
		require.NoError(t, rw.RUnlock(ctx))
		require.NoError(t, w.Lock(ctx))
		require.NoError(t, w.Extend(ctx), "the write lock")
		require.NoError(t, w.Unlock(ctx))
	})
	t.Run("multi-name", func(t *testing.T) {
		both, err := rl.NewMultiMutex([]string{"{ab}a", "{ab}b"})
		require.NoError(t, err)
		one, err := rl.NewMutex("{ab}b")
		require.NoError(t, err)
		require.NoError(t, both.Lock(ctx))
		require.NoError(t, both.Extend(ctx))
		require.ErrorIs(t, one.TryLock(ctx), redlock.ErrNotAcquired, "b is held with a")
		require.NoError(t, both.Unlock(ctx))
		require.NoError(t, one.TryLock(ctx))
		require.NoError(t, one.Unlock(ctx))
	})
	t.Run("semaphore", func(t *testing.T) {
		sems := make([]*redlock.Semaphore, 3)
		for i := range sems {
			sems[i], err = rl.NewSemaphore("sem", 2)
			require.NoError(t, err)
		}
		require.NoError(t, sems[0].Acquire(ctx))
		require.NoError(t, sems[0].Extend(ctx))
		require.NoError(t, sems[1].Acquire(ctx))
		require.Error(t, sems[2].TryAcquire(ctx), "both permits taken")
		require.NoError(t, sems[0].Release(ctx))
		require.NoError(t, sems[2].Acquire(ctx))
		require.NoError(t, sems[1].Release(ctx))
		require.NoError(t, sems[2].Release(ctx))
	})
}

// TestNewChecksClients checks New's refusals.
func TestNewChecksClients(t *testing.T) {
	s := miniredis.RunT(t)
	var cs []rueidis.Client
	for range 2 { // two clients of one server
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.Addr()}, DisableCache: true})
		require.NoError(t, err)
		t.Cleanup(c.Close)
		cs = append(cs, c)
	}
	for name, given := range map[string][]rueidis.Client{
		"none": nil, "nil": {cs[0], nil}, "twice": {cs[0], cs[0]}, "one server": cs,
	} {
		_, err := redlockrueidis.New(given)
		assert.ErrorIs(t, err, redlock.ErrInvalidArgument, name)
	}
	_, err := redlockrueidis.New(cs[:1], redlock.WithTTL(-time.Second))
	assert.ErrorIs(t, err, redlock.ErrInvalidArgument, "an invalid option")
}
