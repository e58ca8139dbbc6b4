package integration

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock/redlock"
	"github.com/redlock-go/redlock/redlock/report"
)

// What Unlock and Do say when the caller's context has ended, fn's error
// wraps the loss, or fn panics, on three redis-server processes of the
// matrix's first launcher (Redis 7.0), at go-redis' default options.

// startThree starts three servers of the matrix's first launcher.
func startThree(t *testing.T) *Servers {
	t.Helper()
	return startServers(t, requireLaunchers(t)[0], 3)
}

// A deferred Unlock whose context was cancelled (a job cancelled, a
// program shutting down) releases the lock it held, says so, and has
// freed the key on every node when it returns.
func TestUnlockCanceledContextReleases(t *testing.T) {
	s := startThree(t)
	rl := newRedlock(t, s)
	name := "verdicts:" + t.Name()
	for _, kind := range []string{"Mutex", "RWMutex read", "Semaphore"} {
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithCancel(timeout(t, time.Minute))
			var unlock func(context.Context) error
			switch kind {
			case "Mutex":
				m := newMutex(t, rl, name)
				require.NoError(t, m.Lock(ctx))
				unlock = m.Unlock
			case "RWMutex read":
				rw, err := rl.NewRWMutex(name)
				require.NoError(t, err)
				require.NoError(t, rw.RLock(ctx))
				unlock = rw.RUnlock
			case "Semaphore":
				sem, err := rl.NewSemaphore(name, 2)
				require.NoError(t, err)
				require.NoError(t, sem.Acquire(ctx))
				unlock = sem.Release
			}
			cancel()
			err := unlock(ctx)
			require.NoError(t, err, "the lock was held")
			assert.NotErrorIs(t, err, redlock.ErrNotHeld)
			assert.Equal(t, []string{"", "", ""}, values(t, inspector(t, s), name), "freed on every node when Unlock returned")
		})
	}
}

// Do keeps fn's own error when fn returns it wrapped with its context's
// cause after the lock was taken away (a forced unlock of every node,
// which renewal finds).
func TestDoKeepsFnErrorAfterForcedUnlock(t *testing.T) {
	s := startThree(t)
	rl, admin := newRedlock(t, s), newRedlock(t, s)
	name := "verdicts:" + t.Name()
	ctx := timeout(t, time.Minute)
	errMine := errors.New("my work failed")
	err := rl.Do(ctx, name, func(ctx context.Context) error {
		_, err := admin.ForceUnlock(ctx, name)
		require.NoError(t, err)
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
			return errors.New("renewal did not find the lock lost")
		}
		return fmt.Errorf("%w (%w)", errMine, context.Cause(ctx))
	}, redlock.WithTTL(2*time.Second))
	require.ErrorIs(t, err, errMine, "%v", err)
	assert.ErrorIs(t, err, redlock.ErrLockLost)
}

// A panic in Do's function, recovered by the program (as net/http
// recovers a handler's), releases the lock: another client takes it right
// after, and no goroutine of the hold (its renewal) is left.
func TestDoPanicReleasesTheLock(t *testing.T) {
	s := startThree(t)
	rl, other := newRedlock(t, s), newRedlock(t, s)
	name := "verdicts:" + t.Name()
	ctx := timeout(t, time.Minute)
	// Warm up both Redlocks (connections, the background audit a second
	// after the first acquisition), so that only the hold's goroutines are
	// new below.
	for _, r := range []*redlock.Redlock{rl, other} {
		m := newMutex(t, r, name+":warm")
		require.NoError(t, m.Lock(ctx))
		require.NoError(t, m.Unlock(ctx))
	}
	require.Eventually(t, func() bool {
		for _, r := range []*redlock.Redlock{rl, other} {
			for _, h := range r.Health() {
				if h.Audit == nil {
					return false
				}
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "the background audits ended")
	before := goleak.IgnoreCurrent()

	boom := errors.New("boom")
	// Do waits for a lock another holds for 300 ms, as it may on a loaded
	// machine when its first attempt misses its quorum: the wait opens
	// rl's wait queue, which outlives the hold (see queueLife) and must
	// not be taken for it.
	blocker := newMutex(t, other, name, redlock.WithTTL(2*time.Second))
	require.NoError(t, blocker.Lock(ctx))
	go func() { time.Sleep(300 * time.Millisecond); _ = blocker.Unlock(ctx) }()
	renewals := &renewalStarts{}
	got := func() (v any) {
		defer func() { v = recover() }()
		return rl.Do(ctx, name, func(context.Context) error {
			time.Sleep(time.Second) // renewed once (every TTL/3)
			panic(boom)
		}, redlock.WithTTL(2*time.Second), redlock.WithObserver(renewals))
	}()
	returned := time.Now()
	require.Equal(t, any(boom), got, "the panic goes on with its own value")
	require.NotZero(t, renewals.since(time.Time{}), "renewed while held")
	m := newMutex(t, other, name, redlock.WithTTL(2*time.Second))
	if assert.NoError(t, m.TryLock(ctx), "the lock was released after the panic") {
		require.NoError(t, m.Unlock(ctx))
	}
	// The hold's renewal is gone at once: no goroutine of it is left (the
	// Redlock's renewal workers, like its clock watch, stop within a
	// second of their last work), and no extension starts after Do
	// returned, past the next one due (TTL/3).
	require.NoError(t, goleak.Find(queueLife(before, goleak.IgnoreAnyFunction(clockWatch), goleak.IgnoreAnyFunction(renewalWorker))...),
		"the hold's renewal outlived it")
	time.Sleep(time.Until(returned.Add(time.Second)))
	assert.Zero(t, renewals.since(returned), "extensions after Do returned")
	deadline := time.Now().Add(5 * time.Second)
	err := goleak.Find(queueLife(before)...)
	for err != nil && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		err = goleak.Find(queueLife(before)...)
	}
	require.NoError(t, err, "goroutines left after the hold")
}

// queueLife ignores the goroutines of a Redlock's wait queue: a
// dispatcher and a subscription (its forwarder and go-redis' own) per
// node, from the first wait until Close, and the sweep that drops a name
// Linger after its last waiter; opts come first.
func queueLife(opts ...goleak.Option) []goleak.Option {
	return append(opts,
		goleak.IgnoreAnyFunction("github.com/redlock-go/redlock/internal/waitq.(*Queue).start.func1"),
		goleak.IgnoreAnyFunction("github.com/redlock-go/redlock/internal/waitq.(*Queue).sweep"),
		goleak.IgnoreAnyFunction("github.com/redlock-go/redlock/internal/waitq.(*Queue).syncLoop"),
		goleak.IgnoreAnyFunction("github.com/redlock-go/redlock/internal/node/goredis.forward"),
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9.(*channel).initHealthCheck.func1"),
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9.(*channel).initMsgChan.func1"),
	)
}

// renewalWorker is a Redlock's worker that makes renewal's extensions,
// kept a second after its last.
const renewalWorker = "github.com/redlock-go/redlock/internal/life.(*Workers).work"

// renewalStarts is an Observer that counts the extensions renewal starts.
type renewalStarts struct {
	mu sync.Mutex
	at []time.Time
}

func (r *renewalStarts) OpStart(ctx context.Context, op report.Op) context.Context {
	if op.Renewal {
		r.mu.Lock()
		r.at = append(r.at, time.Now())
		r.mu.Unlock()
	}
	return ctx
}
func (*renewalStarts) OpEnd(context.Context, report.Op, report.OpResult) {}
func (*renewalStarts) LeaseEnd(report.Lease)                             {}
func (*renewalStarts) NodeFailed(context.Context, *report.NodeError)     {}

// since counts the extensions started after t.
func (r *renewalStarts) since(t time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, at := range r.at {
		if at.After(t) {
			n++
		}
	}
	return n
}

// clockWatch is the engine's clock watch, which runs while a lease is held.
const clockWatch = "github.com/redlock-go/redlock/redlock/internal/engine.(*Engine).watchClocks"
