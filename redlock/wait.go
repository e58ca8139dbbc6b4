package redlock

import (
	"context"
	"fmt"
	"time"

	"github.com/redlock-go/redlock/redlock/internal/engine"
	"github.com/redlock-go/redlock/redlock/internal/lease"
)

// LockWithin acquires the lock as [Mutex.Lock] does, but waits for it at
// most wait: the attempts, the back-off and the wait for a release's
// announcement stop when wait has passed or ctx has ended, whichever comes
// first. A wait of 0 makes exactly one attempt, as [Mutex.TryLock] does.
//
// The wait bounds only the acquisition. Once acquired, the lock is kept
// as ctx says: with [WithRenewal] it is renewed until Unlock, its loss,
// [WithMaxHold] or the end of ctx, not of the wait. So
//
//	err := mu.LockWithin(ctx, 5*time.Second)
//
// waits at most five seconds for the lock, then holds it for as long as
// ctx lasts, whereas Lock with a five-second context would stop renewing
// it after five seconds.
//
// It returns nil once the lock is acquired. Otherwise it returns Lock's
// error: an error wrapping [ErrNotAcquired] and the last attempt's causes
// (one [*report.NodeError] per failed node); when wait passed first it also wraps
// [context.DeadlineExceeded] and says how long it waited, and when ctx
// ended first, ctx.Err(). An attempt under way when the wait ends is
// abandoned like any attempt whose context ended: its grants are released
// in the background. A negative wait returns an error wrapping
// [ErrInvalidArgument], without I/O.
func (m *Mutex) LockWithin(ctx context.Context, wait time.Duration) error {
	if ctx == nil {
		return engine.Invalid("nil context")
	}
	if wait < 0 {
		return engine.Invalid("negative wait %v", wait)
	}
	if wait == 0 {
		return m.TryLock(ctx) // its renewal, if any, is bounded by ctx already
	}
	waitCtx, cancel := context.WithTimeout(ctx, wait)
	defer cancel() // only the wait: the renewal watches ctx
	err := m.Lock(context.WithValue(waitCtx, lease.HoldKey{}, ctx))
	if err != nil && ctx.Err() == nil && waitCtx.Err() != nil {
		return fmt.Errorf("redlock: not acquired within %v: %w", wait, err)
	}
	return err
}
