package redlock

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/node/goredis/goredistest"
	"github.com/redlock-go/redlock/redlock/report"
)

// lateHook holds back every pipeline of a client while on is set: a
// node far from that client.
type lateHook struct {
	on    *atomic.Bool
	delay time.Duration
}

func (lateHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h lateHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.on.Load() {
			time.Sleep(h.delay)
		}
		return next(ctx, cmd)
	}
}

func (h lateHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.on.Load() {
			time.Sleep(h.delay)
		}
		return next(ctx, cmds)
	}
}

var _ = net.Dial // the hook's DialHook passes dials through

// A holder's release that reaches two of five nodes at once and the other
// three 40 ms later (another process, far from them) hands the lock to
// the waiter on two at once: the waiter tries with its token, which the
// three refuse, naming the releaser. Its attempt takes the releaser's
// token for no holder's (the handoffs name it) and counts the three as
// they hand the lock over: one attempt with the token, no second one after
// a failure and a new registration.
func TestHandedAttemptCountsLateHandoffs(t *testing.T) {
	servers, waiterClients := goredistest.Miniredis(t, 5)
	late := &atomic.Bool{}
	holderClients := make([]redis.UniversalClient, len(servers))
	for i, s := range servers {
		c := redis.NewClient(&redis.Options{Addr: s.Addr()})
		if i >= 2 {
			c.AddHook(lateHook{on: late, delay: 40 * time.Millisecond})
		}
		t.Cleanup(func() { _ = c.Close() })
		holderClients[i] = c
	}
	slow := WithRetryDelay(5*time.Second, 10*time.Second) // a back-off would fail the test
	// A node timeout far above a loaded machine's slowest reply: a waiter
	// whose registration timed out on a node would not be queued there.
	patient := WithNodeTimeout(time.Second)
	holderRL, err := New(holderClients, WithTTL(10*time.Second), slow, patient)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, holderRL.Close(context.Background())) })
	rec := &recorder{}
	waiterRL, err := New(waiterClients, WithTTL(10*time.Second), slow, patient, WithObserver(rec))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, waiterRL.Close(context.Background())) })

	holder, err := holderRL.NewMutex("k")
	require.NoError(t, err)
	require.NoError(t, holder.Lock(t.Context()))
	waiter, err := waiterRL.NewMutex("k")
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() { got <- waiter.Lock(t.Context()) }()
	require.Eventually(t, func() bool {
		for i, s := range servers {
			if m, err := s.ZMembers(node.QueueKey("k")); err != nil || len(m) != 1 || !waiterRL.e.Waiters.Listening(i, "k") {
				return false
			}
		}
		return true
	}, 5*time.Second, time.Millisecond, "the waiter queued and listening on every node")
	late.Store(true)
	start := time.Now()
	require.NoError(t, holder.Unlock(t.Context()))
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(4 * time.Second):
		t.Fatal("the waiter waited for its back-off")
	}
	took := time.Since(start)
	late.Store(false)
	rec.mu.Lock()
	ends := append([]report.OpResult(nil), rec.ends...)
	rec.mu.Unlock()
	require.Len(t, ends, 1)
	assert.Equal(t, 2, ends[0].Attempts, "the first attempt, then one with the token")
	assert.Less(t, took, time.Second)
	require.NoError(t, waiter.Unlock(t.Context()))
}
