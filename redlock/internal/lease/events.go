package lease

import (
	"context"
	"time"
)

// What a holder tells of its calls and of its leases' ends. The facade
// hands each holder its Observer as events (redlock/observer.go), which names
// each call by the primitive's kind; the holder knows only which of its
// four calls it runs.

// Call is one call of a holder: its step, its lock's name, and whether
// renewal made it.
type Call struct {
	Step    Step
	Name    string
	Renewal bool
}

// Step is which of a holder's calls runs.
type Step uint8

// The steps, in the order the facade names them.
const (
	StepWait    Step = iota // an acquisition that waits: Lock, Acquire, RLock
	StepTry                 // a single attempt: TryLock, TryAcquire, TryRLock
	StepRelease             // Unlock, Release, RUnlock
	StepExtend              // Extend, or an extension by renewal
)

// acquires reports whether the call acquires.
func (c Call) acquires() bool { return c.Step == StepWait || c.Step == StepTry }

// Events hears a holder's calls and the ends of its leases (nil: no one
// listens).
type Events interface {
	// OpStart is told when call c starts, and returns the context the
	// call goes on with.
	OpStart(ctx context.Context, c Call) context.Context
	// OpEnd is told once for every OpStart, with the call's outcome.
	OpEnd(ctx context.Context, c Call, err error, canceled bool, attempts int)
	// LeaseEnd is told once per lease when it ends: its name, when it was
	// acquired, and its cause (lost: the lease was lost).
	LeaseEnd(name string, acquired time.Time, lost bool, cause error)
}
