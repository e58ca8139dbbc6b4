package engine

import "github.com/redlock-go/redlock/internal/jitter"

// Retry returns the wait between attempts of the options (see
// WithRetryDelay): waiting acquisitions (see internal/turn) and renewal
// after a failed extension wait with it.
func (c *Settings) Retry() jitter.Backoff { return jitter.Backoff{Lo: c.DelayMin, Hi: c.DelayMax} }
