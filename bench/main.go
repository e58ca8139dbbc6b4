// Command bench measures redlock-go side by side with go-redsync/redsync, a
// raw five-node floor and bsm/redislock on one node, against the same five
// real Redis nodes (the integration harness), interleaved round by round.
// It prints one table and writes it, with a plot, to docs/.
//
//	make bench
//
// With -availability it runs the availability benchmark instead
// (availability.go): redlock-go and redsync through faults, checking mutual
// exclusion; it writes docs/AVAILABILITY.md and docs/availability.png.
//
//	make bench-availability
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/collectors"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	tclog "github.com/testcontainers/testcontainers-go/log"

	"github.com/redlock-go/redlock/integration"
)

var (
	rounds           = flag.Int("rounds", 3, "interleaved rounds; the table shows medians")
	duration         = flag.Duration("duration", 2*time.Second, "length of each throughput run (with -availability: of each run of each phase, 3s when not set)")
	pairs            = flag.Int("pairs", 2000, "lock+unlock pairs of the latency run")
	slowN            = flag.Int("slow", 100, "locks of each slow-node run")
	outDir           = flag.String("out", "docs", "where bench.md and bench.png (AVAILABILITY.md and availability.png) go")
	availabilityFlag = flag.Bool("availability", false, "run the availability benchmark (faults, safety checks) instead")
	wanFlag          = flag.Bool("wan", false, "run the WAN benchmark (sites, delay lines, hand-overs between sites) instead; writes WAN.md")
)

// availabilityDuration is -duration's default with -availability.
const availabilityDuration = 3 * time.Second

// defaultOptions runs the speed benchmark at go-redis' default client
// options, as a new user first runs it.
var defaultOptions = flag.Bool("defaults", false, "speed benchmark: go-redis default client options instead of the tuned ones")

// clientOptions are the same for every implementation: go-redis' defaults
// (the configuration docs/API.md recommends) with -defaults, else a tuned
// set run for comparison.
func clientOptions() *redis.Options {
	if *defaultOptions {
		return &redis.Options{}
	}
	return &redis.Options{PoolSize: 128, MaxRetries: -1, DialerRetries: 1, ContextTimeoutEnabled: true}
}

func main() {
	flag.Parse()
	redis.SetLogger(quiet{})
	tclog.SetDefault(tclog.NewNoopLogger())
	bench := run
	if *wanFlag {
		bench = runWAN
		if !flagSet("rounds") {
			*rounds = 2
		}
		if !flagSet("duration") {
			*duration = wanContended
		}
	}
	if *availabilityFlag {
		bench = runAvailability
		if !flagSet("duration") {
			*duration = availabilityDuration
		}
	}
	if err := bench(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

type factory func([]redis.UniversalClient) impl

var factories = []factory{newRedlockImpl, newRedsyncImpl, newRueidisImpl, newValkeyImpl, newRedsyncRueidisImpl, newRawImpl, newBsmImpl, newMultiImpl, newReadImpl, newWriteImpl, newSemaphoreImpl, newNoScriptsImpl}

// measureImpl measures the implementation that f makes, in round, on the
// cluster's nodes and, when it uses five, through the proxies with two of
// them slow.
func measureImpl(ctx context.Context, cluster *integration.Cluster, proxies []*toxiproxy.Proxy, res *results, f factory, round int) error {
	clients := cluster.Clients(clientOptions())
	im := f(clients)
	key := fmt.Sprintf("bench:%d:%s:", round, im.name)
	warm(ctx, im, key+"warm")
	p50, p99, allocs := latency(ctx, im, key+"lat:")
	res.add(im.name, "p50", p50)
	res.add(im.name, "p99", p99)
	res.add(im.name, "allocs", allocs)
	for _, g := range []int{1, 8, 64} {
		res.add(im.name, fmt.Sprint("pairs", g), throughput(ctx, im, key+fmt.Sprint("tp", g, ":"), g))
	}
	att, acq := contended(ctx, im, key+"contended", 8)
	res.add(im.name, "attempts", att)
	res.add(im.name, "acquisitions", acq)
	im.close()
	closeAll(clients)
	if im.nodes != 5 {
		return nil
	}
	return measureSlow(ctx, proxies, res, f, key)
}

// measureSlow measures the lock latency of the implementation that f
// makes through the proxies, all fast, then with nodes 1 and 3 50 ms slow.
func measureSlow(ctx context.Context, proxies []*toxiproxy.Proxy, res *results, f factory, key string) error {
	var proxied []redis.UniversalClient
	for i := range proxies {
		o := clientOptions()
		o.Addr = proxies[i].Listen
		proxied = append(proxied, redis.NewClient(o))
	}
	defer closeAll(proxied)
	im := f(proxied)
	defer im.close()
	warm(ctx, im, key+"pwarm")
	res.add(im.name, "fast", lockLatency(ctx, im, key+"fast:"))
	for _, i := range []int{1, 3} {
		if _, err := proxies[i].Toxics.AddToxicJson(strings.NewReader(
			`{"name":"slow","type":"latency","stream":"downstream","attributes":{"latency":50}}`)); err != nil {
			return err
		}
	}
	res.add(im.name, "slow", lockLatency(ctx, im, key+"slow:"))
	for _, i := range []int{1, 3} {
		if err := proxies[i].Toxics.RemoveToxic(ctx, "slow"); err != nil {
			return err
		}
	}
	return nil
}

func run() error {
	ctx := context.Background()
	cluster, err := integration.Start(ctx, 5)
	if err != nil {
		return err
	}
	defer func() { _ = cluster.Close(context.Background()) }()

	// Five in-process proxies, one per node, for the slow-node runs.
	srv := newProxyServer()
	proxies := make([]*toxiproxy.Proxy, 5)
	for i := range proxies {
		proxies[i] = toxiproxy.NewProxy(srv, fmt.Sprint("node", i), "127.0.0.1:0", cluster.Addr(i))
		if err := proxies[i].Start(); err != nil {
			return err
		}
		defer proxies[i].Stop()
	}

	results := newResults()
	for round := 1; round <= *rounds; round++ {
		fmt.Fprintf(os.Stderr, "round %d of %d\n", round, *rounds)
		for _, f := range factories {
			if err := measureImpl(ctx, cluster, proxies, results, f, round); err != nil {
				return err
			}
		}
	}
	options := "the tuned client options (`PoolSize: 128, MaxRetries: -1, DialerRetries: 1, ContextTimeoutEnabled: true`), " +
		"run for comparison: docs/API.md recommends go-redis' defaults (`make bench`'s -defaults run, docs/bench-defaults.md)"
	if *defaultOptions {
		options = "go-redis' default options (`redis.Options{Addr: ...}`), the configuration docs/API.md recommends"
	}
	table := fmt.Sprintf("Clients at %s; medians of %d interleaved rounds, ratios to redsync in the same run.\n\n", options, *rounds) +
		results.table()
	fmt.Print(table)
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		return err
	}
	base := *outDir + "/bench"
	if *defaultOptions {
		base += "-defaults"
	}
	if err := os.WriteFile(base+".md", []byte(table), 0o644); err != nil {
		return err
	}
	return results.plot(base + ".png")
}

// newProxyServer is an in-process toxiproxy server, silent, for the
// proxies in front of the nodes.
func newProxyServer() *toxiproxy.ApiServer {
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	srv.Metrics.ProxyMetrics = collectors.NewProxyMetricCollectors()
	return srv
}

func closeAll(cs []redis.UniversalClient) {
	for _, c := range cs {
		_ = c.Close()
	}
}

func warm(ctx context.Context, im impl, key string) {
	for i := range 200 {
		if rel, err := im.lock(ctx, fmt.Sprint(key, i)); err == nil {
			_ = rel(ctx)
		}
	}
}

// latency runs lock+unlock pairs one after another on distinct keys: p50
// and p99 in microseconds, and heap allocations per pair in this process.
func latency(ctx context.Context, im impl, key string) (p50, p99, allocs float64) {
	ds := make([]time.Duration, 0, *pairs)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range *pairs {
		start := time.Now()
		rel, err := im.lock(ctx, fmt.Sprint(key, i))
		if err != nil {
			continue
		}
		_ = rel(ctx)
		ds = append(ds, time.Since(start))
	}
	runtime.ReadMemStats(&after)
	slices.Sort(ds)
	us := func(q float64) float64 { return float64(ds[int(q*float64(len(ds)-1))]) / 1e3 }
	return us(0.5), us(0.99), float64(after.Mallocs-before.Mallocs) / float64(*pairs)
}

// throughput runs g goroutines doing lock+unlock pairs on distinct keys for
// the run's duration: pairs per second.
func throughput(ctx context.Context, im impl, key string, g int) float64 {
	var n atomic.Int64
	var wg sync.WaitGroup
	end := time.Now().Add(*duration)
	for w := range g {
		wg.Go(func() {
			for i := 0; time.Now().Before(end); i++ {
				rel, err := im.lock(ctx, fmt.Sprint(key, w, ":", i))
				if err != nil {
					continue
				}
				_ = rel(ctx)
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return float64(n.Load()) / duration.Seconds()
}

// contended runs g goroutines making single attempts on one key, releasing
// at once when they get it: attempts and acquisitions per second.
func contended(ctx context.Context, im impl, key string, g int) (attempts, acquisitions float64) {
	var att, acq atomic.Int64
	var wg sync.WaitGroup
	end := time.Now().Add(*duration)
	for range g {
		wg.Go(func() {
			for time.Now().Before(end) {
				att.Add(1)
				rel, err := im.lock(ctx, key)
				if errors.Is(err, errBusy) || err != nil {
					continue
				}
				acq.Add(1)
				_ = rel(ctx)
			}
		})
	}
	wg.Wait()
	s := duration.Seconds()
	return float64(att.Load()) / s, float64(acq.Load()) / s
}

// lockLatency is the p50 time, in milliseconds, of taking a free lock.
func lockLatency(ctx context.Context, im impl, key string) float64 {
	ds := make([]time.Duration, 0, *slowN)
	for i := range *slowN {
		start := time.Now()
		rel, err := im.lock(ctx, fmt.Sprint(key, i))
		d := time.Since(start)
		if err != nil {
			continue
		}
		ds = append(ds, d)
		_ = rel(ctx)
	}
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return float64(ds[len(ds)/2]) / 1e6
}
