package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/redlock-go/redlock/redlock"
)

// A workload is one client's loop over one primitive until ctx ends.
type workload func(ctx context.Context, s *Sim, c *client, rng *rand.Rand)

// resources names what each workload holds, for the liveness check.
var resources = map[string][]string{
	"mutex": {"m"}, "fenced": {"f"}, "reentrant": {"re"}, "multi": {"{ab}a", "{ab}b"},
	"rwmutex": {"rw"}, "semaphore": {"sem"}, "do": {"do"},
}

var workloads = map[string]workload{
	"mutex":     mutexLoop("m"),
	"fenced":    mutexLoop("f", redlock.WithFencing()),
	"reentrant": reentrantLoop,
	"multi":     multiLoop,
	"rwmutex":   rwLoop,
	"semaphore": semaphoreLoop,
	"do":        doLoop,
}

func workloadNames() []string {
	names := make([]string, 0, len(workloads))
	for n := range workloads {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// A window is what a holder watches: its validity's end and its loss.
type window interface {
	Until() time.Time
	Done() <-chan struct{}
}

// work is a critical section of client c: it reads the resource's
// counter, works for a while (now and then through a pause of its own that
// it does not notice, and through any pause of c's whole process), and
// writes the counter back plus one if its window still lasts, as a holder
// that checks Until before acting does. It returns when its window ended,
// or now.
func work(s *Sim, c *client, rng *rand.Rand, w window, res string, count bool) time.Time {
	v := s.hist.read(res)
	d := between(rng, 0, 30*time.Millisecond)
	switch p := rng.Float64(); {
	case p < 0.02:
		time.Sleep(s.cfg.TTL + d) // a pause: garbage collection, a stalled VM
	case p < 0.07:
		// It uses its lease to the end: it writes less than a millisecond
		// before Until, where a validity counted too long shows.
		d = time.Until(w.Until()) - between(rng, 0, time.Millisecond)
		fallthrough
	default:
		select {
		case <-time.After(d):
		case <-w.Done():
		}
	}
	s.awake(c.idx)
	now := time.Now()
	until := w.Until()
	lost := false
	select {
	case <-w.Done():
		lost = true
	default:
	}
	if count && !lost && now.Before(until) {
		s.hist.write(res, v+1)
	}
	if until.Before(now) {
		return until
	}
	return now
}

func waitFor(rng *rand.Rand) time.Duration { return between(rng, 50*time.Millisecond, time.Second) }

func idle(rng *rand.Rand) { time.Sleep(between(rng, 0, 20*time.Millisecond)) }

func unlockCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 5*time.Second)
}

func mutexLoop(name string, opts ...redlock.Option) workload {
	return func(ctx context.Context, s *Sim, c *client, rng *rand.Rand) {
		mu, err := c.rl.NewMutex(name, append(opts, redlock.WithTTL(s.cfg.TTL))...)
		if err != nil {
			panic(err)
		}
		for ctx.Err() == nil {
			attempt := time.Now()
			var err error
			if rng.IntN(4) == 0 {
				err = mu.TryLock(ctx)
			} else {
				err = mu.LockWithin(ctx, waitFor(rng))
			}
			if err != nil {
				idle(rng)
				continue
			}
			start := time.Now()
			fence := mu.Fence()
			end := work(s, c, rng, mu, name, true)
			s.hist.add(hold{client: c.idx, res: name, who: fmt.Sprintf("client %d", c.idx), attempt: attempt, start: start, end: end, fence: fence})
			uctx, cancel := unlockCtx()
			_ = mu.Unlock(uctx)
			cancel()
			idle(rng)
		}
	}
}

func reentrantLoop(ctx context.Context, s *Sim, c *client, rng *rand.Rand) {
	mu, err := c.rl.NewMutex("re", redlock.WithReentrant(), redlock.WithTTL(s.cfg.TTL))
	if err != nil {
		panic(err)
	}
	for ctx.Err() == nil {
		attempt := time.Now()
		if err := mu.LockWithin(ctx, waitFor(rng)); err != nil {
			idle(rng)
			continue
		}
		start := time.Now()
		holds := 1
		if rng.IntN(2) == 0 && mu.TryLock(ctx) == nil {
			holds++
		}
		end := work(s, c, rng, mu, "re", true)
		s.hist.add(hold{client: c.idx, res: "re", who: fmt.Sprintf("client %d", c.idx), attempt: attempt, start: start, end: end})
		uctx, cancel := unlockCtx()
		for range holds {
			_ = mu.Unlock(uctx)
		}
		cancel()
		idle(rng)
	}
}

// multiLoop takes the names a and b together, or one of them alone.
func multiLoop(ctx context.Context, s *Sim, c *client, rng *rand.Rand) {
	opts := []redlock.Option{redlock.WithTTL(s.cfg.TTL)}
	both, err := c.rl.NewMultiMutex([]string{"{ab}a", "{ab}b"}, opts...)
	if err != nil {
		panic(err)
	}
	a, _ := c.rl.NewMutex("{ab}a", opts...)
	b, _ := c.rl.NewMutex("{ab}b", opts...)
	for ctx.Err() == nil {
		mu, names := both, []string{"{ab}a", "{ab}b"}
		switch rng.IntN(3) {
		case 1:
			mu, names = a, names[:1]
		case 2:
			mu, names = b, names[1:]
		}
		attempt := time.Now()
		if err := mu.LockWithin(ctx, waitFor(rng)); err != nil {
			idle(rng)
			continue
		}
		start := time.Now()
		end := work(s, c, rng, mu, names[0], true)
		for _, n := range names {
			s.hist.add(hold{client: c.idx, res: n, who: fmt.Sprintf("client %d (%d names)", c.idx, len(names)), attempt: attempt, start: start, end: end})
		}
		uctx, cancel := unlockCtx()
		_ = mu.Unlock(uctx)
		cancel()
		idle(rng)
	}
}

func rwLoop(ctx context.Context, s *Sim, c *client, rng *rand.Rand) {
	rw, err := c.rl.NewRWMutex("rw", redlock.WithTTL(s.cfg.TTL))
	if err != nil {
		panic(err)
	}
	for ctx.Err() == nil {
		attempt := time.Now()
		writer := rng.IntN(3) == 0
		wctx, cancel := context.WithTimeout(ctx, waitFor(rng))
		take, kind, who := rw.RLock, shared, fmt.Sprintf("client %d reading", c.idx)
		if writer {
			take, kind, who = rw.Lock, exclusive, fmt.Sprintf("client %d writing", c.idx)
		}
		err := take(wctx)
		cancel()
		if err != nil {
			idle(rng)
			continue
		}
		start := time.Now()
		end := work(s, c, rng, rw, "rw", writer)
		s.hist.add(hold{client: c.idx, res: "rw", kind: kind, who: who, attempt: attempt, start: start, end: end})
		uctx, cancel := unlockCtx()
		if writer {
			_ = rw.Unlock(uctx)
		} else {
			_ = rw.RUnlock(uctx)
		}
		cancel()
		idle(rng)
	}
}

const permits = 2

func semaphoreLoop(ctx context.Context, s *Sim, c *client, rng *rand.Rand) {
	sem, err := c.rl.NewSemaphore("sem", permits, redlock.WithTTL(s.cfg.TTL))
	if err != nil {
		panic(err)
	}
	for ctx.Err() == nil {
		attempt := time.Now()
		wctx, cancel := context.WithTimeout(ctx, waitFor(rng))
		err := sem.Acquire(wctx)
		cancel()
		if err != nil {
			idle(rng)
			continue
		}
		start := time.Now()
		end := work(s, c, rng, sem, "sem", false)
		s.hist.add(hold{client: c.idx, res: "sem", kind: permit, limit: permits, who: fmt.Sprintf("client %d", c.idx), attempt: attempt, start: start, end: end})
		uctx, cancel := unlockCtx()
		_ = sem.Release(uctx)
		cancel()
		idle(rng)
	}
}

// doLoop runs work that outlasts the TTL under Do, which renews the lock.
func doLoop(ctx context.Context, s *Sim, c *client, rng *rand.Rand) {
	for ctx.Err() == nil {
		attempt := time.Now()
		_ = c.rl.Do(ctx, "do", func(fctx context.Context) error {
			mu := redlock.MutexFrom(fctx)
			start := time.Now()
			end := start
			for range 1 + rng.IntN(8) {
				end = work(s, c, rng, mu, "do", true)
				if fctx.Err() != nil || !time.Now().Before(mu.Until()) {
					break
				}
			}
			s.hist.add(hold{client: c.idx, res: "do", who: fmt.Sprintf("client %d", c.idx), attempt: attempt, start: start, end: end})
			return nil
		}, redlock.WithTTL(s.cfg.TTL)) // ErrNotAcquired, ErrLockLost: the nemesis' doing
		idle(rng)
	}
}
