// Command redlock-demo shows the lock at work on five real Redis nodes, in
// five acts, each announced before it runs: the audit of the nodes (what
// `redlock doctor` prints); fencing refusing a holder that
// stalled past its validity; a reader-writer lock; a counting semaphore;
// then six workers, each with its own clients as separate processes would
// have, competing for one lock to update a shared counter with a
// deliberately non-atomic read-sleep-write. Midway two nodes are killed
// (the lock keeps working on the remaining majority), then a third (no
// majority is left and every attempt fails, naming the dead nodes). At the
// end it prints the acquisitions, the attempts that found the lock busy or
// no quorum, lock latency percentiles, and checks that no update was lost
// and no two holders overlapped; then a few of the OpenTelemetry metrics
// that redlockotel recorded meanwhile.
//
// Nodes are numbered from 0, in the order given to redlock.New, as the
// library's errors, Health and Inspect number them.
//
// Run it with `make demo`, which prepares Docker and the Redis image.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	tclog "github.com/testcontainers/testcontainers-go/log"

	"github.com/redlock-go/redlock/redlock"
	"github.com/redlock-go/redlock/redlock/report"
)

func main() {
	workers := flag.Int("workers", 6, "competing workers, each with its own clients")
	phase := flag.Duration("phase", 2*time.Second, "length of each phase")
	flag.Parse()
	// The demo prints its own account; keep the libraries' logs (go-redis
	// reports every refused dial to a killed node) out of it.
	redis.SetLogger(quiet{})
	tclog.SetDefault(tclog.NewNoopLogger())
	if err := run(*workers, *phase); err != nil {
		fmt.Fprintln(os.Stderr, "redlock-demo:", err)
		os.Exit(1)
	}
}

// stats is what the workers report, per phase.
type stats struct {
	mu        sync.Mutex
	acquired  int
	busy      int // attempts that found the lock held (or split) on a quorum that answered
	noQuorum  int // attempts with too few nodes answering for any quorum
	latencies []time.Duration
	failures  map[string]int // by cause, for the summary
}

func (s *stats) ok(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.acquired++
	s.latencies = append(s.latencies, d)
}

func (s *stats) fail(f failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch f.kind {
	case busy:
		s.busy++
	case noQuorum:
		s.noQuorum++
	}
	s.failures[f.String()]++
}

type window struct{ start, end time.Time }

// phases are the demo's phases, in order.
var phases = []string{"all 5 nodes up", "nodes 1 and 3 killed (3 of 5 left)", "node 4 killed too (2 of 5 left: no majority)"}

// demo is one run: the nodes, the telemetry, and what the workers record.
type demo struct {
	cluster  *nodes
	tel      *telemetry
	perPhase []*stats
	current  atomic.Int32
	phaseMu  sync.RWMutex // attempts read-lock it; phase changes lock it

	counter  int64 // guarded by the distributed lock only
	windowMu sync.Mutex
	windows  []window
	wg       sync.WaitGroup
	stop     chan struct{}
	cleanup  []func()
}

func run(workers int, phaseLen time.Duration) error {
	ctx := context.Background()
	fmt.Println("starting 5 Redis nodes in containers (image " + image() + "), numbered from 0")
	cluster, err := startNodes(ctx, 5)
	if err != nil {
		return err
	}
	defer func() {
		if err := cluster.close(); err != nil {
			fmt.Fprintln(os.Stderr, "redlock-demo: stopping nodes:", err)
		}
	}()
	for i := range cluster.Len() {
		fmt.Printf("  node %d at %s\n", i, cluster.Addr(i))
	}
	if err := auditAct(ctx, cluster); err != nil {
		return err
	}
	if err := fencingAct(ctx, cluster); err != nil {
		return err
	}
	if err := primitivesAct(ctx, cluster); err != nil {
		return err
	}
	tel, err := newTelemetry()
	if err != nil {
		return err
	}
	defer tel.close()
	d := &demo{cluster: cluster, tel: tel, perPhase: make([]*stats, len(phases)), stop: make(chan struct{})}
	for i := range d.perPhase {
		d.perPhase[i] = &stats{failures: map[string]int{}}
	}
	defer d.close()
	fmt.Printf(`
%d workers, each with its own Redlock and clients (as %d processes would
have), contend for the lock demo:counter. Each makes one attempt at a time
(TryLock, no waiting) so that every outcome is counted: "busy" when another
worker held the lock, which with %d workers is most attempts and no fault;
"no quorum" when too few nodes answered for any majority. The holder adds 1
to a counter with a read, a 3 ms sleep and a write: a lost update would show
two holders at once. Two nodes are killed after phase 1, a third after phase 2.
`, workers, workers, workers)
	for w := range workers {
		if err := d.startWorker(ctx, w == 0); err != nil {
			return err
		}
	}
	d.runPhases(ctx, phaseLen)
	close(d.stop)
	d.wg.Wait()
	return d.summary()
}

// close runs the clean-ups the workers registered.
func (d *demo) close() {
	for _, f := range d.cleanup {
		f()
	}
}

// startWorker starts one worker with its own Redlock, as a separate
// process would have; the first one also reports the nodes' health.
func (d *demo) startWorker(ctx context.Context, first bool) error {
	// go-redis' default options: the configuration docs/API.md recommends
	// (the library bounds each node call itself).
	clients := d.cluster.Clients(&redis.Options{})
	rl, err := redlock.New(clients, redlock.WithTTL(2*time.Second), redlock.WithObserver(d.tel.obs))
	if err != nil {
		return err
	}
	if first {
		// The nodes' health as the first worker sees it: every worker
		// sees the same nodes.
		reg, err := d.tel.obs.ObserveHealth(rl)
		if err != nil {
			return err
		}
		d.cleanup = append(d.cleanup, func() { _ = reg.Unregister() })
	}
	mu, err := rl.NewMutex("demo:counter")
	if err != nil {
		return err
	}
	d.wg.Go(func() {
		defer func() {
			closeCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = rl.Close(closeCtx)
			for _, c := range clients {
				_ = c.Close()
			}
		}()
		for {
			select {
			case <-d.stop:
				return
			default:
			}
			d.attempt(ctx, mu)
		}
	})
	return nil
}

// attempt makes one attempt at a time (TryLock), so that every failed
// attempt is counted with its cause; Lock does the same loop with a
// randomised back-off. An attempt never straddles a phase change: the
// kills wait for attempts in flight. Holding, it increments the counter
// with a read, a sleep and a write: a lost update shows two holders.
func (d *demo) attempt(ctx context.Context, mu *redlock.Mutex) {
	d.phaseMu.RLock()
	st := d.perPhase[d.current.Load()]
	start := time.Now()
	err := mu.TryLock(ctx)
	d.phaseMu.RUnlock()
	if err != nil {
		st.fail(classify(err))
		time.Sleep(time.Duration(2+rand.IntN(20)) * time.Millisecond)
		return
	}
	st.ok(time.Since(start))
	held := time.Now()
	v := d.counter
	time.Sleep(3 * time.Millisecond)
	d.counter = v + 1
	end := time.Now()
	if u := mu.Until(); u.Before(end) {
		end = u
	}
	d.windowMu.Lock()
	d.windows = append(d.windows, window{held, end})
	d.windowMu.Unlock()
	if err := mu.Unlock(ctx); err != nil {
		f := classify(err)
		f.kind, f.what = unlockFailed, "unlock: "+f.what
		st.fail(f)
	}
}

// runPhases kills nodes phase by phase, reporting each second.
func (d *demo) runPhases(ctx context.Context, phaseLen time.Duration) {
	for p, name := range phases {
		d.phaseMu.Lock()
		switch p {
		case 1:
			fmt.Println("killing nodes 1 and 3")
			must(d.cluster.Kill(ctx, 1))
			must(d.cluster.Kill(ctx, 3))
		case 2:
			fmt.Println("killing node 4")
			must(d.cluster.Kill(ctx, 4))
		}
		d.current.Store(int32(p))
		d.phaseMu.Unlock()
		fmt.Printf("phase %d: %s\n", p+1, name)
		deadline := time.Now().Add(phaseLen)
		for time.Now().Before(deadline) {
			time.Sleep(time.Second)
			d.report(p)
		}
	}
}

// report prints phase p's figures so far.
func (d *demo) report(p int) {
	st := d.perPhase[p]
	st.mu.Lock()
	defer st.mu.Unlock()
	fmt.Printf("  acquired %d, busy %d, no quorum %d; lock latency %s\n", st.acquired, st.busy, st.noQuorum, percentiles(st.latencies))
}

// summary prints every phase's figures, the checks and the telemetry, and
// returns an error when a check failed.
func (d *demo) summary() error {
	fmt.Println()
	fmt.Println("summary")
	acquisitions := 0
	for p, name := range phases {
		acquisitions += d.perPhase[p].acquired
		printPhase(p, name, d.perPhase[p])
	}
	overlapping := countOverlaps(d.windows)
	fmt.Printf("  counter %d after %d acquisitions: ", d.counter, acquisitions)
	if d.counter == int64(acquisitions) {
		fmt.Println("no update lost")
	} else {
		fmt.Printf("%d updates LOST\n", int64(acquisitions)-d.counter)
	}
	fmt.Printf("  overlapping holders: %d\n", overlapping)
	addrs := map[string]string{} // node address → "node i"
	for i := range d.cluster.Len() {
		addrs[d.cluster.Addr(i)] = fmt.Sprintf("node %d", i)
	}
	if err := d.tel.print(addrs); err != nil {
		return err
	}
	switch {
	case d.counter != int64(acquisitions) || overlapping != 0:
		return errors.New("mutual exclusion violated")
	case d.perPhase[1].acquired == 0:
		return errors.New("no acquisition with a minority down")
	case d.perPhase[2].acquired != 0:
		return errors.New("acquired without a majority of nodes")
	}
	return nil
}

// printPhase prints one phase's figures and failures by cause.
func printPhase(p int, name string, st *stats) {
	fmt.Printf("  phase %d (%s)\n", p+1, name)
	fmt.Printf("    acquisitions: %d\n", st.acquired)
	fmt.Printf("    lock latency: %s\n", percentiles(st.latencies))
	fmt.Printf("    not acquired: %d\n", total(st.failures))
	causes := make([]string, 0, len(st.failures))
	for c := range st.failures {
		causes = append(causes, c)
	}
	sort.Strings(causes)
	for _, c := range causes {
		fmt.Printf("      %5d  %s\n", st.failures[c], c)
	}
}

// A failure is why an attempt failed, for the tally.
type failure struct {
	kind    failureKind
	what    string // the cause in words
	failing string // the node errors by kind, "" when none
}

type failureKind int

const (
	busy         failureKind = iota // held by another worker, or split, on the nodes that answered
	noQuorum                        // too many nodes failing for a quorum (a lock survives two of five)
	unlockFailed                    // Unlock did not confirm the release
	other
)

func (f failure) String() string { return f.what + f.failing }

// classify names why err happened, counting its node errors by kind.
func classify(err error) failure {
	nodeErrs := report.NodeErrors(err)
	kinds := map[string]int{}
	for _, ne := range nodeErrs {
		switch {
		case errors.Is(ne, report.ErrNodeDown):
			kinds["node down, not asked"]++
		case errors.Is(ne, syscall.ECONNREFUSED):
			kinds["connection refused"]++
		case errors.Is(ne, report.ErrNodeTimeout):
			kinds["node timeout"]++
		default:
			kinds[ne.Err.Error()]++
		}
	}
	parts := make([]string, 0, len(kinds))
	for k, n := range kinds {
		parts = append(parts, fmt.Sprintf("%d× %s", n, k))
	}
	sort.Strings(parts)
	f := failure{kind: other, what: err.Error()}
	if len(parts) > 0 {
		f.failing = " (node errors: " + strings.Join(parts, ", ") + ")"
	}
	switch {
	case len(nodeErrs) > 2:
		f.kind, f.what = noQuorum, "no quorum possible"
	case errors.Is(err, redlock.ErrNotAcquired):
		f.kind, f.what = busy, "busy: held by another worker, or split between contenders"
	case errors.Is(err, redlock.ErrNotHeld):
		f.what = "not held"
	}
	return f
}

func percentiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "n/a"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) time.Duration { return s[int(q*float64(len(s)-1))].Round(10 * time.Microsecond) }
	return fmt.Sprintf("p50 %v, p90 %v, p99 %v, max %v", at(0.5), at(0.9), at(0.99), s[len(s)-1].Round(10*time.Microsecond))
}

func total(m map[string]int) (n int) {
	for _, v := range m {
		n += v
	}
	return n
}

// countOverlaps counts pairs of consecutive windows (by start) that overlap.
func countOverlaps(ws []window) (n int) {
	slices.SortFunc(ws, func(a, b window) int { return a.start.Compare(b.start) })
	var latest time.Time
	for i, w := range ws {
		if i > 0 && w.start.Before(latest) {
			n++
		}
		if w.end.After(latest) {
			latest = w.end
		}
	}
	return n
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "redlock-demo:", err)
		os.Exit(1)
	}
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}
