package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/redlock"
)

// A counting semaphore on five real nodes: several clients, each with its
// own Redlock (its own connections, as separate processes), contend for a
// semaphore of two permits. Every holder records the interval it may rely
// on, [Acquire returned, min(Release started, Until)], on the monotonic
// clock; no instant may lie in more than two.

const semPermits = 2

// permitLog is the intervals holders relied on.
type permitLog struct {
	mu sync.Mutex
	iv []permitInterval
}

type permitInterval struct {
	from, to time.Time
	who      int
}

func (p *permitLog) add(who int, from, to time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.iv = append(p.iv, permitInterval{from: from, to: to, who: who})
}

// maxOverlap returns the largest number of intervals that share an
// instant, and the holders at that instant. Intervals that only touch do
// not overlap (one ends as the other starts).
func (p *permitLog) maxOverlap() (int, []int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	type event struct {
		at    time.Time
		delta int
		who   int
	}
	events := make([]event, 0, 2*len(p.iv))
	for _, iv := range p.iv {
		events = append(events, event{iv.from, 1, iv.who}, event{iv.to, -1, iv.who})
	}
	slices.SortFunc(events, func(a, b event) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.delta - b.delta // ends first
	})
	best, cur := 0, map[int]bool{}
	var at []int
	for _, e := range events {
		if e.delta < 0 {
			delete(cur, e.who)
			continue
		}
		cur[e.who] = true
		if len(cur) > best {
			best, at = len(cur), nil
			for w := range cur {
				at = append(at, w)
			}
		}
	}
	return best, at
}

// semContender is one client: its Redlock and its Semaphore.
type semContender struct {
	id  int
	sem *redlock.Semaphore
}

func semContenders(t *testing.T, c nodeSet, name string, n int, opts ...redlock.LockOption) []*semContender {
	t.Helper()
	out := make([]*semContender, n)
	for i := range out {
		rl := newRedlock(t, c, redlock.WithNodeTimeout(100*time.Millisecond))
		s, err := rl.NewSemaphore(name, semPermits, opts...)
		require.NoError(t, err)
		out[i] = &semContender{id: i, sem: s}
	}
	return out
}

// contend runs every contender's loop until stop is closed: Acquire, hold
// for a few milliseconds, Release. It returns how many permits were
// acquired.
func contendSemaphore(t *testing.T, cs []*semContender, log *permitLog, stop <-chan struct{}) int {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	acquired := 0
	for _, sc := range cs {
		wg.Go(func() {
			for i := 0; i < 100_000; i++ { // bounded; stop ends it long before
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
				err := sc.sem.Acquire(ctx)
				cancel()
				if err != nil {
					assert.ErrorIs(t, err, redlock.ErrNotAcquired)
					continue
				}
				from := time.Now()
				until := sc.sem.Until()
				time.Sleep(time.Duration(5+rand.N(20)) * time.Millisecond)
				to := time.Now()
				if until.Before(to) {
					to = until
				}
				log.add(sc.id, from, to)
				mu.Lock()
				acquired++
				mu.Unlock()
				_ = sc.sem.Release(context.Background()) // a failed release frees its permit at its TTL
			}
		})
	}
	wg.Wait()
	return acquired
}

func requireNoOverAdmission(t *testing.T, log *permitLog) {
	t.Helper()
	most, who := log.maxOverlap()
	t.Logf("at most %d holders at once (permits %d)", most, semPermits)
	require.LessOrEqual(t, most, semPermits, "more holders than permits at once: %v", who)
}

func TestSemaphoreContention(t *testing.T) {
	n, quorum := semContention(t, startCluster(t, 5), 6, 3*time.Second)
	assert.Equal(t, 4, quorum)
	assert.Greater(t, n, 50)
}

// semContention has n contenders on c's nodes contend for d for a
// semaphore of two permits, each with a 2 s TTL: never more than two may
// hold at once, and both must be in use together at some point. It
// returns how many permits were acquired, and the semaphore's quorum.
func semContention(t *testing.T, c nodeSet, n int, d time.Duration) (acquired, quorum int) {
	t.Helper()
	cs := semContenders(t, c, "sem:"+t.Name(), n, redlock.WithTTL(2*time.Second))
	var log permitLog
	stop := make(chan struct{})
	time.AfterFunc(d, func() { close(stop) })
	acquired = contendSemaphore(t, cs, &log, stop)
	t.Logf("%d permits acquired in %v by %d contenders", acquired, d, n)
	requireNoOverAdmission(t, &log)
	most, _ := log.maxOverlap()
	assert.Equal(t, semPermits, most, "both permits in use at once at some point")
	return acquired, cs[0].sem.Quorum()
}

// One node paused, then it resumes and another is killed: the quorum, 4 of
// 5, survives one failed node. Then a second node is paused with the
// killed one down: no quorum is left, and no one must hold a permit it
// cannot rely on. The bound holds throughout.
func TestSemaphoreContentionFaults(t *testing.T) {
	c := startCluster(t, 5)
	cs := semContenders(t, c, "sem:"+t.Name(), 6, redlock.WithTTL(2*time.Second))
	var log permitLog
	phase := func(name string, d time.Duration) int {
		stop := make(chan struct{})
		time.AfterFunc(d, func() { close(stop) })
		n := contendSemaphore(t, cs, &log, stop)
		t.Logf("%s: %d permits acquired in %v", name, n, d)
		return n
	}
	unpause := pauseNodes(t, c, 1)
	assert.Positive(t, phase("node 1 paused", 2*time.Second))
	unpause()
	require.NoError(t, c.Kill(t.Context(), 3))
	assert.Positive(t, phase("node 3 killed", 2*time.Second))
	unpause = pauseNodes(t, c, 0)
	phase("node 3 killed, node 0 paused", 2*time.Second)
	unpause()
	requireNoOverAdmission(t, &log)
}

// Holders that die without releasing free their permits when their TTL
// runs out; the last release leaves no key behind.
func TestSemaphoreDeadHoldersFreePermits(t *testing.T) {
	c := startCluster(t, 5)
	name := "sem:" + t.Name()
	ttl := time.Second
	var died time.Time
	for range semPermits {
		clients := c.Clients(nil)
		rl, err := redlock.New(clients)
		require.NoError(t, err)
		s, err := rl.NewSemaphore(name, semPermits, redlock.WithTTL(ttl))
		require.NoError(t, err)
		require.NoError(t, s.TryAcquire(t.Context()))
		died = time.Now()
		require.NoError(t, rl.Close(t.Context())) // the process dies: its permit stays on the nodes
		for _, cl := range clients {
			_ = cl.Close()
		}
	}
	s, err := newRedlock(t, c).NewSemaphore(name, semPermits, redlock.WithTTL(ttl))
	require.NoError(t, err)
	require.ErrorIs(t, s.TryAcquire(t.Context()), redlock.ErrNotAcquired, "both permits held by the dead")
	ctx, cancel := context.WithTimeout(t.Context(), 5*ttl)
	defer cancel()
	require.NoError(t, s.Acquire(ctx))
	waited := time.Since(died)
	t.Logf("acquired %v after the last holder died (ttl %v)", waited, ttl)
	assert.GreaterOrEqual(t, waited, ttl-100*time.Millisecond, "a dead holder's permit lasts its TTL")
	assert.Less(t, waited, ttl+time.Second)
	require.NoError(t, s.Release(t.Context()))
	// The other dead holder's permit may outlive this one by the few
	// milliseconds between the two deaths: the keys go with the last
	// permit, within a TTL.
	nodes := inspector(t, c)
	for i, n := range nodes {
		assert.Eventually(t, func() bool {
			got, err := n.Exists(t.Context(), name, name+":redlock:permits").Result()
			return err == nil && got == 0
		}, ttl, 10*time.Millisecond, "node %d keeps the semaphore's keys", i)
	}
}

// A Mutex and a Semaphore on one name, or two Semaphores with different
// counts, refuse each other as misconfigured, at once.
func TestSemaphoreMisconfigured(t *testing.T) {
	c := startCluster(t, 5)
	rl := newRedlock(t, c)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()

	m := newMutex(t, rl, "sem-mutex:"+t.Name())
	require.NoError(t, m.Lock(ctx))
	s, err := rl.NewSemaphore(m.Name(), semPermits)
	require.NoError(t, err)
	start := time.Now()
	err = s.Acquire(ctx)
	requireMisconfigured(t, err, time.Since(start), time.Second)

	s, err = rl.NewSemaphore("sem-only:"+t.Name(), semPermits)
	require.NoError(t, err)
	require.NoError(t, s.Acquire(ctx))
	start = time.Now()
	err = newMutex(t, rl, s.Name()).Lock(ctx)
	requireMisconfigured(t, err, time.Since(start), time.Second)

	other, err := rl.NewSemaphore(s.Name(), semPermits+1)
	require.NoError(t, err)
	start = time.Now()
	err = other.Acquire(ctx)
	requireMisconfigured(t, err, time.Since(start), time.Second)
	assert.ErrorContains(t, err, fmt.Sprintf("has %d permits on this node, this one asks for %d", semPermits, semPermits+1))
	require.NoError(t, s.Release(ctx))
	require.NoError(t, m.Unlock(ctx))
}
