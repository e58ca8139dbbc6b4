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

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/node/nodetest"
	"github.com/redlock-go/redlock/internal/waitq"
)

// handoff measures, in virtual time, how long after the holder's Unlock
// returns a waiter's Lock returns.
func handoff(t *testing.T, r *Redlock, fs []*nodetest.Fake, opts ...LockOption) time.Duration {
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
			f.Faults(func(n *nodetest.Fake) { n.Delay = time.Millisecond })
		}
		// A fixed back-off makes the polling case deterministic too.
		notified := handoff(t, r, fs, WithRetryDelay(70*time.Millisecond, 70*time.Millisecond))
		polled := handoff(t, r, fs, WithRetryDelay(70*time.Millisecond, 70*time.Millisecond), WithNotification(false))
		t.Logf("handoff: notified %v, polling %v", notified, polled)
		assert.Equal(t, time.Duration(0), notified, "handed over by the release: no attempt after it")
		assert.Greater(t, polled, 10*time.Millisecond, "the next poll")
	})
}

func TestLostNotificationsFallBackToPolling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		for _, f := range fs {
			f.Faults(func(n *nodetest.Fake) { n.Mute = true })
		}
		d := handoff(t, r, fs)
		assert.Greater(t, d, time.Duration(0))
		assert.LessOrEqual(t, d, defaultRetryDelayMax, "bounded by the back-off")
		synctest.Wait()
		// The first release named its waiter (no one subscribes there, so
		// nothing was handed over); the second, with no one queued, was a
		// compare-and-delete that announced nothing.
		assert.Equal(t, 1, fs[0].PublishedCount(), "the first release was announced, and lost")
	})
}

func TestNotificationWithNodeDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 5)
		fs[2].Faults(func(n *nodetest.Fake) { n.Err = errBoom; n.Mute = true })
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
		before := fs[0].Count("acquire")
		require.NoError(t, holder.Unlock(t.Context()))
		synctest.Wait()
		// One waiter woken, not all three (it may need a second attempt if
		// it reached a node before the release did).
		assert.LessOrEqual(t, fs[0].Count("acquire"), before+2, "more than one waiter woken")
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
			total += f.PublishedCount()
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
		fs[0].Faults(func(n *nodetest.Fake) {
			assert.True(t, n.Subs[0].Channels[node.ReleaseChannel("k")], "subscribed while waiting")
		})
		require.NoError(t, holder.Unlock(t.Context()))
		<-done
		time.Sleep(waitq.Linger / 2)
		synctest.Wait()
		fs[0].Faults(func(n *nodetest.Fake) {
			assert.True(t, n.Subs[0].Channels[node.ReleaseChannel("k")], "the subscription lingers after the last waiter")
		})
		time.Sleep(waitq.Linger)
		synctest.Wait()
		fs[0].Faults(func(n *nodetest.Fake) {
			assertOwnChannelOnly(t, n.Subs[0].Channels, "unsubscribed once no one waited for a while; the process's own channel stays")
		})
		require.NoError(t, r.Close(t.Context()))
		fs[0].Faults(func(n *nodetest.Fake) {
			assert.Empty(t, n.Subs, "Close closes the subscriptions")
		})
	})
}

// A release hands the lock to the oldest waiter queued on the nodes: only
// its process is told, it makes no attempt, and the waiters of other
// processes keep waiting.
func TestReleaseWakesOldestQueuedWaiterOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := nodetest.Fakes(3)
		for _, f := range fs {
			// Every node releases before any attempt woken by the
			// release reaches one: one acquire per attempt.
			f.Faults(func(n *nodetest.Fake) { n.Delay = time.Millisecond })
		}
		var rls []*Redlock
		for range 3 { // three processes on the same nodes
			r, err := newRedlock(nodetest.Nodes(fs))
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
		assert.Len(t, fs[0].Waiting(node.QueueKey("k")), 2, "both waiters queued")
		before := acquires(fs)
		require.NoError(t, holder.Unlock(t.Context()))
		assert.Equal(t, 1, <-order, "the oldest waiter goes first")
		assert.Equal(t, before, acquires(fs), "handed the lock over: no one tried")
		assert.Equal(t, 2, <-order, "then the next, on the next release")
		wg.Wait()
		synctest.Wait()
		assert.Empty(t, fs[0].Waiting(node.QueueKey("k")), "no one left queued")
	})
}

// releasedToWaiter runs, on five fake nodes 100 µs away, a holder's
// release to a waiter queued and subscribed for a second; got closes when
// the waiter's Lock returns.
func releasedToWaiter(t *testing.T) (fs []*nodetest.Fake, holder, waiter *Mutex, got chan struct{}) {
	t.Helper()
	r, fs := newFakeRedlock(t, 5)
	for _, f := range fs {
		f.Faults(func(n *nodetest.Fake) { n.Delay = 100 * time.Microsecond })
	}
	holder = newFakeMutex(t, r, "k")
	waiter = newFakeMutex(t, r, "k")
	require.NoError(t, holder.Lock(t.Context()))
	got = make(chan struct{})
	go func() {
		assert.NoError(t, waiter.Lock(t.Context()))
		close(got)
	}()
	time.Sleep(time.Second)
	require.NoError(t, holder.Unlock(t.Context()))
	return fs, holder, waiter, got
}

// A holder that releases and locks again lets the waiter that heard the
// release go first, instead of taking the lock back at once.
func TestReleaseCourtesyLetsWaiterFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, holder, waiter, got := releasedToWaiter(t)
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
		fs[0].Faults(func(n *nodetest.Fake) { n.Hang = make(chan struct{}) })
		w := r.e.Waiters.Join("warm", time.Minute) // starts the subscriptions
		synctest.Wait()
		before := runtime.NumGoroutine()
		for i := range 200 {
			r.e.Waiters.Join(fmt.Sprint("k", i), time.Minute).Leave(time.Minute)
		}
		time.Sleep(waitq.Linger + time.Second) // the names are dropped
		synctest.Wait()
		assert.LessOrEqual(t, runtime.NumGoroutine()-before, 1, "one goroutine for the stalled node at most")
		w.Leave(time.Minute)
		fs[0].Faults(func(n *nodetest.Fake) { close(n.Hang); n.Hang = nil })
		time.Sleep(waitq.Linger + time.Second)
		synctest.Wait()
		assertOwnChannelOnly(t, fs[1].Subs[0].Channels, "the other nodes end up with no lock's channel subscribed")
	})
}

// A release heard only by this process's own lingering subscription, with
// no Lock waiting, costs the next Lock no courtesy.
func TestNoCourtesyForOwnSubscription(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3)
		for _, f := range fs {
			f.Faults(func(n *nodetest.Fake) { n.Delay = 100 * time.Microsecond })
		}
		handoff(t, r, fs) // leaves this Redlock subscribed to "k"
		require.True(t, r.e.Waiters.Listening(0, "k"))
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

// A releaser that locks again at once, with notification on, waits for
// its turn behind the waiter it released to: it makes no attempt while
// that waiter holds the lock (an attempt out of turn would land in one of
// the handoffs that follow), and its turn comes with the waiter's release.
func TestCourtesyWaitsForTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs, holder, waiter, got := releasedToWaiter(t)
		again := make(chan time.Time)
		go func() {
			assert.NoError(t, holder.Lock(t.Context()))
			again <- time.Now()
		}()
		<-got
		before := fs[0].Count("acquire")
		time.Sleep(50 * time.Millisecond) // the waiter's hold, past the courtesy and a back-off's minimum
		assert.Equal(t, before, fs[0].Count("acquire"), "the releaser tried out of turn")
		require.NoError(t, waiter.Unlock(t.Context()))
		released := time.Now()
		assert.Less(t, (<-again).Sub(released), 5*time.Millisecond, "its turn was announced")
		require.NoError(t, holder.Unlock(t.Context()))
	})
}

// assertOwnChannelOnly asserts that channels, a node's subscription, hold
// one channel: this process's own wake channel.
func assertOwnChannelOnly(t *testing.T, channels map[string]bool, msg string) {
	t.Helper()
	got := slices.Collect(maps.Keys(channels))
	if assert.Len(t, got, 1, msg) {
		assert.True(t, strings.HasPrefix(got[0], node.WakePrefix), "%s: %s", msg, got[0])
	}
}

// courtesyMax is the longest courtesy (internal/waitq, whose
// TestCourtesyBounds pins it).
const courtesyMax = 20 * time.Millisecond

// releases is a fake node that keeps the plain releases sent to it.
type releases struct {
	*nodetest.Fake
	mu   sync.Mutex
	sent []*node.Release
}

// Do implements node.Node.
func (n *releases) Do(ctx context.Context, sendBy time.Time, op node.Op, done func(node.Reply)) {
	if r, ok := op.(*node.Release); ok && r.Shape == node.Plain {
		n.mu.Lock()
		n.sent = append(n.sent, r)
		n.mu.Unlock()
	}
	n.Fake.Do(ctx, sendBy, op, done)
}

// A waiter's release names the member its wait was queued as, with its
// score, so that a node can tell the member is no longer queued from the
// waiter it pops (see release_head.lua).
func TestReleaseNamesItsWaitsMemberAndScore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3)
		kept := make([]*releases, len(fs))
		nodes := make([]node.Node, len(fs))
		for i, f := range fs {
			kept[i] = &releases{Fake: f}
			nodes[i] = kept[i]
		}
		other, err := newRedlock(nodes)
		require.NoError(t, err)
		defer func() { require.NoError(t, other.Close(context.Background())) }()
		holder := newFakeMutex(t, r, "k")
		waiter := newFakeMutex(t, other, "k", WithRetryDelay(time.Hour, time.Hour))
		require.NoError(t, holder.Lock(t.Context()))
		got := make(chan error, 1)
		go func() { got <- waiter.Lock(t.Context()) }()
		time.Sleep(time.Second)
		var member string
		var score int64
		fs[0].Faults(func(n *nodetest.Fake) {
			for m, s := range n.Queues[node.QueueKey("k")] {
				member, score = m, s
			}
		})
		require.NotEmpty(t, member, "the waiter is queued")
		require.NoError(t, holder.Unlock(t.Context()))
		require.NoError(t, <-got)
		require.NoError(t, waiter.Unlock(t.Context()))
		synctest.Wait()
		for _, n := range kept {
			n.mu.Lock()
			var named []*node.Release // the Unlock's (a late handoff's orphan release names no member)
			for _, rel := range n.sent {
				if rel.Queued != "" {
					named = append(named, rel)
				}
			}
			n.mu.Unlock()
			require.Len(t, named, 1, n.Name)
			assert.Equal(t, member, named[0].Queued, n.Name)
			assert.Equal(t, score, named[0].QueuedSince, n.Name)
		}
	})
}
