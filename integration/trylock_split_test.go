package integration

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/redlock"
)

// TestTryLockFreeGoesToOne is the cron job of many hosts: eight processes
// (eight Redlocks, each with its own go-redis clients at their default
// options) TryLock one free name at the same instant, on three real
// servers. A free lock must go to exactly one of them in every round, even
// when their first requests split the nodes; the others are refused
// because that one holds it (ErrHeld), never because no one does.
func TestTryLockFreeGoesToOne(t *testing.T) {
	s := startServers(t, requireLaunchers(t)[0], 3)
	ctx := timeout(t, time.Minute)
	const hosts, rounds = 8, 100
	name := "trylock-split:" + t.Name()
	ms := make([]*redlock.Mutex, hosts)
	for i := range ms {
		rl := newRedlock(t, s)
		// Each host's first call dials its connections and identifies the
		// servers: not the race this test is about.
		warm := newMutex(t, rl, name+":warm")
		require.NoError(t, warm.LockWithin(ctx, 10*time.Second))
		require.NoError(t, warm.Unlock(ctx))
		ms[i] = newMutex(t, rl, name)
	}
	for round := range rounds {
		start := make(chan struct{})
		errs := make([]error, hosts)
		var ready, done sync.WaitGroup
		for i, m := range ms {
			ready.Add(1)
			done.Go(func() {
				ready.Done()
				<-start
				errs[i] = m.TryLock(ctx)
			})
		}
		ready.Wait()
		close(start)
		done.Wait()
		var winners []int
		for i, err := range errs {
			if err == nil {
				winners = append(winners, i)
				continue
			}
			assert.ErrorIs(t, err, redlock.ErrHeld, "round %d, host %d: refused although no one else held the lock: %v", round, i, err)
		}
		assert.Len(t, winners, 1, "round %d: the free lock went to %d hosts: %v", round, len(winners), errs[0])
		for _, w := range winners {
			require.NoError(t, ms[w].Unlock(ctx), "round %d", round)
		}
	}
}
