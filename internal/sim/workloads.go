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
	"rwmutex": {"rw"}, "semaphore": {"sem"}, "do": {"do"}, "renewed": {"r0", "r1", "r2"},
}

// refusable are the workloads whose refusals (TryLock's, and LockWithin's
// once its wait ended) are judged (see Sim.refused).
var refusable = map[string]bool{"mutex": true, "fenced": true}

var workloads = map[string]workload{
	"mutex":     mutexLoop("m"),
	"fenced":    mutexLoop("f", redlock.WithFencing()),
	"reentrant": reentrantLoop,
	"multi":     multiLoop,
	"rwmutex":   rwLoop,
	"semaphore": semaphoreLoop,
	"do":        doLoop,
	"renewed":   renewedLoop,
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
// that checks Until before acting does; now and then it first extends its
// hold halfway through its validity, and then uses it to the end. It
// returns when its window ended, or now.
func work(s *Sim, c *client, rng *rand.Rand, g *grant, w extendable, count bool) time.Time {
	res := g.names[0]
	v := s.hist.read(res)
	extended := rng.IntN(8) == 0 // it needs more time: halfway, it extends
	if extended {
		select {
		case <-time.After(time.Until(w.Until()) / 2):
		case <-w.Done():
		}
		s.awake(c.idx)
		s.extend(g, w)
	}
	dwell(s, rng, w, extended)
	s.awake(c.idx)
	return finish(s, w, res, v, count)
}

// dwell is the work's time in the critical section: a short while, a
// pause, or (always once it extended) its lease to the end, cut short
// when the hold is lost but for the pause.
func dwell(s *Sim, rng *rand.Rand, w window, extended bool) {
	d := between(rng, 0, 30*time.Millisecond)
	switch p := rng.Float64(); {
	case p < 0.02:
		time.Sleep(s.cfg.TTL + d) // a pause: garbage collection, a stalled VM
	case p < 0.07 || extended:
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
}

// finish writes the counter of res back as v plus one, when count asks
// and the window still lasts, and returns when the window ended, or now.
func finish(s *Sim, w window, res string, v int, count bool) time.Time {
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

func mutexLoop(name string, opts ...redlock.LockOption) workload {
	return func(ctx context.Context, s *Sim, c *client, rng *rand.Rand) {
		mu, err := c.rl.NewMutex(name, append(opts, redlock.WithTTL(s.cfg.TTL))...)
		if err != nil {
			panic(err)
		}
		for ctx.Err() == nil {
			g := &grant{hold: hold{client: c.idx, res: name, who: fmt.Sprintf("client %d", c.idx), attempt: time.Now()},
				names: []string{name}, quorum: majority(s.cfg.Nodes)}
			var err error
			if rng.IntN(4) == 0 {
				err = mu.TryLock(ctx)
				if err != nil {
					s.refused(g, "TryLock", err)
				}
			} else if err = mu.LockWithin(ctx, waitFor(rng)); err != nil && ctx.Err() == nil {
				s.refused(g, "LockWithin", err)
			}
			if err != nil {
				idle(rng)
				continue
			}
			s.took(g)
			g.fence = mu.Fence()
			end := work(s, c, rng, g, mu, true)
			s.release(g, mu, end, "Unlock", true, mu.Unlock)
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
		g := &grant{hold: hold{client: c.idx, res: "re", who: fmt.Sprintf("client %d", c.idx), attempt: time.Now()},
			names: []string{"re"}, quorum: majority(s.cfg.Nodes)}
		if err := mu.LockWithin(ctx, waitFor(rng)); err != nil {
			idle(rng)
			continue
		}
		s.took(g)
		holds := 1
		if rng.IntN(2) == 0 && mu.TryLock(ctx) == nil {
			holds++
		}
		end := work(s, c, rng, g, mu, true)
		if holds == 2 { // drops one hold: the lock stays held
			uctx, cancel := unlockCtx()
			_ = mu.Unlock(uctx)
			cancel()
		}
		s.release(g, mu, end, "final Unlock", true, mu.Unlock)
		idle(rng)
	}
}

// multiLoop takes the names a and b together, or one of them alone.
func multiLoop(ctx context.Context, s *Sim, c *client, rng *rand.Rand) {
	opts := []redlock.LockOption{redlock.WithTTL(s.cfg.TTL)}
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
		g := &grant{hold: hold{client: c.idx, who: fmt.Sprintf("client %d (%d names)", c.idx, len(names)), attempt: time.Now()},
			names: names, quorum: majority(s.cfg.Nodes)}
		if err := mu.LockWithin(ctx, waitFor(rng)); err != nil {
			idle(rng)
			continue
		}
		s.took(g)
		end := work(s, c, rng, g, mu, true)
		s.release(g, mu, end, "Unlock", true, mu.Unlock)
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
		g := &grant{hold: hold{client: c.idx, res: "rw", kind: kind, who: who, attempt: attempt}, names: []string{"rw"}, quorum: majority(s.cfg.Nodes)}
		s.took(g)
		end := work(s, c, rng, g, rw, writer)
		if writer {
			s.release(g, rw, end, "Unlock", true, rw.Unlock)
		} else {
			s.release(g, rw, end, "RUnlock", true, rw.RUnlock)
		}
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
		g := &grant{hold: hold{client: c.idx, res: "sem", kind: permit, limit: permits, who: fmt.Sprintf("client %d", c.idx), attempt: attempt},
			names: []string{"sem"}, quorum: sem.Quorum()}
		s.took(g)
		end := work(s, c, rng, g, sem, false)
		s.release(g, sem, end, "Release", true, sem.Release)
		idle(rng)
	}
}

// doLoop runs work that outlasts the TTL under Do, which renews the lock.
func doLoop(ctx context.Context, s *Sim, c *client, rng *rand.Rand) {
	for ctx.Err() == nil {
		g := &grant{hold: hold{client: c.idx, res: "do", who: fmt.Sprintf("client %d", c.idx), attempt: time.Now()},
			names: []string{"do"}, quorum: majority(s.cfg.Nodes)}
		held := false
		_ = c.rl.Do(ctx, "do", func(fctx context.Context) error {
			mu := redlock.MutexFrom(fctx)
			s.took(g)
			g.end = g.start
			for range 1 + rng.IntN(8) {
				g.end = work(s, c, rng, g, mu, true)
				if fctx.Err() != nil || !time.Now().Before(mu.Until()) {
					break
				}
			}
			held = true
			return nil
		}, redlock.WithTTL(s.cfg.TTL)) // ErrNotAcquired, ErrLockLost: the nemesis' doing
		if held { // Do's release is its own: its verdict is not seen
			g.freed = time.Now()
			s.hist.add(g.hold)
		}
		idle(rng)
	}
}
