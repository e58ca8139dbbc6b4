package redlock

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node"
)

// A writer's Unlock drops its waiting mark on every node, also on one
// where readers still held when it got the lock elsewhere.
func TestRWMutexUnlockDropsMark(t *testing.T) {
	r, servers, _ := newRW(t)
	ctx := t.Context()
	reader, w := newRWMutex(t, r, "doc"), newRWMutex(t, r, "doc")
	require.NoError(t, reader.RLock(ctx))
	require.Eventually(t, func() bool {
		for _, s := range servers {
			if !s.Exists("doc") {
				return false
			}
		}
		return true
	}, time.Second, time.Millisecond)
	require.ErrorIs(t, w.TryLock(ctx), ErrNotAcquired)
	servers[0].Del("doc") // the reader's hold gone from two nodes only
	servers[1].Del("doc")
	// Lock, not TryLock: an attempt that hears the reader's refusal before
	// the two grants may give way to it once (the split-vote rule), and
	// tries again.
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	require.NoError(t, w.Lock(wctx))
	require.Eventually(t, func() bool { return servers[2].Exists("doc:redlock:writer") }, time.Second, time.Millisecond,
		"node 2, where the reader still holds, keeps the writer's mark")
	require.NoError(t, w.Unlock(ctx))
	assert.Eventually(t, func() bool {
		for _, s := range servers {
			if s.Exists("doc:redlock:writer") {
				return false
			}
		}
		return true
	}, time.Second, time.Millisecond, "the writer's unlock dropped its mark everywhere")
}

// A writer's Lock that gives up drops its waiting mark on every node, so
// that new readers get in at once (the simulator's seed 120006: readers
// were refused for 2 s, with nothing held, by the marks of writers whose
// Locks had ended); a refused TryLock keeps it for the writer's next try.
func TestRWMutexLockGivenUpDropsMark(t *testing.T) {
	r, servers, _ := newRW(t)
	ctx := t.Context()
	reader, w := newRWMutex(t, r, "doc"), newRWMutex(t, r, "doc")
	require.NoError(t, reader.RLock(ctx))
	marked := func() int {
		n := 0
		for _, s := range servers {
			if s.Exists("doc:redlock:writer") {
				n++
			}
		}
		return n
	}
	require.Eventually(t, func() bool {
		for _, s := range servers {
			if !s.Exists("doc") {
				return false
			}
		}
		return true
	}, time.Second, time.Millisecond, "the reader holds on every node")
	require.ErrorIs(t, w.TryLock(ctx), ErrNotAcquired)
	require.Eventually(t, func() bool { return marked() == len(servers) }, time.Second, time.Millisecond,
		"a refused TryLock marks the writer waiting on every node")
	late := newRWMutex(t, r, "doc")
	require.ErrorIs(t, late.TryRLock(ctx), ErrHeld, "a new reader is refused while the writer waits")

	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, w.Lock(wctx), ErrNotAcquired)
	require.Eventually(t, func() bool { return marked() == 0 }, time.Second, time.Millisecond,
		"the Lock that gave up dropped its mark everywhere")
	require.NoError(t, late.TryRLock(ctx), "a new reader gets in once no writer waits")
	require.NoError(t, late.RUnlock(ctx))
	require.NoError(t, reader.RUnlock(ctx))
}

// A writer whose TTL is shorter than its wait between attempts is not
// starved by a stream of overlapping readers: its mark outlasts that wait,
// so no reader gets in once it waits.
func TestRWMutexShortTTLWriterNotStarved(t *testing.T) {
	const ttl = 150 * time.Millisecond
	r, servers, _ := newRW(t, WithTTL(ttl), WithRetryDelay(defaultRetryDelayMin, defaultRetryDelayMax))
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	var clock sync.WaitGroup
	defer clock.Wait()
	defer cancel()
	clock.Go(func() { // miniredis expires keys only when told: in real time here
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for ctx.Err() == nil {
			<-tick.C
			for _, s := range servers {
				s.FastForward(5 * time.Millisecond)
			}
		}
	})
	var mu sync.Mutex
	var admitted []time.Time
	var leaving sync.WaitGroup // the readers' delayed RUnlocks
	defer leaving.Wait()
	stop := make(chan struct{})
	streamed := make(chan struct{})
	go func() { // a new reader tried every 10ms, each holding 400ms, renewed
		defer close(streamed)
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			rw, err := r.NewRWMutex("doc", WithRenewal())
			if err != nil || rw.TryRLock(ctx) != nil {
				continue
			}
			mu.Lock()
			admitted = append(admitted, time.Now())
			mu.Unlock()
			leaving.Go(func() {
				time.Sleep(400 * time.Millisecond)
				_ = rw.RUnlock(context.Background())
			})
		}
	}()
	time.Sleep(100 * time.Millisecond) // readers overlap from here on
	w := newRWMutex(t, r, "doc")
	waiting := time.Now().Add(50 * time.Millisecond) // its first attempt has marked it waiting
	err := w.Lock(ctx)
	got := time.Now()
	close(stop)
	<-streamed
	require.NoError(t, err, "the writer got the lock while readers kept coming")
	require.NoError(t, w.Unlock(context.Background()))
	late := 0
	mu.Lock()
	for _, at := range admitted {
		if at.After(waiting) && at.Before(got) {
			late++
		}
	}
	mu.Unlock()
	assert.Zero(t, late, "readers admitted while the writer waited (waited %v)", got.Sub(waiting))
}

// The readers' hash expires with its last live reader, not with the
// longest hold it ever had: a reader that leaves takes its time with it.
func TestRWMutexHashExpiresWithLastReader(t *testing.T) {
	r, servers, _ := newRW(t, WithTTL(2*time.Second))
	ctx := t.Context()
	// Node timeouts far above a loaded machine's slowest reply (the short
	// reader's below its TTL): every node must see each reader's call.
	long := newRWMutex(t, r, "doc", WithNodeTimeout(time.Second))
	short := newRWMutex(t, r, "doc", WithTTL(300*time.Millisecond), WithNodeTimeout(250*time.Millisecond))
	require.NoError(t, long.RLock(ctx))
	require.NoError(t, short.RLock(ctx))
	require.NoError(t, long.RUnlock(ctx))
	require.Eventually(t, func() bool {
		for _, s := range servers {
			if ttl := s.TTL("doc"); ttl <= 0 || ttl > 300*time.Millisecond {
				return false
			}
		}
		return true
	}, time.Second, time.Millisecond, "every node keeps the name only as long as the short reader")
}

// A writer's release whose turn is a reader's wakes every waiting reader
// at once, in this process and in another: with a back-off of seconds,
// all four get in at the announcement, not one at it and the others at
// their back-off.
func TestRWMutexReadersWokenTogether(t *testing.T) {
	slow := WithRetryDelay(5*time.Second, 10*time.Second)
	// A node timeout far above a loaded machine's slowest reply: a reader
	// whose call to a node timed out would not be queued there, and would
	// wait for its back-off, which is what the test tells from a wake-up.
	patient := WithNodeTimeout(time.Second)
	r, servers, _ := newRW(t, slow, patient)
	// A second process on the same nodes: its reader hears the release on
	// the name's channel.
	var clients []redis.UniversalClient
	for _, s := range servers {
		c := redis.NewClient(&redis.Options{Addr: s.Addr()})
		t.Cleanup(func() { _ = c.Close() })
		clients = append(clients, c)
	}
	other, err := New(clients, WithTTL(5*time.Second), slow, patient)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, other.Close(context.Background())) })
	ctx := t.Context()
	w := newRWMutex(t, r, "doc")
	require.NoError(t, w.Lock(ctx))
	readers := make([]*RWMutex, 4)
	got := make(chan error, len(readers))
	for i := range readers {
		owner := r
		if i == len(readers)-1 {
			owner = other
		}
		readers[i] = newRWMutex(t, owner, "doc")
		go func() { got <- readers[i].RLock(ctx) }()
	}
	require.Eventually(t, func() bool { return queuedAndListening(servers, "doc", len(readers), r, other) },
		5*time.Second, time.Millisecond, "the readers queued and listening on every node")
	start := time.Now()
	require.NoError(t, w.Unlock(ctx))
	for range readers {
		select {
		case err := <-got:
			require.NoError(t, err)
		case <-time.After(4 * time.Second): // a queued waiter's back-off is at least 5 s
			t.Fatal("a reader waited for its back-off, not for the announcement")
		}
	}
	assert.Less(t, time.Since(start), 4*time.Second)
	for _, rd := range readers {
		require.NoError(t, rd.RUnlock(ctx))
	}
}

// queuedAndListening reports whether every server queues n waiters on
// name and each of rs listens to every node for its announcements.
func queuedAndListening(servers []*miniredis.Miniredis, name string, n int, rs ...*Redlock) bool {
	for i, s := range servers {
		if m, err := s.ZMembers(node.QueueKey(name)); err != nil || len(m) != n {
			return false
		}
		for _, r := range rs {
			if !r.e.Waiters.Listening(i, name) {
				return false
			}
		}
	}
	return true
}
