package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redlock-go/redlock/redlock/internal/quorum"

	"github.com/redlock-go/redlock/internal/node"
)

// The lease: one acquisition held, whatever took it (a Mutex, a
// Semaphore's permit, an RWMutex's read or write lock). Every primitive
// value holds its leases through one holder, which owns the lease's
// token, its validity and loss timer, Done, Err and Until, its extension
// and renewal, and its end: the primitives differ only in the operations
// they send (a leaseKind) and in how they acquire.

// lease is one acquisition, from the attempt that made it to its release
// or its loss. Fields after done are guarded by the holder's mu.
type lease struct {
	token string
	// notice is unique to the acquisition: its release announces it.
	notice string
	start  time.Time // the attempt's start: the validity counts from it
	fence  uint64    // the fencing token; 0 when not fenced
	done   chan struct{}

	// voters and jumps are the grant's (see grant): the nodes that hold
	// the lease, as far as their clocks are known to have kept it.
	voters, jumps []int

	until time.Time   // the validity's end; moves with every extension
	holds int         // holds taken on a reentrant lock; 1 otherwise
	err   error       // why the lease ended; set before done is closed
	loss  *time.Timer // ends the lease lossMargin before until

	// stopped says why renewal stopped ("": it did not), and failed is
	// the last extension's failure (nil: none, or one succeeded since):
	// what a lease whose validity ran out says of why.
	stopped string
	failed  error
}

// live reports whether l has not ended. Called with the holder's mu held.
func (l *lease) live() bool { return l != nil && l.err == nil }

// lossMargin is how long before the end of validity a lease that was not
// extended counts as lost: Done closes, and the context of work run by
// [Redlock.Do] is cancelled, this much before another holder may exist,
// to give the work time to stop.
func lossMargin(ttl time.Duration) time.Duration { return ttl / 20 }

// leaseKind is what differs between the primitives' leases: the node
// operations that release and extend one, and the Observer's names of
// the calls.
type leaseKind interface {
	// release is the operation that ends l on a node and announces it to
	// waiters; undo gives back a failed attempt's token silently.
	release(name string, l *lease) node.Op
	undo(name, token string) node.Op
	extend(name, token string, cfg *settings) node.Op
}

// holder holds the leases of one primitive value, one at a time. It is
// shared by the goroutines that use the value; mu guards lease, busy and
// the mutable fields of the lease.
type holder struct {
	e      *engine
	name   string
	cfg    settings
	report quorum.ReportFunc // the value's Observer, as a node failure reporter (nil: none)
	events events            // the value's Observer, told of its calls and leases (nil: none)
	quorum int               // nodes that must hold a lease: 0 for a majority
	kind   leaseKind

	mu    sync.Mutex
	lease *lease // the current lease; nil when none was taken or it was released
	busy  bool   // an acquisition is in flight (semaphores: one at a time)
}

// errNotHeld is the error of a call on a holder that holds nothing.
func (h *holder) errNotHeld() error { return fmt.Errorf("%w: not held", errNotHeldSentinel) }

// current returns the current lease, live or ended; nil when none.
func (h *holder) current() *lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lease
}

// holding reports whether the holder holds a live lease, or an
// acquisition is in flight.
func (h *holder) holding() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.busy || h.lease.live()
}

// take makes g, the acquisition of token, the holder's lease, ends the
// one it replaces, and starts its renewal when asked to.
func (h *holder) take(ctx context.Context, token, notice string, g grant) {
	l := &lease{token: token, notice: notice, start: g.start, fence: g.fence, done: make(chan struct{}), until: g.until, holds: 1, voters: g.voters, jumps: g.jumps}
	h.mu.Lock()
	old := h.lease
	h.lease = l
	l.loss = time.AfterFunc(h.untilLoss(l), func() { h.end(l, h.ranOut(l)) })
	h.mu.Unlock()
	if old != nil {
		h.end(old, fmt.Errorf("%w: acquired again", errLockLostSentinel))
	}
	if !h.e.record(l, h) {
		h.end(l, errEngineClosed) // closed meanwhile: nothing would keep or watch it
		return
	}
	if h.cfg.renew {
		h.renew(holdContext(ctx), l) // the hold may outlast the wait: see LockWithin
	}
}

// untilLoss is how long from now until l counts as lost. Called with h.mu
// held.
func (h *holder) untilLoss(l *lease) time.Duration {
	return time.Until(l.until.Add(-lossMargin(h.cfg.ttl)))
}

// ranOut is why lease l ended when its validity ran out: what stopped its
// renewal, and the last extension's failure, with its node errors.
func (h *holder) ranOut(l *lease) error {
	h.mu.Lock()
	stopped, failed := l.stopped, l.failed
	h.mu.Unlock()
	msg := "validity ran out"
	if stopped != "" {
		msg += " (" + stopped + ")"
	}
	err := fmt.Errorf("%w: %s", errLockLostSentinel, msg)
	if failed != nil {
		err = errors.Join(err, fmt.Errorf("the last extension failed: %w", failed))
	}
	return err
}

// moveUntil moves l's validity to until when later, and its loss timer
// with it. Called with h.mu held.
func (h *holder) moveUntil(l *lease, until time.Time) {
	if until.After(l.until) {
		l.until = until
		l.loss.Reset(h.untilLoss(l))
	}
}

// end ends lease l with cause, once; later calls do nothing. The Observer
// hears of it before Done closes: whoever sees Done closed finds the end
// observed.
func (h *holder) end(l *lease, cause error) {
	h.mu.Lock()
	if l.err != nil {
		h.mu.Unlock()
		return
	}
	l.err = cause
	l.loss.Stop()
	h.mu.Unlock()
	h.e.forget(l)
	if h.events != nil {
		h.events.HoldEnd(h.name, l.start, errors.Is(cause, errLockLostSentinel), cause)
	}
	close(l.done) // once: only the call that set l.err gets here
}

// release ends the current lease with cause and releases it on every
// node with op (see Redlock.free). It returns errNotHeldSentinel, without I/O,
// when there is none.
func (h *holder) release(ctx context.Context, cause error) error {
	h.mu.Lock()
	l := h.lease
	if l == nil {
		h.mu.Unlock()
		return h.errNotHeld()
	}
	h.lease = nil
	c := lapse{cfg: &h.cfg, report: h.report, since: l.start, quorum: h.quorum}
	if l.err == nil {
		c.until = l.until // a lost lease passes none: an absent key is no resend
	}
	h.mu.Unlock()
	h.end(l, cause)
	return h.e.free(ctx, h.kind.release(h.name, l), h.name, true, c)
}

// extend extends lease l: see Mutex.Extend.
func (h *holder) extend(ctx context.Context, l *lease) error {
	h.mu.Lock()
	until, ended := l.until, l.err
	h.mu.Unlock()
	if ended != nil {
		return fmt.Errorf("%w: %w", errNotHeldSentinel, ended)
	}
	start := h.e.now()
	if !start.Before(until) {
		return fmt.Errorf("%w: validity ran out %v ago", errNotHeldSentinel, start.Sub(until))
	}
	op := h.kind.extend(h.name, l.token, &h.cfg)
	if err := h.e.extend(ctx, op, lapse{cfg: &h.cfg, report: h.report, quorum: h.quorum}); err != nil {
		if errors.Is(err, errLockLostSentinel) {
			h.end(l, err)
		}
		return err
	}
	next := quorum.ValidUntil(start, h.cfg.ttl, h.cfg.driftFactor)
	if !h.e.now().Before(next) {
		return fmt.Errorf("%w: extended, but no validity left of ttl %v", errNotHeldSentinel, h.cfg.ttl)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if l.err != nil {
		return fmt.Errorf("%w: %w", errNotHeldSentinel, l.err)
	}
	l.until = next
	l.loss.Reset(h.untilLoss(l))
	return nil
}

// extendCurrent extends the current lease.
func (h *holder) extendCurrent(ctx context.Context) error {
	l := h.current()
	if l == nil {
		return h.errNotHeld()
	}
	return h.extend(ctx, l)
}

// until returns the end of the current lease's validity; the zero Time
// when none was taken (or it was released).
func (h *holder) until() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lease == nil {
		return time.Time{}
	}
	return h.lease.until
}

// closedChan is the Done channel of a holder that holds nothing.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// done returns the current lease's Done channel; a closed one when none.
func (h *holder) done() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lease == nil {
		return closedChan
	}
	return h.lease.done
}

// err returns why the current lease ended, nil while it lasts.
func (h *holder) err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lease == nil {
		return h.errNotHeld()
	}
	return h.lease.err
}

// observe runs one call of the holder, whose result run returns, between
// its Observer's OpStart and OpEnd (directly when it has none). The
// context that bounds an acquisition's hold (the caller's, see
// holdContext) is passed on under holdKey, so that renewal runs under it
// rather than under the Observer's context, whose span would otherwise
// parent every extension after the call returned.
func (h *holder) observe(ctx context.Context, c call, run func(context.Context) (int, error)) error {
	o := h.events
	if o == nil || ctx == nil {
		_, err := run(ctx)
		return err
	}
	hold := ctx
	if c.acquires() {
		hold = holdContext(ctx)
	}
	octx := o.OpStart(ctx, c)
	if c.acquires() && octx != ctx {
		octx = context.WithValue(octx, holdKey{}, hold)
	}
	attempts, err := run(octx)
	o.OpEnd(octx, c, err, err != nil && hold.Err() != nil, attempts)
	return err
}

// call is the holder's call at step s.
func (h *holder) call(s step) call { return call{step: s, name: h.name} }

// Bounding the wait for a lock apart from the hold. The context given to
// Lock bounds both: the attempts, and with WithRenewal the renewal of the
// lock once acquired. LockWithin bounds the attempts by a context of their
// own, which carries the caller's context as a value: the acquisition
// starts renewal under that one instead (see holdContext).

// holdKey is the context key under which LockWithin's wait context
// carries the context that bounds the hold.
type holdKey struct{}

// holdContext returns the context that bounds the hold of a lock acquired
// under ctx: the caller's own when ctx is LockWithin's wait context, ctx
// itself otherwise.
func holdContext(ctx context.Context) context.Context {
	if hold, ok := ctx.Value(holdKey{}).(context.Context); ok {
		return hold
	}
	return ctx
}
