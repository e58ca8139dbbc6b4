package main

import (
	"fmt"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// results holds every round's figure per implementation and metric.
type results struct {
	impls  []string
	values map[string]map[string][]float64
}

func newResults() *results { return &results{values: map[string]map[string][]float64{}} }

func (r *results) add(impl, metric string, v float64) {
	if r.values[impl] == nil {
		r.values[impl] = map[string][]float64{}
		r.impls = append(r.impls, impl)
	}
	r.values[impl][metric] = append(r.values[impl][metric], v)
}

// median of the rounds; ok is false when the metric was not measured.
func (r *results) median(impl, metric string) (float64, bool) {
	vs := slices.Clone(r.values[impl][metric])
	if len(vs) == 0 {
		return 0, false
	}
	slices.Sort(vs)
	return vs[len(vs)/2], true
}

var rows = []struct {
	metric, label, format string
	lowerIsBetter         bool
}{
	{"p50", "lock+unlock p50, 1 goroutine (µs)", "%.0f", true},
	{"p99", "lock+unlock p99, 1 goroutine (µs)", "%.0f", true},
	{"pairs1", "pairs/s, 1 goroutine, distinct keys", "%.0f", false},
	{"pairs8", "pairs/s, 8 goroutines, distinct keys", "%.0f", false},
	{"pairs64", "pairs/s, 64 goroutines, distinct keys", "%.0f", false},
	{"attempts", "contended attempts/s, 8 goroutines, one key", "%.0f", false},
	{"acquisitions", "contended acquisitions/s, 8 goroutines, one key", "%.0f", false},
	{"allocs", "heap allocations per pair", "%.0f", true},
	{"fast", "lock p50, via proxies, all nodes fast (ms)", "%.2f", true},
	{"slow", "lock p50, via proxies, 2 of 5 nodes +50 ms (ms)", "%.2f", true},
}

// table renders the medians, each with its ratio to redsync's.
func (r *results) table() string {
	var b strings.Builder
	b.WriteString("| metric |")
	for _, im := range r.impls {
		fmt.Fprintf(&b, " %s |", im)
	}
	b.WriteString("\n|---|")
	for range r.impls {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, row := range rows {
		fmt.Fprintf(&b, "| %s |", row.label)
		base, hasBase := r.median("redsync", row.metric)
		for _, im := range r.impls {
			v, ok := r.median(im, row.metric)
			if !ok {
				b.WriteString(" n/a |")
				continue
			}
			fmt.Fprintf(&b, " "+row.format, v)
			if hasBase && base != 0 && im != "redsync" {
				fmt.Fprintf(&b, " (%.2fx)", v/base)
			}
			b.WriteString(" |")
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\nMedians of %d interleaved rounds; ratios are to redsync's figure in the same run.\n", *rounds)
	return b.String()
}

// plot draws pairs/s at 1, 8 and 64 goroutines per implementation.
func (r *results) plot(path string) error {
	p := plot.New()
	p.Title.Text = "lock+unlock pairs per second, distinct keys, five Redis nodes"
	p.Y.Label.Text = "pairs/s"
	w := vg.Points(14)
	var bars []plot.Plotter
	for i, im := range r.impls {
		vals := make(plotter.Values, 0, 3)
		for _, g := range []string{"pairs1", "pairs8", "pairs64"} {
			v, _ := r.median(im, g)
			vals = append(vals, v)
		}
		bc, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return err
		}
		bc.LineStyle.Width = vg.Length(0)
		bc.Color = plotutil.Color(i)
		bc.Offset = w * vg.Length(float64(i)-float64(len(r.impls)-1)/2)
		p.Legend.Add(im, bc)
		bars = append(bars, bc)
	}
	p.Add(bars...)
	p.Legend.Top = true
	p.Legend.Left = true
	p.NominalX("1 goroutine", "8 goroutines", "64 goroutines")
	return p.Save(8*vg.Inch, 4.5*vg.Inch, path)
}
