package main

// The availability benchmark (make bench-availability): redlock-go and
// redsync side by side on five real Redis nodes, interleaved, through five
// phases of faults and at two go-redis option sets, checking mutual
// exclusion all along. The report (table, targets, plot) is in
// availability_report.go.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/integration"
	"github.com/redlock-go/redlock/redlock"
)

// failFastOptions make a dead node's error surface at once, without
// go-redis' command and dial retries (Addr is set per node). They are run
// for comparison: the configuration docs/API.md recommends is go-redis'
// defaults, the "default" set.
func failFastOptions() *redis.Options {
	return &redis.Options{MaxRetries: -1, DialerRetries: 1}
}

// An optionSet is the go-redis options every client of a run gets.
type optionSet struct {
	name string
	opts func() *redis.Options
}

var optionSets = []optionSet{
	{"default", func() *redis.Options { return &redis.Options{} }},
	{"fail-fast", failFastOptions},
}

const (
	contenders   = 8                      // clients contending for one key
	uncontendedG = 16                     // goroutines on distinct keys
	lockWait     = 2 * time.Second        // context of each Lock
	holdFor      = 2 * time.Millisecond   // critical section
	sampleEvery  = 5 * time.Millisecond   // goroutine sampling
	flapEvery    = 500 * time.Millisecond // flapping: down, then up, this long each
	majorityWait = time.Second            // paused majority: contenders fail this long
	recoverLimit = 15 * time.Second       // paused majority: give up after this
	closeLimit   = 15 * time.Second       // Redlock.Close
	settleFor    = 200 * time.Millisecond // goroutine baseline: no drop this long
	settleLimit  = 3 * time.Second        // goroutine baseline: wait at most
)

// The nodes the minority faults hit, and the majority the paused-majority
// run freezes.
var (
	minority = []int{1, 3}
	majority = []int{1, 3, 4}
	flapNode = 1
)

// lockClient is one process's lock client over its own five go-redis
// clients: a Redlock, or a redsync instance.
type lockClient interface {
	mutex(key string) (mutex, error)
	close(ctx context.Context) error
}

// mutex is the part of a lock both implementations offer. TryLock is a
// single attempt; Lock retries with the implementation's defaults.
type mutex interface {
	Lock(ctx context.Context) error
	TryLock(ctx context.Context) error
	Unlock(ctx context.Context) error
	Until() time.Time
}

type implementation struct {
	name string
	new  func([]redis.UniversalClient) (lockClient, error)
}

var implementations = []implementation{
	{"redlock-go", newRedlockClient},
	{"redsync", newRedsyncClient},
}

type redlockClient struct{ rl *redlock.Redlock }

func newRedlockClient(clients []redis.UniversalClient) (lockClient, error) {
	rl, err := redlock.New(clients, redlock.WithTTL(ttl))
	return redlockClient{rl}, err
}

func (c redlockClient) mutex(key string) (mutex, error) { return c.rl.NewMutex(key) }

func (c redlockClient) close(ctx context.Context) error { return c.rl.Close(ctx) }

type redsyncClient struct{ rs *redsync.Redsync }

func newRedsyncClient(clients []redis.UniversalClient) (lockClient, error) {
	pools := make([]redsyncredis.Pool, len(clients))
	for i, c := range clients {
		pools[i] = goredis.NewPool(c)
	}
	return redsyncClient{redsync.New(pools...)}, nil
}

func (c redsyncClient) mutex(key string) (mutex, error) {
	return redsyncMutex{c.rs.NewMutex(key, redsync.WithExpiry(ttl))}, nil
}

func (redsyncClient) close(context.Context) error { return nil }

// redsyncMutex adapts redsync's Mutex: its default retry policy for Lock
// (32 tries, 50–250 ms apart), one try for TryLock.
type redsyncMutex struct{ m *redsync.Mutex }

func (m redsyncMutex) Lock(ctx context.Context) error    { return m.m.LockContext(ctx) }
func (m redsyncMutex) TryLock(ctx context.Context) error { return m.m.TryLockContext(ctx) }
func (m redsyncMutex) Until() time.Time                  { return m.m.Until() }

func (m redsyncMutex) Unlock(ctx context.Context) error {
	ok, err := m.m.UnlockContext(ctx)
	if !ok && err == nil {
		err = errors.New("redsync: unlock: no quorum released")
	}
	return err
}

// A phase is a fault applied to the nodes for one run and healed after it.
type phase struct {
	name string
	// viaProxy: the clients reach the minority nodes through the proxies.
	viaProxy bool
	// apply injects the fault; the run ends at deadline. heal undoes it.
	apply func(ctx context.Context, a *availability, deadline time.Time) (heal func(context.Context) error, err error)
}

var phases = []phase{
	{name: "fault-free", apply: func(context.Context, *availability, time.Time) (func(context.Context) error, error) {
		return func(context.Context) error { return nil }, nil
	}},
	{name: "silent", apply: func(ctx context.Context, a *availability, _ time.Time) (func(context.Context) error, error) {
		heal := func(ctx context.Context) error { return a.each(ctx, minority, a.cluster.Unpause) }
		return heal, a.each(ctx, minority, a.cluster.Pause)
	}},
	{name: "far", viaProxy: true, apply: func(ctx context.Context, a *availability, _ time.Time) (func(context.Context) error, error) {
		heal := func(ctx context.Context) error {
			for _, i := range minority {
				a.proxies[i].Toxics.ResetToxics(ctx)
			}
			return nil
		}
		for _, i := range minority {
			for _, stream := range []string{"upstream", "downstream"} {
				if _, err := a.proxies[i].Toxics.AddToxicJson(strings.NewReader(fmt.Sprintf(
					`{"name":"far-%s","type":"latency","stream":"%s","attributes":{"latency":25}}`, stream, stream))); err != nil {
					return heal, err
				}
			}
		}
		return heal, nil
	}},
	{name: "killed", apply: func(ctx context.Context, a *availability, _ time.Time) (func(context.Context) error, error) {
		heal := func(ctx context.Context) error { return a.each(ctx, minority, a.cluster.Restart) }
		return heal, a.each(ctx, minority, a.cluster.Kill)
	}},
	{name: "flapping", apply: func(ctx context.Context, a *availability, deadline time.Time) (func(context.Context) error, error) {
		stop := make(chan struct{})
		done := make(chan error, 1)
		go func() { done <- a.flap(ctx, deadline, stop) }()
		return func(context.Context) error {
			close(stop)
			return <-done
		}, nil
	}},
}

// flap kills flapNode and restarts it, each state lasting flapEvery, until
// deadline or stop; it leaves the node running.
func (a *availability) flap(ctx context.Context, deadline time.Time, stop <-chan struct{}) error {
	wait := func() bool {
		t := time.NewTimer(min(flapEvery, max(0, time.Until(deadline))))
		defer t.Stop()
		select {
		case <-t.C:
			return time.Now().Before(deadline)
		case <-stop:
			return false
		}
	}
	limit := int(time.Until(deadline)/flapEvery) + 1 // a bound besides the deadline
	for range limit {
		if err := a.cluster.Kill(ctx, flapNode); err != nil {
			return err
		}
		a.flaps.Add(1)
		more := wait()
		if err := a.cluster.Restart(ctx, flapNode); err != nil {
			return err
		}
		if !more || !wait() {
			return nil
		}
	}
	return nil
}

// availability is the state of one benchmark run.
type availability struct {
	cluster *integration.Cluster
	proxies map[int]*toxiproxy.Proxy // the minority nodes' proxies
	res     *availResults
	flaps   atomic.Int64
}

// each runs f on the given nodes in parallel.
func (a *availability) each(ctx context.Context, nodes []int, f func(context.Context, int) error) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for k, i := range nodes {
		wg.Go(func() { errs[k] = f(ctx, i) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// clients returns one new go-redis client per node with opts, as a separate
// process would have; through the proxies for the minority when viaProxy.
func (a *availability) clients(opts func() *redis.Options, viaProxy bool) []redis.UniversalClient {
	out := make([]redis.UniversalClient, a.cluster.Len())
	for i := range out {
		o := opts()
		o.Addr = a.cluster.Addr(i)
		if p, ok := a.proxies[i]; ok && viaProxy {
			o.Addr = p.Listen
		}
		out[i] = redis.NewClient(o)
	}
	return out
}

// process is one lock client with its own go-redis clients.
type process struct {
	lc      lockClient
	clients []redis.UniversalClient
}

func (a *availability) processes(n int, im implementation, opts func() *redis.Options, viaProxy bool) ([]process, error) {
	ps := make([]process, 0, n)
	for range n {
		cs := a.clients(opts, viaProxy)
		lc, err := im.new(cs)
		if err != nil {
			closeAll(cs)
			a.closeProcesses(ps)
			return nil, err
		}
		ps = append(ps, process{lc, cs})
	}
	return ps, nil
}

// closeProcesses closes each lock client, then its go-redis clients.
func (a *availability) closeProcesses(ps []process) {
	for _, p := range ps {
		ctx, cancel := context.WithTimeout(context.Background(), closeLimit)
		if err := p.lc.close(ctx); err != nil {
			a.res.note("close did not return within %v: %v", closeLimit, err)
		}
		cancel()
		closeAll(p.clients)
	}
}

// warmUp makes one lock+unlock pair per process, so that each has a
// connection to every node before the fault.
func warmUp(ps []process, key string) {
	for _, p := range ps { // one at a time: they share the key
		m, err := p.lc.mutex(key)
		if err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), lockWait)
		if m.TryLock(ctx) == nil {
			_ = m.Unlock(ctx)
		}
		cancel()
	}
}

// Flags that narrow a run while working on one figure; a full run (the
// documented one) uses none.
var (
	onlyPhases = flag.String("phases", "", "with -availability: comma-separated phases to run besides fault-free (and \"majority\"); all when empty")
	onlySets   = flag.String("sets", "", "with -availability: comma-separated option sets; all when empty")
	onlyImpls  = flag.String("impls", "", "with -availability: comma-separated implementations; all when empty")
)

// selected reports whether name is in the comma-separated list, or the list
// is empty.
func selected(list, name string) bool {
	return list == "" || slices.Contains(strings.Split(list, ","), name)
}

func runAvailability() error {
	ctx := context.Background()
	cluster, err := integration.Start(ctx, 5)
	if err != nil {
		return err
	}
	defer func() { _ = cluster.Close(context.Background()) }()

	a := &availability{cluster: cluster, proxies: map[int]*toxiproxy.Proxy{}, res: newAvailResults()}
	srv := newProxyServer()
	for _, i := range minority {
		p := toxiproxy.NewProxy(srv, fmt.Sprint("node", i), "127.0.0.1:0", cluster.Addr(i))
		if err := p.Start(); err != nil {
			return err
		}
		defer p.Stop()
		a.proxies[i] = p
	}

	started := time.Now()
	for round := 1; round <= *rounds; round++ {
		for _, set := range optionSets {
			if !selected(*onlySets, set.name) {
				continue
			}
			for _, im := range implementations {
				if !selected(*onlyImpls, im.name) {
					continue
				}
				if err := a.runImplementation(ctx, round, set, im); err != nil {
					return err
				}
			}
		}
	}
	a.res.note("%d kill/restart cycles of node %d in the flapping runs; whole run %v",
		a.flaps.Load(), flapNode, time.Since(started).Round(time.Second))
	return a.res.report(*outDir)
}

// runImplementation runs every phase, then the paused majority, for one
// implementation at one option set in one round.
func (a *availability) runImplementation(ctx context.Context, round int, set optionSet, im implementation) error {
	key := fmt.Sprintf("avail:%d:%s:%s:", round, set.name, im.name)
	var free struct{ acq, unc, gc, gu float64 } // fault-free figures of this round
	for _, ph := range phases {
		if !selected(*onlyPhases, ph.name) && ph.name != "fault-free" {
			continue
		}
		fmt.Fprintf(os.Stderr, "round %d/%d  %-11s  %-10s  %-10s ", round, *rounds, set.name, im.name, ph.name)
		c, err := a.contended(ctx, im, set, ph, key+ph.name+":contended")
		if err != nil {
			return fmt.Errorf("%s %s %s contended: %w", set.name, im.name, ph.name, err)
		}
		u, err := a.uncontended(ctx, im, set, ph, key+ph.name+":uncontended:")
		if err != nil {
			return fmt.Errorf("%s %s %s uncontended: %w", set.name, im.name, ph.name, err)
		}
		acq := float64(c.acquisitions) / c.elapsed.Seconds()
		if ph.name == "fault-free" {
			free.acq, free.unc, free.gc, free.gu = acq, u.pairs, float64(c.peak), float64(u.peak)
			a.res.faultFree(round, set.name, im.name, acq)
		}
		add := func(metric string, v float64) { a.res.add(set.name, im.name, ph.name, metric, v) }
		add("acq", acq)
		add("acq×", ratio(acq, free.acq))
		add("p50", quantileMs(c.waits, 0.5))
		add("p99", quantileMs(c.waits, 0.99))
		add("lockErr", float64(c.lockErrors))
		add("share", c.maxShare())
		add("streak", float64(c.longestStreak()))
		add("unc", u.pairs)
		add("unc×", ratio(u.pairs, free.unc))
		add("gc", float64(c.peak))
		add("gc×", ratio(float64(c.peak), free.gc))
		add("gu", float64(u.peak))
		add("gu×", ratio(float64(u.peak), free.gu))
		a.res.safety(round, set.name, im.name, ph.name, c.safety)
		if c.unlockErrors > 0 {
			a.res.note("round %d, %s, %s, %s: %d Unlock errors in the contended run", round, set.name, im.name, ph.name, c.unlockErrors)
		}
		fmt.Fprintf(os.Stderr, "%6.0f acq/s  %6.0f pairs/s  overlaps %d  lost %d\n",
			acq, u.pairs, c.overlaps, c.lost)
	}
	if !selected(*onlyPhases, "majority") {
		return nil
	}
	fmt.Fprintf(os.Stderr, "round %d/%d  %-11s  %-10s  paused majority ", round, *rounds, set.name, im.name)
	rec, s, err := a.pausedMajority(ctx, im, set, key+"majority")
	if err != nil {
		return fmt.Errorf("%s %s paused majority: %w", set.name, im.name, err)
	}
	a.res.add(set.name, im.name, "", "recovery", rec)
	a.res.safety(round, set.name, im.name, "paused majority", s)
	fmt.Fprintf(os.Stderr, "first acquisition %s after the resume\n", fmtRecovery(rec))
	return nil
}
