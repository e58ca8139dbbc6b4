package engine

import (
	"time"

	"github.com/redlock-go/redlock/internal/node"
)

// Settings are what the engine's operations run with: New's options, and
// a primitive's over them. The facade's config adds what only it knows
// (the Observer).
type Settings struct {
	TTL         time.Duration
	NodeTimeout time.Duration
	DriftFactor float64
	Tries       int // 0: until the context ends
	DelayMin    time.Duration
	DelayMax    time.Duration
	Listen      bool // waiters listen for announced releases (WithNotification)
	Renew       bool
	MaxHold     time.Duration // 0: no bound
	Reentrant   bool
	Fencing     bool
	Restart     time.Duration // restart delay; 0: off
	Ack         node.Ack      // replicas that must acknowledge a write; zero: none
	Quorum      int           // a semaphore's quorum; 0: its default
	NoScripts   bool          // New's nodes speak without scripts from the start
	SafeQuorum  bool          // refuse acquisitions while no quorum is safe (see redlock/audit.go)
	// ClockTolerance is the clock guard's (see quorum.ClockGuard); 0: off.
	ClockTolerance time.Duration
}
