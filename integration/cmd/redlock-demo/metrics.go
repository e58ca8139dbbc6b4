package main

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/redlock-go/redlock/redlockotel"
)

// telemetry is the demo's OpenTelemetry side: one redlockotel Observer
// shared by every worker's Redlock, recording into an in-memory reader that
// the demo reads at its end, where a real program would export.
type telemetry struct {
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
	obs    *redlockotel.Observer
}

func newTelemetry() (*telemetry, error) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	obs, err := redlockotel.NewObserver(redlockotel.WithMeterProvider(mp))
	if err != nil {
		return nil, err
	}
	return &telemetry{reader: reader, mp: mp, obs: obs}, nil
}

// print prints a few of the instruments as collected now.
func (t *telemetry) print(addrs map[string]string) error {
	var rm metricdata.ResourceMetrics
	if err := t.reader.Collect(context.Background(), &rm); err != nil {
		return err
	}
	fmt.Println()
	fmt.Println("metrics (OpenTelemetry, redlockotel, read through the SDK's ManualReader)")
	for _, sm := range rm.ScopeMetrics {
		byName := map[string]metricdata.Metrics{}
		for _, m := range sm.Metrics {
			byName[m.Name] = m
		}
		printDurations(byName)
		printNodes(byName, addrs)
	}
	return nil
}

// printDurations prints the acquisitions' and holds' durations and the
// losses.
func printDurations(byName map[string]metricdata.Metrics) {
	if h, ok := byName["redlock.acquire.duration"].Data.(metricdata.Histogram[float64]); ok {
		fmt.Println("  redlock.acquire.duration (TryLock calls) by redlock.outcome:")
		for _, p := range sortedPoints(h.DataPoints, redlockotel.OutcomeKey) {
			fmt.Printf("    %-13s %6d calls, p50 %v, p99 %v\n", attr(p.Attributes, redlockotel.OutcomeKey), p.Count, seconds(quantile(p, 0.5)), seconds(quantile(p, 0.99)))
		}
	}
	if h, ok := byName["redlock.hold.duration"].Data.(metricdata.Histogram[float64]); ok {
		fmt.Println("  redlock.hold.duration by redlock.end:")
		for _, p := range sortedPoints(h.DataPoints, redlockotel.EndKey) {
			fmt.Printf("    %-13s %6d acquisitions, mean %v\n", attr(p.Attributes, redlockotel.EndKey), p.Count, seconds(p.Sum/float64(max(p.Count, 1))))
		}
	}
	if s, ok := byName["redlock.lost"].Data.(metricdata.Sum[int64]); ok {
		n := int64(0)
		for _, p := range s.DataPoints {
			n += p.Value
		}
		fmt.Printf("  redlock.lost: %d\n", n)
	}
}

// printNodes prints the node errors and the nodes' health, by node.
func printNodes(byName map[string]metricdata.Metrics, addrs map[string]string) {
	if s, ok := byName["redlock.node.errors"].Data.(metricdata.Sum[int64]); ok {
		fmt.Println("  redlock.node.errors by server.address and error.type:")
		points := s.DataPoints
		sort.Slice(points, func(i, j int) bool {
			a, b := points[i].Attributes, points[j].Attributes
			return addrs[attr(a, redlockotel.ServerAddressKey)]+attr(a, redlockotel.ErrorTypeKey) <
				addrs[attr(b, redlockotel.ServerAddressKey)]+attr(b, redlockotel.ErrorTypeKey)
		})
		for _, p := range points {
			addr := attr(p.Attributes, redlockotel.ServerAddressKey)
			fmt.Printf("    %-6s %-16s %-10s %6d\n", addrs[addr], addr, attr(p.Attributes, redlockotel.ErrorTypeKey), p.Value)
		}
	}
	if g, ok := byName["redlock.node.up"].Data.(metricdata.Gauge[int64]); ok {
		fmt.Print("  redlock.node.up:")
		points := g.DataPoints
		sort.Slice(points, func(i, j int) bool {
			return addrs[attr(points[i].Attributes, redlockotel.ServerAddressKey)] < addrs[attr(points[j].Attributes, redlockotel.ServerAddressKey)]
		})
		for _, p := range points {
			fmt.Printf(" %s=%d", addrs[attr(p.Attributes, redlockotel.ServerAddressKey)], p.Value)
		}
		fmt.Println()
	}
}

func (t *telemetry) close() { _ = t.mp.Shutdown(context.Background()) }

// sortedPoints returns ps sorted by their value of key.
func sortedPoints(ps []metricdata.HistogramDataPoint[float64], key attribute.Key) []metricdata.HistogramDataPoint[float64] {
	out := append([]metricdata.HistogramDataPoint[float64](nil), ps...)
	sort.Slice(out, func(i, j int) bool { return attr(out[i].Attributes, key) < attr(out[j].Attributes, key) })
	return out
}

func attr(set attribute.Set, key attribute.Key) string {
	v, _ := set.Value(key)
	return v.String()
}

// quantile estimates the q-quantile of a histogram point, interpolating
// linearly within the bucket it falls in, as Prometheus'
// histogram_quantile does.
func quantile(p metricdata.HistogramDataPoint[float64], q float64) float64 {
	if p.Count == 0 {
		return math.NaN()
	}
	rank := q * float64(p.Count)
	seen := 0.0
	for i, n := range p.BucketCounts {
		if n == 0 || seen+float64(n) < rank {
			seen += float64(n)
			continue
		}
		lo, hi := 0.0, 0.0
		if i > 0 {
			lo = p.Bounds[i-1]
		}
		if i < len(p.Bounds) {
			hi = p.Bounds[i]
		} else if v, ok := p.Max.Value(); ok {
			hi = v // the overflow bucket ends at the largest value seen
		} else {
			return lo
		}
		return lo + (hi-lo)*(rank-seen)/float64(n)
	}
	return p.Sum / float64(p.Count)
}

func seconds(s float64) time.Duration {
	if math.IsNaN(s) {
		return 0
	}
	return time.Duration(s * float64(time.Second)).Round(10 * time.Microsecond)
}
