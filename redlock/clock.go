package redlock

import (
	"math"
	"time"

	"github.com/redlock-go/redlock/redlock/internal/engine"
	"github.com/redlock-go/redlock/redlock/internal/quorum"
)

// Time. A holder relies on its lock for its validity, measured on this
// process's monotonic clock from the start of the attempt that took it;
// the nodes expire keys by their own clocks. The options below bound how
// far the two may disagree: the drift allowance taken off every validity,
// the clock guard that stops a node whose clock jumped from voting, and the
// delay a restarted node waits before it grants again.

// clock is the library's one clock: the nodes, the engine and the logger
// read it.
var clock = time.Now

// ErrClockJump marks a node that does not vote because its clock jumped,
// or disagrees with this process's (see [WithClockTolerance]): in a
// [report.NodeError], in [report.NodeHealth.Clock], with [ErrLockLost] in
// the cause of a lease lost because nodes that granted it jumped ahead, and
// in the error of a release those nodes left unconfirmed (see
// [Mutex.Unlock]). A clock stepped back keeps keys longer than their TTL:
// no lease is lost to it.
var ErrClockJump = quorum.ErrClockJump

// WithDriftFactor sets the clock drift allowance as a fraction of the TTL:
// the validity of an acquisition is shortened by TTL × factor + 2ms, to
// cover nodes whose clocks run faster than ours. It must be in [0, 0.5).
// Default: 0.01.
func WithDriftFactor(f float64) LockOption {
	return optionFunc(func(c *config) error {
		if math.IsNaN(f) || f < 0 || f >= 0.5 {
			return engine.Invalid("drift factor must be in [0, 0.5), got %v", f)
		}
		c.DriftFactor = f
		return nil
	})
}

// WithClockTolerance sets how far a node's clock may be from this
// process's wall clock, or move against its monotonic clock between two
// replies of the node, and the node still vote. A node outside it does not
// vote, for grants or extensions, until it has agreed again for the
// longest TTL in use, and a lease left without a quorum of nodes whose
// clocks did not jump is lost ([Mutex.Done] closes, the cause wrapping
// [ErrClockJump]). 0 turns the guard off.
// Default: 1s; see docs/ALGORITHM.md, "Clock guard".
func WithClockTolerance(d time.Duration) Option {
	return redlockOption(func(c *config) error {
		if d < 0 {
			return engine.Invalid("clock tolerance must not be negative, got %v", d)
		}
		c.ClockTolerance = d
		return nil
	})
}

// WithRestartDelay makes a node refuse acquisitions while it has been up
// for less than d, rounded up to a whole second, plus one second: a node
// restarted without persistence has forgotten the locks it granted, and
// its grant could help a second holder to a quorum until the longest TTL
// in use has passed. A refusing node counts as failed, with an error
// wrapping [report.ErrNodeRecovering]. d must be at least the lock's TTL,
// and should be the longest TTL any client uses on these nodes. Zero turns
// it off. Default: off. See docs/ALGORITHM.md, "Restart protection".
func WithRestartDelay(d time.Duration) LockOption {
	return optionFunc(func(c *config) error {
		if d < 0 {
			return engine.Invalid("restart delay must not be negative, got %v", d)
		}
		c.Restart = d
		return nil
	})
}
