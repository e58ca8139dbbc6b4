package sim

import (
	"bytes"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/cryptotest"
	"testing/synctest"

	"time"

	"github.com/redlock-go/redlock/internal/jitter"
)

var (
	simSeed   = flag.Uint64("sim.seed", 0, "replay this seed alone, printing its schedule")
	simStart  = flag.Uint64("sim.start", 1, "the first seed of a run of seeds")
	simTime   = flag.Duration("sim.time", 15*time.Second, "how long to run seeds for (wall clock)")
	simOnly   = flag.String("sim.only", "", "run only these workloads (comma-separated: "+strings.Join(workloadNames(), ",")+")")
	simDigest = flag.String("sim.digest", "", "with -sim.seed: replay the run of this digest (a failure prints it); fail if no try is that run")
	simTries  = flag.Int("sim.tries", 10, "with -sim.digest: run the seed up to this many times until one is that run")
	simSame   = flag.Int("sim.same", 0, "with -sim.seed: run the seed this many times and compare the requests the nodes received")
	simProcs  = flag.Int("sim.procs", runtime.NumCPU(), "run seeds in this many processes (each runs Go on one thread)")
	simStride = flag.Uint64("sim.stride", 1, "run every this many seeds from -sim.start (set by -sim.procs)")
	simSites  = flag.Bool("sim.sites", false, "place every schedule's nodes and clients in three sites (see sites.go)")
)

// TestSimulation runs seeded schedules for -sim.time (or the one seed
// -sim.seed) and fails on any violation, printing the command that
// replays it.
func TestSimulation(t *testing.T) {
	if *simSeed != 0 {
		replay(t)
		return
	}
	if *simProcs > 1 {
		spread(t)
		return
	}
	start := time.Now()
	var c counts
	for seed := *simStart; time.Since(start) < *simTime; seed += *simStride {
		res := runSeed(t, seed, false)
		c.add(res)
		reportFailures(t, res)
	}
	t.Logf("%s%d %d %d %d %d %d", countsMark, c.schedules, c.acquisitions, c.violations, c.stalled, c.sited, c.sitedAcq)
	t.Log(c.line(time.Since(start), fmt.Sprintf("seeds from %d, every %d", *simStart, *simStride)))
}

// counts are what runs of seeds checked.
// sited and sitedAcq count the schedules with sites (see sites.go) and
// their acquisitions.
type counts struct{ schedules, acquisitions, violations, stalled, sited, sitedAcq int }

// add counts res.
func (c *counts) add(res Result) {
	c.schedules++
	c.acquisitions += res.Acquisitions
	c.violations += len(res.Violations)
	c.stalled += len(res.Stalled)
	if res.Config.Sites {
		c.sited++
		c.sitedAcq += res.Acquisitions
	}
}

// countsMark begins the line in which a process of spread tells its counts.
const countsMark = "sim counts: "

func (c counts) line(took time.Duration, seeds string) string {
	return fmt.Sprintf("sim: %d schedules (%s) and %d acquisitions checked in %v (%.2f schedules/s), %d violations, %d workers without a turn once healed; with sites: %d schedules, %d acquisitions",
		c.schedules, seeds, c.acquisitions, took.Round(time.Second), float64(c.schedules)/took.Seconds(), c.violations, c.stalled, c.sited, c.sitedAcq)
}

// spread runs the seeds in -sim.procs processes of this test, every
// -sim.procs-th seed each, side by side: a run is one thread (see
// TestMain), and the machine has more. It fails with the output of each
// process that failed, whose replay commands are as they would be alone.
func spread(t *testing.T) {
	t.Helper()
	start := time.Now()
	procs := *simProcs
	outs := make([]bytes.Buffer, procs)
	var wg sync.WaitGroup
	errs := make([]error, procs)
	for i := range procs {
		args := []string{"-test.run=^TestSimulation$", "-test.v", "-test.timeout=0", "-sim.procs=1",
			fmt.Sprintf("-sim.start=%d", *simStart+uint64(i)), fmt.Sprintf("-sim.stride=%d", procs),
			"-sim.time=" + simTime.String(), "-sim.only=" + *simOnly, fmt.Sprintf("-sim.sites=%t", *simSites)}
		cmd := exec.CommandContext(t.Context(), os.Args[0], args...)
		cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
		wg.Go(func() { errs[i] = cmd.Run() })
	}
	wg.Wait()
	var all counts
	for i := range procs {
		var c counts
		_, after, ok := strings.Cut(outs[i].String(), countsMark)
		if ok {
			_, _ = fmt.Sscan(after, &c.schedules, &c.acquisitions, &c.violations, &c.stalled, &c.sited, &c.sitedAcq)
		}
		all.schedules += c.schedules
		all.acquisitions += c.acquisitions
		all.violations += c.violations
		all.stalled += c.stalled
		all.sited += c.sited
		all.sitedAcq += c.sitedAcq
		if errs[i] != nil || !ok {
			t.Errorf("process %d of %d (seeds from %d, every %d): %v\n%s", i+1, procs, *simStart+uint64(i), procs, errs[i], outs[i].String())
		}
	}
	t.Log(all.line(time.Since(start), fmt.Sprintf("seeds from %d, in %d processes", *simStart, procs)))
}

// replay runs the seed -sim.seed and prints its schedule; with -sim.digest,
// until a run is the one of that digest.
func replay(t *testing.T) {
	t.Helper()
	var res Result
	for try := 1; ; try++ {
		res = runSeed(t, *simSeed, false)
		if *simDigest == "" {
			break
		}
		if res.Digest == *simDigest {
			t.Logf("run %d is the same run: every node received the same requests at the same fake times", try)
			break
		}
		t.Logf("run %d was another run (digest %s): goroutines ready at one instant ran in another order", try, res.Digest)
		if try == *simTries {
			t.Errorf("none of %d runs was the run of digest %s", try, *simDigest)
			break
		}
	}
	if len(res.Violations) == 0 && len(res.Stalled) == 0 { // reportFailures prints it otherwise
		t.Logf("schedule:\n  %s", strings.Join(res.Events, "\n  "))
	}
	t.Logf("%d acquisitions; the run's digest: %s", res.Acquisitions, res.Digest)
	reportFailures(t, res)
}

// runSeed runs one seed in its bubble, with every random draw of the
// library and of crypto/rand (its tokens) taken from the seed; keep keeps
// every request the nodes received.
func runSeed(t *testing.T, seed uint64, keep bool) Result {
	t.Helper()
	var res Result
	cfg := Plan(seed)
	if *simOnly != "" {
		cfg.Primitives = strings.Split(*simOnly, ",")
	}
	cfg.Sites = cfg.Sites || *simSites
	cfg.Trace = keep
	cryptotest.SetGlobalRandom(t, seed)
	restore := jitter.Seed(seed)
	defer restore()
	synctest.Test(t, func(*testing.T) { res = Run(cfg) })
	return res
}

// reportFailures fails the test on res's violations and on workers that got no
// turn once the faults healed, with the command that replays the seed.
func reportFailures(t *testing.T, res Result) {
	t.Helper()
	only := ""
	if *simOnly != "" {
		only = " -sim.only=" + *simOnly
	}
	if *simSites {
		only += " -sim.sites"
	}
	cmd := fmt.Sprintf("go test ./internal/sim -run TestSimulation -sim.seed=%d%s -sim.digest=%s -v", res.Config.Seed, only, res.Digest)
	if raceEnabled {
		// The race detector runs goroutines in a random order on purpose:
		// the seed's faults replay, this run seldom does.
		cmd = fmt.Sprintf("go test -race ./internal/sim -run TestSimulation -sim.seed=%d%s -v (the same faults; under -race, seldom the same run)", res.Config.Seed, only)
	}
	schedule := strings.Join(res.Events, "\n  ")
	if len(res.Violations) > 0 {
		t.Errorf("%s\n%d violations, the first: %s\nschedule:\n  %s\nreplay: %s", res.Config, len(res.Violations), res.Violations[0], schedule, cmd)
	}
	if len(res.Stalled) > 0 {
		t.Errorf("%s\nno turn once the faults healed: %s\nschedule:\n  %s\nreplay: %s", res.Config, strings.Join(res.Stalled, "; "), schedule, cmd)
	}
}

// TestReplay checks that a seed's replay is the same run: it runs a seed
// (-sim.seed, 7 by default) -sim.same times (4 by default) and compares the
// requests each node received, and when, with the first run's, telling
// where a run parted from it. Goroutines ready at one fake instant run in
// an order no seed fixes (a select between ready channels is random, a
// Mutex hands over by the wall clock): over seeds 1-30, 81 of 90 pairs of
// runs were the same run, so a replay may take a few tries (-sim.tries).
// The test fails when no two runs are the same: something drew from
// outside the seed.
func TestReplay(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector runs goroutines in a random order on purpose: `make unit` runs this test without it")
	}
	seed, runs := uint64(7), 4
	if *simSeed != 0 {
		seed = *simSeed
	}
	if *simSame != 0 {
		runs = *simSame
	}
	var first *trace
	seen := map[string]int{}
	for run := 1; run <= runs; run++ {
		tr := runSeed(t, seed, true).Trace
		d := tr.digest()
		seen[d]++
		if first == nil {
			first = tr
		}
		if d == first.digest() {
			t.Logf("run %d: %s, the same as run 1", run, d)
			continue
		}
		node, i, mine, theirs := first.parting(tr)
		t.Logf("run %d: %s, parts from run 1 at node %d's request %d:\n  run 1: %s\n  run %d: %s", run, d, node, i, mine, run, theirs)
	}
	most := slices.Max(slices.Collect(maps.Values(seen)))
	t.Logf("seed %d: %d runs, %d different, at most %d the same run", seed, runs, len(seen), most)
	if runs > 1 && most < 2 {
		t.Errorf("no two of %d runs of seed %d were the same run", runs, seed)
	}
}
