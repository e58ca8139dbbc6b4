package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

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
// A held lock costs no goroutine: its next extension is a timer, and only
// an extension under way runs one. Extensions are due on a grid of a
// twentieth of the period (renewGrid), each moved earlier to the grid
// line before it, so that the extensions of many locks held at once fall
// due together and share quorum rounds: the plain extensions that wait
// while one round is under way go together in the next, one request and
// one script call (or one SET IFEQ each) per node, each tallied on its
// own (see engine.ExtendTogether): a process holding thousands of locks
// extends them in a few dozen rounds per period, not thousands. The
// extensions run on the engine's workers (Engine.Work), at most as many
// at once as the nodes' workers carry in a round trip; the
// others wait their turn there, not in the nodes' bounded queues, the
// lease closest to counting as lost first. An extension can so start
// later than TTL/3 when nodes are slow and many locks are held: with 256
// in flight, each taking a node timeout, the 5,000th of one grid line
// starts 20 node timeouts late. The Observer's OpStart and OpEnd of an
// extension run on a worker too: one that blocks delays every lock's
// renewal, not only its own.

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

// renewal is the renewal of one lease. ctx, holdEnd, done, fire and
// run are set once; the other fields are guarded by the holder's mu.
type renewal struct {
	ctx      context.Context //nolint:containedctx // the hold's, which each extension runs under: renewal stops when it ends
	holdEnd  time.Time       // WithMaxHold's bound; zero for none
	fire     func()          // hands the extension due to a worker (see Engine.Due)
	run      func()          // makes the extension that fell due (extendDue)
	armed    bool            // the timer is set for the next extension
	running  bool            // an extension is under way
	stop     bool            // renewal is to stop: the lease ended, or ctx did
	failures int             // extensions failed in a row
	unhook   func() bool     // removes the hook on ctx's end
	done     chan struct{}   // closed once renewal stopped and no extension runs
}

// renew starts renewing lease l until it ends or holdCtx does.
func (h *Holder) renew(holdCtx context.Context, l *Lease) {
	r := &renewal{ctx: holdCtx, done: make(chan struct{})}
	if h.Settings.MaxHold > 0 {
		r.holdEnd = l.start.Add(h.Settings.MaxHold)
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
	r.fire = func() {
		h.mu.Lock()
		if r.stop || !r.armed {
			h.mu.Unlock()
			return // stopped meanwhile: no worker for nothing
		}
		by := l.until.Add(-lossMargin(h.Settings.TTL)) // the lease counts as lost then
		h.mu.Unlock()
		h.Engine.Work(by, r.run) // closed: Close ends the lease
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
// renewal's extension still fires, and finds it stopped (extendDue).
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

// extendDue makes lease l's extension that fell due, and schedules the
// next one: TTL/3 after this one began, on the grid (see renewGrid), or
// after the retry back-off when it failed.
func (h *Holder) extendDue(l *Lease) {
	h.mu.Lock()
	r := l.renewal
	if r.stop || !r.armed || l.Err != nil {
		h.mu.Unlock()
		return // stopped meanwhile, or about to be (see end)
	}
	r.armed, r.running = false, true
	h.mu.Unlock()
	now := h.Engine.Now()
	err, goOn := h.extendOnce(l, now)
	h.mu.Lock()
	defer h.mu.Unlock()
	r.running = false
	switch {
	case !goOn || r.stop:
		h.renewalStopped(r)
	case err == nil:
		r.failures = 0
		line, d := h.onGrid(now.Add(renewEvery(h.Settings.TTL)))
		h.schedule(r, line, d)
	default:
		// Nodes failing or slow: try again soon; the loss timer ends the
		// lease if no extension succeeds in time.
		r.failures++
		d := h.Settings.Retry().Delay(r.failures)
		h.schedule(r, h.Engine.Now().Add(d), d)
	}
}

// extendOnce is the extension of lease l due at now, unless the hold
// reached its bound; it reports whether renewal goes on.
func (h *Holder) extendOnce(l *Lease, now time.Time) (err error, goOn bool) {
	r := l.renewal
	if !r.holdEnd.IsZero() && !now.Before(r.holdEnd) {
		// Bounded: the lease runs out at its validity.
		h.renewalEnded(l, fmt.Sprintf("renewal stopped at the maximum hold, WithMaxHold(%v)", h.Settings.MaxHold), nil)
		return nil, false
	}
	err = h.renewOnce(r.ctx, l)
	h.renewalEnded(l, "", err)
	return err, !errors.Is(err, engine.ErrLockLost) && r.ctx.Err() == nil
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

// renewOnce is one extension of lease l by renewal, observed as one.
func (h *Holder) renewOnce(holdCtx context.Context, l *Lease) error {
	c := h.Call(StepExtend)
	c.Renewal = true
	ctx, end := h.Observe(holdCtx, c)
	return end(0, h.extend(ctx, l, true))
}
