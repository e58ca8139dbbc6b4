package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/redlock-go/redlock/redlock"
	"github.com/redlock-go/redlock/redlock/report"
)

// renewedLoop holds the three locks of "renewed" at once, with renewal
// (WithRenewal), for up to two TTLs: taken one after the other within
// milliseconds, their extensions fall due together and share rounds (see
// engine.ExtendAll). What renewal tells each holder (its Until, its
// loss) is what its writes trust: an extension counted for a lease that
// no quorum extended shows as two holders of one name, and each extension
// that succeeded is judged as an Extend's nil (see renewals).
func renewedLoop(ctx context.Context, s *Sim, c *client, rng *rand.Rand) {
	names := resources["renewed"]
	mus := make([]*redlock.Mutex, len(names))
	for k, name := range names {
		mu, err := c.rl.NewMutex(name, redlock.WithTTL(s.cfg.TTL), redlock.WithRenewal())
		if err != nil {
			panic(err)
		}
		mus[k] = mu
	}
	type held struct {
		g  *grant
		mu *redlock.Mutex
		v  int
	}
	for ctx.Err() == nil {
		var hs []held
		for k, mu := range mus {
			g := &grant{hold: hold{client: c.idx, res: names[k], who: fmt.Sprintf("client %d", c.idx), attempt: time.Now()},
				names: []string{names[k]}, quorum: majority(s.cfg.Nodes)}
			if err := mu.LockWithin(ctx, waitFor(rng)/4); err != nil {
				continue
			}
			s.took(g)
			hs = append(hs, held{g: g, mu: mu, v: s.hist.read(names[k])})
			c.renewals.holding(names[k], renewedHold{g: g, mu: mu})
		}
		time.Sleep(between(rng, 0, 2*s.cfg.TTL))
		s.awake(c.idx)
		for _, h := range hs {
			end := finish(s, h.mu, h.g.names[0], h.v, true)
			c.renewals.holding(h.g.names[0], renewedHold{})
			s.release(h.g, h.mu, end, "Unlock", true, h.mu.Unlock)
		}
		idle(rng)
	}
}

// observe returns the options that make c's Redlock observed: by its
// renewals, when "renewed" runs.
func (s *Sim) observe(c *client) []redlock.Option {
	if !slices.Contains(s.cfg.Primitives, "renewed") {
		return nil
	}
	c.renewals = &renewals{s: s, idx: c.idx, holds: map[string]renewedHold{}}
	return []redlock.Option{redlock.WithObserver(c.renewals)}
}

// renewals is the Observer of a client that runs "renewed": each
// extension renewal made and found to succeed is judged as an Extend's
// nil is (see Sim.extend), against the hold it extended.
type renewals struct {
	s   *Sim
	idx int

	mu    sync.Mutex
	holds map[string]renewedHold // the holds of renewedLoop, by name
}

// renewedHold is a hold of renewedLoop that renewal extends.
type renewedHold struct {
	g  *grant
	mu *redlock.Mutex
}

// holding records that name's hold is h (nil g: none).
func (r *renewals) holding(name string, h renewedHold) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if h.g == nil {
		delete(r.holds, name)
		return
	}
	r.holds[name] = h
}

type renewalStart struct{}

// OpStart implements report.Observer: an extension of renewal starts.
func (r *renewals) OpStart(ctx context.Context, op report.Op) context.Context {
	if !op.Renewal {
		return ctx
	}
	return context.WithValue(ctx, renewalStart{}, time.Now())
}

// OpEnd implements report.Observer: an extension of renewal that
// succeeded says that a quorum holds the token until Until.
func (r *renewals) OpEnd(ctx context.Context, op report.Op, res report.OpResult) {
	call, ok := ctx.Value(renewalStart{}).(time.Time)
	if !ok || res.Err != nil {
		return
	}
	r.mu.Lock()
	h, held := r.holds[op.Name]
	r.mu.Unlock()
	if !held {
		return // released meanwhile: the Unlock's verdict is judged
	}
	v := verdict{op: "renewal's Extend", hold: h.g.hold, call: call, ret: time.Now(), quorum: h.g.quorum,
		what: extendedNil, until: h.mu.Until()}
	v.held = count(r.s.heldTill(h.g, v.until, call))
	v.hold.res = h.g.names[0]
	r.s.hist.judged(v)
}

func (*renewals) LeaseEnd(report.Lease)                         {}
func (*renewals) NodeFailed(context.Context, *report.NodeError) {}
