package redlock

import (
	"context"
	"errors"
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

// startRenewal starts renewing lease l until it ends or holdCtx does.
func (m *Mutex) startRenewal(holdCtx context.Context, l *lease) {
	if err := m.r.track(1); err != nil {
		return // closed: the lease runs out by itself
	}
	go func() {
		defer m.r.wg.Done()
		m.renew(holdCtx, l)
	}()
}

func (m *Mutex) renew(holdCtx context.Context, l *lease) {
	m.mu.Lock()
	start := l.acq.until.Add(-(m.cfg.ttl - drift(m.cfg.ttl, m.cfg.driftFactor)))
	m.mu.Unlock()
	var holdEnd time.Time
	if m.cfg.maxHold > 0 {
		holdEnd = start.Add(m.cfg.maxHold)
	}
	timer := time.NewTimer(time.Until(start.Add(renewEvery(m.cfg.ttl))))
	defer timer.Stop()
	failures := 0
	for {
		select {
		case <-l.done:
			return
		case <-holdCtx.Done():
			return
		case <-m.r.done:
			return
		case <-timer.C:
		}
		now := m.r.now()
		if !holdEnd.IsZero() && !now.Before(holdEnd) {
			return // bounded: the lease runs out at its validity
		}
		err := m.renewOnce(holdCtx, l)
		switch {
		case err == nil:
			failures = 0
			timer.Reset(time.Until(now.Add(renewEvery(m.cfg.ttl))))
		case errors.Is(err, ErrLockLost) || holdCtx.Err() != nil:
			return
		default:
			// Nodes failing or slow: try again soon; the loss timer ends
			// the lease if no extension succeeds in time.
			failures++
			timer.Reset(backoff(failures, m.cfg.delayMin, m.cfg.delayMax))
		}
	}
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
