package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redlock-go/redlock/redlock/internal/engine"
)

// Renewal (the watchdog). While a lock taken with WithRenewal is held, one
// goroutine per acquisition extends it every TTL/3, counted from the start
// of the previous extension: two more chances remain before its validity
// runs out if one extension fails. A failed extension is retried after the
// retry back-off until the validity is about to run out (the lease then
// ends as lost, see lossMargin). The goroutine stops on Unlock or loss,
// when the holder's context ends, and at the WithMaxHold bound; the lease
// then simply runs out; Redlock.Close stops it too. It never extends after
// the validity has run out
// and never re-creates a key: both are Extend's rules, which it uses.

// renewEvery is the renewal period for a TTL.
func renewEvery(ttl time.Duration) time.Duration { return ttl / 3 }

// renew starts renewing lease l until it ends or holdCtx does.
func (h *Holder) renew(holdCtx context.Context, l *Lease) {
	if err := h.Engine.Track(); err != nil {
		return // closed: the lease runs out by itself
	}
	stopped := make(chan struct{})
	h.mu.Lock()
	l.renewDone = stopped
	h.mu.Unlock()
	go func() {
		defer h.Engine.Untrack()
		defer close(stopped)
		h.renewing(holdCtx, l)
	}()
}

// renewing is the renewal goroutine of lease l.
func (h *Holder) renewing(holdCtx context.Context, l *Lease) {
	cfg := &h.Settings
	var holdEnd time.Time
	if cfg.MaxHold > 0 {
		holdEnd = l.start.Add(cfg.MaxHold)
	}
	timer := time.NewTimer(l.start.Add(renewEvery(cfg.TTL)).Sub(h.Engine.Now()))
	defer timer.Stop()
	failures := 0
	for {
		select {
		case <-l.done:
			return
		case <-holdCtx.Done():
			h.renewal(l, "renewal stopped: the context it was acquired with ended", nil)
			return
		case <-h.Engine.Closing():
			return
		case <-timer.C:
		}
		now := h.Engine.Now()
		if !holdEnd.IsZero() && !now.Before(holdEnd) {
			// Bounded: the lease runs out at its validity.
			h.renewal(l, fmt.Sprintf("renewal stopped at the maximum hold, WithMaxHold(%v)", cfg.MaxHold), nil)
			return
		}
		err := h.renewOnce(holdCtx, l)
		h.renewal(l, "", err)
		switch {
		case err == nil:
			failures = 0
			timer.Reset(now.Add(renewEvery(cfg.TTL)).Sub(h.Engine.Now()))
		case errors.Is(err, engine.ErrLockLost) || holdCtx.Err() != nil:
			return
		default:
			// Nodes failing or slow: try again soon; the loss timer ends
			// the lease if no extension succeeds in time.
			failures++
			timer.Reset(cfg.Retry().Delay(failures))
		}
	}
}

// renewal records what renewal knows of lease l for the loss it may end
// in (see holder.ranOut): why it stopped ("": it goes on), and its last
// extension's failure (nil: it succeeded).
func (h *Holder) renewal(l *Lease, stopped string, failed error) {
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
	return end(0, h.extend(ctx, l))
}
