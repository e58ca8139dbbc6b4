package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkHandoffProcesses is BenchmarkHandoff with each of the eight
// contenders in a process of its own, as contenders for one lock run in
// production: the test binary runs itself eight times (see childMain).
// In one process, the other clients' work (the releaser's next Lock
// queuing, its release's last replies) wakes the shared Go scheduler
// while the new holder sleeps, and the runtime's millisecond epoll wait
// makes that sleep late by up to a millisecond; separate processes do
// not share it. Holds are checked across processes on the wall clock:
// each child reports when its Lock returned and when it called Unlock,
// and no two such intervals may overlap.
func BenchmarkHandoffProcesses(b *testing.B) {
	benchAddrs(b)
	for _, im := range handoffImpls {
		b.Run(im.name, func(b *testing.B) {
			key := fmt.Sprint("handoff-procs:", time.Now().UnixNano())
			r, err := runChildren(b.N, im.name, key)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(r.elapsed.Nanoseconds())/float64(len(r.holds)), "ns/op")
			if n := r.overlaps(); n > 0 {
				b.Fatalf("%d overlapping holds", n)
			}
			r.report(b)
		})
	}
}

// childEnv names the implementation a child process runs; childKeyEnv the
// lock name.
const (
	childEnv    = "REDLOCK_HANDOFF_CHILD"
	childKeyEnv = "REDLOCK_HANDOFF_KEY"
)

func TestMain(m *testing.M) {
	if name := os.Getenv(childEnv); name != "" {
		flag.Parse()
		if err := childMain(name, os.Getenv(childKeyEnv), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// hold is one acquisition of a child: when its Lock returned and when it
// called Unlock, in Unix nanoseconds, and how long its Lock waited.
type hold struct {
	child            int
	locked, unlocked int64
	waited           time.Duration
}

// childMain is one contender: once warm, it says "R" and waits for a line
// on its standard input; then it loops Lock, a hold, Unlock on key until
// its standard input closes, writing "H <locked> <unlocking> <waited ns>"
// for each acquisition and "F" for each Lock that gave up.
func childMain(name, key string, stop io.Reader, out io.Writer) error {
	idx := slices.IndexFunc(handoffImpls, func(im implementation) bool { return im.name == name })
	if idx < 0 {
		return fmt.Errorf("no implementation %q", name)
	}
	cs := benchClients(strings.Split(os.Getenv("REDLOCK_BENCH_ADDRS"), ","))
	defer closeAll(cs)
	lc, err := handoffImpls[idx].new(cs)
	if err != nil {
		return err
	}
	ctx := context.Background()
	defer func() { _ = lc.close(ctx) }()
	if m, err := lc.mutex(key + ":warm"); err == nil && m.Lock(ctx) == nil {
		_ = m.Unlock(ctx)
	}
	w := bufio.NewWriter(out)
	defer w.Flush()
	fmt.Fprintln(w, "R") // ready
	if err := w.Flush(); err != nil {
		return err
	}
	in := bufio.NewReader(stop)
	if _, err := in.ReadString('\n'); err != nil { // go
		return nil
	}
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, in)
		close(done)
	}()
	for {
		select {
		case <-done:
			return nil
		default:
		}
		m, waited, gave, err := lockOnce(ctx, lc, key)
		if err != nil {
			return err
		}
		if gave {
			fmt.Fprintln(w, "F")
			continue
		}
		locked := time.Now()
		time.Sleep(holdFor)
		unlocking := time.Now()
		_ = m.Unlock(ctx)
		fmt.Fprintln(w, "H", locked.UnixNano(), unlocking.UnixNano(), waited.Nanoseconds())
		if err := w.Flush(); err != nil {
			return err
		}
	}
}

// childrenRun is what the children of one run reported.
type childrenRun struct {
	holds   []hold
	failed  int
	elapsed time.Duration // from the first hold's start to the n-th's end
}

// runChildren starts the contenders, lets them go once all are warm and
// ready, and stops them once n acquisitions were reported.
func runChildren(n int, name, key string) (*childrenRun, error) {
	ch, err := startChildren(name, key)
	if err != nil {
		return nil, err
	}
	r := &childrenRun{}
	for l := range ch.lines {
		ch.take(r, l, n)
	}
	if err := ch.wait(); err != nil {
		return nil, err
	}
	if len(r.holds) < n {
		return nil, fmt.Errorf("%d acquisitions reported, %d wanted", len(r.holds), n)
	}
	slices.SortFunc(r.holds, func(a, b hold) int { return int(a.locked - b.locked) })
	// The first hold's Lock may have waited for the others to start: the
	// run is timed from its Lock's return to the last hold's Unlock call,
	// plus one handoff (the median) so that n acquisitions take n cycles.
	first, last := r.holds[0], r.holds[len(r.holds)-1]
	r.elapsed = time.Duration(last.unlocked-first.locked) + r.medianGap()
	return r, nil
}

// childLine is one line a contender process wrote.
type childLine struct {
	child int
	text  string
}

// children are the contender processes of one run.
type children struct {
	cmds    []*exec.Cmd
	stdins  []io.WriteCloser
	lines   chan childLine // every child's, closed once all ended
	ready   int
	stopped bool
}

// startChildren starts the contender processes of run name on key.
func startChildren(name, key string) (*children, error) {
	ch := &children{lines: make(chan childLine, 1024)}
	var readers sync.WaitGroup
	for i := range contenders {
		out, err := ch.start(name, key)
		if err != nil {
			ch.stop()
			return nil, err
		}
		readers.Go(func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				ch.lines <- childLine{i, sc.Text()}
			}
		})
	}
	go func() {
		readers.Wait()
		close(ch.lines)
	}()
	return ch, nil
}

// start starts one contender process and returns its output.
func (ch *children) start(name, key string) (io.Reader, error) {
	cmd := exec.Command(os.Args[0], "-test.run", "^$", fmt.Sprintf("-defaults=%v", *defaultOptions))
	cmd.Env = append(os.Environ(), childEnv+"="+name, childKeyEnv+"="+key)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ch.cmds, ch.stdins = append(ch.cmds, cmd), append(ch.stdins, in)
	return out, nil
}

// take reads line l into r: a child ready (all ready: they go), an attempt
// failed, or a hold; once n holds are in, the children are stopped.
func (ch *children) take(r *childrenRun, l childLine, n int) {
	f := strings.Fields(l.text)
	switch {
	case len(f) == 1 && f[0] == "R":
		if ch.ready++; ch.ready == contenders {
			for _, in := range ch.stdins {
				_, _ = io.WriteString(in, "go\n")
			}
		}
	case len(f) == 1 && f[0] == "F":
		r.failed++
	case len(f) == 4 && f[0] == "H" && len(r.holds) < n:
		h := hold{child: l.child}
		h.locked, _ = strconv.ParseInt(f[1], 10, 64)
		h.unlocked, _ = strconv.ParseInt(f[2], 10, 64)
		w, _ := strconv.ParseInt(f[3], 10, 64)
		h.waited = time.Duration(w)
		r.holds = append(r.holds, h)
	}
	if len(r.holds) >= n && !ch.stopped {
		ch.stopped = true
		ch.stop()
	}
}

// stop closes the children's input: each stops at that.
func (ch *children) stop() {
	for _, in := range ch.stdins {
		_ = in.Close()
	}
}

// wait waits for every child to exit.
func (ch *children) wait() error {
	var errs []error
	for _, c := range ch.cmds {
		if err := c.Wait(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("contender processes: %v", errs)
	}
	return nil
}

// overlaps counts the holds that began before the one before ended.
func (r *childrenRun) overlaps() int {
	n := 0
	for i := 1; i < len(r.holds); i++ {
		if r.holds[i].locked < r.holds[i-1].unlocked {
			n++
		}
	}
	return n
}

// gaps are the handoffs: from a hold's Unlock call to the next hold's
// Lock returning.
func (r *childrenRun) gaps() []time.Duration {
	var gs []time.Duration
	for i := 1; i < len(r.holds); i++ {
		gs = append(gs, time.Duration(r.holds[i].locked-r.holds[i-1].unlocked))
	}
	return gs
}

func (r *childrenRun) medianGap() time.Duration {
	gs := r.gaps()
	if len(gs) == 0 {
		return 0
	}
	slices.Sort(gs)
	return gs[len(gs)/2]
}

// report adds the metrics BenchmarkHandoff reports.
func (r *childrenRun) report(b *testing.B) {
	b.Helper()
	shares := make([]int, contenders)
	var waits, holds []time.Duration
	for _, h := range r.holds {
		shares[h.child]++
		waits = append(waits, h.waited)
		holds = append(holds, time.Duration(h.unlocked-h.locked))
	}
	gaps := r.gaps()
	slices.Sort(waits)
	b.ReportMetric(float64(slices.Max(shares))/float64(len(r.holds)), "max-share")
	b.ReportMetric(float64(r.failed), "failed-locks")
	b.ReportMetric(float64(waits[len(waits)-1])/1e6, "max-wait-ms")
	b.ReportMetric(quantileMs(waits, 0.99), "p99-wait-ms")
	b.ReportMetric(quantileMs(gaps, 0.5)*1e3, "handoff-p50-us")
	b.ReportMetric(quantileMs(holds, 0.5)*1e3, "hold-p50-us")
	b.ReportMetric(meanMs(gaps)*1e3, "handoff-mean-us")
	b.ReportMetric(meanMs(holds)*1e3, "hold-mean-us")
}
