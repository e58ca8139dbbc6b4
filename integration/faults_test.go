package integration

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/integration/clientnet"
	"github.com/redlock-go/redlock/redlock"
	"github.com/redlock-go/redlock/redlock/report"
)

// Fault scenarios: each simulated client is a separate "process" with its
// own proxies to the five lock nodes (clientnet.ClientNet), its own go-redis clients
// and its own Redlock, so that latency, blackholes, lost replies and
// partitions differ per client. Node-wide faults (pause, kill, restart) go
// through the container harness. A sixth Redis, which no fault touches,
// holds the guarded resource; every scenario records a history and checks
// it (history_test.go).

const lockNodes = 5

// rig is one scenario's world: five lock nodes, the resource Redis (node
// 5), direct clients to the lock nodes for inspection, and the history.
type rig struct {
	c    *Cluster
	insp []*redis.Client
	hist *history
	res  *resource
}

func newRig(t *testing.T, opts ...Option) *rig {
	t.Helper()
	c := startCluster(t, lockNodes+1, opts...)
	insp := make([]*redis.Client, lockNodes)
	for i := range insp {
		cl := redis.NewClient(&redis.Options{Addr: c.Addr(i), MaxRetries: -1, DialTimeout: time.Second,
			ReadTimeout: time.Second, WriteTimeout: time.Second})
		insp[i] = cl
		t.Cleanup(func() { _ = cl.Close() })
	}
	hist := newHistory()
	return &rig{c: c, insp: insp, hist: hist, res: newResource(t, c.Addr(lockNodes), "resource:"+t.Name(), hist)}
}

// lockAddrs returns the addresses of the five lock nodes.
func (r *rig) lockAddrs() []string {
	out := make([]string, lockNodes)
	for i := range out {
		out[i] = r.c.Addr(i)
	}
	return out
}

// values returns key on each lock node ("" absent, "<down>" no answer).
func (r *rig) values(t *testing.T, key string) []string {
	t.Helper()
	return values(t, r.insp, key)
}

// waitValues polls until key's values on the lock nodes satisfy ok, for at
// most d; it returns the last values seen and whether ok held.
func (r *rig) waitValues(t *testing.T, key string, d time.Duration, ok func([]string) bool) ([]string, bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		v := r.values(t, key)
		if ok(v) {
			return v, true
		}
		if time.Now().After(deadline) {
			return v, false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func allEmpty(v []string) bool { return slices.Equal(v, make([]string, len(v))) }

// simClient is one simulated client process.
type simClient struct {
	id      int
	net     *clientnet.ClientNet
	clients []redis.UniversalClient
	rl      *redlock.Redlock
}

// warmConns is how many connections per node a client opens before faults
// are injected (see clientnet.WarmPool): each reply dropped later costs one.
const warmConns = 6

// proxiedOptions are the go-redis options of simulated clients: no
// retries (a test about faults must see each one), short timeouts so that
// a worker stuck on a silent node comes back soon, and pipelines on the
// main pool so that clientnet.WarmPool warms the connections they use.
func proxiedOptions() *redis.Options {
	return &redis.Options{
		MaxRetries: -1, DialTimeout: 500 * time.Millisecond,
		ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond,
		PoolSize: 2 * warmConns, PipelinePoolSize: -1,
	}
}

// client starts simulated client id: proxies, warm clients and a Redlock
// with opts, all closed after the test.
func (r *rig) client(t *testing.T, id int, opts ...redlock.Option) *simClient {
	t.Helper()
	net, err := clientnet.NewClientNet(r.lockAddrs())
	require.NoError(t, err)
	clients := newClients(net.Len(), net.Addr, proxiedOptions())
	rl, err := redlock.New(clients, opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		// Healed first, so that background calls end and Close returns.
		assert.NoError(t, net.HealAll())
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		assert.NoError(t, rl.Close(ctx), "client %d: background node calls did not finish", id)
		for _, cl := range clients {
			_ = cl.Close()
		}
		net.Close()
	})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for _, cl := range clients {
		require.NoError(t, clientnet.WarmPool(ctx, cl.(*redis.Client), warmConns))
	}
	return &simClient{id: id, net: net, clients: clients, rl: rl}
}

func (sc *simClient) mutex(t *testing.T, name string, opts ...redlock.LockOption) *redlock.Mutex {
	t.Helper()
	return newMutex(t, sc.rl, name, opts...)
}

// warm takes and releases a lock with opts once, so that every script the
// lock uses is in each node's cache: with replies dropped, a NOSCRIPT
// answer would be lost too, and the EVAL fallback never sent.
func (sc *simClient) warm(t *testing.T, opts ...redlock.LockOption) {
	t.Helper()
	m := sc.mutex(t, fmt.Sprintf("warm:%s:%d", t.Name(), sc.id), opts...)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	require.NoError(t, m.Lock(ctx))
	require.NoError(t, m.Unlock(ctx))
}

// contend runs rounds critical sections on m as client sc, recording each
// in the rig's history. Each Lock is bounded by wait; a Lock that fails
// counts as a failed attempt. It returns the acquisitions made.
func (r *rig) contend(t *testing.T, sc *simClient, m *redlock.Mutex, rounds int, wait time.Duration) int {
	t.Helper()
	got := 0
	for range rounds {
		ctx, cancel := context.WithTimeout(t.Context(), wait)
		err := m.Lock(ctx)
		cancel()
		if err != nil {
			assert.ErrorIs(t, err, redlock.ErrNotAcquired)
			continue
		}
		got++
		hd := r.hist.acquired(sc.id, m)
		assert.NoError(t, r.res.section(t.Context(), sc.id, m.Fence()), "client %d", sc.id)
		hd.released()
		_ = m.Unlock(t.Context()) // may report ErrNotHeld under faults; the history judges
	}
	return got
}

// contendBoth runs contend for clients a and b at once, each with its own
// mutex, and returns how many rounds each acquired.
func (r *rig) contendBoth(t *testing.T, a *simClient, ma *redlock.Mutex, b *simClient, mb *redlock.Mutex, rounds int) (gotA, gotB int) {
	t.Helper()
	var wg sync.WaitGroup
	wg.Go(func() { gotA = r.contend(t, a, ma, rounds, 3*time.Second) })
	wg.Go(func() { gotB = r.contend(t, b, mb, rounds, 3*time.Second) })
	wg.Wait()
	return gotA, gotB
}

// driftOf is the library's drift allowance at its default factor: TTL ×
// factor, rounded up, plus 2ms.
func driftOf(ttl time.Duration) time.Duration {
	return time.Duration(math.Ceil(float64(ttl)*0.01)) + 2*time.Millisecond
}

// TestFaultLatency: two slow nodes (+50ms per round trip) do not slow the
// lock, which decides on the three fast ones; three slow nodes do, and the
// validity window is then shortened by the time the acquisition took.
// Two clients with different slow nodes contend safely.
func TestFaultLatency(t *testing.T) {
	r := newRig(t)
	ctx := t.Context()
	const ttl, slow = time.Second, 50 * time.Millisecond
	opts := []redlock.Option{redlock.WithTTL(ttl), redlock.WithNodeTimeout(300 * time.Millisecond), redlock.WithFencing()}
	a, b := r.client(t, 0, opts...), r.client(t, 1, opts...)
	name := "latency:" + t.Name()
	ma, mb := a.mutex(t, name), b.mutex(t, name)
	a.warm(t)
	b.warm(t)
	require.NoError(t, a.net.Latency(1, slow))
	require.NoError(t, a.net.Latency(3, slow))
	require.NoError(t, b.net.Latency(0, slow))
	require.NoError(t, b.net.Latency(4, slow))

	start := time.Now()
	require.NoError(t, ma.TryLock(ctx))
	returned := time.Now()
	took := returned.Sub(start)
	assert.Less(t, took, slow, "took %v: waited for a slow node", took)
	assert.LessOrEqual(t, ma.Until().Sub(returned), ttl-driftOf(ttl), "validity beyond ttl-drift")
	require.NoError(t, ma.Unlock(ctx))

	require.NoError(t, a.net.Latency(2, slow)) // a majority is slow now
	start = time.Now()
	require.NoError(t, ma.TryLock(ctx))
	returned = time.Now()
	took = returned.Sub(start)
	// Two round trips (the grant, then the fencing token), each as slow as
	// the third-fastest node; the validity window starts before both.
	assert.GreaterOrEqual(t, took, 2*slow)
	assert.LessOrEqual(t, ma.Until().Sub(returned), ttl-driftOf(ttl)-2*slow,
		"validity not shortened by the %v the acquisition took", took)
	require.NoError(t, ma.Unlock(ctx))
	require.NoError(t, a.net.Heal(2))

	gotA, gotB := r.contendBoth(t, a, ma, b, mb, 10)
	assert.Equal(t, 10, gotA)
	assert.Equal(t, 10, gotB)
	requireSafe(t, r.res, true)
}

// TestFaultBlackholeMinority: two nodes silent for one client (a partition
// that drops packets, no error) cost it nothing: it decides on the other
// three, before the node timeout. It contends safely with a healthy client.
func TestFaultBlackholeMinority(t *testing.T) {
	r := newRig(t)
	ctx := t.Context()
	const nodeTimeout = 300 * time.Millisecond
	opts := []redlock.Option{redlock.WithTTL(time.Second), redlock.WithNodeTimeout(nodeTimeout), redlock.WithFencing()}
	a, b := r.client(t, 0, opts...), r.client(t, 1, opts...)
	name := "bh-minority:" + t.Name()
	ma, mb := a.mutex(t, name), b.mutex(t, name)
	require.NoError(t, a.net.Blackhole(0))
	require.NoError(t, a.net.Blackhole(4))

	start := time.Now()
	require.NoError(t, ma.TryLock(ctx))
	took := time.Since(start)
	assert.Less(t, took, nodeTimeout/2, "took %v: waited for the silent nodes", took)
	require.NoError(t, ma.Unlock(ctx))

	gotA, gotB := r.contendBoth(t, a, ma, b, mb, 8)
	assert.Equal(t, 8, gotA)
	assert.Equal(t, 8, gotB)
	requireSafe(t, r.res, true)
}

// TestFaultBlackholeMajority: three silent nodes make TryLock fail after
// one node timeout, naming them; the two nodes that granted are released
// before it returns, and once healed no key of the attempt is anywhere.
func TestFaultBlackholeMajority(t *testing.T) {
	r := newRig(t)
	ctx := t.Context()
	const nodeTimeout = 300 * time.Millisecond
	a := r.client(t, 0, redlock.WithTTL(2*time.Second), redlock.WithNodeTimeout(nodeTimeout))
	b := r.client(t, 1, redlock.WithTTL(2*time.Second), redlock.WithNodeTimeout(nodeTimeout))
	name := "bh-majority:" + t.Name()
	ma := a.mutex(t, name)
	for _, i := range []int{1, 2, 3} {
		require.NoError(t, a.net.Blackhole(i))
	}
	start := time.Now()
	err := ma.TryLock(ctx)
	took := time.Since(start)
	requireTimedOut(t, err, took, nodeTimeout, 1, 2, 3)
	assert.True(t, ma.Until().IsZero())
	assert.Equal(t, []string{"", "", "", "", ""}, r.values(t, name), "the nodes that granted were not released")

	require.NoError(t, a.net.HealAll())
	v, ok := r.waitValues(t, name, 3*time.Second, allEmpty)
	assert.True(t, ok, "a key of the failed attempt remains: %q", v)
	mb := b.mutex(t, name)
	require.NoError(t, mb.TryLock(ctx), "the failed attempt left the lock taken")
	hd := r.hist.acquired(b.id, mb)
	require.NoError(t, r.res.section(ctx, b.id, 0))
	hd.released()
	require.NoError(t, mb.Unlock(ctx))
	requireSafe(t, r.res, true)
}

// TestFaultRepliesLost: nodes that apply a command and lose its reply.
// With two such nodes the lock is still acquired (on the other three), the
// SETs were applied on all five, and Unlock's release, applied while its
// reply is lost too, leaves no key anywhere. With three such nodes the
// attempt fails; the nodes that stopped answering are down, and the
// releases of its applied SETs are owed to them and delivered once they
// answer again, long before the TTL.
func TestFaultRepliesLost(t *testing.T) {
	r := newRig(t)
	ctx := t.Context()
	const nodeTimeout = 150 * time.Millisecond
	opts := []redlock.Option{redlock.WithTTL(2 * time.Second), redlock.WithNodeTimeout(nodeTimeout)}
	a := r.client(t, 0, opts...)
	a.warm(t)
	name := "lost-replies:" + t.Name()
	ma := a.mutex(t, name)

	require.NoError(t, a.net.DropReplies(3))
	require.NoError(t, a.net.DropReplies(4))
	start := time.Now()
	require.NoError(t, ma.TryLock(ctx))
	took := time.Since(start)
	assert.Less(t, took, nodeTimeout, "took %v: waited for the nodes whose replies are lost", took)
	hd := r.hist.acquired(a.id, ma)
	v, ok := r.waitValues(t, name, time.Second, func(v []string) bool {
		return v[0] != "" && slices.Equal(v, []string{v[0], v[0], v[0], v[0], v[0]})
	})
	assert.True(t, ok, "the SET was not applied on every node: %q", v)
	require.NoError(t, r.res.section(ctx, a.id, 0))
	hd.released()
	require.NoError(t, ma.Unlock(ctx))
	v, ok = r.waitValues(t, name, 3*time.Second, allEmpty)
	assert.True(t, ok, "the release was not applied where its reply was lost: %q", v)

	name2 := name + ":failed"
	// A TTL far longer than the test: only a delivered release frees it.
	mf := a.mutex(t, name2, redlock.WithTTL(time.Minute))
	require.NoError(t, a.net.DropReplies(1))
	require.NoError(t, a.net.Heal(4))
	// Nodes 1, 3 and 2 lose replies now; 2 is set below. Node 3 went
	// down when its replies stopped (node 4 too, until a probe sees it
	// answer again): the attempt skips it.
	require.NoError(t, a.net.DropReplies(2))
	err := mf.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	failedNodes := indexes(report.NodeErrors(err))
	assert.Subset(t, failedNodes, []int{1, 2, 3})
	got := r.values(t, name2)
	assert.NotEmpty(t, got[1], "node 1 did not apply the SET whose reply it lost")
	assert.Equal(t, got[1], got[2], "node 2 did not apply the SET whose reply it lost")
	// The fault was real: a command through node 1's proxy gets no reply.
	pingErr := a.clients[1].Ping(ctx).Err()
	var netErr interface{ Timeout() bool }
	assert.True(t, errors.As(pingErr, &netErr) && netErr.Timeout(), "PING through a lost-replies proxy: %v", pingErr)
	// The releases of the applied SETs are owed to the nodes that stopped
	// answering, and delivered once they answer again.
	require.NoError(t, a.net.HealAll())
	v, ok = r.waitValues(t, name2, 5*time.Second, allEmpty)
	assert.True(t, ok, "the failed attempt's SETs were not released: %q", v)

	requireSafe(t, r.res, true)
}

// TestFaultPartitionPerClient: a 2|3 split seen differently by two
// clients: A reaches {0,1,2}, B reaches {2,3,4}. Node 2 arbitrates: both
// make progress, never together, with increasing fencing tokens.
func TestFaultPartitionPerClient(t *testing.T) {
	r := newRig(t)
	opts := []redlock.Option{redlock.WithTTL(time.Second), redlock.WithNodeTimeout(100 * time.Millisecond), redlock.WithFencing()}
	a, b := r.client(t, 0, opts...), r.client(t, 1, opts...)
	name := "partition:" + t.Name()
	ma, mb := a.mutex(t, name), b.mutex(t, name)
	require.NoError(t, a.net.Blackhole(3))
	require.NoError(t, a.net.Blackhole(4))
	require.NoError(t, b.net.Blackhole(0))
	require.NoError(t, b.net.Blackhole(1))

	gotA, gotB := r.contendBoth(t, a, ma, b, mb, 10)
	t.Logf("A acquired %d times, B %d times", gotA, gotB)
	assert.Positive(t, gotA)
	assert.Positive(t, gotB)
	requireSafe(t, r.res, true)
}
