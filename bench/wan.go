package main

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
	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/integration"
	"github.com/redlock-go/redlock/redlock"
)

// The WAN benchmark (make bench-wan): nodes placed in sites, and clients
// in those sites that reach a node of another site through a delay line,
// an in-process proxy that delivers every chunk d after it read it, both
// ways. Every figure is set beside its floor, the least any Redlock could
// do on those delays:
//
//   - a Lock or an Unlock needs a majority's replies: its floor is the
//     majority-th smallest round trip from the client's site;
//   - a hand-over from a holder in site X to a waiter in site Y (Unlock
//     called to the next Lock returning) needs the release to reach a node
//     k and k to tell the waiter, on a majority of nodes: its floor is the
//     majority-th smallest d(X,k) + d(k,Y).

// The sites' one-way delays: A-B 10 ms, A-C 30 ms, B-C 20 ms, none inside
// a site.
var (
	wanSites = []string{"A", "B", "C"}
	wanDelay = [3][3]time.Duration{
		{0, 10 * time.Millisecond, 30 * time.Millisecond},
		{10 * time.Millisecond, 0, 20 * time.Millisecond},
		{30 * time.Millisecond, 20 * time.Millisecond, 0},
	}
)

// A placement is where the nodes and the contenders are: the site of each.
type placement struct {
	name       string
	nodes      []int
	contenders []int
}

var placements = []placement{
	{"five nodes, A A B B C", []int{0, 0, 1, 1, 2}, []int{0, 0, 1, 1, 2}},
	{"three nodes, one per site", []int{0, 1, 2}, []int{0, 0, 1, 1, 2}},
	{"seven nodes, A A A B B C C", []int{0, 0, 0, 1, 1, 2, 2}, []int{0, 0, 1, 1, 2}},
}

// WAN run settings: the contended loop's hold and its Lock's bound, and
// the uncontended pairs per site. Each contended run lasts -duration
// (wanContended when not set).
const (
	wanHold      = 5 * time.Millisecond
	wanLockWait  = 10 * time.Second
	wanPairs     = 40
	wanContended = 10 * time.Second
)

// quorumOf returns the majority of n nodes.
func quorumOf(n int) int { return n/2 + 1 }

// kth returns the k-th smallest of ds (k from 1).
func kth(ds []time.Duration, k int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[k-1]
}

// lockFloor is the least time a Lock (or an Unlock) from site s can take
// on p: the majority-th smallest round trip.
func (p placement) lockFloor(s int) time.Duration {
	var rtts []time.Duration
	for _, k := range p.nodes {
		rtts = append(rtts, 2*wanDelay[s][k])
	}
	return kth(rtts, quorumOf(len(p.nodes)))
}

// transitFloor is the least time a hand-over from site x to site y can
// take on p (see the top of this file).
func (p placement) transitFloor(x, y int) time.Duration {
	var ds []time.Duration
	for _, k := range p.nodes {
		ds = append(ds, wanDelay[x][k]+wanDelay[k][y])
	}
	return kth(ds, quorumOf(len(p.nodes)))
}

// wanNet is a placement's nodes and the addresses each site reaches them
// at: the node itself in its own site, a delay line's otherwise.
type wanNet struct {
	cluster *integration.Cluster
	proxies []*toxiproxy.Proxy
	addrs   [3][]string
}

func startWAN(ctx context.Context, p placement) (*wanNet, error) {
	cluster, err := integration.Start(ctx, len(p.nodes))
	if err != nil {
		return nil, err
	}
	w := &wanNet{cluster: cluster}
	srv := newProxyServer()
	for s := range wanSites {
		for i, k := range p.nodes {
			d := wanDelay[s][k]
			if d == 0 {
				w.addrs[s] = append(w.addrs[s], cluster.Addr(i))
				continue
			}
			px := toxiproxy.NewProxy(srv, fmt.Sprintf("site%s-node%d", wanSites[s], i), "127.0.0.1:0", cluster.Addr(i))
			if err := px.Start(); err != nil {
				w.close()
				return nil, err
			}
			w.proxies = append(w.proxies, px)
			for _, stream := range []string{"upstream", "downstream"} {
				if _, err := px.Toxics.AddToxicJson(strings.NewReader(fmt.Sprintf(
					`{"name":"wan-%s","type":"latency","stream":"%s","attributes":{"latency":%d}}`,
					stream, stream, d.Milliseconds()))); err != nil {
					w.close()
					return nil, err
				}
			}
			w.addrs[s] = append(w.addrs[s], px.Listen)
		}
	}
	return w, nil
}

func (w *wanNet) close() {
	for _, px := range w.proxies {
		px.Stop()
	}
	_ = w.cluster.Close(context.Background())
}

// clients returns node clients as a process in site s has them, at
// go-redis' default options.
func (w *wanNet) clients(s int) []redis.UniversalClient {
	cs := make([]redis.UniversalClient, len(w.addrs[s]))
	for i, a := range w.addrs[s] {
		cs[i] = redis.NewClient(&redis.Options{Addr: a})
	}
	return cs
}

// alone measures one client of im in site s taking and releasing free
// locks, one pair after another: the Lock and Unlock durations, and the
// pairs that failed. The first pairs dial the connections (go-redis'
// HELLO and the command: three round trips, past the node timeout from a
// far site) and are not counted.
func (w *wanNet) alone(ctx context.Context, im implementation, s int) (locks, unlocks []time.Duration, failed int, err error) {
	cs := w.clients(s)
	defer closeAll(cs)
	lc, err := im.new(cs)
	if err != nil {
		return nil, nil, 0, err
	}
	defer func() { _ = lc.close(ctx) }()
	key := fmt.Sprintf("wan:alone:%s:%d:", wanSites[s], time.Now().UnixNano())
	for i := range wanPairs + 5 {
		m, err := lc.mutex(fmt.Sprint(key, i))
		if err != nil {
			return nil, nil, 0, err
		}
		start := time.Now()
		lerr := m.Lock(ctx)
		locked := time.Now()
		var uerr error
		if lerr == nil {
			uerr = m.Unlock(ctx)
		}
		switch {
		case i < 5:
		case lerr != nil || uerr != nil:
			failed++
		default:
			locks = append(locks, locked.Sub(start))
			unlocks = append(unlocks, time.Since(locked))
		}
	}
	return locks, unlocks, failed, nil
}

// wanHoldRec is one acquisition of the contended run.
type wanHoldRec struct {
	contender, site int
	called, locked  time.Time // Lock called, Lock returned
	unlocking       time.Time // Unlock called
}

// contendedRun is what one contended run of one implementation saw.
type contendedRun struct {
	holds    []wanHoldRec
	failed   int // Locks that gave up
	overlaps int
	took     time.Duration
}

// contended runs p's contenders, each a process of its own (its lock
// client and node clients) in its site, looping Lock, a wanHold hold,
// Unlock on one name for d.
func (w *wanNet) contended(ctx context.Context, im implementation, p placement, d time.Duration) (*contendedRun, error) {
	key := fmt.Sprintf("wan:contended:%d", time.Now().UnixNano())
	lcs := make([]lockClient, len(p.contenders))
	for c, s := range p.contenders {
		cs := w.clients(s)
		defer closeAll(cs)
		lc, err := im.new(cs)
		if err != nil {
			return nil, err
		}
		defer func() { _ = lc.close(ctx) }()
		lcs[c] = lc
		m, _ := lc.mutex(key + ":warm")
		if m.Lock(ctx) == nil {
			_ = m.Unlock(ctx)
		}
	}
	run := &contendedRun{}
	var mu sync.Mutex
	var inside atomic.Int32
	var errs []error
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	for c, lc := range lcs {
		wg.Go(func() {
			for time.Now().Before(end) {
				m, err := lc.mutex(key)
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				lctx, cancel := context.WithTimeout(ctx, wanLockWait)
				called := time.Now()
				err = m.Lock(lctx)
				cancel()
				locked := time.Now()
				if err != nil {
					mu.Lock()
					if gaveUp(err) {
						run.failed++
					} else {
						errs = append(errs, err)
					}
					mu.Unlock()
					continue
				}
				over := inside.Add(1) != 1
				time.Sleep(wanHold)
				inside.Add(-1)
				unlocking := time.Now()
				mu.Lock()
				if over {
					run.overlaps++
				}
				run.holds = append(run.holds, wanHoldRec{contender: c, site: p.contenders[c], called: called, locked: locked, unlocking: unlocking})
				mu.Unlock()
				_ = m.Unlock(ctx)
			}
		})
	}
	wg.Wait()
	run.took = time.Since(start)
	slices.SortFunc(run.holds, func(a, b wanHoldRec) int { return a.locked.Compare(b.locked) })
	return run, errors.Join(errs...)
}

// renewTTL is the renewal phase's TTL: short against the sites' round
// trips, so that an extension started late would not make it in time.
const renewTTL = 2 * time.Second

// renewHold is how long the renewal phase holds its lock from each site.
var renewHold = flag.Duration("wan.hold", time.Minute, "with -wan: how long each site's Do holds its lock with a 2 s TTL")

// renewal runs, from every site at once, a Do with a renewTTL TTL whose
// function holds the lock for renewHold, and returns per site how long it
// held before the lock was lost (renewHold when it was not) and the
// error Do returned.
func (w *wanNet) renewal(ctx context.Context) ([3]time.Duration, [3]error) {
	var held [3]time.Duration
	var errs [3]error
	var wg sync.WaitGroup
	for s := range wanSites {
		wg.Go(func() {
			cs := w.clients(s)
			defer closeAll(cs)
			rl, err := redlock.New(cs, redlock.WithTTL(renewTTL))
			if err != nil {
				errs[s] = err
				return
			}
			defer func() { _ = rl.Close(ctx) }()
			name := fmt.Sprintf("wan:renew:%s:%d", wanSites[s], time.Now().UnixNano())
			errs[s] = rl.Do(ctx, name, func(ctx context.Context) error {
				start := time.Now()
				select {
				case <-time.After(*renewHold):
				case <-ctx.Done():
				}
				held[s] = time.Since(start)
				return nil
			})
		})
	}
	wg.Wait()
	return held, errs
}

// gaveUp reports whether a Lock's error says it gave up waiting: its
// deadline passed, or (redsync) it ran out of tries, finding the lock taken.
func gaveUp(err error) bool {
	var taken *redsync.ErrTaken
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, redsync.ErrFailed) || errors.As(err, &taken)
}

// runWAN is make bench-wan: every placement, both implementations side
// by side, uncontended from each site and contended from all.
func runWAN() error {
	ctx := context.Background()
	var report strings.Builder
	report.WriteString(wanPreamble())
	for _, p := range placements {
		fmt.Fprintf(os.Stderr, "placement: %s\n", p.name)
		w, err := startWAN(ctx, p)
		if err != nil {
			return err
		}
		res, err := measurePlacement(ctx, w, p)
		w.close()
		if err != nil {
			return err
		}
		report.WriteString(res.table(p))
	}
	fmt.Print(report.String())
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(*outDir+"/WAN.md", []byte(report.String()), 0o644)
}

// measurePlacement runs both implementations on w: alone from every
// site, then contended, in *rounds interleaved rounds.
func measurePlacement(ctx context.Context, w *wanNet, p placement) (*wanResults, error) {
	res := &wanResults{alone: map[string][3][2][]time.Duration{}, aloneFailed: map[string]int{}, runs: map[string][]*contendedRun{}}
	for _, im := range implementations {
		var a [3][2][]time.Duration
		for s := range wanSites {
			locks, unlocks, failed, err := w.alone(ctx, im, s)
			if err != nil {
				return nil, err
			}
			a[s] = [2][]time.Duration{locks, unlocks}
			res.aloneFailed[im.name] += failed
		}
		res.alone[im.name] = a
	}
	if *renewHold > 0 {
		fmt.Fprintf(os.Stderr, "  renewal: a Do from every site for %v\n", *renewHold)
		res.renewHeld, res.renewErrs = w.renewal(ctx)
	}
	for round := 1; round <= *rounds; round++ {
		for _, im := range implementations {
			fmt.Fprintf(os.Stderr, "  contended, round %d: %s\n", round, im.name)
			run, err := w.contended(ctx, im, p, *duration)
			if err != nil {
				return nil, err
			}
			if run.overlaps > 0 {
				return nil, fmt.Errorf("%s on %s: %d overlapping holds", im.name, p.name, run.overlaps)
			}
			res.runs[im.name] = append(res.runs[im.name], run)
		}
	}
	return res, nil
}
