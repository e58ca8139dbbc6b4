package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/integration"
)

// BenchmarkPair is one lock+unlock pair per op on distinct keys, for
// profiling and for benchstat comparisons of the library against itself:
//
//	go test -run '^$' -bench Pair -count 10 -cpuprofile cpu.out
//
// It uses the nodes in REDLOCK_BENCH_ADDRS (comma-separated host:port) when
// set, and otherwise starts five containers with the integration harness.
func BenchmarkPair(b *testing.B) {
	addrs := strings.Split(os.Getenv("REDLOCK_BENCH_ADDRS"), ",")
	if addrs[0] == "" {
		c, err := integration.Start(context.Background(), 5)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close(context.Background()) })
		addrs = addrs[:0]
		for i := range c.Len() {
			addrs = append(addrs, c.Addr(i))
		}
	}
	for _, f := range append(factories[:len(factories):len(factories)], newFencedImpl, newRestartDelayImpl, newReadOneNameImpl) {
		for _, par := range []int{1, 64} {
			clients := make([]redis.UniversalClient, len(addrs))
			for i, a := range addrs {
				o := clientOptions()
				o.Addr = a
				clients[i] = redis.NewClient(o)
			}
			im := f(clients)
			b.Run(fmt.Sprintf("%s/goroutines=%d", strings.ReplaceAll(im.name, " ", "_"), par), func(b *testing.B) {
				ctx := context.Background()
				if im.ready != nil {
					im.ready()
					b.ResetTimer()
				}
				var seq atomic.Int64
				b.ReportAllocs()
				if par == 1 {
					// A lone caller's median pair, beside the mean
					// (ns/op): the figure docs/PERFORMANCE.md compares.
					took := make([]time.Duration, 0, 1<<16)
					for b.Loop() {
						start := time.Now()
						pair(ctx, b, im, fmt.Sprint("pair:", seq.Add(1)))
						if len(took) < cap(took) {
							took = append(took, time.Since(start))
						}
					}
					slices.Sort(took)
					b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
					return
				}
				b.SetParallelism(par / max(1, testingProcs()))
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						pair(ctx, b, im, fmt.Sprint("pair:", seq.Add(1)))
					}
				})
			})
			im.close()
			closeAll(clients)
		}
	}
}

func pair(ctx context.Context, b *testing.B, im impl, key string) { //nolint:thelper // b.Helper would cost every pair measured
	rel, err := im.lock(ctx, key)
	if err != nil {
		b.Fatal(err)
	}
	if err := rel(ctx); err != nil {
		b.Fatal(err)
	}
}

func testingProcs() int { return runtimeGOMAXPROCS() }
