package sim

import (
	"flag"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

var (
	simSeed  = flag.Uint64("sim.seed", 0, "replay this seed alone, printing its schedule")
	simStart = flag.Uint64("sim.start", 1, "the first seed of a run of seeds")
	simTime  = flag.Duration("sim.time", 15*time.Second, "how long to run seeds for (wall clock)")
	simOnly  = flag.String("sim.only", "", "run only these workloads (comma-separated: "+strings.Join(workloadNames(), ",")+")")
)

// TestSimulation runs seeded schedules for -sim.time (or the one seed
// -sim.seed) and fails on any violation, printing the command that
// replays it.
func TestSimulation(t *testing.T) {
	if *simSeed != 0 {
		res := runSeed(t, *simSeed)
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

func report(t *testing.T, res Result) {
	t.Helper()
	for _, s := range res.Stalled {
		t.Logf("%s: %s (replay: -sim.seed=%d)", res.Config, s, res.Config.Seed)
	}
	if len(res.Violations) == 0 {
		return
	}
	only := ""
	if *simOnly != "" {
		only = " -sim.only=" + *simOnly
	}
	t.Errorf("%s\n%d violations, the first: %s\nreplay: go test ./internal/sim -run TestSimulation -sim.seed=%d%s -v",
		res.Config, len(res.Violations), res.Violations[0], res.Config.Seed, only)
}
