package redlock

import (
	"fmt"
	"strings"

	"github.com/redlock-go/redlock/redlock/internal/quorum"
	"github.com/redlock-go/redlock/redlock/report"

	"github.com/redlock-go/redlock/internal/node/nodetest"

	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDoRunsUnderTheLockAndReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		other := newFakeMutex(t, r, "job")
		errWork := errors.New("work failed")
		assert.Nil(t, MutexFrom(t.Context()))
		err := r.Do(t.Context(), "job", func(ctx context.Context) error {
			synctest.Wait() // every node has answered
			assert.Equal(t, 5, keyOn(fs, "job"))
			m := MutexFrom(ctx)
			require.NotNil(t, m)
			assert.Equal(t, "job", m.Name())
			assert.True(t, time.Now().Before(m.Until()))
			assert.ErrorIs(t, other.TryLock(ctx), ErrNotAcquired)
			time.Sleep(30 * time.Second) // renewed meanwhile
			assert.NoError(t, ctx.Err())
			assert.ErrorIs(t, other.TryLock(ctx), ErrNotAcquired)
			return errWork
		}, WithTTL(time.Second))
		assert.ErrorIs(t, err, errWork)
		assert.NotErrorIs(t, err, ErrLockLost)
		synctest.Wait()
		assert.Zero(t, keyOn(fs, "job"), "released after fn returned")
		assert.Greater(t, fs[0].Count("extend"), 80)
	})
}

func TestDoCancelsWorkBeforeValidityEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5, WithNodeTimeout(50*time.Millisecond))
		var until time.Time
		var cancelledAt time.Time
		err := r.Do(t.Context(), "job", func(ctx context.Context) error {
			synctest.Wait()             // every node has the key
			for _, f := range fs[1:4] { // a majority stalls
				f.Faults(func(n *nodetest.Fake) { n.Hang = make(chan struct{}) })
			}
			for ctx.Err() == nil {
				time.Sleep(time.Millisecond)
			}
			cancelledAt = time.Now()
			assert.ErrorIs(t, context.Cause(ctx), ErrLockLost, "the cause says the lock was lost")
			return ctx.Err()
		}, WithTTL(time.Second))
		// A stalled node kept the expiry of the last successful extension.
		until = fs[1].Expiry("job")
		require.ErrorIs(t, err, ErrLockLost)
		require.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, 1, strings.Count(err.Error(), "lock lost"), "said once: %v", err)
		assert.ErrorContains(t, err, `redlock: lock lost while do "job" ran: validity ran out`)
		assert.NotEmpty(t, report.NodeErrors(err), "the nodes that failed are named")
		assert.False(t, cancelledAt.IsZero())
		// The key on the healthy node expires a full TTL after the last
		// extension; the validity ended TTL/20 + drift earlier than that,
		// and the work was cancelled before the validity ended.
		assert.True(t, cancelledAt.Before(until.Add(-quorum.Drift(time.Second, defaultDriftFactor))), "cancelled at %v, key expiry %v", cancelledAt, until)
	})
}

func TestDoNotAcquired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3)
		for _, f := range fs {
			f.Set("job", "other", time.Hour)
		}
		ran := false
		err := r.Do(t.Context(), "job", func(context.Context) error { ran = true; return nil }, WithTries(2))
		require.ErrorIs(t, err, ErrNotAcquired)
		assert.False(t, ran)
	})
}

func TestDoBadInput(t *testing.T) {
	ns := nodetest.Nodes(nodetest.Fakes(3))
	r, err := newRedlock(ns)
	require.NoError(t, err)
	var nilCtx context.Context
	assert.ErrorIs(t, r.Do(nilCtx, "k", func(context.Context) error { return nil }), ErrInvalidArgument)
	assert.ErrorIs(t, r.Do(t.Context(), "k", nil), ErrInvalidArgument)
	assert.ErrorIs(t, r.Do(t.Context(), "", func(context.Context) error { return nil }), ErrInvalidArgument)
}

// Do keeps fn's own error when fn returns it with its context's cause
// after the lock was taken away (deleted on every node, so renewal finds
// it gone): errors.Is finds both, and the loss is said once.
func TestDoKeepsFnErrorWithTheLoss(t *testing.T) {
	errMine := errors.New("mine")
	for _, tc := range []struct {
		name string
		ret  func(cause error) error
	}{
		{"wrapped with the cause", func(cause error) error { return fmt.Errorf("%w (%w)", errMine, cause) }},
		{"joined with the cause", func(cause error) error { return errors.Join(errMine, cause) }},
		{"its own error only", func(error) error { return errMine }},
		{"the cause only", func(cause error) error { return cause }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r, fs := newFakeRedlock(t, 3)
				var cause error
				err := r.Do(t.Context(), "job", func(ctx context.Context) error {
					synctest.Wait() // every node has the key
					for _, f := range fs {
						f.Faults(func(n *nodetest.Fake) { delete(n.Data, "job") })
					}
					<-ctx.Done()
					cause = context.Cause(ctx)
					require.ErrorIs(t, cause, ErrLockLost)
					return tc.ret(cause)
				}, WithTTL(time.Second))
				if tc.name != "the cause only" {
					assert.ErrorIs(t, err, errMine, "fn's error is kept: %v", err)
					assert.True(t, strings.HasPrefix(err.Error(), "mine"), "in fn's words: %q", err)
				}
				assert.ErrorIs(t, err, ErrLockLost)
				assert.Equal(t, 1, strings.Count(err.Error(), "lock lost"), "said once: %q", err)
				assert.ErrorContains(t, err, `lock lost while do "job" ran`)
				assert.Len(t, report.NodeErrors(err), len(report.NodeErrors(cause)), "node errors counted once")
			})
		})
	}
}

// A panic in fn releases the lock and stops its renewal before it goes
// on, with its own value: a program that recovers it does not keep the
// lock.
func TestDoPanicReleasesTheLock(t *testing.T) {
	for _, read := range []bool{false, true} {
		t.Run(map[bool]string{false: "Do", true: "DoRead"}[read], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r, fs := newFakeRedlock(t, 3)
				boom := errors.New("boom")
				fn := func(context.Context) error {
					time.Sleep(time.Second) // renewed meanwhile
					panic(boom)
				}
				got := func() (v any) {
					defer func() { v = recover() }()
					if read {
						return r.DoRead(t.Context(), "job", fn, WithTTL(2*time.Second))
					}
					return r.Do(t.Context(), "job", fn, WithTTL(2*time.Second))
				}()
				assert.Equal(t, any(boom), got, "the panic goes on with its own value")
				calls := func() (n int) {
					for _, f := range fs {
						n += f.Count("extend") + f.Count("read extend")
					}
					return n
				}
				renewals := calls()
				require.Positive(t, renewals)
				other := newFakeMutex(t, r, "job")
				require.NoError(t, other.TryLock(t.Context()), "the lock was released")
				require.NoError(t, other.Unlock(t.Context()))
				time.Sleep(10 * time.Second)
				assert.Equal(t, renewals, calls(), "renewal stopped")
			})
		})
	}
}

// Do returns only once the renewal of its hold has stopped.
func TestDoStopsRenewalBeforeReturning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := newFakeRedlock(t, 3)
		var renewed <-chan struct{}
		require.NoError(t, r.Do(t.Context(), "job", func(ctx context.Context) error {
			renewed = MutexFrom(ctx).h.RenewalDone()
			time.Sleep(time.Second)
			return nil
		}, WithTTL(2*time.Second)))
		select {
		case <-renewed:
		default:
			t.Fatal("renewal outlived Do")
		}
	})
}
