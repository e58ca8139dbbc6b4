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
	var b strings.Builder
	fmt.Fprintf(&b, "\n%s, %d ops per run, %d rounds, %d nodes; medians per op\n\n", *bench, *ops, *rounds, *nodes)
	b.WriteString("| per op |")
	for _, bd := range builds {
		fmt.Fprintf(&b, " %s |", label(bd))
	}
	b.WriteString("\n|---|")
	for range builds {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	row := func(name string, get func(measurement) float64) {
		vals := make([]float64, len(builds))
		for i, bd := range builds {
			xs := make([]float64, len(bd.runs))
			for j, m := range bd.runs {
				xs[j] = get(m)
			}
			vals[i] = median(xs)
		}
		if slices.Max(vals) == 0 {
			return
		}
		fmt.Fprintf(&b, "| %s |", name)
		for i, v := range vals {
			fmt.Fprintf(&b, " %s", format(v))
			if i > 0 && vals[0] != 0 {
				fmt.Fprintf(&b, " (%.2fx)", v/vals[0])
			}
			b.WriteString(" |")
		}
		b.WriteString("\n")
	}
	row("wall time, µs", func(m measurement) float64 { return m.wall })
	row("client CPU, µs (set-up included)", func(m measurement) float64 { return m.client })
	row(fmt.Sprintf("%d servers' CPU, µs", *nodes), func(m measurement) float64 { return m.servers })
	// A script's own commands count in its EVALSHA's time and again
	// under their own names, as INFO commandstats reports them.
	row("node 0 command time, µs (all commands)", func(m measurement) float64 { return m.nodeTotal() })
	row("node 0 calls", func(m measurement) float64 {
		t := 0.0
		for _, c := range m.calls {
			t += c
		}
		return t
	})
	row("allocs", func(m measurement) float64 { return m.allocs })
	if slices.ContainsFunc(builds, func(bd build) bool { return bd.failed > 0 }) {
		b.WriteString("| failed runs (not counted) |")
		for _, bd := range builds {
			fmt.Fprintf(&b, " %d |", bd.failed)
		}
		b.WriteString("\n")
	}
	for _, u := range namesOf(builds, func(m measurement) map[string]float64 { return m.metrics }) {
		row(u, func(m measurement) float64 { return m.metrics[u] })
	}
	cmds := namesOf(builds, func(m measurement) map[string]float64 { return m.calls })
	for _, c := range cmds {
		if !frequent(builds, c) {
			continue // set-up: HELLO, SCRIPT LOAD, CONFIG RESETSTAT, INFO
		}
		row("node 0 "+strings.ToUpper(c)+": calls", func(m measurement) float64 { return m.calls[c] })
		row("node 0 "+strings.ToUpper(c)+": µs per call", func(m measurement) float64 {
			if m.calls[c] == 0 {
				return 0
			}
			return m.usec[c] / m.calls[c]
		})
		row("node 0 "+strings.ToUpper(c)+": µs", func(m measurement) float64 { return m.usec[c] })
	}
	return b.String()
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
