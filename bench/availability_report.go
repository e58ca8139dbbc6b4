package main

// The availability benchmark's report: medians over rounds, the table, the
// targets and the plot.

import (
	"fmt"
	"math"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// availResults holds every round's figures.
type availResults struct {
	values     map[string][]float64 // by resultKey
	faultFrees map[string]float64   // round|set|impl: fault-free acquisitions/s
	totals     map[string]*safetyTotal
	violations []string
	notes      []string
}

type safetyTotal struct{ acquisitions, overlaps, lost, expired int }

func newAvailResults() *availResults {
	return &availResults{values: map[string][]float64{}, faultFrees: map[string]float64{}, totals: map[string]*safetyTotal{}}
}

func resultKey(set, impl, phase, metric string) string {
	return set + "|" + impl + "|" + phase + "|" + metric
}

func (r *availResults) add(set, impl, phase, metric string, v float64) {
	k := resultKey(set, impl, phase, metric)
	r.values[k] = append(r.values[k], v)
}

// faultFree records an implementation's fault-free rate; once both have one
// for this round and option set, their ratio is recorded.
func (r *availResults) faultFree(round int, set, impl string, acq float64) {
	r.faultFrees[fmt.Sprint(round, "|", set, "|", impl)] = acq
	ours, ok1 := r.faultFrees[fmt.Sprint(round, "|", set, "|redlock-go")]
	theirs, ok2 := r.faultFrees[fmt.Sprint(round, "|", set, "|redsync")]
	if ok1 && ok2 {
		r.add(set, "", "", "vs redsync", ratio(ours, theirs))
	}
}

func (r *availResults) safety(round int, set, impl, phase string, s *safety) {
	k := set + "|" + impl
	t := r.totals[k]
	if t == nil {
		t = &safetyTotal{}
		r.totals[k] = t
	}
	t.acquisitions += s.acquisitions
	t.overlaps += s.overlaps
	t.lost += s.lost
	t.expired += s.expired
	if s.overlaps > 0 || s.lost > 0 {
		r.violations = append(r.violations, fmt.Sprintf("round %d, %s options, %s, %s: %d overlaps, %d lost updates in %d acquisitions",
			round, set, impl, phase, s.overlaps, s.lost, s.acquisitions))
	}
	if s.expired > 0 {
		r.note("round %d, %s options, %s, %s: %d acquisitions had no validity left when Lock returned", round, set, impl, phase, s.expired)
	}
}

func (r *availResults) note(format string, args ...any) {
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

// median of the rounds, ignoring NaN (not measured); NaN when none.
func (r *availResults) median(set, impl, phase, metric string) float64 {
	var vs []float64
	for _, v := range r.values[resultKey(set, impl, phase, metric)] {
		if !math.IsNaN(v) {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return math.NaN()
	}
	slices.Sort(vs)
	return vs[len(vs)/2]
}

func num(format string, v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf(format, v)
}

func fmtRecovery(s float64) string {
	if math.IsInf(s, 1) {
		return fmt.Sprintf("none within %v", recoverLimit)
	}
	return fmt.Sprintf("%.2f s", s)
}

// table renders the medians of every option set, then the targets.
func (r *availResults) table() string {
	var b strings.Builder
	for _, set := range optionSets {
		fmt.Fprintf(&b, "### %s options\n\n", set.name)
		b.WriteString("| phase | implementation | contended acq/s | × fault-free | Lock wait p50 / p99 (ms) | failed Locks | max share / longest streak " +
			"| uncontended pairs/s | × fault-free | goroutine peak, contended / uncontended | × fault-free |\n")
		b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, ph := range phases {
			for _, im := range implementations {
				m := func(metric string) float64 { return r.median(set.name, im.name, ph.name, metric) }
				fmt.Fprintf(&b, "| %s | %s | %s | %s | %s / %s | %s | %s / %s | %s | %s | %s / %s | %s / %s |\n",
					ph.name, im.name, num("%.0f", m("acq")), num("%.2fx", m("acq×")),
					num("%.1f", m("p50")), num("%.1f", m("p99")), num("%.0f", m("lockErr")),
					num("%.2f", m("share")), num("%.0f", m("streak")),
					num("%.0f", m("unc")), num("%.2fx", m("unc×")),
					num("%.0f", m("gc")), num("%.0f", m("gu")), num("%.2fx", m("gc×")), num("%.2fx", m("gu×")))
			}
		}
		fmt.Fprintf(&b, "\n- fault-free contended acquisitions/s, redlock-go / redsync: %s\n", num("%.2fx", r.median(set.name, "", "", "vs redsync")))
		for _, im := range implementations {
			t := r.totals[set.name+"|"+im.name]
			if t == nil {
				t = &safetyTotal{}
			}
			fmt.Fprintf(&b, "- %s: paused majority, resume to first acquisition %s; %d overlaps, %d lost updates in %d acquisitions\n",
				im.name, fmtRecovery(r.median(set.name, im.name, "", "recovery")), t.overlaps, t.lost, t.acquisitions)
		}
		b.WriteString("\n")
	}
	b.WriteString(r.targets())
	return b.String()
}

// A target is checked on redlock-go's medians; redsync's are shown beside.
type target struct {
	label string
	// value returns the figure for one implementation and option set, and
	// the phase it comes from when it is the worst of several.
	value func(set, impl string) (float64, string)
	ok    func(float64) bool
	unit  string
}

var minorityFaults = []string{"silent", "far", "killed", "flapping"}

func (r *availResults) phaseRatio(metric, phase string, atLeast float64) target {
	return target{
		label: fmt.Sprintf("%s: contended acquisitions/s ≥ %.1fx fault-free", phase, atLeast),
		value: func(set, impl string) (float64, string) { return r.median(set, impl, phase, metric), "" },
		ok:    func(v float64) bool { return v >= atLeast },
		unit:  "x",
	}
}

// worst is the lowest (or highest) of metrics over the minority faults.
func (r *availResults) worst(metrics []string, highest bool) func(set, impl string) (float64, string) {
	return func(set, impl string) (float64, string) {
		best, at := math.NaN(), ""
		for _, ph := range minorityFaults {
			for _, m := range metrics {
				v := r.median(set, impl, ph, m)
				if math.IsNaN(v) {
					continue
				}
				if math.IsNaN(best) || (highest && v > best) || (!highest && v < best) {
					best, at = v, ph
				}
			}
		}
		return best, at
	}
}

func (r *availResults) targets() string {
	ts := []target{
		r.phaseRatio("acq×", "silent", 0.7),
		r.phaseRatio("acq×", "far", 0.5),
		r.phaseRatio("acq×", "killed", 0.9),
		{
			label: "fault-free contended acquisitions/s ≥ 1.0x redsync's",
			value: func(set, impl string) (float64, string) {
				if impl != "redlock-go" {
					return math.NaN(), ""
				}
				return r.median(set, "", "", "vs redsync"), ""
			},
			ok: func(v float64) bool { return v >= 1 }, unit: "x",
		},
		{
			label: "uncontended pairs/s under each minority fault ≥ 0.8x fault-free (worst)",
			value: r.worst([]string{"unc×"}, false), ok: func(v float64) bool { return v >= 0.8 }, unit: "x",
		},
		{
			label: "goroutine peak under any minority fault ≤ 3x fault-free (worst, contended or uncontended)",
			value: r.worst([]string{"gc×", "gu×"}, true), ok: func(v float64) bool { return v <= 3 }, unit: "x",
		},
		{
			label: "paused majority: acquirable within 1 s of resuming",
			value: func(set, impl string) (float64, string) { return r.median(set, impl, "", "recovery"), "" },
			ok:    func(v float64) bool { return v <= 1 }, unit: " s",
		},
		{
			label: "0 overlaps, 0 lost updates (all rounds and phases)",
			value: func(set, impl string) (float64, string) {
				t := r.totals[set+"|"+impl]
				if t == nil {
					return math.NaN(), ""
				}
				return float64(t.overlaps + t.lost), ""
			},
			ok: func(v float64) bool { return v == 0 }, unit: " violations",
		},
	}
	var b strings.Builder
	b.WriteString("### Targets (checked on redlock-go's medians; redsync's figure in brackets)\n\n| target |")
	for _, set := range optionSets {
		fmt.Fprintf(&b, " %s options |", set.name)
	}
	b.WriteString("\n|---|")
	for range optionSets {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, t := range ts {
		fmt.Fprintf(&b, "| %s |", t.label)
		for _, set := range optionSets {
			v, at := t.value(set.name, "redlock-go")
			verdict := "**misses**"
			if !math.IsNaN(v) && t.ok(v) {
				verdict = "holds"
			}
			fmt.Fprintf(&b, " %s %s", fmtTarget(v, t.unit, at), verdict)
			if rv, rat := t.value(set.name, "redsync"); !math.IsNaN(rv) {
				fmt.Fprintf(&b, " (redsync %s)", fmtTarget(rv, t.unit, rat))
			}
			b.WriteString(" |")
		}
		b.WriteString("\n")
	}
	return b.String()
}

func fmtTarget(v float64, unit, at string) string {
	var s string
	switch {
	case math.IsNaN(v):
		s = "–"
	case math.IsInf(v, 1) && unit == " s":
		s = fmtRecovery(v)
	case unit == " violations":
		s = fmt.Sprintf("%.0f%s", v, unit)
	default:
		s = fmt.Sprintf("%.2f%s", v, unit)
	}
	if at != "" {
		s += " (" + at + ")"
	}
	return s
}

// method describes what was run, for the written report.
func method() string {
	return fmt.Sprintf(`Five Redis nodes in containers (the integration harness), the lock clients and an
in-process toxiproxy all on this machine (%s, GOMAXPROCS %d). redlock-go runs through its public API:
redlock.New(clients, redlock.WithTTL(10s)), rl.NewMutex(key) with defaults, Lock / TryLock / Unlock,
rl.Close; redsync v4: redsync.New(pools...).NewMutex(key, redsync.WithExpiry(10s)), LockContext with its
default retry policy (32 tries, 50–250 ms apart), TryLockContext, UnlockContext. Option sets, per node
client: "default" is &redis.Options{} (go-redis defaults, the configuration docs/API.md recommends);
"fail-fast" is failFastOptions() in bench/availability.go, for comparison: %s.

Order: round → option set → implementation → phases (fault-free, silent, far, killed, flapping), then the
paused majority. In each phase two runs follow each other, contended then uncontended; each run creates
new processes' worth of clients (a lock client and five go-redis clients each), warms them with one
lock+unlock each, applies the fault, runs for %v, heals the fault, then closes its clients.
Faults hit nodes 1 and 3: silent = docker pause (as SIGSTOP); far = the clients reach nodes 1 and 3
through in-process toxiproxy proxies with a 25 ms latency toxic upstream and another downstream (added
after the warm-up; in every other phase and run all five nodes are reached directly, without proxies);
killed = SIGKILL, restarted (empty) after the run; flapping = node 1 killed, %v later restarted, up for
%v, and again until the run ends. Paused majority: nodes 1, 3 and 4 paused for %v while %d contenders
make single attempts (TryLock, 10 ms apart after a failure), then resumed together; the figure is the
time from the resume to the first successful attempt (median over rounds).

Contended: %d processes on one key (new per run), each looping Lock (%v context), read a counter, hold %v,
write it back plus one, Unlock. acq/s = acquisitions / time until the last contender returned; Lock wait
= time inside successful Locks; failed Locks = Locks that returned an error; max share = largest share
of one process in the acquisitions; longest streak = most consecutive acquisitions by one process.
Uncontended: %d goroutines of one process, TryLock + Unlock on distinct keys. Goroutine peak =
runtime.NumGoroutine() sampled every %v during the run, minus the count before the run's clients were
created (so it includes the run's worker goroutines and the sampler); in the far phase the goroutines of
the in-process toxiproxy (recognised by their stacks) are left out of both counts. Safety: every holder
records [Lock returned, min(Unlock called, Until())] on the monotonic clock, no two may overlap, and the
counter must equal the number of acquisitions (the paused-majority acquisitions are checked too).
Ratios to fault-free are taken within one round, option set and implementation, then the median is shown.`,
		runtime.Version(), runtime.GOMAXPROCS(0), fmtOptions(failFastOptions()),
		*duration, flapEvery, flapEvery, majorityWait, contenders,
		contenders, lockWait, holdFor, uncontendedG, sampleEvery)
}

// fmtOptions writes the options' non-zero fields as a Go literal.
func fmtOptions(o *redis.Options) string {
	v := reflect.ValueOf(o).Elem()
	var fields []string
	for i := range v.NumField() {
		f := v.Field(i)
		if !v.Type().Field(i).IsExported() || f.IsZero() {
			continue
		}
		switch f.Kind() {
		case reflect.Func, reflect.Pointer, reflect.Interface, reflect.Slice, reflect.Map:
			fields = append(fields, v.Type().Field(i).Name+": (set)")
		default:
			fields = append(fields, fmt.Sprintf("%s: %v", v.Type().Field(i).Name, f.Interface()))
		}
	}
	return "&redis.Options{" + strings.Join(fields, ", ") + "}"
}

// report prints the table, writes it with the method and the plot to dir,
// and fails when mutual exclusion was violated.
func (r *availResults) report(dir string) error {
	table := r.table()
	fmt.Print(table)
	var notes strings.Builder
	if len(r.violations) > 0 || len(r.notes) > 0 {
		notes.WriteString("\n### Notes\n\n")
		for _, v := range r.violations {
			fmt.Fprintf(&notes, "- SAFETY VIOLATION: %s\n", v)
		}
		for _, n := range r.notes {
			fmt.Fprintf(&notes, "- %s\n", n)
		}
		fmt.Print(notes.String())
	}
	doc := fmt.Sprintf("# Availability under faults\n\n```sh\n%s\n```\n\n%s\n\nMedians of %d interleaved rounds.\n\n%s%s\n![contended acquisitions per second by phase](availability.png)\n",
		command(), method(), *rounds, table, notes.String())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(dir+"/AVAILABILITY.md", []byte(doc), 0o644); err != nil {
		return err
	}
	if err := r.plot(dir + "/availability.png"); err != nil {
		return err
	}
	if len(r.violations) > 0 {
		return fmt.Errorf("mutual exclusion violated:\n  %s", strings.Join(r.violations, "\n  "))
	}
	return nil
}

// command is the command line that produced the report.
func command() string {
	return strings.TrimSpace("cd bench && ../scripts/with-redis-env.sh go run . " + strings.Join(os.Args[1:], " "))
}

// plot draws contended acquisitions/s per phase, absolute and as a ratio to
// fault-free, one bar per implementation and option set.
func (r *availResults) plot(path string) error {
	names := make([]string, len(phases))
	for i, ph := range phases {
		names[i] = ph.name
	}
	panel := func(title, ylabel, metric string) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text = title
		p.Y.Label.Text = ylabel
		w := vg.Points(9)
		n := len(optionSets) * len(implementations)
		k, top := 0, 0.0
		for _, set := range optionSets {
			for _, im := range implementations {
				vals := make(plotter.Values, len(phases))
				for i, ph := range phases {
					if v := r.median(set.name, im.name, ph.name, metric); !math.IsNaN(v) {
						vals[i] = v
						top = max(top, v)
					}
				}
				bc, err := plotter.NewBarChart(vals, w)
				if err != nil {
					return nil, err
				}
				bc.LineStyle.Width = vg.Length(0)
				bc.Color = plotutil.Color(k)
				bc.Offset = w * vg.Length(float64(k)-float64(n-1)/2)
				p.Add(bc)
				p.Legend.Add(im.name+", "+set.name, bc)
				k++
			}
		}
		p.Legend.Top = true
		if top == 0 {
			top = 1
		}
		p.Y.Min, p.Y.Max = 0, 1.45*top // room for the legend above the bars
		p.NominalX(names...)
		return p, nil
	}
	abs, err := panel("contended acquisitions/s, 8 processes, one key", "acquisitions/s", "acq")
	if err != nil {
		return err
	}
	rel, err := panel("the same, as a ratio to fault-free", "× fault-free", "acq×")
	if err != nil {
		return err
	}
	img := vgimg.New(14*vg.Inch, 5*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Inch / 3, PadTop: vg.Inch / 8, PadBottom: vg.Inch / 8, PadLeft: vg.Inch / 8, PadRight: vg.Inch / 8}
	canvases := plot.Align([][]*plot.Plot{{abs, rel}}, tiles, dc)
	abs.Draw(canvases[0][0])
	rel.Draw(canvases[0][1])
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
