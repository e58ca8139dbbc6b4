package sim

import (
	"flag"
	"fmt"
	"strings"
	"testing"
	"testing/cryptotest"
	"testing/synctest"

	"time"

	"github.com/redlock-go/redlock/internal/jitter"
)

var (
	simSeed  = flag.Uint64("sim.seed", 0, "replay this seed alone, printing its schedule")
	simStart = flag.Uint64("sim.start", 1, "the first seed of a run of seeds")
	simTime  = flag.Duration("sim.time", 15*time.Second, "how long to run seeds for (wall clock)")
	simOnly  = flag.String("sim.only", "", "run only these workloads (comma-separated: "+strings.Join(workloadNames(), ",")+")")
	simTries = flag.Int("sim.tries", 1, "with -sim.seed: run the seed up to this many times, until one run fails")
	simSame  = flag.Int("sim.same", 0, "with -sim.seed: run the seed this many times and compare the requests the nodes received")
)

// TestSimulation runs seeded schedules for -sim.time (or the one seed
// -sim.seed) and fails on any violation, printing the command that
// replays it.
func TestSimulation(t *testing.T) {
	if *simSeed != 0 {
		// The seed fixes every fault; the order of goroutines ready at one
		// instant is the runtime's, so a replay may take a few runs to
		// fail the same way.
		var res Result
		for try := 1; try <= *simTries; try++ {
			res = runSeed(t, *simSeed)
			if len(res.Violations)+len(res.Stalled) > 0 {
				t.Logf("run %d of at most %d failed", try, *simTries)
				break
			}
		}
		t.Logf("schedule:\n%s\n%d acquisitions", strings.Join(res.Events, "\n"), res.Acquisitions)
		report(t, res)
		return
	}
	start := time.Now()
	schedules, acquisitions, violations, stalled := 0, 0, 0, 0
	for seed := *simStart; time.Since(start) < *simTime; seed++ {
		res := runSeed(t, seed)
		schedules++
		acquisitions += res.Acquisitions
		violations += len(res.Violations)
		stalled += len(res.Stalled)
		report(t, res)
	}
	took := time.Since(start)
	t.Logf("sim: %d schedules (seeds %d-%d) and %d acquisitions checked in %v (%.2f schedules/s), %d violations, %d workers without a turn once healed",
		schedules, *simStart, *simStart+uint64(schedules)-1, acquisitions, took.Round(time.Second),
		float64(schedules)/took.Seconds(), violations, stalled)
}

func runSeed(t *testing.T, seed uint64) Result {
	t.Helper()
	var res Result
	cfg := Plan(seed)
	if *simOnly != "" {
		cfg.Primitives = strings.Split(*simOnly, ",")
	}
	synctest.Test(t, func(*testing.T) { res = Run(cfg) })
	return res
}

// report fails the test on res's violations and on workers that got no
// turn once the faults healed, with the command that replays the seed.
func report(t *testing.T, res Result) {
	t.Helper()
	only := ""
	if *simOnly != "" {
		only = " -sim.only=" + *simOnly
	}
	replay := fmt.Sprintf("go test ./internal/sim -run TestSimulation -sim.seed=%d%s -sim.tries=20 -v", res.Config.Seed, only)
	if len(res.Violations) > 0 {
		t.Errorf("%s\n%d violations, the first: %s\nreplay: %s", res.Config, len(res.Violations), res.Violations[0], replay)
	}
	if len(res.Stalled) > 0 {
		t.Errorf("%s\nno turn once the faults healed: %s\nreplay: %s", res.Config, strings.Join(res.Stalled, "; "), replay)
	}
}

// TestReplay runs -sim.seed -sim.same times and reports which runs received
// the same requests as the first, at the same fake times, and where the
// others parted from it.
func TestReplay(t *testing.T) {
	if *simSeed == 0 || *simSame == 0 {
		t.Skip("-sim.seed and -sim.same select a seed to replay")
	}
	var first *trace
	same := 0
	for run := 1; run <= *simSame; run++ {
		cfg := Plan(*simSeed)
		if *simOnly != "" {
			cfg.Primitives = strings.Split(*simOnly, ",")
		}
		cfg.Trace = true
		var res Result
		cryptotest.SetGlobalRandom(t, *simSeed)
		restore := jitter.Seed(*simSeed)
		synctest.Test(t, func(*testing.T) { res = Run(cfg) })
		restore()
		tr := res.Trace
		if first == nil {
			first = tr
		}
		if tr.digest() == first.digest() {
			same++
			t.Logf("run %d: %s, the same as run 1", run, tr.digest())
			continue
		}
		node, i, mine, theirs := first.parting(tr)
		t.Logf("run %d: %s, parts from run 1 at node %d's request %d:\n  run 1: %s\n  run %d: %s", run, tr.digest(), node, i, mine, run, theirs)
	}
	t.Logf("%d of %d runs the same as the first", same, *simSame)
}
