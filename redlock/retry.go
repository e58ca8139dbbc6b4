package redlock

import (
	"math/rand/v2"
	"time"
)

// retrier is the wait between attempts: uniformly random in [lo,
// min(hi, lo×2^(attempt-1))], so that contenders that failed together do
// not try again together. Waiting acquisitions (see turn.go) and renewal
// after a failed extension wait with it.
type retrier struct{ lo, hi time.Duration }

// retry returns the retrier of the options (see WithRetryDelay).
func (c *settings) retry() retrier { return retrier{lo: c.delayMin, hi: c.delayMax} }

// delay is the wait after the given failed attempt.
func (rt retrier) delay(attempt int) time.Duration {
	ceiling := rt.hi
	if attempt < 32 {
		if c := rt.lo << (attempt - 1); c > 0 && c < rt.hi {
			ceiling = c
		}
	}
	return rt.lo + rand.N(ceiling-rt.lo+1)
}
