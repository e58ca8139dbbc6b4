package redlock

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// handoff measures, in virtual time, how long after the holder's Unlock
// returns a waiter's Lock returns.
func handoff(t *testing.T, r *Redlock, fs []*fakeNode, opts ...Option) time.Duration {
	t.Helper()
	holder := newFakeMutex(t, r, "k")
	waiter := newFakeMutex(t, r, "k", opts...)
	require.NoError(t, holder.Lock(t.Context()))
	got := make(chan time.Time)
	go func() {
		assert.NoError(t, waiter.Lock(t.Context()))
		got <- time.Now()
	}()
	time.Sleep(5 * time.Second) // the waiter's back-off has grown to its max
	require.NoError(t, holder.Unlock(t.Context()))
	released := time.Now()
	acquired := <-got
	require.NoError(t, waiter.Unlock(t.Context()))
	return acquired.Sub(released)
}

func TestNotifiedHandoffIsImmediate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		for _, f := range fs {
			f.faults(func(n *fakeNode) { n.delay = time.Millisecond })
		}
		// A fixed back-off makes the polling case deterministic too.
		notified := handoff(t, r, fs, WithRetryDelay(70*time.Millisecond, 70*time.Millisecond))
		polled := handoff(t, r, fs, WithRetryDelay(70*time.Millisecond, 70*time.Millisecond), WithNotification(false))
		t.Logf("handoff: notified %v, polling %v", notified, polled)
		assert.Equal(t, time.Millisecond, notified, "one round trip after the release")
		assert.Greater(t, polled, 10*time.Millisecond, "the next poll")
	})
}

func TestLostNotificationsFallBackToPolling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		for _, f := range fs {
			f.faults(func(n *fakeNode) { n.mute = true })
		}
		d := handoff(t, r, fs)
		assert.Greater(t, d, time.Duration(0))
		assert.LessOrEqual(t, d, DefaultRetryDelayMax, "bounded by the back-off")
		synctest.Wait()
		assert.Equal(t, 2, fs[0].publishedCount(), "both releases were announced, and lost")
	})
}

func TestNotificationWithNodeDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		fs[2].faults(func(n *fakeNode) { n.err = errBoom; n.mute = true })
		// At once, or after one re-ask of a node the holder's release had
		// not reached yet.
		assert.LessOrEqual(t, handoff(t, r, fs), time.Millisecond, "the other nodes' announcements wake the waiter")
	})
}

// TestReleaseWakesOneWaiter: of several waiters in one process, a release
// wakes only the longest-waiting one; the others stay on their back-off.
func TestReleaseWakesOneWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3)
		holder := newFakeMutex(t, r, "k")
		require.NoError(t, holder.Lock(t.Context()))
		synctest.Wait() // held on every node, not just a quorum
		var wg sync.WaitGroup
		order := make(chan int, 3)
		for i := range 3 {
			w := newFakeMutex(t, r, "k", WithRetryDelay(time.Hour, time.Hour)) // no polling: only wake-ups
			wg.Go(func() {
				require.NoError(t, w.Lock(t.Context()))
				order <- i
				time.Sleep(time.Second)
				require.NoError(t, w.Unlock(t.Context()))
			})
			time.Sleep(time.Millisecond) // join in order
		}
		synctest.Wait()
		before := fs[0].count("acquire")
		require.NoError(t, holder.Unlock(t.Context()))
		synctest.Wait()
		// One waiter woken, not all three (it may need a second attempt if
		// it reached a node before the release did).
		assert.LessOrEqual(t, fs[0].count("acquire"), before+2, "more than one waiter woken")
		wg.Wait()
		close(order)
		var got []int
		for i := range order {
			got = append(got, i)
		}
		assert.ElementsMatch(t, []int{0, 1, 2}, got)
		// The longest waiter is woken first; it usually, not always, wins:
		// see TestWakeOrder for the order of wake-ups itself.
		synctest.Wait() // the last release reaches every node
		// Each of the 4 releases is announced by every node that still held
		// it: at least a quorum (a woken waiter can win before the previous
		// release reached the third node, which then has nothing to free).
		total := 0
		for _, f := range fs {
			total += f.publishedCount()
		}
		assert.GreaterOrEqual(t, total, 4*2, "every release announced")
	})
}

func TestSubscriptionsFollowWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3)
		holder := newFakeMutex(t, r, "k")
		require.NoError(t, holder.Lock(t.Context()))
		w := newFakeMutex(t, r, "k")
		done := make(chan struct{})
		go func() {
			assert.NoError(t, w.Lock(t.Context()))
			close(done)
		}()
		synctest.Wait()
		fs[0].mu.Lock()
		assert.True(t, fs[0].subs[0].channels[releaseChannel("k")], "subscribed while waiting")
		fs[0].mu.Unlock()
		require.NoError(t, holder.Unlock(t.Context()))
		<-done
		time.Sleep(subLinger / 2)
		synctest.Wait()
		fs[0].mu.Lock()
		assert.True(t, fs[0].subs[0].channels[releaseChannel("k")], "the subscription lingers after the last waiter")
		fs[0].mu.Unlock()
		time.Sleep(subLinger)
		synctest.Wait()
		fs[0].mu.Lock()
		assert.Equal(t, []string{wakeChannel(r.waiters.self)}, slices.Collect(maps.Keys(fs[0].subs[0].channels)),
			"unsubscribed once no one waited for a while; the process's own channel stays")
		fs[0].mu.Unlock()
		require.NoError(t, r.Close(t.Context()))
		fs[0].mu.Lock()
		assert.Empty(t, fs[0].subs, "Close closes the subscriptions")
		fs[0].mu.Unlock()
	})
}

// TestWakeOrder: announcements wake the waiters of a name oldest first, one
// per release, and copies of one release from other nodes wake no one.
func TestWakeOrder(t *testing.T) {
	_, ns := fakes(1)
	r, err := newRedlock(ns)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, r.Close(context.Background())) })
	ws := &r.waiters
	w0 := ws.join("k", time.Second)
	w1 := ws.join("k", time.Second)
	woken := func(w *waiter) bool {
		select {
		case <-w.wake:
			return true
		default:
			return false
		}
	}
	ws.announce("k", "release-1", "")
	assert.True(t, woken(w0))
	ws.announce("k", "release-1", "") // the same release, from another node
	assert.False(t, woken(w0), "woken once per release")
	assert.False(t, woken(w1))
	w0.leave()
	ws.announce("k", "release-2", "")
	assert.True(t, woken(w1))
	ws.announce("other", "release-3", "")
	assert.False(t, woken(w1))
	// A release that names a waiter wakes that one, whatever its age.
	w2 := ws.join("k", time.Second)
	ws.announce("k", "release-4", w2.id)
	assert.True(t, woken(w2))
	assert.False(t, woken(w1))
	ws.announce("k", "release-5", "another-process/waiter")
	assert.False(t, woken(w1), "another process's turn")
	assert.False(t, woken(w2))
	w1.leave()
	w2.leave()
}

// A release hands the lock to the oldest waiter queued on the nodes: only
// its process is told, and the waiters of other processes keep waiting.
func TestReleaseWakesOldestQueuedWaiterOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs, _ := fakes(3)
		for _, f := range fs {
			// Every node releases before any attempt woken by the
			// release reaches one: one acquire per attempt.
			f.faults(func(n *fakeNode) { n.delay = time.Millisecond })
		}
		var rls []*Redlock
		for range 3 { // three processes on the same nodes
			r, err := newRedlock(fakeNodes(fs))
			require.NoError(t, err)
			rls = append(rls, r)
		}
		defer func() {
			for _, r := range rls {
				require.NoError(t, r.Close(context.Background()))
			}
		}()
		holder := newFakeMutex(t, rls[0], "k")
		require.NoError(t, holder.Lock(t.Context()))
		order := make(chan int, 2)
		var wg sync.WaitGroup
		defer wg.Wait()
		for i := 1; i <= 2; i++ {
			m := newFakeMutex(t, rls[i], "k", WithRetryDelay(time.Hour, time.Hour)) // no polling
			wg.Go(func() {
				if assert.NoError(t, m.Lock(t.Context())) {
					order <- i
					time.Sleep(time.Millisecond)
					assert.NoError(t, m.Unlock(t.Context()))
				}
			})
			time.Sleep(time.Second) // process 1 waits longer than process 2
		}
		assert.Len(t, fs[0].waiting(queueKey("k")), 2, "both waiters queued")
		before := fs[0].count("acquire")
		require.NoError(t, holder.Unlock(t.Context()))
		assert.Equal(t, 1, <-order, "the oldest waiter goes first")
		assert.Equal(t, before+1, fs[0].count("acquire"), "only its process tried")
		assert.Equal(t, 2, <-order, "then the next, on the next release")
		wg.Wait()
		synctest.Wait()
		assert.Empty(t, fs[0].waiting(queueKey("k")), "no one left queued")
	})
}

// A holder that releases and locks again lets the waiter that heard the
// release go first, instead of taking the lock back at once.
func TestReleaseCourtesyLetsWaiterFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		for _, f := range fs {
			f.faults(func(n *fakeNode) { n.delay = 100 * time.Microsecond })
		}
		holder := newFakeMutex(t, r, "k")
		waiter := newFakeMutex(t, r, "k")
		require.NoError(t, holder.Lock(t.Context()))
		got := make(chan struct{})
		go func() {
			assert.NoError(t, waiter.Lock(t.Context()))
			close(got)
		}()
		time.Sleep(time.Second) // the waiter waits, subscribed
		require.NoError(t, holder.Unlock(t.Context()))
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		err := holder.Lock(ctx) // at once: the releaser wants it back
		<-got
		require.ErrorIs(t, err, ErrNotAcquired, "the releaser took the lock back before the waiter")
		require.NoError(t, waiter.Unlock(t.Context()))
	})
}

// Waiters coming and going on a stalled node's subscription cost one
// goroutine per node, not one per subscribe or unsubscribe.
func TestStalledSubscriptionCostsOneGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3)
		fs[0].faults(func(n *fakeNode) { n.hang = make(chan struct{}) })
		w := r.waiters.join("warm", time.Minute) // starts the subscriptions
		synctest.Wait()
		before := runtime.NumGoroutine()
		for i := range 200 {
			r.waiters.join(fmt.Sprint("k", i), time.Minute).leave()
		}
		time.Sleep(subLinger + time.Second) // the names are dropped
		synctest.Wait()
		assert.LessOrEqual(t, runtime.NumGoroutine()-before, 1, "one goroutine for the stalled node at most")
		w.leave()
		fs[0].faults(func(n *fakeNode) { close(n.hang); n.hang = nil })
		time.Sleep(subLinger + time.Second)
		synctest.Wait()
		assert.Equal(t, []string{wakeChannel(r.waiters.self)}, slices.Collect(maps.Keys(fs[1].subs[0].channels)),
			"the other nodes end up with no lock's channel subscribed")
	})
}

// A release heard only by this process's own lingering subscription, with
// no Lock waiting, costs the next Lock no courtesy.
func TestNoCourtesyForOwnSubscription(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3)
		for _, f := range fs {
			f.faults(func(n *fakeNode) { n.delay = 100 * time.Microsecond })
		}
		handoff(t, r, fs) // leaves this Redlock subscribed to "k"
		require.True(t, r.waiters.listening(0, "k"))
		time.Sleep(courtesyMax) // the courtesy of handoff's own release is over
		m := newFakeMutex(t, r, "k")
		for range 3 {
			start := time.Now()
			require.NoError(t, m.Lock(t.Context()))
			assert.Equal(t, 100*time.Microsecond, time.Since(start), "one round trip, no courtesy")
			require.NoError(t, m.Unlock(t.Context()))
		}
	})
}

// On a plain node, a lock's queue and fencing counter sit beside its name,
// so that an ACL key pattern covering the name covers them; on a cluster
// node they hash to the name's slot, or do not exist.
func TestKeysShareTheNamesSlot(t *testing.T) {
	for name, want := range map[string]string{
		"orders":          "{orders}:redlock:waiters",
		"{user:7}:orders": "{user:7}:orders:redlock:waiters",
		"a{b}c":           "a{b}c:redlock:waiters",
		"a{}b":            "", // no valid tag: no key can share its slot
		"only{open":       "",
		"close}only":      "", // "{close}only}" would hash "close"
	} {
		assert.Equal(t, name+":redlock:waiters", queueKey(name), name)
		plain, cluster := &redisNode{}, &redisNode{sharded: true}
		assert.Equal(t, queueKey(name), plain.inSlot(name, queueKey(name)), name)
		assert.Equal(t, want, cluster.inSlot(name, queueKey(name)), name)
		if want != "" {
			assert.Equal(t, hashSlotKey(name), hashSlotKey(want), name)
			assert.Equal(t, hashSlotKey(name), hashSlotKey(cluster.inSlot(name, fenceKey(name))), name)
		}
	}
}

// hashSlotKey is the part of key Redis Cluster hashes.
func hashSlotKey(key string) string {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			return key[open+1 : open+1+end]
		}
	}
	return key
}
