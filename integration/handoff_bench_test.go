package integration

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redlock-go/redlock/redlock"
)

// BenchmarkHandoff measures how long a lock stays idle between holders:
// with 8 waiters queued on one lock across five real nodes, the time from
// the holder's Unlock returning to the next holder's Lock returning (it can
// be negative: the next holder may win before the release's last replies
// arrive). Each participant has its own clients and Redlock, as separate
// processes would. One iteration is one handoff. Reported: p50 and p99 in
// milliseconds, with release notification and with polling only.
//
//	make bench-handoff
func BenchmarkHandoff(b *testing.B) {
	c := startCluster(b, 5)
	for _, mode := range []struct {
		name   string
		notify bool
	}{{"notify", true}, {"poll", false}} {
		b.Run(mode.name, func(b *testing.B) {
			benchHandoff(b, c, mode.notify)
		})
	}
}

func benchHandoff(b *testing.B, c *Cluster, notify bool) {
	b.Helper()
	const participants = 9 // one holder and 8 waiters
	key := "handoff:" + b.Name()
	var (
		mu        sync.Mutex
		seq       int
		released  = map[int]time.Time{} // acquisition k's Unlock returned
		handoffs  = make(chan time.Duration, 1024)
		ctx, stop = context.WithCancel(context.Background())
		wg        sync.WaitGroup
		advanced  = sync.NewCond(&mu) // broadcast at every acquisition
	)
	for range participants {
		m := newMutex(b, newRedlock(b, c), key, redlock.WithNotification(notify))
		wg.Go(func() {
			for {
				if err := m.Lock(ctx); err != nil {
					return // stopped
				}
				at := time.Now()
				mu.Lock()
				seq++
				k := seq
				prev, ok := released[k-1]
				advanced.Broadcast()
				mu.Unlock()
				if ok {
					select {
					case handoffs <- at.Sub(prev):
					case <-ctx.Done():
					}
				}
				time.Sleep(time.Millisecond) // the critical section
				_ = m.Unlock(context.Background())
				mu.Lock()
				released[k] = time.Now()
				// Back to the end of the queue: wait for someone else to
				// take the lock before trying again, so that every handoff
				// goes to one of the 8 waiters.
				for seq == k && ctx.Err() == nil {
					advanced.Wait()
				}
				mu.Unlock()
			}
		})
	}
	var got []time.Duration
	for b.Loop() {
		got = append(got, <-handoffs)
	}
	stop()
	mu.Lock()
	advanced.Broadcast()
	mu.Unlock()
	wg.Wait()
	slices.Sort(got)
	q := func(p float64) float64 {
		return float64(got[int(p*float64(len(got)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(0, "ns/op")
}
