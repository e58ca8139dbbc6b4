package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/redlock"
)

// The clock guard against real Redis servers whose wall clocks jump
// (libfaketime, see WithClocks): the two scenarios in which a jump lets a
// second client take a lock the first still holds. Each runs guarded (the
// default) and with the guard off, where the second client gets the lock:
// that is what the guard prevents.

// holdFor is the TTL of the first holder: long enough that its validity
// runs through the whole scenario.
const clockTTL = 20 * time.Second

// TestClockJumpThreeNodes: a lock held on all five nodes; three of them
// jump a minute ahead and forget it.
func TestClockJumpThreeNodes(t *testing.T) {
	for _, guarded := range []bool{true, false} {
		t.Run(map[bool]string{true: "guarded", false: "unguarded"}[guarded], func(t *testing.T) {
			c := startCluster(t, 5, WithClocks())
			opts := guardOpts(guarded)
			ctx := timeout(t, time.Minute)
			name := "clock:" + t.Name()
			first := newMutex(t, newRedlock(t, c, opts...), name, redlock.WithTTL(clockTTL))
			require.NoError(t, first.Lock(ctx))
			admin := inspector(t, c)
			require.Eventually(t, func() bool {
				for _, a := range admin {
					if a.Exists(ctx, name).Val() != 1 {
						return false
					}
				}
				return true
			}, time.Second, 5*time.Millisecond, "held on every node")
			for _, i := range []int{0, 1, 2} {
				require.NoError(t, c.SetClock(i, time.Minute))
			}
			secondAfterJump(ctx, t, c, opts, name, first, guarded, "without the guard the jumped nodes' grants count: two holders", 0, 1, 2)
		})
	}
}

// TestClockJumpBareQuorum is Kleppmann's case: the first client holds the
// lock on a bare quorum (it cannot reach nodes 3 and 4), then one of its
// three nodes jumps.
func TestClockJumpBareQuorum(t *testing.T) {
	for _, guarded := range []bool{true, false} {
		t.Run(map[bool]string{true: "guarded", false: "unguarded"}[guarded], func(t *testing.T) {
			c := startCluster(t, 5, WithClocks())
			opts := guardOpts(guarded)
			ctx := timeout(t, time.Minute)
			name := "clock:" + t.Name()
			// The first client is cut off from nodes 3 and 4: its clients
			// for them dial a loopback port nothing listens on.
			clients := c.Clients(nil)
			for _, i := range []int{3, 4} {
				_ = clients[i].Close()
				clients[i] = redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.%d:1", i)})
			}
			firstRL := redlockOver(t, clients, opts...)
			first := newMutex(t, firstRL, name, redlock.WithTTL(clockTTL))
			require.NoError(t, first.Lock(ctx), "on nodes 0, 1, 2")
			require.NoError(t, c.SetClock(2, time.Minute))
			secondAfterJump(ctx, t, c, opts, name, first, guarded, "without the guard: nodes 2, 3, 4 grant, two holders", 2)
		})
	}
}

// lockUnguarded returns nil when the second client got the lock: at
// once (err, its TryLock's), or within a few attempts, since an attempt
// whose first replies name the first holder may give way to it (the
// split-vote rule) although a quorum would grant.
func lockUnguarded(t *testing.T, m *redlock.Mutex, err error) error {
	t.Helper()
	if err == nil {
		return nil
	}
	return m.Lock(timeout(t, 5*time.Second))
}

func guardOpts(guarded bool) []redlock.Option {
	if guarded {
		return nil
	}
	return []redlock.Option{redlock.WithClockTolerance(0)}
}

// requireRefusedByClock checks that rl's nodes jumped, and only they, do
// not vote because of their clocks (their replies may come after the
// attempt was decided: an attempt may give way to the holder it sees
// first).
func requireRefusedByClock(t *testing.T, rl *redlock.Redlock, jumped ...int) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, h := range rl.Health() {
			if slices.Contains(jumped, h.Index) != errors.Is(h.Clock, redlock.ErrClockJump) {
				return false
			}
		}
		return true
	}, 2*time.Second, 10*time.Millisecond, "the jumped nodes %v do not vote: %+v", jumped, rl.Health())
}

// requireLostToClock waits for m's Done and checks its cause names the
// clock.
func requireLostToClock(t *testing.T, m *redlock.Mutex) {
	t.Helper()
	select {
	case <-m.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the first holder did not find out that nodes it counted jumped")
	}
	require.ErrorIs(t, m.Err(), redlock.ErrLockLost)
	assert.ErrorIs(t, m.Err(), redlock.ErrClockJump)
	assert.True(t, time.Now().Before(m.Until()), "found out while its validity still ran")
}

// secondAfterJump has a second client try name once clocks jumped on the
// nodes jumped. Unguarded, it gets the lock while the first's validity
// still runs (unguarded says why); guarded, it is refused, the jumped
// nodes do not vote, and the first holder's lease ends for the clock.
func secondAfterJump(ctx context.Context, t *testing.T, c *Cluster, opts []redlock.Option, name string, first *redlock.Mutex,
	guarded bool, unguarded string, jumped ...int) {
	t.Helper()
	secondRL := newRedlock(t, c, opts...)
	second := newMutex(t, secondRL, name, redlock.WithTTL(clockTTL))
	err := second.TryLock(ctx)
	if !guarded {
		require.NoError(t, lockUnguarded(t, second, err), unguarded)
		assert.True(t, time.Now().Before(first.Until()), "while the first's validity still runs")
		return
	}
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	requireRefusedByClock(t, secondRL, jumped...)
	requireLostToClock(t, first)
}
