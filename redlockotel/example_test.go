package redlockotel_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/redlock-go/redlock/redlock"
	"github.com/redlock-go/redlock/redlockotel"
)

func Example() {
	// Three in-process Redis stand-ins; real code passes clients of N
	// independent Redis masters.
	clients, stop := standIns(3)
	defer stop()

	// Real code sets up exporters, or passes no option at all to use the
	// global providers. Here: an in-memory reader and span recorder.
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))

	obs, err := redlockotel.NewObserver(redlockotel.WithMeterProvider(mp), redlockotel.WithTracerProvider(tp))
	if err != nil {
		panic(err)
	}
	rl, err := redlock.New(clients, redlock.WithObserver(obs))
	if err != nil {
		panic(err)
	}
	defer rl.Close(context.Background())
	reg, err := obs.ObserveHealth(rl) // the node gauges; optional
	if err != nil {
		panic(err)
	}
	defer func() { _ = reg.Unregister() }()

	ctx, job := tp.Tracer("example").Start(context.Background(), "nightly-report")
	mu, _ := rl.NewMutex("report:nightly", redlock.WithTTL(5*time.Second))
	if err := mu.Lock(ctx); err != nil {
		panic(err)
	}
	other, _ := rl.NewMutex("report:nightly")
	fmt.Println("second TryLock:", other.TryLock(ctx) != nil)
	_ = mu.Unlock(ctx)
	job.End()

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		panic(err)
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == "redlock.acquire.duration" {
			for _, p := range h.DataPoints {
				outcome, _ := p.Attributes.Value(redlockotel.OutcomeKey)
				fmt.Printf("%s{%s} count %d\n", m.Name, outcome.AsString(), p.Count)
			}
		}
	}
	for _, s := range spans.Ended() {
		fmt.Printf("span %s, child of the job: %t, status %v\n", s.Name(), s.Parent().SpanID() == job.SpanContext().SpanID(), s.Status().Code)
	}
	// Unordered output:
	// second TryLock: true
	// redlock.acquire.duration{acquired} count 1
	// redlock.acquire.duration{not_acquired} count 1
	// span redlock.Lock, child of the job: true, status Unset
	// span redlock.TryLock, child of the job: true, status Error
	// span redlock.Unlock, child of the job: true, status Unset
	// span nightly-report, child of the job: false, status Unset
}

// standIns starts n in-process Redis stand-ins and returns a client of
// each, and what stops them.
func standIns(n int) ([]redis.UniversalClient, func()) {
	var clients []redis.UniversalClient
	var stops []func()
	for range n {
		m := miniredis.NewMiniRedis()
		if err := m.Start(); err != nil {
			panic(err)
		}
		c := redis.NewClient(&redis.Options{Addr: m.Addr()})
		clients = append(clients, c)
		stops = append(stops, func() { _ = c.Close(); m.Close() })
	}
	return clients, func() {
		for _, stop := range stops {
			stop()
		}
	}
}
