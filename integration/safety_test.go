package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/redlock"
)

// The safety workload, run in every deployment shape docs/DEPLOYMENTS.md
// documents: Redlocks with clients of their own, as separate processes
// have, contend for one name around a counter that only the lock guards.
// Two holders at once show as overlapping validity windows, a lost update,
// a data race on the counter (under -race), or an Unlock that finds its
// token on fewer than a quorum. Shapes differ in how a release reaches a
// waiter: on a Redis Cluster, PUBLISH counts the subscribers of the local
// master only, while the cluster bus delivers the message to every
// master's, so a count is no proof that a waiter heard, or did not hear.

const (
	safetyRedlocks = 2  // contending Redlocks, each with clients of its own
	safetyWorkers  = 2  // goroutines per Redlock, each with its own Mutex
	safetyRounds   = 15 // critical sections per goroutine
)

// lockKind is a kind of lock the workload takes; a round enters it holds
// times (a reentrant lock twice) and leaves it as often.
type lockKind struct {
	name   string
	opts   []redlock.LockOption
	holds  int
	fenced bool
}

var (
	// plainKind is the default lock: the only one a release hands over to
	// the oldest waiter.
	plainKind = lockKind{name: "plain", holds: 1}
	// pollingKind is the plain lock with notification off: waiters poll.
	pollingKind = lockKind{name: "polling", opts: []redlock.LockOption{redlock.WithNotification(false)}, holds: 1}
	lockKinds   = []lockKind{
		plainKind,
		{name: "fenced", opts: []redlock.LockOption{redlock.WithFencing()}, holds: 1, fenced: true},
		{name: "reentrant", opts: []redlock.LockOption{redlock.WithReentrant()}, holds: 2},
		pollingKind,
	}
)

// safetyHold is one critical section and the fencing token it ran under
// (0 when not fenced).
type safetyHold struct {
	window
	fence uint64
}

// safetyWorker is one goroutine of the workload and what it saw; only
// that goroutine touches it until the workload has ended.
type safetyWorker struct {
	id         int
	m          *redlock.Mutex
	holds      []safetyHold
	unlockErrs []error
}

// nodesOf returns new clients, one per node, for the i-th Redlock of a
// workload: a shape may vary them from one Redlock to the next.
type nodesOf func(i int) []redis.UniversalClient

// safetyWorkload runs the workload on name: safetyRedlocks Redlocks (New
// with newOpts) over the clients nodes gives each, safetyWorkers
// goroutines each, safetyRounds rounds per goroutine of Lock, a
// read-sleep-write of a plain int, Unlock. It then checks that no two
// validity windows overlap, that no update was lost, that every Unlock
// found its token on a quorum, and that fencing tokens grow with the holds.
func safetyWorkload(t *testing.T, nodes nodesOf, name string, kind lockKind, newOpts ...redlock.Option) {
	t.Helper()
	safetyOver(t, func(t *testing.T, i int) *redlock.Redlock {
		t.Helper()
		return redlockOver(t, nodes(i), newOpts...)
	}, name, kind)
}

// redlocksOf returns a new Redlock, the i-th of a workload, with clients of
// its own, closed when t ends.
type redlocksOf func(t *testing.T, i int) *redlock.Redlock

// safetyOver is safetyWorkload over the Redlocks made gives.
func safetyOver(t *testing.T, made redlocksOf, name string, kind lockKind) {
	t.Helper()
	ctx := timeout(t, 2*time.Minute)
	// A node that answers within a second is up: a loaded machine is not
	// what this test is about, and a release that timed out on a majority
	// would read as not held.
	opts := append([]redlock.LockOption{redlock.WithTTL(5 * time.Second), redlock.WithNodeTimeout(time.Second)}, kind.opts...)
	var workers []*safetyWorker
	for i := range safetyRedlocks {
		rl := made(t, i)
		for range safetyWorkers {
			workers = append(workers, &safetyWorker{id: len(workers), m: newMutex(t, rl, name, opts...)})
		}
	}
	// Read and written apart, with nothing but the lock between holders:
	// -race reports two holders at once, and the total counts lost updates.
	counter := 0
	origin := time.Now()
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Go(func() { w.run(t, ctx, kind, &counter) })
	}
	wg.Wait()
	took := time.Since(origin)

	holds, unlockErrs := gather(workers)
	windows := make([]window, len(holds))
	for i, h := range holds {
		windows[i] = h.window
	}
	t.Logf("%s, %s lock: %d of %d critical sections in %v", name, kind.name, len(holds), len(workers)*safetyRounds, took)
	assert.Empty(t, describe(overlaps(windows), origin), "two holders at once")
	assert.Equal(t, len(holds), counter, "lost updates: the counter against the critical sections that ran")
	for _, err := range unlockErrs {
		if errors.Is(err, redlock.ErrNotHeld) {
			t.Errorf("Unlock found its token on fewer than a quorum: another holder took the lock, or a node lost it: %v", err)
		} else {
			t.Errorf("Unlock failed: %v", err)
		}
	}
	if kind.fenced {
		for i := 1; i < len(holds); i++ {
			assert.Greater(t, holds[i].fence, holds[i-1].fence, "fencing tokens grow with the holds: %s then %s",
				holds[i-1].String(origin), holds[i].String(origin))
		}
	}
}

// run is worker w's rounds: Lock, a read-sleep-write of counter (a plain
// int: -race reports two holders at once), Unlock.
func (w *safetyWorker) run(t *testing.T, ctx context.Context, kind lockKind, counter *int) {
	t.Helper()
	for round := range safetyRounds {
		if !w.lock(t, ctx, kind.holds, round) {
			return
		}
		start := time.Now()
		v := *counter
		time.Sleep(2 * time.Millisecond)
		*counter = v + 1
		end := time.Now()
		if until := w.m.Until(); until.Before(end) {
			end = until
		}
		w.holds = append(w.holds, safetyHold{window{w.id, start, end}, w.m.Fence()})
		for range kind.holds {
			if err := w.m.Unlock(ctx); err != nil {
				w.unlockErrs = append(w.unlockErrs, fmt.Errorf("worker %d, round %d: %w", w.id, round, err))
			}
		}
	}
}

// gather returns the workers' holds, by start, and their Unlock errors.
func gather(workers []*safetyWorker) ([]safetyHold, []error) {
	var holds []safetyHold
	var unlockErrs []error
	for _, w := range workers {
		holds = append(holds, w.holds...)
		unlockErrs = append(unlockErrs, w.unlockErrs...)
	}
	slices.SortFunc(holds, func(a, b safetyHold) int { return a.start.Compare(b.start) })
	return holds, unlockErrs
}

// lock enters w's lock holds times, each Lock bounded by 20 s; it reports
// whether the lock is held, failing the test when not.
func (w *safetyWorker) lock(t *testing.T, ctx context.Context, holds, round int) bool {
	t.Helper()
	for i := range holds {
		lockCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err := w.m.Lock(lockCtx)
		cancel()
		if !assert.NoError(t, err, "worker %d, round %d: Lock (hold %d)", w.id, round, i+1) {
			for range i {
				_ = w.m.Unlock(ctx)
			}
			return false
		}
	}
	return true
}

// eachKind runs the workload once per lock kind, each on its own name
// (base for the plain lock, base/kind for the others), so that keys one
// kind leaves behind for a moment (a release still on its way to the last
// node) meet no other kind.
func eachKind(t *testing.T, nodes nodesOf, base string) {
	t.Helper()
	eachKindOver(t, func(t *testing.T, i int) *redlock.Redlock {
		t.Helper()
		return redlockOver(t, nodes(i))
	}, base)
}

// eachKindOver is eachKind over the Redlocks made gives.
func eachKindOver(t *testing.T, made redlocksOf, base string) {
	t.Helper()
	for _, kind := range lockKinds {
		t.Run(kind.name, func(t *testing.T) {
			name := base
			if kind.name != plainKind.name {
				name += "/" + kind.name
			}
			safetyOver(t, made, name, kind)
		})
	}
}

// TestSafetyPlain runs the workload on five plain servers: every lock
// kind, and both protocols (RESP3 is go-redis' default; a RESP2
// connection delivers pub/sub messages differently).
func TestSafetyPlain(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 5)
	over := func(opts *redis.Options) nodesOf {
		return func(int) []redis.UniversalClient { return c.Clients(opts) }
	}
	eachKind(t, over(nil), "safety:plain")
	t.Run("RESP2", func(t *testing.T) {
		safetyWorkload(t, over(&redis.Options{Protocol: 2}), "safety:resp2", plainKind)
	})
	t.Run("RESP3", func(t *testing.T) {
		safetyWorkload(t, over(&redis.Options{Protocol: 3}), "safety:resp3", plainKind)
	})
	t.Run("RESP2 and RESP3", func(t *testing.T) {
		safetyWorkload(t, func(i int) []redis.UniversalClient {
			return c.Clients(&redis.Options{Protocol: 2 + i%2})
		}, "safety:resp", plainKind)
	})
}

// TestSafetyCluster runs the workload on three Redis Clusters of three
// masters each, every cluster one node of the Redlocks: every lock kind,
// on a name without a hash tag and on one with, and over RESP2. A waiter's
// own channel and the lock's key are on different masters of a cluster
// more often than not.
func TestSafetyCluster(t *testing.T) {
	t.Parallel()
	rcs := startRedisClusters(t, 3, 3)
	over := func(opts *redis.ClusterOptions) nodesOf {
		return func(int) []redis.UniversalClient {
			clients := make([]redis.UniversalClient, len(rcs))
			for i, rc := range rcs {
				clients[i] = rc.Client(opts)
			}
			return clients
		}
	}
	for _, name := range []string{"job:7", "{acct:9}:job"} {
		t.Run(name, func(t *testing.T) {
			eachKind(t, over(nil), name)
			t.Run("RESP2", func(t *testing.T) {
				safetyWorkload(t, over(&redis.ClusterOptions{Protocol: 2}), name+"/resp2", plainKind)
			})
		})
	}
}

// TestSafetySentinel runs the workload on three Sentinel-managed masters:
// one Redlock over failover clients, the other over universal clients
// given a master name.
func TestSafetySentinel(t *testing.T) {
	t.Parallel()
	s := startSentinel(t, 3)
	over := func(protocol int) nodesOf {
		return func(i int) []redis.UniversalClient {
			if i%2 == 0 {
				return s.Clients(&redis.FailoverOptions{Protocol: protocol})
			}
			clients := make([]redis.UniversalClient, s.Len())
			for j := range clients {
				clients[j] = redis.NewUniversalClient(&redis.UniversalOptions{MasterName: s.MasterName(j), Addrs: s.SentinelAddrs(), Protocol: protocol})
			}
			return clients
		}
	}
	eachKind(t, over(0), "safety:sentinel")
	t.Run("RESP2", func(t *testing.T) { safetyWorkload(t, over(2), "safety:sentinel:resp2", plainKind) })
	t.Run("renewal of many", func(t *testing.T) {
		holdManyWithRenewal(t, timeout(t, time.Minute), 2*time.Second, func() []redis.UniversalClient { return over(0)(1) })
	})
}

// TestSafetyRing runs the workload with go-redis Rings of two plain
// servers each as nodes: one Ring beside two servers (notification on and
// off), and three Rings.
func TestSafetyRing(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 6)
	addrs := make([]string, c.Len())
	for i := range addrs {
		addrs[i] = c.Addr(i)
	}
	ring := func(addrs ...string) *redis.Ring {
		o := &redis.RingOptions{Addrs: map[string]string{}}
		for i, a := range addrs {
			o.Addrs["shard"+strconv.Itoa(i)] = a
		}
		return redis.NewRing(o)
	}
	mixed := func(int) []redis.UniversalClient {
		return []redis.UniversalClient{
			ring(addrs[0], addrs[1]), redis.NewClient(&redis.Options{Addr: addrs[2]}), redis.NewClient(&redis.Options{Addr: addrs[3]}),
		}
	}
	t.Run("one Ring and two servers", func(t *testing.T) {
		safetyWorkload(t, mixed, "safety:ring:mixed", plainKind)
	})
	for _, kind := range lockKinds[1:] { // fenced, reentrant, polling
		t.Run("one Ring and two servers, "+kind.name, func(t *testing.T) {
			safetyWorkload(t, mixed, "safety:ring:mixed/"+kind.name, kind)
		})
	}
	t.Run("one Ring and two servers, renewal of many", func(t *testing.T) {
		holdManyWithRenewal(t, timeout(t, time.Minute), 2*time.Second, func() []redis.UniversalClient { return mixed(0) })
	})
	t.Run("three Rings", func(t *testing.T) {
		safetyWorkload(t, func(int) []redis.UniversalClient {
			return []redis.UniversalClient{ring(addrs[0], addrs[1]), ring(addrs[2], addrs[3]), ring(addrs[4], addrs[5])}
		}, "safety:ring", plainKind)
	})
}

// TestSafetyTLS runs the workload on three nodes that serve TLS only.
func TestSafetyTLS(t *testing.T) {
	t.Parallel()
	tn := startTLS(t, 3)
	over := func(protocol int) nodesOf {
		return func(int) []redis.UniversalClient {
			clients := make([]redis.UniversalClient, len(tn))
			for i, n := range tn {
				clients[i] = redis.NewClient(&redis.Options{Addr: n.Addr(), TLSConfig: n.ClientTLS(), Protocol: protocol})
			}
			return clients
		}
	}
	eachKind(t, over(0), "safety:tls")
	t.Run("RESP2", func(t *testing.T) { safetyWorkload(t, over(2), "safety:tls:resp2", plainKind) })
	t.Run("renewal of many", func(t *testing.T) {
		holdManyWithRenewal(t, timeout(t, time.Minute), 2*time.Second, func() []redis.UniversalClient { return over(0)(0) })
	})
}

// TestSafetyACL runs the workload on three nodes as the user of each ACL
// line docs/DEPLOYMENTS.md describes: the full line, as written there,
// and each tier below it (aclTiers). A tier without the queue or the
// channels turns the handoff off: waiters are woken to try, or poll.
func TestSafetyACL(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	admin := inspector(t, c)
	ctx := timeout(t, 5*time.Minute)
	as := func(user, pass string) nodesOf {
		return func(int) []redis.UniversalClient { return userClients(c, user, pass) }
	}
	t.Run("full line", func(t *testing.T) {
		user, pass := fullLineUser(ctx, t, admin)
		eachKind(t, as(user, pass), "locks:safety:full")
		t.Run("renewal of many", func(t *testing.T) {
			holdManyWithRenewal(t, ctx, 2*time.Second, func() []redis.UniversalClient { return as(user, pass)(0) })
		})
	})
	for _, tier := range aclTiers {
		t.Run(tier.name, func(t *testing.T) {
			user := "safety" + strings.ReplaceAll(tier.name, " ", "")
			setUser(t, ctx, admin, aclLine(user, "pw", "locks:", tier.drop...))
			safetyWorkload(t, as(user, "pw"), "locks:"+user, plainKind)
		})
	}
}

// TestSafetyWithoutScripts runs the workload on three nodes spoken to
// without scripts: as a user refused them (+@all -@scripting), which the
// nodes find at their first refusal, with every lock kind; with
// WithoutScripts given to New; and as the user of docs/DEPLOYMENTS.md's
// line for such nodes, as written there.
func TestSafetyWithoutScripts(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	noScriptsUser(t, c)
	eachKind(t, func(int) []redis.UniversalClient { return userClients(c, "noscripts", "pw") }, "safety:noscripts")
	t.Run("renewal of many", func(t *testing.T) {
		// Each extension is a transaction of its own on every node.
		holdManyWithRenewal(t, timeout(t, time.Minute), 2*time.Second, func() []redis.UniversalClient { return userClients(c, "noscripts", "pw") })
	})
	t.Run("WithoutScripts", func(t *testing.T) {
		safetyWorkload(t, func(int) []redis.UniversalClient { return c.Clients(nil) },
			"safety:withoutscripts", plainKind, redlock.WithoutScripts())
	})
	t.Run("documented line", func(t *testing.T) {
		line := aclLineAfter(t, "The commands such a user needs")
		fields := strings.Fields(line)
		ctx := timeout(t, time.Minute)
		args := make([]any, len(fields))
		for i, f := range fields {
			args[i] = f
		}
		for _, a := range inspector(t, c) {
			require.NoError(t, a.Do(ctx, args...).Err(), "%s", line)
		}
		safetyWorkload(t, func(int) []redis.UniversalClient {
			return userClients(c, fields[2], strings.TrimPrefix(fields[4], ">"))
		}, "locks:safety:noscripts", plainKind)
	})
}

// TestSafetyReplicated runs the workload on three masters, each with a
// replica in sync, with WithReplicaAck: a grant counts once a replica has
// it, and the release hands the lock to no waiter (the replica's
// acknowledgement is part of every grant), so waiters are woken to try.
func TestSafetyReplicated(t *testing.T) {
	t.Parallel()
	c := replicated(t)
	masters := func(int) []redis.UniversalClient { return clientsOf(t, nil, c.Addr(0), c.Addr(1), c.Addr(2)) }
	// A live replica acknowledges at once; the acknowledgement may wait
	// 1.5 s (see TestReplicaAckStoppedReplica), within the node timeout.
	acked := lockKind{name: "plain, acknowledged", opts: []redlock.LockOption{redlock.WithNodeTimeout(3 * time.Second)}, holds: 1}
	safetyWorkload(t, masters, "safety:replicated", acked,
		redlock.WithNodeTimeout(3*time.Second), redlock.WithReplicaAck(1, 1500*time.Millisecond))
	t.Run("renewal of many", func(t *testing.T) {
		// Each extension waits for a replica, one round of its own.
		holdManyWithRenewal(t, timeout(t, 2*time.Minute), 12*time.Second, func() []redis.UniversalClient { return masters(0) },
			redlock.WithNodeTimeout(3*time.Second), redlock.WithReplicaAck(1, 1500*time.Millisecond))
	})
}
