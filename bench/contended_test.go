package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The contended benchmarks: one name, many contenders, one op per
// acquisition, for benchstat comparisons as BenchmarkPair is.
//
//	go test -run '^$' -bench 'Contended|Handoff' -count 6

// benchAddrs are the nodes of REDLOCK_BENCH_ADDRS; these benchmarks skip
// without them (BenchmarkPair starts containers instead).
func benchAddrs(b *testing.B) []string {
	b.Helper()
	addrs := strings.Split(os.Getenv("REDLOCK_BENCH_ADDRS"), ",")
	if addrs[0] == "" {
		b.Skip("REDLOCK_BENCH_ADDRS not set")
	}
	return addrs
}

func benchClients(addrs []string) []redis.UniversalClient {
	clients := make([]redis.UniversalClient, len(addrs))
	for i, a := range addrs {
		o := clientOptions()
		o.Addr = a
		clients[i] = redis.NewClient(o)
	}
	return clients
}

// BenchmarkContended is make bench's contended row: 8 goroutines of one
// process making single attempts on one name, releasing at once when they
// get it. An op is one acquisition; attempts/op is how many attempts each
// took.
func BenchmarkContended(b *testing.B) {
	addrs := benchAddrs(b)
	for _, f := range []factory{newRedlockImpl, newRedsyncImpl} {
		clients := benchClients(addrs)
		im := f(clients)
		b.Run(strings.ReplaceAll(im.name, " ", "_"), func(b *testing.B) {
			ctx := context.Background()
			key := fmt.Sprint("contended:", time.Now().UnixNano())
			var acq, att atomic.Int64
			target := int64(b.N)
			var wg sync.WaitGroup
			b.ResetTimer()
			for range 8 {
				wg.Go(func() {
					for acq.Load() < target {
						att.Add(1)
						rel, err := im.lock(ctx, key)
						if err != nil {
							continue
						}
						acq.Add(1)
						_ = rel(ctx)
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(att.Load())/float64(acq.Load()), "attempts/op")
		})
		im.close()
		closeAll(clients)
	}
}

// warmContenders makes the contenders' lock clients of im, each on clients
// of its own, each having taken and released a lock beside key once; they
// are closed at the end of b.
func warmContenders(b *testing.B, im implementation, addrs []string, key string) []lockClient {
	b.Helper()
	ctx := context.Background()
	var lcs []lockClient
	for range contenders {
		cs := benchClients(addrs)
		lc, err := im.new(cs)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			_ = lc.close(ctx)
			closeAll(cs)
		})
		lcs = append(lcs, lc)
		m, _ := lc.mutex(key + ":warm")
		if m.Lock(ctx) == nil {
			_ = m.Unlock(ctx)
		}
	}
	return lcs
}

// BenchmarkHandoff is the availability benchmark's contended run without
// faults: 8 clients, each with its own lock client and node clients as a
// process has, looping Lock, a 2 ms hold, Unlock on one name. An op is one
// acquisition. max-share is the largest share of one client in the
// acquisitions (1/8 is fair), max-wait-ms the longest successful Lock;
// handoff-p50-us the median time from a holder's Unlock call to the next
// holder's Lock returning, hold-p50-us the median hold (the sleep and what
// a loaded machine adds to it): ns/op is about their sum.
func BenchmarkHandoff(b *testing.B) {
	addrs := benchAddrs(b)
	for _, im := range handoffImpls {
		b.Run(im.name, func(b *testing.B) {
			ctx := context.Background()
			key := fmt.Sprint("handoff:", time.Now().UnixNano())
			lcs := warmContenders(b, im, addrs, key)
			var acq, failed atomic.Int64
			target := int64(b.N)
			shares := make([]int, len(lcs))
			waits := make([][]time.Duration, len(lcs))
			var inside atomic.Int32
			var overlaps atomic.Int32
			var gaps handoffGaps
			var wg sync.WaitGroup
			b.ResetTimer()
			for i, lc := range lcs {
				wg.Go(func() {
					for acq.Load() < target {
						m, waited, gave, err := lockOnce(ctx, lc, key)
						if err != nil {
							b.Error(err)
							return
						}
						if gave {
							failed.Add(1)
							continue
						}
						locked := time.Now()
						waits[i] = append(waits[i], waited)
						if inside.Add(1) != 1 {
							overlaps.Add(1)
						}
						gaps.locked(locked)
						time.Sleep(holdFor)
						inside.Add(-1)
						shares[i]++
						acq.Add(1)
						gaps.unlocking(locked)
						_ = m.Unlock(ctx)
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			if n := overlaps.Load(); n > 0 {
				b.Fatalf("%d overlapping holds", n)
			}
			var all2 []time.Duration
			for _, w := range waits {
				all2 = append(all2, w...)
			}
			slices.Sort(all2)
			b.ReportMetric(float64(slices.Max(shares))/float64(acq.Load()), "max-share")
			b.ReportMetric(float64(failed.Load()), "failed-locks")
			b.ReportMetric(float64(all2[len(all2)-1])/1e6, "max-wait-ms")
			b.ReportMetric(float64(all2[len(all2)*99/100])/1e6, "p99-wait-ms")
			gapMs, holdMs := gaps.medians()
			b.ReportMetric(gapMs*1e3, "handoff-p50-us")
			b.ReportMetric(holdMs*1e3, "hold-p50-us")
			gapMs, holdMs = gaps.means()
			b.ReportMetric(gapMs*1e3, "handoff-mean-us")
			b.ReportMetric(holdMs*1e3, "hold-mean-us")
		})
	}
}

// handoffGaps records, across contenders, each handoff (from a holder's
// Unlock call to the next holder's Lock returning) and each hold (from its
// Lock returning to its Unlock call: the 2 ms sleep, and what the loaded
// machine adds to it).
type handoffGaps struct {
	mu          sync.Mutex
	unlockedAt  time.Time
	gaps, holds []time.Duration
}

func (g *handoffGaps) locked(at time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.unlockedAt.IsZero() {
		g.gaps = append(g.gaps, at.Sub(g.unlockedAt))
	}
}

func (g *handoffGaps) unlocking(lockedAt time.Time) {
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.unlockedAt = now
	g.holds = append(g.holds, now.Sub(lockedAt))
}

// medians returns the median handoff and the median hold, in ms.
func (g *handoffGaps) medians() (gapMs, holdMs float64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return quantileMs(g.gaps, 0.5), quantileMs(g.holds, 0.5)
}

// means returns the mean handoff and the mean hold, in ms: ns/op is
// about their sum, where the medians leave the tails out.
func (g *handoffGaps) means() (gapMs, holdMs float64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return meanMs(g.gaps), meanMs(g.holds)
}

func meanMs(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return float64(sum) / float64(len(ds)) / 1e6
}

// lockOnce makes one Lock of key, bounded by lockWait, with a new value
// of lc: the value, how long its Lock took, and whether it gave up. A Lock
// that gave up (its wait bound, or its own bound on attempts: redsync's 32
// tries) is a failed Lock, counted, not a failed run: err is nil then.
func lockOnce(ctx context.Context, lc lockClient, key string) (m mutex, waited time.Duration, gave bool, err error) {
	m, err = lc.mutex(key)
	if err != nil {
		return nil, 0, false, err
	}
	lctx, cancel := context.WithTimeout(ctx, lockWait)
	defer cancel()
	start := time.Now()
	err = m.Lock(lctx)
	waited = time.Since(start)
	if err != nil && gaveUp(err) {
		return m, waited, true, nil
	}
	return m, waited, false, err
}
