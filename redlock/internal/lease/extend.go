package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/redlock/internal/engine"
	"github.com/redlock-go/redlock/redlock/internal/quorum"
)

// unextendable is why a lease that ended (ended: why; nil when it did not)
// or whose validity runs until until cannot be extended at start; nil
// when it can.
func unextendable(ended error, start, until time.Time) error {
	switch {
	case ended != nil && errors.Is(ended, errRanOut) && start.Before(until):
		// Given up lossMargin early, for the work to stop in time: the
		// nodes hold the token still, so not ErrNotHeld, but lost.
		return fmt.Errorf("%w; given up %v before its validity ends, for the work to stop (Done is closed)", ended, until.Sub(start).Round(time.Millisecond))
	case ended != nil:
		return fmt.Errorf("%w: %w", engine.ErrNotHeld, ended)
	case !start.Before(until):
		return fmt.Errorf("%w: validity ran out %v ago", engine.ErrNotHeld, start.Sub(until))
	}
	return nil
}

// extension is an extension of a lease under way: its request, and what
// its outcome is judged against.
type extension struct {
	l    *Lease
	op   node.Op
	next time.Time // the validity it gives, counted from its start
	c    engine.Lapse
}

// extend extends lease l: see Mutex.Extend.
func (h *Holder) extend(ctx context.Context, l *Lease) error {
	x, err := h.beginExtend(l, h.Engine.Now())
	if err != nil {
		return err
	}
	granted, err := h.Engine.Extend(ctx, x.op, x.c)
	return h.endExtend(x, granted, err)
}

// beginExtend makes lease l's extension that starts at start, or says
// why it cannot be made.
func (h *Holder) beginExtend(l *Lease, start time.Time) (*extension, error) {
	h.mu.Lock()
	until, ended := l.until, l.Err
	h.mu.Unlock()
	if err := unextendable(ended, start, until); err != nil {
		return nil, err
	}
	x := &extension{l: l, op: h.Kind.Extend(h.Name, l.Token, &h.Settings), next: quorum.ValidUntil(start, h.Settings.TTL, h.Settings.DriftFactor)}
	late := func(i int) { // re-armed as the voters were, after the round decided
		jumps := h.jumps()
		h.mu.Lock()
		l.confirm([]int{i}, x.next, jumps)
		h.mu.Unlock()
	}
	x.c = engine.Lapse{Settings: &h.Settings, Report: h.Report, Quorum: h.Quorum, Late: late}
	return x, nil
}

// endExtend ends extension x, which the nodes of granted granted, with
// err the engine's verdict (Extend's): the lease's validity moves when it
// holds, and the lease ends when it is lost. It returns the extension's
// error.
func (h *Holder) endExtend(x *extension, granted []int, err error) error {
	l := x.l
	if len(granted) > 0 {
		// Each re-armed the key, whether or not a quorum did.
		jumps := h.jumps()
		h.mu.Lock()
		l.confirm(granted, x.next, jumps)
		h.mu.Unlock()
	}
	if err != nil {
		if errors.Is(err, engine.ErrLockLost) {
			h.end(l, err)
		}
		return err
	}
	if !h.Engine.Now().Before(x.next) {
		return fmt.Errorf("%w: extended, but no validity left of ttl %v", engine.ErrNotHeld, h.Settings.TTL)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if l.Err != nil && errors.Is(l.Err, errRanOut) {
		// Given up while the extension ran (the simulator's seed 2048):
		// a quorum holds the token until next, but Done is closed.
		return fmt.Errorf("%w; extended on the nodes, but given up meanwhile, for the work to stop (Done is closed)", l.Err)
	}
	if l.Err != nil {
		return fmt.Errorf("%w: %w", engine.ErrNotHeld, l.Err)
	}
	l.until = x.next
	l.loss.Reset(h.untilLoss(l))
	return nil
}

// ExtendCurrent extends the current lease.
func (h *Holder) ExtendCurrent(ctx context.Context) error {
	l := h.Current()
	if l == nil {
		return h.errNotHeld()
	}
	return h.extend(ctx, l)
}
