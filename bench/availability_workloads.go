package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// safety checks mutual exclusion: every holder's interval on this process's
// monotonic clock, and a counter incremented non-atomically under the lock.
type safety struct {
	mu        sync.Mutex
	intervals [][2]time.Time
	order     []int // holder of each acquisition, in order
	counter   atomic.Int64
	expired   int // acquisitions whose validity had ended when Lock returned

	overlaps, lost, acquisitions int // set by check
}

// critical is one holder's critical section: read the counter, hold, write
// it back plus one. The interval ends at the release or at the end of the
// acquisition's validity, whichever is first.
func (s *safety) critical(id int, m mutex) {
	start := time.Now()
	until := m.Until()
	s.mu.Lock()
	s.order = append(s.order, id)
	s.mu.Unlock()
	v := s.counter.Load() // a read-modify-write in two steps: only the lock protects it
	time.Sleep(holdFor)
	s.counter.Store(v + 1)
	end := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if until.Before(end) {
		end = until
	}
	if end.Before(start) {
		s.expired++
		end = start
	}
	s.intervals = append(s.intervals, [2]time.Time{start, end})
}

// check counts overlapping intervals and lost updates.
func (s *safety) check() {
	s.mu.Lock()
	defer s.mu.Unlock()
	iv := slices.Clone(s.intervals)
	slices.SortFunc(iv, func(a, b [2]time.Time) int { return a[0].Compare(b[0]) })
	s.overlaps = 0
	for i := 1; i < len(iv); i++ {
		if iv[i][0].Before(iv[i-1][1]) {
			s.overlaps++
		}
		if iv[i][1].Before(iv[i-1][1]) {
			iv[i][1] = iv[i-1][1] // carry the latest end forward
		}
	}
	s.acquisitions = len(s.intervals)
	s.lost = s.acquisitions - int(s.counter.Load())
}

type contendedResult struct {
	*safety
	elapsed      time.Duration
	waits        []time.Duration
	perClient    []int
	lockErrors   int
	unlockErrors int
	peak         int
}

func (c *contendedResult) maxShare() float64 {
	if c.acquisitions == 0 {
		return math.NaN()
	}
	return float64(slices.Max(c.perClient)) / float64(c.acquisitions)
}

func (c *contendedResult) longestStreak() int {
	best, run := 0, 0
	for i, id := range c.order {
		if i > 0 && id == c.order[i-1] {
			run++
		} else {
			run = 1
		}
		best = max(best, run)
	}
	return best
}

// contended runs the contenders, each its own process, on one key for the
// run's duration under the phase's fault: Lock, hold, Unlock.
func (a *availability) contended(ctx context.Context, im implementation, set optionSet, ph phase, key string) (*contendedResult, error) {
	gc := newGoroutineCounter(ph.viaProxy)
	base := gc.settled()
	ps, err := a.processes(contenders, im, set.opts, ph.viaProxy)
	if err != nil {
		return nil, err
	}
	defer a.closeProcesses(ps)
	mus := make([]mutex, len(ps))
	for i, p := range ps {
		if mus[i], err = p.lc.mutex(key); err != nil {
			return nil, err
		}
	}
	warmUp(ps, key+":warm")

	res := &contendedResult{safety: &safety{}, perClient: make([]int, len(ps))}
	end := time.Now().Add(*duration)
	heal, err := ph.apply(ctx, a, end)
	if err != nil {
		return nil, errors.Join(err, heal(ctx))
	}
	stopSampling := sample(gc)
	start := time.Now()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for id, m := range mus {
		wg.Go(func() {
			for time.Now().Before(end) {
				lctx, cancel := context.WithTimeout(ctx, lockWait)
				t0 := time.Now()
				err := m.Lock(lctx)
				waited := time.Since(t0)
				cancel()
				if err != nil {
					mu.Lock()
					res.lockErrors++
					mu.Unlock()
					if waited < time.Millisecond {
						time.Sleep(time.Millisecond) // no busy loop on an immediate error
					}
					continue
				}
				res.critical(id, m)
				uctx, cancel := context.WithTimeout(ctx, lockWait)
				err = m.Unlock(uctx)
				cancel()
				mu.Lock()
				res.waits = append(res.waits, waited)
				res.perClient[id]++
				if err != nil {
					res.unlockErrors++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	res.peak = stopSampling() - base
	if err := heal(ctx); err != nil {
		return nil, err
	}
	res.check()
	return res, nil
}

type uncontendedResult struct {
	pairs float64 // per second
	peak  int
}

// uncontended runs TryLock+Unlock pairs on distinct keys from one process
// for the run's duration under the phase's fault.
func (a *availability) uncontended(ctx context.Context, im implementation, set optionSet, ph phase, key string) (uncontendedResult, error) {
	gc := newGoroutineCounter(ph.viaProxy)
	base := gc.settled()
	ps, err := a.processes(1, im, set.opts, ph.viaProxy)
	if err != nil {
		return uncontendedResult{}, err
	}
	defer a.closeProcesses(ps)
	lc := ps[0].lc
	warmUp(ps, key+"warm")

	end := time.Now().Add(*duration)
	heal, err := ph.apply(ctx, a, end)
	if err != nil {
		return uncontendedResult{}, errors.Join(err, heal(ctx))
	}
	stopSampling := sample(gc)
	start := time.Now()
	var n atomic.Int64
	var wg sync.WaitGroup
	for w := range uncontendedG {
		wg.Go(func() {
			for i := 0; time.Now().Before(end); i++ {
				m, err := lc.mutex(fmt.Sprint(key, w, ":", i))
				if err != nil {
					time.Sleep(time.Millisecond)
					continue
				}
				lctx, cancel := context.WithTimeout(ctx, lockWait)
				if err := m.TryLock(lctx); err == nil {
					if m.Unlock(lctx) == nil {
						n.Add(1)
					}
				}
				cancel()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	peak := stopSampling() - base
	if err := heal(ctx); err != nil {
		return uncontendedResult{}, err
	}
	return uncontendedResult{pairs: float64(n.Load()) / elapsed.Seconds(), peak: peak}, nil
}

// pausedMajority pauses a majority of the nodes while the contenders make
// single attempts, resumes them, and returns the seconds from the resume
// until an attempt succeeded (+Inf if none did within recoverLimit).
func (a *availability) pausedMajority(ctx context.Context, im implementation, set optionSet, key string) (float64, *safety, error) {
	ps, err := a.processes(contenders, im, set.opts, false)
	if err != nil {
		return 0, nil, err
	}
	defer a.closeProcesses(ps)
	mus := make([]mutex, len(ps))
	for i, p := range ps {
		if mus[i], err = p.lc.mutex(key); err != nil {
			return 0, nil, err
		}
	}
	warmUp(ps, key+":warm")
	s := &safety{}

	if err := a.each(ctx, majority, a.cluster.Pause); err != nil {
		return 0, nil, errors.Join(err, a.each(ctx, majority, a.cluster.Unpause))
	}
	c := &pausedContenders{first: make(chan time.Time, 1), stop: make(chan struct{})}
	var wg sync.WaitGroup
	for id, m := range mus {
		wg.Go(func() { c.contend(ctx, s, id, m) })
	}
	time.Sleep(majorityWait)
	t0 := time.Now()
	c.resumed.Store(&t0)
	unpauseErr := a.each(ctx, majority, a.cluster.Unpause)
	rec := math.Inf(1)
	timer := time.NewTimer(recoverLimit)
	select {
	case got := <-c.first:
		rec = got.Sub(t0).Seconds()
	case <-timer.C:
	}
	timer.Stop()
	close(c.stop)
	wg.Wait()
	if unpauseErr != nil {
		return 0, nil, unpauseErr
	}
	if n := c.during.Load(); n > 0 {
		a.res.note("%s, %s: %d acquisitions while 3 of 5 nodes were paused", set.name, im.name, n)
	}
	s.check()
	return rec, s, nil
}

// pausedContenders are pausedMajority's contenders: each makes single
// attempts until stop, and the first to succeed after the resume says when.
type pausedContenders struct {
	resumed atomic.Pointer[time.Time] // set just before the unpause
	during  atomic.Int64              // acquisitions while the majority was paused
	first   chan time.Time
	stop    chan struct{}
}

// contend is contender id's loop on m, its critical sections checked by s.
func (c *pausedContenders) contend(ctx context.Context, s *safety, id int, m mutex) {
	for {
		select {
		case <-c.stop:
			return
		default:
		}
		actx, cancel := context.WithTimeout(ctx, lockWait)
		err := m.TryLock(actx)
		cancel()
		if err != nil {
			select {
			case <-c.stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		if c.resumed.Load() == nil {
			c.during.Add(1)
		} else {
			select {
			case c.first <- time.Now():
			default:
			}
		}
		s.critical(id, m)
		uctx, cancel := context.WithTimeout(ctx, lockWait)
		_ = m.Unlock(uctx)
		cancel()
	}
}

// goroutineCounter counts this process's goroutines. With excludeProxy it
// leaves out those of the in-process toxiproxy (a few per proxied
// connection), which are the benchmark's network, not the lock clients'.
type goroutineCounter struct {
	excludeProxy bool
	recs         []runtime.StackRecord
	isProxy      map[uintptr]bool // by PC
}

func newGoroutineCounter(excludeProxy bool) *goroutineCounter {
	return &goroutineCounter{excludeProxy: excludeProxy, isProxy: map[uintptr]bool{}}
}

func (g *goroutineCounter) count() int {
	if !g.excludeProxy {
		return runtime.NumGoroutine()
	}
	for {
		n, ok := runtime.GoroutineProfile(g.recs)
		if !ok {
			g.recs = make([]runtime.StackRecord, n+n/4+64)
			continue
		}
		count := 0
	goroutines:
		for _, r := range g.recs[:n] {
			for _, pc := range r.Stack() {
				proxy, seen := g.isProxy[pc]
				if !seen {
					f := runtime.FuncForPC(pc - 1)
					proxy = f != nil && strings.HasPrefix(f.Name(), "github.com/Shopify/toxiproxy/")
					g.isProxy[pc] = proxy
				}
				if proxy {
					continue goroutines
				}
			}
			count++
		}
		return count
	}
}

// settled returns the count once the goroutines of earlier runs have
// ended: when it has not dropped for settleFor, or after settleLimit.
func (g *goroutineCounter) settled() int {
	n := g.count()
	stable := time.Duration(0)
	for end := time.Now().Add(settleLimit); stable < settleFor && time.Now().Before(end); {
		time.Sleep(settleFor / 4)
		if m := g.count(); m < n {
			n, stable = m, 0
		} else {
			stable += settleFor / 4
		}
	}
	return n
}

// sample records the peak goroutine count every sampleEvery until the
// returned function is called, which returns the peak.
func sample(g *goroutineCounter) func() int {
	stop := make(chan struct{})
	peak := make(chan int)
	go func() {
		p := g.count()
		t := time.NewTicker(sampleEvery)
		defer t.Stop()
		for {
			select {
			case <-stop:
				peak <- max(p, g.count())
				return
			case <-t.C:
				p = max(p, g.count())
			}
		}
	}()
	return func() int {
		close(stop)
		return <-peak
	}
}

func ratio(v, base float64) float64 {
	if base == 0 {
		return math.NaN()
	}
	return v / base
}

// quantileMs is the q-quantile of ds in milliseconds, NaN for none.
func quantileMs(ds []time.Duration, q float64) float64 {
	if len(ds) == 0 {
		return math.NaN()
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[int(q*float64(len(s)-1))]) / 1e6
}
