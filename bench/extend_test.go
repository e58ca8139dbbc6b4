package main

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-go/redlock/redlock"
)

// BenchmarkExtend is one held Mutex extended b.N times in a row by 64
// goroutines, each on a lock of its own: the extension path alone
// (renewal's, called by hand), with and without an Observer, whose node
// reports cost a timer per request where they are kept per request.
//
//	REDLOCK_BENCH_ADDRS=127.0.0.1:7101,... go test -run '^$' -bench Extend -benchmem . -args -defaults
func BenchmarkExtend(b *testing.B) {
	addrs := benchAddrs(b)
	for _, observed := range []bool{false, true} {
		name := "plain"
		opts := []redlock.Option{redlock.WithTTL(10 * time.Second)}
		if observed {
			name = "observed"
			opts = append(opts, redlock.WithObserver(&renewalFailures{b: b}))
		}
		b.Run(name, func(b *testing.B) {
			clients := benchClients(addrs)
			defer closeAll(clients)
			rl, err := redlock.New(clients, opts...)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			defer func() { _ = rl.Close(ctx) }()
			run := renewalRuns.Add(1)
			b.SetParallelism(32) // 64 goroutines on two cores
			b.ReportAllocs()
			client0 := selfCPU()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				m, err := rl.NewMutex("extend:" + renewalProcess + ":" + name + ":" + time.Now().Format("150405.000000000") + ":" + string(rune('a'+run%26)))
				if err != nil {
					b.Error(err)
					return
				}
				if err := m.Lock(ctx); err != nil {
					b.Error(err)
					return
				}
				defer func() { _ = m.Unlock(ctx) }()
				for pb.Next() {
					if err := m.Extend(ctx); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64((selfCPU()-client0).Nanoseconds())/1e3/float64(b.N), "client-µs/op")
		})
	}
}
