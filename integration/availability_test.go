package integration

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/integration/clientnet"
	"github.com/redlock-go/redlock/redlock"
)

// Availability under faults: several clients, each as a separate process
// would be (its own go-redis clients at go-redis' default options, its own
// Redlock at the library's defaults), contend for one lock with blocking
// Lock and holds of a few milliseconds. Each test measures the rate of
// acquisitions without the fault, then with it, on the same rig, clients
// and history checker as the fault scenarios (faults_test.go,
// history_test.go): the lock must stay safe (no overlapping holders, no
// lost update) and available (a fault a majority survives must not stop
// it; a majority that comes back must make it usable again at once).

const (
	// availClients is how many clients contend in each test.
	availClients = 4
	// availPhase is how long each measured phase lasts.
	availPhase = 3 * time.Second
	// availLockWait bounds each Lock call (and each phase ends them all).
	availLockWait = time.Second
	// minAvailability is the share of the fault-free rate of acquisitions
	// that a fault a majority survives must leave. Conservative, so that a
	// busy 2-core machine does not make it flake.
	minAvailability = 0.3
	// minFreeAcquired is the fewest acquisitions a fault-free phase must
	// make for the comparison to mean anything.
	minFreeAcquired = 20
	// farLatency is the one-way delay to a far node.
	farLatency = 25 * time.Millisecond
)

// contender is one contending client process.
type contender struct {
	id int
	m  *redlock.Mutex
}

// contender starts client id over the given node addresses: go-redis
// clients at default options and a Redlock with opts, closed after the
// test, and a Mutex on name, warmed by one Lock and Unlock (connections
// dialled, scripts loaded).
func (r *rig) contender(t *testing.T, id int, addrs []string, name string, opts ...redlock.Option) *contender {
	t.Helper()
	clients := newClients(len(addrs), func(i int) string { return addrs[i] }, nil)
	t.Cleanup(func() {
		for _, cl := range clients {
			_ = cl.Close()
		}
	})
	rl, err := redlock.New(clients, opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		assert.NoError(t, rl.Close(ctx), "client %d: background node calls did not finish", id)
	})
	m := newMutex(t, rl, name)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	require.NoError(t, m.Lock(ctx), "client %d: warm-up", id)
	require.NoError(t, m.Unlock(ctx), "client %d: warm-up", id)
	return &contender{id: id, m: m}
}

// contenders starts availClients clients on the rig's five lock nodes,
// each connecting directly, all contending for name.
func (r *rig) contenders(t *testing.T, name string) []*contender {
	t.Helper()
	out := make([]*contender, availClients)
	for id := range out {
		out[id] = r.contender(t, id, r.lockAddrs(), name)
	}
	return out
}

// phase is what the clients achieved in one measured period.
type phase struct {
	name       string
	calls      int // Lock or TryLock calls
	acquired   int
	unlockErrs int
	took       time.Duration
}

func (p phase) rate() float64 { return float64(p.acquired) / p.took.Seconds() }

func (p phase) String() string {
	return fmt.Sprintf("%s: %d acquired of %d Lock calls in %v, %.1f/s (%d Unlock errors)",
		p.name, p.acquired, p.calls, p.took.Round(time.Millisecond), p.rate(), p.unlockErrs)
}

// section runs one critical section of client c, which has just acquired,
// recorded in the rig's history, then releases the lock. It reports
// whether Unlock failed (under faults it may: the history judges).
func (r *rig) section(t *testing.T, c *contender) (unlockFailed bool) {
	t.Helper()
	hd := r.hist.acquired(c.id, c.m)
	assert.NoError(t, r.res.section(t.Context(), c.id, 0), "client %d", c.id)
	hd.released()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	return c.m.Unlock(ctx) != nil
}

// contendFor has every client Lock, run a critical section and Unlock, over
// and over, until d has passed. Each Lock is bounded by availLockWait and
// by the end of the phase. It returns what they achieved together.
func (r *rig) contendFor(t *testing.T, name string, clients []*contender, d time.Duration) phase {
	t.Helper()
	start := time.Now()
	end := start.Add(d)
	var calls, acquired, unlockErrs atomic.Int64
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() {
			for {
				now := time.Now()
				if !now.Before(end) {
					return
				}
				deadline := now.Add(availLockWait)
				if deadline.After(end) {
					deadline = end
				}
				ctx, cancel := context.WithDeadline(t.Context(), deadline)
				err := c.m.Lock(ctx)
				cancel()
				calls.Add(1)
				if err != nil {
					if !assert.ErrorIs(t, err, redlock.ErrNotAcquired, "client %d", c.id) {
						return
					}
					continue
				}
				acquired.Add(1)
				if r.section(t, c) {
					unlockErrs.Add(1)
				}
			}
		})
	}
	wg.Wait()
	p := phase{name: name, calls: int(calls.Load()), acquired: int(acquired.Load()),
		unlockErrs: int(unlockErrs.Load()), took: time.Since(start)}
	t.Log(p)
	return p
}

// assertAvailable checks that the faulty phase kept at least
// minAvailability of the fault-free rate of acquisitions.
func assertAvailable(t *testing.T, free, faulty phase) {
	t.Helper()
	ratio := faulty.rate() / free.rate()
	t.Logf("availability: %.1f/s with the fault, %.1f/s without: %.0f%% (required %.0f%%)",
		faulty.rate(), free.rate(), 100*ratio, 100*minAvailability)
	assert.GreaterOrEqual(t, ratio, minAvailability,
		"%s: %.1f/s, less than %.0f%% of the fault-free %.1f/s", faulty.name, faulty.rate(), 100*minAvailability, free.rate())
}

// pauseNodes pauses the given nodes and returns a function that unpauses
// them, which also runs at cleanup (before the clients close, whose
// background calls to those nodes must end) if the test did not call it.
func pauseNodes(t *testing.T, c nodeSet, nodes ...int) (unpause func()) {
	t.Helper()
	var once sync.Once
	unpause = func() {
		once.Do(func() {
			for _, i := range nodes {
				assert.NoError(t, c.Unpause(context.Background(), i))
			}
		})
	}
	t.Cleanup(unpause)
	for _, i := range nodes {
		require.NoError(t, c.Pause(t.Context(), i))
	}
	return unpause
}

// TestAvailabilitySilentMinority: two of five nodes paused (silent: no
// answer, no error) for the whole run. Four clients contend for 3 s
// without the fault, then for 3 s with it. The lock must stay safe, and
// keep at least minAvailability of its fault-free rate of acquisitions: a
// quorum of three answers as fast as before.
func TestAvailabilitySilentMinority(t *testing.T) {
	r := newRig(t)
	name := "avail-silent:" + t.Name()
	clients := r.contenders(t, name)

	free := r.contendFor(t, "fault-free", clients, availPhase)
	require.GreaterOrEqual(t, free.acquired, minFreeAcquired, "the fault-free phase is too slow to compare with")

	pauseNodes(t, r.c, 1, 3)
	faulty := r.contendFor(t, "nodes 1 and 3 paused", clients, availPhase)

	assertAvailable(t, free, faulty)
	requireSafe(t, r.res, false)
}

// TestAvailabilityFarMinority: each client reaches nodes 3 and 4 through
// its own proxies, the other three directly. Four clients contend for 3 s
// with no delay on the proxies, then for 3 s with 25 ms each way (50 ms
// per round trip) to nodes 3 and 4, a far data centre. The lock must stay
// safe, and keep at least minAvailability of its fault-free rate: the
// three near nodes make a quorum.
func TestAvailabilityFarMinority(t *testing.T) {
	r := newRig(t)
	name := "avail-far:" + t.Name()
	far := []int{3, 4}
	nets := make([]*clientnet.ClientNet, availClients)
	clients := make([]*contender, availClients)
	for id := range clients {
		upstreams := make([]string, len(far))
		for j, i := range far {
			upstreams[j] = r.c.Addr(i)
		}
		net, err := clientnet.NewClientNet(upstreams)
		require.NoError(t, err)
		nets[id] = net
		// Registered before the client: it closes first, while its
		// background calls can still get through.
		t.Cleanup(func() {
			assert.NoError(t, net.HealAll())
			net.Close()
		})
		addrs := r.lockAddrs()
		for j, i := range far {
			addrs[i] = net.Addr(j)
		}
		clients[id] = r.contender(t, id, addrs, name)
	}

	free := r.contendFor(t, "fault-free through the proxies", clients, availPhase)
	require.GreaterOrEqual(t, free.acquired, minFreeAcquired, "the fault-free phase is too slow to compare with")

	for _, net := range nets {
		for j := range far {
			require.NoError(t, net.LatencyBothWays(j, farLatency))
		}
	}
	requireRoundTrip(t, nets[0].Addr(0), 2*farLatency)
	faulty := r.contendFor(t, fmt.Sprintf("nodes %v %v away each way", far, farLatency), clients, availPhase)

	assertAvailable(t, free, faulty)
	requireSafe(t, r.res, false)
}

// requireRoundTrip checks that a PING to addr takes at least least: the
// fault is in place.
func requireRoundTrip(t *testing.T, addr string, least time.Duration) {
	t.Helper()
	rc := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { _ = rc.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	require.NoError(t, rc.Ping(ctx).Err()) // dials and sends HELLO first
	start := time.Now()
	require.NoError(t, rc.Ping(ctx).Err())
	took := time.Since(start)
	t.Logf("PING through the far proxy: %v", took.Round(time.Millisecond))
	require.GreaterOrEqual(t, took, least, "the latency is not in place")
}

// TestAvailabilityPausedMajorityResumes: four clients contend; three of
// five nodes are paused for about a second, during which every attempt
// fails; then all are unpaused. The clients that kept trying must get the
// lock back at once: one of them, trying with TryLock in a loop, acquires
// within 1 s of the unpause. And the attempts that failed during the pause
// (their SETs reach the paused nodes when they resume) must not leave their
// key behind: once that holder has released and everyone stopped, no node
// holds the key, 1 s after the unpause at the latest. The TTL is the
// default (10 s), so expiry cannot pass for either.
func TestAvailabilityPausedMajorityResumes(t *testing.T) {
	r := newRig(t)
	name := "avail-resume:" + t.Name()
	clients := r.contenders(t, name)
	const within = time.Second

	free := r.contendFor(t, "fault-free", clients, 500*time.Millisecond)
	require.Positive(t, free.acquired, "no acquisition without the fault")

	paused := []int{0, 1, 2}
	before := make([]map[string]int64, len(paused))
	for j, i := range paused {
		before[j] = commandCalls(t, r.insp[i])
	}
	unpause := pauseNodes(t, r.c, paused...)
	during := r.contendFor(t, fmt.Sprintf("nodes %v paused", paused), clients, time.Second)
	assert.Zero(t, during.acquired, "acquired with a majority paused")
	assert.Positive(t, during.calls)
	unpause()
	resumed := time.Now()
	// The failed attempts' commands, queued while the nodes were paused,
	// are applied now: SETs, and the undos that follow them.
	t.Logf("the key on each node just after the unpause: %q", r.values(t, name))
	for j, i := range paused {
		t.Logf("node %d applied on resuming: %v", i, callsSince(before[j], commandCalls(t, r.insp[i])))
	}

	first, tries := r.tryUntilAcquired(t, clients, resumed.Add(within+time.Second))
	stopped := time.Now()
	if assert.False(t, first.IsZero(), "nobody acquired within %v of the unpause (%d TryLock calls)", within+time.Second, tries) {
		t.Logf("first acquisition %v after the unpause (%d TryLock calls)", first.Sub(resumed).Round(time.Millisecond), tries)
		assert.LessOrEqual(t, first.Sub(resumed), within, "the lock came back too late after the unpause")
	}

	// Nobody holds the lock now: a key left on a node is a failed
	// attempt's. Its undo may still be on its way for a moment after the
	// last TryLock returned.
	deadline := resumed.Add(within)
	if grace := stopped.Add(250 * time.Millisecond); grace.After(deadline) {
		deadline = grace
	}
	v, ok := r.waitValues(t, name, time.Until(deadline), allEmpty)
	if !assert.True(t, ok, "%v after the unpause, with no holder, the key remains: %q",
		time.Since(resumed).Round(time.Millisecond), v) {
		// How long it lingers, for the report: at most its TTL.
		v, ok = r.waitValues(t, name, 10*time.Second+time.Second, allEmpty)
		t.Logf("%v after the unpause the leftover key was gone: %v (%q)", time.Since(resumed).Round(time.Millisecond), ok, v)
	}
	requireSafe(t, r.res, false)
}

// tryUntilAcquired has every client call TryLock in a loop, 5 ms apart,
// until one acquires (it runs a critical section and releases) or until
// deadline. It returns when the first acquisition happened (zero if none)
// and how many TryLock calls were made.
func (r *rig) tryUntilAcquired(t *testing.T, clients []*contender, deadline time.Time) (time.Time, int) {
	t.Helper()
	var (
		mu    sync.Mutex
		first time.Time
		calls atomic.Int64
		wg    sync.WaitGroup
	)
	got := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return !first.IsZero()
	}
	for _, c := range clients {
		wg.Go(func() {
			for !got() && time.Now().Before(deadline) {
				ctx, cancel := context.WithDeadline(t.Context(), deadline)
				err := c.m.TryLock(ctx)
				cancel()
				calls.Add(1)
				if err != nil {
					if !assert.ErrorIs(t, err, redlock.ErrNotAcquired, "client %d", c.id) {
						return
					}
					time.Sleep(5 * time.Millisecond)
					continue
				}
				at := time.Now()
				mu.Lock()
				if first.IsZero() || at.Before(first) {
					first = at
				}
				mu.Unlock()
				r.section(t, c)
			}
		})
	}
	wg.Wait()
	return first, int(calls.Load())
}

// commandCalls returns how many times the node ran each command (INFO
// commandstats).
func commandCalls(t *testing.T, rc *redis.Client) map[string]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	info, err := rc.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	out := make(map[string]int64)
	for _, m := range regexp.MustCompile(`cmdstat_([^:]+):calls=(\d+)`).FindAllStringSubmatch(info, -1) {
		n, err := strconv.ParseInt(m[2], 10, 64)
		require.NoError(t, err)
		out[m[1]] = n
	}
	return out
}

// callsSince returns the commands run between two commandCalls, but for
// the inspection's own (INFO, GET, HELLO and the like).
func callsSince(before, after map[string]int64) map[string]int64 {
	out := make(map[string]int64)
	for cmd, n := range after {
		switch cmd {
		case "info", "get", "hello", "client|setinfo", "ping":
			continue
		}
		if d := n - before[cmd]; d > 0 {
			out[cmd] = d
		}
	}
	return out
}
