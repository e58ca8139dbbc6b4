package quorum

import (
	"math"
	"time"
)

// Time and validity.
//
// Every duration the algorithm measures comes from readings of Go's
// monotonic clock: time.Now returns a Time carrying a monotonic reading, and
// Sub, Since and Until between two such Times use it, so a wall-clock step
// (NTP, an operator, a VM migration) neither lengthens nor shortens a
// validity window. Times returned to callers keep that reading; compare them
// with time.Now, time.Until or Before/After in the same process, never after
// serialising them.

// Clock is the time source. It is time.Now outside tests.
type Clock func() time.Time

// Drift is the allowance for clock drift between this process and the
// nodes: a node whose clock runs fast expires the key early, so the window
// this process may rely on must end early too. The Redlock description sets
// it to TTL × factor plus 2 ms for the granularity of Redis' expiry.
func Drift(ttl time.Duration, factor float64) time.Duration {
	// Rounded up: a shorter allowance than asked for would overstate validity.
	return time.Duration(math.Ceil(float64(ttl)*factor)) + 2*time.Millisecond
}

// validity is how long an acquisition that took elapsed, measured from its
// start, may still be relied on once it returns: TTL - elapsed - drift. The
// keys were set no earlier than the start, so each node expires them no
// earlier than start + TTL by its own clock; elapsed is already spent and
// drift covers clocks that run fast. Zero or less means the lock is unusable.
func validity(ttl, elapsed time.Duration, factor float64) time.Duration {
	return ttl - elapsed - Drift(ttl, factor)
}

// ValidUntil is the end of the validity window of an attempt that started at
// start: start + TTL - drift, which equals the moment of decision plus
// validity(ttl, elapsed, factor).
func ValidUntil(start time.Time, ttl time.Duration, factor float64) time.Time {
	return start.Add(ttl - Drift(ttl, factor))
}

// graceMin is the least grace asLongAgain gives.
const graceMin = 100 * time.Microsecond

// AsLongAgain is how long to wait for the nodes still due once a quorum
// answered after elapsed: as long again. Nodes about as fast as the quorum
// then answer too, while a slow or silent minority costs no more than the
// quorum did (at least graceMin, so that nodes a few microseconds behind
// are not taken for slow ones).
func AsLongAgain(elapsed time.Duration) time.Duration { return max(elapsed, graceMin) }

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
