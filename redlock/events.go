package redlock

import (
	"context"
	"time"
)

// What a holder tells of its calls and of its leases' ends. The facade
// hands each holder its Observer as events (observer.go), which names
// each call by the primitive's kind; the holder knows only which of its
// four calls it runs.

// call is one call of a holder: its step, its lock's name, and whether
// renewal made it.
type call struct {
	step    step
	name    string
	renewal bool
}

// step is which of a holder's calls runs.
type step uint8

const (
	stepWait    step = iota // an acquisition that waits: Lock, Acquire, RLock
	stepTry                 // a single attempt: TryLock, TryAcquire, TryRLock
	stepRelease             // Unlock, Release, RUnlock
	stepExtend              // Extend, or an extension by renewal
)

// acquires reports whether the call acquires.
func (c call) acquires() bool { return c.step == stepWait || c.step == stepTry }

// events hears a holder's calls and the ends of its leases (nil: no one
// listens).
type events interface {
	// OpStart is told when call c starts, and returns the context the
	// call goes on with.
	OpStart(ctx context.Context, c call) context.Context
	// OpEnd is told once for every OpStart, with the call's outcome.
	OpEnd(ctx context.Context, c call, err error, canceled bool, attempts int)
	// HoldEnd is told once per lease when it ends: its name, when it was
	// acquired, and its cause (lost: the lease was lost).
	HoldEnd(name string, acquired time.Time, lost bool, cause error)
}
