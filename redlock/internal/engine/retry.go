package engine

import (
	"time"

	"github.com/redlock-go/redlock/internal/jitter"
)

// Retrier is the wait between attempts: uniformly random in [lo,
// min(hi, lo×2^(attempt-1))], so that contenders that failed together do
// not try again together. Waiting acquisitions (see internal/turn) and renewal
// after a failed extension wait with it.
type Retrier struct{ Lo, Hi time.Duration }

// Retry returns the retrier of the options (see WithRetryDelay).
func (c *Settings) Retry() Retrier { return Retrier{Lo: c.DelayMin, Hi: c.DelayMax} }

// Delay is the wait after the given failed attempt.
func (rt Retrier) Delay(attempt int) time.Duration {
	ceiling := rt.Hi
	if attempt < 32 {
		if c := rt.Lo << (attempt - 1); c > 0 && c < rt.Hi {
			ceiling = c
		}
	}
	return rt.Lo + jitter.N(ceiling-rt.Lo+1)
}
