package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/redlock/internal/engine"
)

// Renewal (the watchdog). While a lock taken with WithRenewal is held, it
// is extended every TTL/3, counted from the start of the previous
// extension: two more chances remain before its validity runs out if one
// extension fails. A failed extension is retried after the retry back-off
// until the validity is about to run out (the lease then ends as lost, see
// lossMargin). Renewal stops on Unlock or loss, when the holder's context
// ends, and at the WithMaxHold bound; the lease then simply runs out;
// Redlock.Close stops it too. It never extends after the validity has run
// out and never re-creates a key: both are Extend's rules, which it uses.
//
// A held lock costs no goroutine: its next extension is a line of a
// grid, and the line's one timer (Engine.Due) makes the extensions due on
// it. Extensions are due on a grid of a twentieth of the period
// (renewGrid), each moved earlier to the grid line before it, so that the
// extensions of many locks held at once fall due together: the line
// makes its plain extensions (node.Together) together, in rounds of one
// request and one script call (or one SET IFEQ each) per node, each
// tallied on its own (engine.ExtendAll), on its own goroutine: a process
// holding thousands of locks extends them in a few dozen rounds per
// period, and no goroutine waits for each. A line's rounds go one after
// the other, those closest to counting as lost first: with thousands due
// on one line, each round taking a node timeout when nodes are slow, the
// last of them starts that many node timeouts late. The other
// extensions (a reader's, a permit's, a reentrant or multi-name lock's,
// one that waits for replicas) each run alone on one of the engine's
// workers (Engine.Work), as many at once as the nodes' workers carry in a
// round trip. The Observer's OpStart and OpEnd of a plain extension run on
// its line's goroutine: one that blocks delays its line's renewals, not
// only its own.

// renewEvery is the renewal period for a TTL.
func renewEvery(ttl time.Duration) time.Duration { return ttl / 3 }

// renewGrid is the grid the extensions of a TTL fall due on: at most a
// twentieth of the period early; none (0) for a TTL under 60 ms, whose
// grid would be finer than a timer's millisecond.
func renewGrid(ttl time.Duration) time.Duration {
	if g := renewEvery(ttl) / 20; g >= time.Millisecond {
		return g
	}
	return 0
}

// renewal is the renewal of one lease. ctx, holdEnd, together, fire and
// run are set once; the other fields are guarded by the holder's mu.
type renewal struct {
	ctx      context.Context //nolint:containedctx // the hold's, which each extension runs under: renewal stops when it ends
	holdEnd  time.Time       // WithMaxHold's bound; zero for none
	together bool            // its extensions go with the line's (node.Together); else each on a worker
	fire     func(*engine.Batch)
	run      func() // makes the extension that fell due alone, on a worker (extendDue)
	armed    bool   // the timer is set for the next extension
	running  bool   // an extension is under way
	stop     bool   // renewal is to stop: the lease ended, or ctx did
	failures int    // extensions failed in a row
	unhook   func() bool
	done     chan struct{} // closed once renewal stopped and no extension runs
}

// renew starts renewing lease l until it ends or holdCtx does.
func (h *Holder) renew(holdCtx context.Context, l *Lease) {
	r := &renewal{ctx: holdCtx, done: make(chan struct{})}
	if h.Settings.MaxHold > 0 {
		r.holdEnd = l.start.Add(h.Settings.MaxHold)
	}
	if ext, ok := h.Kind.Extend(h.Name, l.Token, &h.Settings).(*node.Extend); ok {
		r.together = node.Together(ext)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	l.renewal = r
	if l.Err != nil || h.Engine.Open() != nil {
		h.renewalStopped(r) // ended, or closed: the lease runs out by itself
		return
	}
	r.unhook = context.AfterFunc(holdCtx, func() {
		h.renewalEnded(l, "renewal stopped: the context it was acquired with ended", nil)
		h.stopRenewal(l)
	})
	r.run = func() { h.extendDue(l) }
	r.fire = func(b *engine.Batch) {
		h.mu.Lock()
		if r.stop || !r.armed {
			h.mu.Unlock()
			return // stopped meanwhile: nothing to send
		}
		by := l.until.Add(-lossMargin(h.Settings.TTL)) // the lease counts as lost then
		h.mu.Unlock()
		if !r.together {
			h.Engine.Work(by, r.run) // closed: Close ends the lease
			return
		}
		d, ok := h.beginDue(l)
		if !ok {
			return
		}
		if d.x == nil {
			h.finishDue(d, nil, d.err)
			return
		}
		b.Add(engine.Extension{Ctx: d.ctx, Op: d.x.op.(*node.Extend), C: d.x.c, By: by,
			Done: func(granted []int, err error) { h.finishDue(d, granted, err) }})
	}
	line, d := h.onGrid(l.start.Add(renewEvery(h.Settings.TTL)))
	h.schedule(r, line, d)
}

// onGrid is the grid line at or before at (see renewGrid), and how long
// from now until it. The line is found on the wall clock, the wait
// measured on the monotonic one: a jump of the wall clock moves an
// extension no more than one grid step earlier, never later.
func (h *Holder) onGrid(at time.Time) (time.Time, time.Duration) {
	d := at.Sub(h.Engine.Now())
	if g := renewGrid(h.Settings.TTL); g > 0 {
		line := at.Truncate(g)
		return line, d - at.Sub(line)
	}
	return at, d
}

// schedule sets r's next extension on line, d from now: with the others
// due on the same line, one timer for them all (Engine.Due). A stopped
// renewal's extension still fires, and finds it stopped.
// Called with h.mu held.
func (h *Holder) schedule(r *renewal, line time.Time, d time.Duration) {
	r.armed = true
	h.Engine.Due(line, d, r.fire)
}

// stopRenewal stops l's renewal: its next extension is not made, and
// renewal's done closes once the one under way, if any, returns.
func (h *Holder) stopRenewal(l *Lease) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := l.renewal
	if r == nil || r.stop {
		return
	}
	r.stop = true
	r.armed = false // its extension, due, finds it stopped
	if !r.running {
		h.renewalStopped(r)
	}
}

// renewalStopped ends renewal r, which runs no extension. Called with
// h.mu held.
func (h *Holder) renewalStopped(r *renewal) {
	r.stop = true
	if r.unhook != nil {
		r.unhook()
	}
	close(r.done)
}

// due is renewal's extension of a lease, under way.
type due struct {
	l   *Lease
	now time.Time       // when it began
	ctx context.Context //nolint:containedctx // the Observer's, under the hold's: the extension runs under it
	end func(attempts int, err error) error
	x   *extension // nil when it cannot be made: err says why
	err error
}

// extendDue makes lease l's extension that fell due alone, on a worker.
func (h *Holder) extendDue(l *Lease) {
	d, ok := h.beginDue(l)
	if !ok {
		return
	}
	var granted []int
	err := d.err
	if d.x != nil {
		granted, err = h.Engine.Extend(d.ctx, d.x.op, d.x.c)
	}
	h.finishDue(d, granted, err)
}

// beginDue begins lease l's extension that fell due, observed as a call
// of its own; false when there is none to make: renewal stopped
// meanwhile, or stops now, at the hold's bound (the lease then runs out
// at its validity).
func (h *Holder) beginDue(l *Lease) (*due, bool) {
	h.mu.Lock()
	r := l.renewal
	if r.stop || !r.armed || l.Err != nil {
		h.mu.Unlock()
		return nil, false // stopped meanwhile, or about to be (see end)
	}
	r.armed, r.running = false, true
	h.mu.Unlock()
	d := &due{l: l, now: h.Engine.Now()}
	if !r.holdEnd.IsZero() && !d.now.Before(r.holdEnd) {
		h.renewalEnded(l, fmt.Sprintf("renewal stopped at the maximum hold, WithMaxHold(%v)", h.Settings.MaxHold), nil)
		h.nextDue(d, nil, false)
		return nil, false
	}
	c := h.Call(StepExtend)
	c.Renewal = true
	d.ctx, d.end = h.Observe(r.ctx, c)
	d.x, d.err = h.beginExtend(l, d.now)
	return d, true
}

// finishDue ends extension d with its outcome, the nodes that granted it
// and the engine's verdict (see endExtend), and schedules the next.
func (h *Holder) finishDue(d *due, granted []int, err error) {
	if d.x != nil {
		err = h.endExtend(d.x, granted, err)
	}
	err = d.end(0, err)
	h.renewalEnded(d.l, "", err)
	h.nextDue(d, err, !errors.Is(err, engine.ErrLockLost) && d.l.renewal.ctx.Err() == nil)
}

// nextDue schedules the extension after d, whose error was err: TTL/3
// after d began, on the grid (see renewGrid), or after the retry back-off
// when it failed; none when renewal does not go on.
func (h *Holder) nextDue(d *due, err error, goOn bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := d.l.renewal
	r.running = false
	switch {
	case !goOn || r.stop:
		h.renewalStopped(r)
	case err == nil:
		r.failures = 0
		line, wait := h.onGrid(d.now.Add(renewEvery(h.Settings.TTL)))
		h.schedule(r, line, wait)
	default:
		// Nodes failing or slow: try again soon; the loss timer ends the
		// lease if no extension succeeds in time.
		r.failures++
		wait := h.Settings.Retry().Delay(r.failures)
		h.schedule(r, h.Engine.Now().Add(wait), wait)
	}
}

// renewalEnded records what renewal knows of lease l for the loss it may
// end in (see holder.ranOut): why it stopped ("": it goes on), and its
// last extension's failure (nil: it succeeded).
func (h *Holder) renewalEnded(l *Lease, stopped string, failed error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if stopped != "" {
		l.stopped = stopped
	}
	l.failed = failed
}
