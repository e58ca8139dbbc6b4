package redlock

import (
	"context"
	"fmt"
	"time"

	"github.com/redlock-go/redlock/redlock/internal/engine"
	"github.com/redlock-go/redlock/redlock/internal/lease"
)

// LockWithin acquires the lock as [Mutex.Lock] does, but waits for it at
// most wait, or until ctx ends: a wait of 0 makes exactly one attempt, as
// [Mutex.TryLock] does. The wait bounds only the acquisition: once
// acquired, the lock is kept as ctx says (with [WithRenewal], renewed
// until Unlock, its loss, [WithMaxHold] or the end of ctx, not of the
// wait).
//
// It returns nil once the lock is acquired, and otherwise Lock's error,
// which also wraps [context.DeadlineExceeded] and says how long it waited
// when wait passed first. An attempt under way when the wait ends is
// abandoned: its grants are released in the background. A negative wait
// returns an error wrapping [ErrInvalidArgument], without I/O.
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
