package redlock

import (
	"context"
	"errors"
	"sync"
	"time"
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

// renewal renews the leases of one holder: a Mutex's, or the read holds of
// an RWMutex.
type renewal struct {
	r   *Redlock
	cfg *config
	mu  *sync.Mutex // guards the leases' fields
	// once is one extension of lease l by renewal.
	once func(holdCtx context.Context, l *lease) error
}

// start starts renewing lease l until it ends or holdCtx does.
func (rn renewal) start(holdCtx context.Context, l *lease) {
	if err := rn.r.track(1); err != nil {
		return // closed: the lease runs out by itself
	}
	go func() {
		defer rn.r.wg.Done()
		rn.run(holdCtx, l)
	}()
}

func (rn renewal) run(holdCtx context.Context, l *lease) {
	cfg := rn.cfg
	rn.mu.Lock()
	start := l.acq.until.Add(-(cfg.ttl - drift(cfg.ttl, cfg.driftFactor)))
	rn.mu.Unlock()
	var holdEnd time.Time
	if cfg.maxHold > 0 {
		holdEnd = start.Add(cfg.maxHold)
	}
	timer := time.NewTimer(time.Until(start.Add(renewEvery(cfg.ttl))))
	defer timer.Stop()
	failures := 0
	for {
		select {
		case <-l.done:
			return
		case <-holdCtx.Done():
			return
		case <-rn.r.done:
			return
		case <-timer.C:
		}
		now := rn.r.now()
		if !holdEnd.IsZero() && !now.Before(holdEnd) {
			return // bounded: the lease runs out at its validity
		}
		err := rn.once(holdCtx, l)
		switch {
		case err == nil:
			failures = 0
			timer.Reset(time.Until(now.Add(renewEvery(cfg.ttl))))
		case errors.Is(err, ErrLockLost) || holdCtx.Err() != nil:
			return
		default:
			// Nodes failing or slow: try again soon; the loss timer ends
			// the lease if no extension succeeds in time.
			failures++
			timer.Reset(backoff(failures, cfg.delayMin, cfg.delayMax))
		}
	}
}

// startRenewal starts renewing lease l until it ends or holdCtx does.
func (m *Mutex) startRenewal(holdCtx context.Context, l *lease) {
	renewal{r: m.r, cfg: &m.cfg, mu: &m.mu, once: m.renewOnce}.start(holdCtx, l)
}

// renewOnce is one extension of lease l by renewal.
func (m *Mutex) renewOnce(holdCtx context.Context, l *lease) error {
	if m.cfg.observer == nil {
		return m.extend(holdCtx, l)
	}
	return m.observe(holdCtx, Op{Kind: OpExtend, Name: m.name, Renewal: true}, func(ctx context.Context) (int, error) {
		return 0, m.extend(ctx, l)
	})
}
