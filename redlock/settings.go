package redlock

import (
	"time"

	"github.com/redlock-go/redlock/internal/node"
)

// settings are what the engine's operations run with: New's options, and
// a primitive's over them. The facade's config adds what only it knows
// (the Observer).
type settings struct {
	ttl         time.Duration
	nodeTimeout time.Duration
	driftFactor float64
	tries       int // 0: until the context ends
	delayMin    time.Duration
	delayMax    time.Duration
	notify      bool
	renew       bool
	maxHold     time.Duration // 0: no bound
	reentrant   bool
	fencing     bool
	restart     time.Duration // restart delay; 0: off
	ack         node.Ack      // replicas that must acknowledge a write; zero: none
	quorum      int           // a semaphore's quorum; 0: its default
	noScripts   bool          // New's nodes speak without scripts from the start
	safeQuorum  bool          // refuse acquisitions while no quorum is safe (see audit.go)
	// clockTolerance is the clock guard's (see clockguard.go); 0: off.
	clockTolerance time.Duration
}
