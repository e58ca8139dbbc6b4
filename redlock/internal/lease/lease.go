package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redlock-go/redlock/redlock/internal/engine"

	"github.com/redlock-go/redlock/redlock/internal/quorum"

	"github.com/redlock-go/redlock/internal/node"
)

// The lease: one acquisition held, whatever took it (a Mutex, a
// Semaphore's permit, an RWMutex's read or write lock). Every primitive
// value holds its leases through one holder, which owns the lease's
// token, its validity and loss timer, Done, Err and Until, its extension
// and renewal, and its end: the primitives differ only in the operations
// they send (a leaseKind) and in how they acquire.

// Lease is one acquisition, from the attempt that made it to its release
// or its loss. Fields after done are guarded by the holder's mu.
type Lease struct {
	holder *Holder // the holder whose lease it is
	Token  string
	// notice is unique to the acquisition: its release announces it.
	Notice string
	start  time.Time // the attempt's start: the validity counts from it
	Fence  uint64    // the fencing token; 0 when not fenced
	done   chan struct{}

	// nodes is what each node last confirmed of the lease (see
	// nodes.go); in few, without an allocation of its own, for as many
	// nodes as most deployments have.
	nodes []nodeHold
	few   [7]nodeHold
	// late tells the nodes that granted after the grant was decided;
	// granted and grantJumps are the grant's validity and jump counts.
	late       interface{ Granted(i int) bool }
	granted    time.Time
	grantJumps []int

	until time.Time // the validity's end; moves with every extension
	Holds int       // holds taken on a reentrant lock; 1 otherwise
	// Queued is the queue member of the wait that took the lease, "" for
	// none: its release removes it first (see node.Release.Queued), and
	// QueuedSince its score.
	Queued      string
	QueuedSince int64
	Err         error       // why the lease ended; set before done is closed
	loss        *time.Timer // ends the lease lossMargin before until

	// stopped says why renewal stopped ("": it did not), and failed is
	// the last extension's failure (nil: none, or one succeeded since):
	// what a lease whose validity ran out says of why.
	stopped string
	failed  error
	// renewal is the lease's renewal; nil when it has none (see
	// RenewalDone).
	renewal *renewal
}

// Live reports whether l has not ended. Called with the holder's mu held.
func (l *Lease) Live() bool { return l != nil && l.Err == nil }

// lossMargin is how long before the end of validity a lease that was not
// extended counts as lost: Done closes, and the context of work run by
// [Redlock.Do] is cancelled, this much before another holder may exist,
// to give the work time to stop.
func lossMargin(ttl time.Duration) time.Duration { return ttl / 20 }

// Kind is what differs between the primitives' leases: the node
// operations that release and extend one, and the Observer's names of
// the calls.
type Kind interface {
	// release is the operation that ends l on a node and announces it to
	// waiters; undo gives back a failed attempt's token silently.
	Release(name string, l *Lease) node.Op
	Undo(name, token string) node.Op
	Extend(name, token string, cfg *engine.Settings) node.Op
}

// Holder holds the leases of one primitive value, one at a time. It is
// shared by the goroutines that use the value; mu guards lease, busy and
// the mutable fields of the lease.
type Holder struct {
	Engine   *engine.Engine
	Name     string
	Settings engine.Settings
	Report   quorum.ReportFunc // the value's Observer, as a node failure reporter (nil: none)
	Events   Events            // the value's Observer, told of its calls and leases (nil: none)
	Quorum   int               // nodes that must hold a lease: 0 for a majority
	Kind     Kind

	mu    sync.Mutex
	lease *Lease // the current lease; nil when none was taken or it was released
	busy  bool   // an acquisition is in flight (semaphores: one at a time)
}

// errNotHeld is the error of a call on a holder that holds nothing.
func (h *Holder) errNotHeld() error { return fmt.Errorf("%w: not held", engine.ErrNotHeld) }

// Current returns the current lease, live or ended; nil when none.
func (h *Holder) Current() *Lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lease
}

// Live returns the holder's live lease, nil when it holds none.
func (h *Holder) Live() *Lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lease.Live() {
		return h.lease
	}
	return nil
}

// Begin marks an acquisition in flight, one at a time: it returns
// inFlight while another is, held while the holder holds a live lease,
// and nil once marked; [Holder.Finish] ends the mark.
func (h *Holder) Begin(inFlight, held error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.busy:
		return inFlight
	case h.lease.Live():
		return held
	}
	h.busy = true
	return nil
}

// Finish ends the mark [Holder.Begin] set.
func (h *Holder) Finish() {
	h.mu.Lock()
	h.busy = false
	h.mu.Unlock()
}

// Holding reports whether the holder holds a live lease, or an
// acquisition is in flight.
func (h *Holder) Holding() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.busy || h.lease.Live()
}

// Take makes g, the acquisition of token, the holder's lease, ends the
// one it replaces, and starts its renewal when asked to.
func (h *Holder) Take(ctx context.Context, token, notice string, g engine.Grant) {
	l := &Lease{holder: h, Token: token, Notice: notice, start: g.Start, Fence: g.Fence, done: make(chan struct{}), until: g.Until, Holds: 1,
		late: g.Late, granted: g.Until, grantJumps: g.Jumps}
	if n := h.Engine.Pool.Size(); n <= len(l.few) {
		l.nodes = l.few[:n]
	} else {
		l.nodes = make([]nodeHold, n)
	}
	l.confirm(g.Voters, g.Until, g.Jumps)
	h.mu.Lock()
	old := h.lease
	h.lease = l
	l.loss = time.AfterFunc(h.untilLoss(l), func() { h.end(l, h.ranOut(l)) })
	h.mu.Unlock()
	if old != nil {
		h.end(old, fmt.Errorf("%w: acquired again", engine.ErrLockLost))
	}
	if !h.Engine.Record(l, token) {
		h.end(l, engine.ErrRedlockClosed) // closed meanwhile: nothing would keep or watch it
		return
	}
	if h.Settings.Renew {
		h.renew(holdContext(ctx), l) // the hold may outlast the wait: see LockWithin
	}
}

// Left records member, the queue member of the wait that took the current
// lease, and its score since, when it took one (see Lease.Queued).
func (h *Holder) Left(member string, since int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lease.Live() {
		h.lease.Queued, h.lease.QueuedSince = member, since
	}
}

// untilLoss is how long from now until l counts as lost. Called with h.mu
// held.
func (h *Holder) untilLoss(l *Lease) time.Duration {
	return l.until.Add(-lossMargin(h.Settings.TTL)).Sub(h.Engine.Now())
}

// errRanOut marks a lease that ended lossMargin before its validity did
// (see ranOut).
var errRanOut = errors.New("validity ran out")

// ranOut is why lease l ended when its validity ran out: what stopped its
// renewal, and the last extension's failure, with its node errors.
func (h *Holder) ranOut(l *Lease) error {
	h.mu.Lock()
	stopped, failed := l.stopped, l.failed
	h.mu.Unlock()
	msg := ""
	if stopped != "" {
		msg = " (" + stopped + ")"
	}
	err := fmt.Errorf("%w: %w%s", engine.ErrLockLost, errRanOut, msg)
	if failed != nil {
		err = errors.Join(err, fmt.Errorf("the last extension failed: %w", failed))
	}
	return err
}

// HoldAgain counts one more hold on l, a reentrant lock's lease, whose
// validity now lasts until g's at least, and whose nodes g's voters
// confirmed; false when l is no longer the holder's live lease.
func (h *Holder) HoldAgain(l *Lease, g engine.Grant) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lease != l || l.Err != nil {
		return false
	}
	l.Holds++
	l.confirm(g.Voters, g.Until, g.Jumps)
	h.moveUntil(l, g.Until)
	return true
}

// DropHold counts one hold less on the live lease when it has more than
// one, and returns it; nil, changing nothing, otherwise.
func (h *Holder) DropHold() *Lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	l := h.lease
	if !l.Live() || l.Holds < 2 {
		return nil
	}
	l.Holds--
	return l
}

// moveUntil moves l's validity to until when later, and its loss timer
// with it. Called with h.mu held.
func (h *Holder) moveUntil(l *Lease, until time.Time) {
	if until.After(l.until) {
		l.until = until
		l.loss.Reset(h.untilLoss(l))
	}
}

// end ends lease l with cause, once; later calls do nothing. The Observer
// hears of it before Done closes: whoever sees Done closed finds the end
// observed.
func (h *Holder) end(l *Lease, cause error) {
	h.mu.Lock()
	if l.Err != nil {
		h.mu.Unlock()
		return
	}
	l.Err = cause
	l.loss.Stop()
	h.mu.Unlock()
	h.Engine.Forget(l)
	if h.Events != nil {
		h.Events.LeaseEnd(h.Name, l.start, errors.Is(cause, engine.ErrLockLost), cause)
	}
	close(l.done) // once: only the call that set l.err gets here
	h.stopRenewal(l)
}

// Release ends the current lease with cause and releases it on every
// node with op (see Redlock.free). It returns ErrNotHeld, without I/O,
// when there is none.
func (h *Holder) Release(ctx context.Context, cause error) error {
	h.mu.Lock()
	l := h.lease
	if l == nil {
		h.mu.Unlock()
		return h.errNotHeld()
	}
	h.lease = nil
	c := engine.Lapse{Settings: &h.Settings, Report: h.Report, Since: l.start, Quorum: h.Quorum}
	// What each node confirmed holds whatever ended the lease, except
	// when nodes answered that its token was gone (an extension's
	// ErrNotHeld, ErrLockLost for good): a key absent there before its
	// confirmed expiry was deleted by another, and an absent key is then
	// no resend. A lease lost to a clock jump or to its validity passes
	// it: Confirmed forgets a node whose clock jumped, and a resent
	// release that finds the key gone on a node that did not is this
	// release's own doing.
	if l.Err == nil || !errors.Is(l.Err, engine.ErrNotHeld) {
		c.Confirmed = l
	}
	h.mu.Unlock()
	h.end(l, cause)
	return h.Engine.Free(ctx, h.Kind.Release(h.Name, l), h.Name, true, c)
}

// Until returns the end of the current lease's validity; the zero Time
// when none was taken (or it was released).
func (h *Holder) Until() time.Time {
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

// Done returns the current lease's Done channel; a closed one when none.
func (h *Holder) Done() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lease == nil {
		return closedChan
	}
	return h.lease.done
}

// RenewalDone returns a channel closed once the current lease's renewal
// has stopped and runs no extension; closed already when it has none. It returns
// soon after the lease ends, at most an extension in flight later (one
// node timeout): whoever ended a lease can wait for it so that no renewal
// outlives the hold (see Redlock.Do).
func (h *Holder) RenewalDone() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lease == nil || h.lease.renewal == nil {
		return closedChan
	}
	return h.lease.renewal.done
}

// Err returns why the current lease ended, nil while it lasts.
func (h *Holder) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lease == nil {
		return h.errNotHeld()
	}
	return h.lease.Err
}

// Observe starts one call of the holder: it tells its Observer of the
// call (OpStart) and returns the context the call runs under, and the
// function the call ends with, which tells the Observer of its outcome
// (OpEnd: attempts made, err) and returns err. With no Observer (or a nil
// ctx) the call runs under ctx and its end tells no one. The context that
// bounds an acquisition's hold (the caller's, see holdContext) is passed
// on under HoldKey, so that renewal runs under it rather than under the
// Observer's context, whose span would otherwise parent every extension
// after the call returned.
func (h *Holder) Observe(ctx context.Context, c Call) (context.Context, func(attempts int, err error) error) {
	o := h.Events
	if o == nil || ctx == nil {
		return ctx, unobserved
	}
	hold := ctx
	if c.acquires() {
		hold = holdContext(ctx)
	}
	octx := o.OpStart(ctx, c)
	if c.acquires() && octx != ctx {
		octx = context.WithValue(octx, HoldKey{}, hold)
	}
	return octx, func(attempts int, err error) error {
		o.OpEnd(octx, c, err, err != nil && hold.Err() != nil, attempts)
		return err
	}
}

// unobserved ends a call that no Observer hears of.
func unobserved(_ int, err error) error { return err }

// Call is the holder's call at step s.
func (h *Holder) Call(s Step) Call { return Call{Step: s, Name: h.Name} }

// Bounding the wait for a lock apart from the hold. The context given to
// Lock bounds both: the attempts, and with WithRenewal the renewal of the
// lock once acquired. LockWithin bounds the attempts by a context of their
// own, which carries the caller's context as a value: the acquisition
// starts renewal under that one instead (see holdContext).

// HoldKey is the context key under which LockWithin's wait context
// carries the context that bounds the hold.
type HoldKey struct{}

// holdContext returns the context that bounds the hold of a lock acquired
// under ctx: the caller's own when ctx is LockWithin's wait context, ctx
// itself otherwise.
func holdContext(ctx context.Context) context.Context {
	if hold, ok := ctx.Value(HoldKey{}).(context.Context); ok {
		return hold
	}
	return ctx
}
