package main

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// table is the medians of every build side by side, in Markdown, with
// each build's ratio to the first.
func table(builds []build) string {
	t := &sideBySide{builds: builds}
	less := ""
	if *setup {
		less = " less a run of one"
	}
	fmt.Fprintf(&t.b, "\n%s, %d ops per run%s, %d rounds, %d nodes; medians per op\n\n", *bench, *ops, less, *rounds, *nodes)
	t.b.WriteString("| per op |")
	for _, bd := range builds {
		fmt.Fprintf(&t.b, " %s |", label(bd))
	}
	t.b.WriteString("\n|---|" + strings.Repeat("---:|", len(builds)) + "\n")
	t.row("wall time, µs", func(m measurement) float64 { return m.wall })
	client := "client CPU, µs"
	if !*setup {
		client += " (set-up included)"
	}
	t.row(client, func(m measurement) float64 { return m.client })
	t.row(fmt.Sprintf("%d servers' CPU, µs", *nodes), func(m measurement) float64 { return m.servers })
	// A script's own commands count in its EVALSHA's time and again
	// under their own names, as INFO commandstats reports them.
	t.row("node 0 command time, µs (all commands)", measurement.nodeTotal)
	t.row("node 0 calls", measurement.totalCalls)
	t.row("allocs", func(m measurement) float64 { return m.allocs })
	if slices.ContainsFunc(builds, func(bd build) bool { return bd.failed > 0 }) {
		t.b.WriteString("| failed runs (not counted) |")
		for _, bd := range builds {
			fmt.Fprintf(&t.b, " %d |", bd.failed)
		}
		t.b.WriteString("\n")
	}
	for _, u := range namesOf(builds, func(m measurement) map[string]float64 { return m.metrics }) {
		t.row(u, func(m measurement) float64 { return m.metrics[u] })
	}
	for _, c := range namesOf(builds, func(m measurement) map[string]float64 { return m.calls }) {
		if !frequent(builds, c) {
			continue // set-up: HELLO, SCRIPT LOAD, CONFIG RESETSTAT, INFO
		}
		t.row("node 0 "+strings.ToUpper(c)+": calls", func(m measurement) float64 { return m.calls[c] })
		t.row("node 0 "+strings.ToUpper(c)+": µs per call", func(m measurement) float64 { return m.perCall(c) })
		t.row("node 0 "+strings.ToUpper(c)+": µs", func(m measurement) float64 { return m.usec[c] })
	}
	return t.b.String()
}

// sideBySide is a table being written: a row per figure, a column per
// build.
type sideBySide struct {
	b      strings.Builder
	builds []build
}

// row writes the median of get over each build's runs, with its ratio to
// the first build's; nothing when every median is 0.
func (t *sideBySide) row(name string, get func(measurement) float64) {
	vals := make([]float64, len(t.builds))
	for i, bd := range t.builds {
		xs := make([]float64, len(bd.runs))
		for j, m := range bd.runs {
			xs[j] = get(m)
		}
		vals[i] = median(xs)
	}
	if slices.Max(vals) == 0 {
		return
	}
	fmt.Fprintf(&t.b, "| %s |", name)
	for i, v := range vals {
		fmt.Fprintf(&t.b, " %s", format(v))
		if i > 0 && vals[0] != 0 {
			fmt.Fprintf(&t.b, " (%.2fx)", v/vals[0])
		}
		t.b.WriteString(" |")
	}
	t.b.WriteString("\n")
}

// firstLines returns the first n lines of text.
func firstLines(text string, n int) string {
	lines := strings.SplitN(text, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}

// namesOf returns the keys of what of every run of every build, sorted.
func namesOf(builds []build, of func(measurement) map[string]float64) []string {
	var names []string
	for _, bd := range builds {
		for _, m := range bd.runs {
			for k := range of(m) {
				if !slices.Contains(names, k) {
					names = append(names, k)
				}
			}
		}
	}
	sort.Strings(names)
	return names
}

// frequent reports whether some build's runs call command c at least
// once every 20 operations (median).
func frequent(builds []build, c string) bool {
	for _, bd := range builds {
		xs := make([]float64, len(bd.runs))
		for j, m := range bd.runs {
			xs[j] = m.calls[c]
		}
		if median(xs) >= 0.05 {
			return true
		}
	}
	return false
}

// label names a column: its build, and its benchmark when there are
// several ("redsync/64" for ^BenchmarkPair$/^redsync$/^goroutines=64$).
func label(bd build) string {
	rev := bd.rev
	if rev == "." {
		rev = "working tree"
	}
	if !strings.Contains(*bench, ",") {
		return rev
	}
	return rev + " " + bd.bench
}

// pattern is the -test.bench pattern of bench: IMPL/GOROUTINES is
// BenchmarkPair's run of the implementation named IMPL (spaces as
// underscores) at GOROUTINES goroutines; anything else is a pattern
// already.
func pattern(bench string) string {
	impl, g, ok := strings.Cut(bench, "/")
	if !ok || strings.ContainsAny(bench, "^$") || strings.HasPrefix(bench, "Benchmark") || strings.Contains(g, "/") {
		return bench
	}
	return "^BenchmarkPair$/^" + regexp.QuoteMeta(impl) + "$/^goroutines=" + regexp.QuoteMeta(g) + "$"
}

func format(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}
