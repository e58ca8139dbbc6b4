package redlock

import (
	"context"
	"crypto/tls"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node/goredis/goredistest"
	"github.com/redlock-go/redlock/internal/node/nodetest"
)

// Close ends the leases still held: their loss timers stop, the Observer
// hears of each end before Close returns and never after, and Done closes
// with an error wrapping ErrLockLost. The keys stay on the nodes until
// their TTL.
func TestCloseEndsLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		r, fs := newFakeRedlock(t, 3, WithObserver(rec), WithTTL(time.Second))
		m := newFakeMutex(t, r, "k")
		require.NoError(t, m.Lock(t.Context()))
		s, err := r.NewSemaphore("s", 2)
		require.NoError(t, err)
		require.NoError(t, s.Acquire(t.Context()))
		require.NoError(t, r.Close(t.Context()))
		_, _, holds, _ := rec.snapshot()
		assert.Len(t, holds, 2, "both ends heard by Close")
		for _, done := range []<-chan struct{}{m.Done(), s.Done()} {
			select {
			case <-done:
			default:
				t.Fatal("a lease still open after Close")
			}
		}
		assert.ErrorIs(t, m.Err(), ErrLockLost)
		assert.ErrorIs(t, s.Err(), ErrLockLost)
		_, held := fs[0].Get("k")
		assert.True(t, held, "Close releases nothing: the key expires at its TTL")
		time.Sleep(2 * time.Second) // past the loss timers' moments
		_, _, holds, _ = rec.snapshot()
		assert.Len(t, holds, 2, "no end heard after Close")
	})
}

// When Close's context ends first, Close still stops the nodes' workers
// and says that calls were left in flight, instead of leaving everything
// running.
func TestCloseContextEnds(t *testing.T) {
	silent := nodetest.SilentListener(t)
	c := redis.NewClient(&redis.Options{Addr: silent, ReadTimeout: 2 * time.Second})
	t.Cleanup(func() { _ = c.Close() })
	r, err := New([]redis.UniversalClient{c}, WithTTL(time.Second))
	require.NoError(t, err)
	m, err := r.NewMutex("k")
	require.NoError(t, err)
	require.ErrorIs(t, m.TryLock(t.Context()), ErrNotAcquired)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = r.Close(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "still in flight")
	assert.Less(t, time.Since(start), time.Second, "Close returned at its context's end")
	// The calls end at the client's read timeout; then nothing is left.
	require.NoError(t, r.Close(context.Background()))
}

// A node that is a TLS client pointed at a port that does not speak TLS,
// with go-redis' default options, holds each call in its dial for about
// 25 s (five dials of five seconds, detached from any context: a plain
// Redis port reads the handshake as an unfinished command and never
// answers). Close does not wait for those: the library stopped waiting for
// them at the node timeout, and they end at the client's own.
func TestCloseTLSClientOnPlainPort(t *testing.T) {
	_, plain := goredistest.Miniredis(t, 2)
	// Dials of one second, not go-redis' five: the same shape, and the
	// test waits for them to end before it returns.
	tlsClient := redis.NewClient(&redis.Options{Addr: nodetest.SilentListener(t), DialTimeout: time.Second,
		TLSConfig: &tls.Config{InsecureSkipVerify: true}}) //nolint:gosec // a misconfigured client, on purpose
	t.Cleanup(func() { _ = tlsClient.Close() })
	r, err := New([]redis.UniversalClient{tlsClient, plain[0], plain[1]})
	require.NoError(t, err)
	m, err := r.NewMutex("k")
	require.NoError(t, err)
	require.NoError(t, m.Lock(t.Context()), "two of three nodes")
	require.NoError(t, m.Unlock(t.Context()))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	start := time.Now()
	require.NoError(t, r.Close(ctx))
	// About 1.1 s here (a probe's timeout and a node timeout); under the
	// parallel -race unit suite it once took 3.8 s. Waiting for the dials
	// would take their 5 s.
	assert.Less(t, time.Since(start), 4500*time.Millisecond, "Close waited for a dial its client holds")
	// The dials end at the client's timeout (five of a second), with the
	// workers that were stopped behind them.
	assert.Eventually(t, func() bool {
		return !running("redlock/internal/node.(*Redis)", "redlock/redlock.(*engine)", "redlock/redlock.(*pool)")
	},
		15*time.Second, 100*time.Millisecond, "the library's goroutines end once the client returns the calls")
}

// running reports whether some goroutine runs a function whose name
// contains one of names.
func running(names ...string) bool {
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	for _, n := range names {
		if strings.Contains(stacks, n) {
			return true
		}
	}
	return false
}
